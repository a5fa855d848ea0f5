//! Static consistency checks of a policy's `metadata.yml`: against its
//! `Cargo.toml`, against what kwctl and Artifact Hub require, and within itself.
//! The checks that need the built module (host calls, mutation) are in
//! [`module_problems`] and in the tests, which run the module in the harness.

use std::collections::BTreeSet;

use gpu_e2e::metadata::{self as md, ExecutionMode, KNOWN_KEYS, Metadata, PolicyType};
use gpu_e2e::wasm_scanner::{capability_allowed, validate_capability_pattern};

use crate::policies::CargoPackage;

/// Annotations every policy must carry (kwctl, Artifact Hub and the Rancher UI read them).
pub const REQUIRED_ANNOTATIONS: &[&str] = &[
    md::ANNOTATION_TITLE,
    md::ANNOTATION_VERSION,
    md::ANNOTATION_DESCRIPTION,
    md::ANNOTATION_AUTHOR,
    md::ANNOTATION_URL,
    md::ANNOTATION_SOURCE,
    md::ANNOTATION_LICENSE,
    md::ANNOTATION_SEVERITY,
    md::ANNOTATION_CATEGORY,
    md::ANNOTATION_OCI_URL,
    md::ANNOTATION_ARTIFACTHUB_DISPLAY_NAME,
    md::ANNOTATION_ARTIFACTHUB_RESOURCES,
    md::ANNOTATION_ARTIFACTHUB_KEYWORDS,
];

/// Values of `io.kubewarden.policy.severity`.
pub const SEVERITIES: &[&str] = &["info", "low", "medium", "high", "critical"];

/// The host capabilities that read Kubernetes resources (and so need
/// `contextAwareResources`).
const KUBERNETES_CAPABILITIES: &[&str] = &[
    "kubernetes/get_resource",
    "kubernetes/list_resources_all",
    "kubernetes/list_resources_by_namespace",
    "kubernetes/can_i",
];

/// What is wrong with `metadata.yml` (its text, and as parsed) for the policy
/// `name` with Cargo package `package` and license `license`; empty when nothing is.
pub fn metadata_problems(
    name: &str,
    package: &CargoPackage,
    license: Option<&str>,
    text: &str,
    metadata: &Metadata,
) -> Vec<String> {
    let mut out = Vec::new();

    // Keys kwctl silently ignores: a typo (`hostCapabilites`) would drop a declaration.
    match yaml_serde::from_str::<yaml_serde::Value>(text) {
        Ok(yaml_serde::Value::Mapping(map)) => {
            for key in map.keys() {
                let key = key.as_str().unwrap_or_default();
                if !KNOWN_KEYS.contains(&key) {
                    out.push(format!(
                        "unknown top-level key {key:?}: kwctl ignores it (known: {})",
                        KNOWN_KEYS.join(", ")
                    ));
                }
            }
        }
        _ => out.push("metadata.yml is not a YAML mapping".into()),
    }

    // policy-evaluator's validation (kwctl annotate refuses what fails it).
    let mut with_protocol = metadata.clone();
    with_protocol.protocol_version = Some("v1".into());
    if let Err(problems) = with_protocol.validate() {
        out.extend(problems);
    }
    if metadata.rules.is_empty() {
        out.push("rules: empty, so the policy never sees a request".into());
    }
    if metadata.execution_mode != ExecutionMode::KubewardenWapc {
        out.push("executionMode: must be kubewarden-wapc (SDK policies)".into());
    }
    if metadata.policy_type != PolicyType::Kubernetes {
        out.push("policyType: must be kubernetes".into());
    }

    // Annotations.
    for key in REQUIRED_ANNOTATIONS {
        match metadata.annotation(key) {
            None => out.push(format!("annotations: {key} is missing")),
            Some(v) if v.trim().is_empty() => out.push(format!("annotations: {key} is empty")),
            Some(_) => {}
        }
    }
    let annotation = |key| metadata.annotation(key).unwrap_or_default();
    let version = annotation(md::ANNOTATION_VERSION);
    if !version.is_empty() && version != package.version {
        out.push(format!(
            "annotations: {} is {version} but Cargo.toml has version {}",
            md::ANNOTATION_VERSION,
            package.version
        ));
    }
    if !is_semver(&package.version) {
        out.push(format!(
            "Cargo.toml version {} is not semver",
            package.version
        ));
    }
    // One repository, several policies: each release is tagged `<policy>/v<version>`
    // (the Artifact Hub download link and the release pipeline use this annotation).
    let expected_tag = format!("{name}/v{}", package.version);
    match metadata.annotation(md::ANNOTATION_GITHUB_RELEASE_TAG) {
        Some(tag) if tag == expected_tag => {}
        other => out.push(format!(
            "annotations: {} is {other:?}, expected {expected_tag:?} (this repository tags each policy's releases <policy>/v<version>)",
            md::ANNOTATION_GITHUB_RELEASE_TAG
        )),
    }
    let title = annotation(md::ANNOTATION_TITLE);
    if !title.is_empty() && title != name {
        out.push(format!(
            "annotations: {} is {title:?}, expected the policy's name {name:?} (kwctl scaffold manifest names the ClusterAdmissionPolicy after it)",
            md::ANNOTATION_TITLE
        ));
    }
    let oci = annotation(md::ANNOTATION_OCI_URL);
    if !oci.is_empty() {
        if oci.contains("://")
            || oci.contains('@')
            || oci.rsplit('/').next().is_some_and(|l| l.contains(':'))
        {
            out.push(format!(
                "annotations: {} must be a repository without scheme, tag or digest (got {oci:?}); the tag is v<version>",
                md::ANNOTATION_OCI_URL
            ));
        } else if oci.rsplit('/').next() != Some(name) {
            out.push(format!(
                "annotations: {} {oci:?} must end with /{name} (the release pipeline uses its last segment as the policy id)",
                md::ANNOTATION_OCI_URL
            ));
        }
    }
    for key in [md::ANNOTATION_URL, md::ANNOTATION_SOURCE] {
        let v = annotation(key);
        if !(v.is_empty() || v.starts_with("https://") || v.starts_with("http://")) {
            out.push(format!(
                "annotations: {key} must be an http(s) URL, got {v:?}"
            ));
        }
    }
    let severity = annotation(md::ANNOTATION_SEVERITY);
    if !severity.is_empty() && !SEVERITIES.contains(&severity) {
        out.push(format!(
            "annotations: {} must be one of {}, got {severity:?}",
            md::ANNOTATION_SEVERITY,
            SEVERITIES.join("|")
        ));
    }
    if let Some(license) = license {
        let declared = annotation(md::ANNOTATION_LICENSE);
        if !declared.is_empty() && declared != license {
            out.push(format!(
                "annotations: {} is {declared:?} but Cargo.toml says {license:?}",
                md::ANNOTATION_LICENSE
            ));
        }
    }
    for key in [
        md::ANNOTATION_ARTIFACTHUB_KEYWORDS,
        md::ANNOTATION_ARTIFACTHUB_RESOURCES,
    ] {
        let v = annotation(key);
        if !v.is_empty() && v.split(',').any(|item| item.trim().is_empty()) {
            out.push(format!(
                "annotations: {key} has an empty item in {v:?} (kwctl scaffold artifacthub rejects it)"
            ));
        }
    }
    let author = annotation(md::ANNOTATION_AUTHOR);
    if !author.is_empty()
        && let Err(e) = parse_maintainers(author)
    {
        out.push(format!("annotations: {}: {e}", md::ANNOTATION_AUTHOR));
    }
    if let Some(v) = metadata.annotation(md::ANNOTATION_HIDDEN_UI)
        && v != "true"
        && v != "false"
    {
        out.push(format!(
            "annotations: {} must be \"true\" or \"false\"",
            md::ANNOTATION_HIDDEN_UI
        ));
    }
    if metadata.annotation(md::ANNOTATION_USAGE).is_some() {
        out.push(format!(
            "annotations: {} comes from README.md at annotate time; do not set it in metadata.yml",
            md::ANNOTATION_USAGE
        ));
    }

    // Host capabilities and context-aware resources.
    let declared = metadata.host_capabilities.clone().unwrap_or_default();
    for pattern in &declared {
        if let Err(e) = validate_capability_pattern(pattern) {
            out.push(format!("hostCapabilities: {e}"));
        }
    }
    let reads_kubernetes = KUBERNETES_CAPABILITIES
        .iter()
        .any(|c| capability_allowed(&declared, c));
    if reads_kubernetes && metadata.context_aware_resources.is_empty() {
        out.push(
            "contextAwareResources: empty, but hostCapabilities declares Kubernetes host calls: list the resources the policy reads"
                .into(),
        );
    }
    if !metadata.context_aware_resources.is_empty() && !reads_kubernetes {
        out.push("hostCapabilities: contextAwareResources are listed but no kubernetes/* host capability is declared".into());
    }
    out
}

/// The metadata against the built module.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ModuleFindings {
    /// Contradictions: a capability the module was seen calling (`observed`) or
    /// whose operation name is in its data (`detected`: `kwctl annotate` warns about
    /// it) but that is not declared, a declared capability with no host call in the
    /// module, a protocol version other than `v1`.
    pub problems: Vec<String>,
}

/// Compares the declared `hostCapabilities` with the host calls of the built
/// module: `detected` in its data by [`gpu_e2e::wasm_scanner`] (what it may
/// call), `observed` while it ran on its test_data (what it does call).
pub fn module_problems(
    metadata: &Metadata,
    detected: &BTreeSet<String>,
    observed: &BTreeSet<String>,
    protocol_version: &str,
) -> ModuleFindings {
    let mut out = ModuleFindings::default();
    let declared = metadata.host_capabilities.clone().unwrap_or_default();
    for capability in observed {
        if !capability_allowed(&declared, capability) {
            out.problems.push(format!(
                "the module calls host capability {capability} but hostCapabilities does not declare it"
            ));
        }
    }
    for capability in detected.difference(observed) {
        if !capability_allowed(&declared, capability) {
            out.problems.push(format!(
                "the module names host capability {capability} but hostCapabilities does not declare it (kwctl annotate warns about it){}",
                if observed.is_empty() {
                    ""
                } else {
                    "; it was not called on the test data"
                }
            ));
        }
    }
    for pattern in &declared {
        if !detected
            .iter()
            .chain(observed)
            .any(|c| capability_allowed([pattern], c))
        {
            out.problems.push(format!(
                "hostCapabilities declares {pattern} but the module has no such host call"
            ));
        }
    }
    if protocol_version != "v1" {
        out.problems.push(format!(
            "the module answers protocol_version {protocol_version:?}, expected \"v1\""
        ));
    }
    out
}

/// A maintainer from `io.kubewarden.policy.author`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Maintainer {
    /// Display name (may be empty).
    pub name: String,
    /// E-mail address.
    pub email: String,
}

/// Parses `io.kubewarden.policy.author` as kwctl does for Artifact Hub: a
/// comma-separated list of RFC 5322 name-addr (`Name <email>`) or bare
/// addresses; every entry needs a valid e-mail address.
pub fn parse_maintainers(author: &str) -> Result<Vec<Maintainer>, String> {
    let mut out = Vec::new();
    for item in author.split(',') {
        let item = item.trim();
        if item.is_empty() {
            continue; // kwctl's parser skips empty list members
        }
        let (name, email) = match item.split_once('<') {
            Some((name, rest)) => {
                let Some(email) = rest.strip_suffix('>') else {
                    return Err(format!("{item:?}: expected `Name <email>`"));
                };
                (name.trim().trim_matches('"').to_string(), email.trim())
            }
            None => (String::new(), item),
        };
        if !is_email(email) {
            return Err(format!(
                "{item:?} has no valid e-mail address (Artifact Hub needs `Name <email>`)"
            ));
        }
        out.push(Maintainer {
            name,
            email: email.to_string(),
        });
    }
    if out.is_empty() {
        return Err("no maintainer in an empty author list".into());
    }
    Ok(out)
}

fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.is_empty()
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && domain.contains('.')
        && !s
            .chars()
            .any(|c| c.is_whitespace() || "<>(),;:\"[]\\".contains(c))
}

/// `MAJOR.MINOR.PATCH` with an optional `-pre` and `+build`.
pub fn is_semver(v: &str) -> bool {
    let core = v.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && (p.len() == 1 || !p.starts_with('0'))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata_yaml(extra_annotations: &str) -> String {
        format!(
            "rules:
- apiGroups: ['']
  apiVersions: [v1]
  resources: [pods]
  operations: [CREATE, UPDATE]
mutating: false
backgroundAudit: true
executionMode: kubewarden-wapc
annotations:
  io.kubewarden.policy.title: gpu-x-policy
  io.kubewarden.policy.version: 0.2.0
  com.github.release.tag: gpu-x-policy/v0.2.0
  io.kubewarden.policy.description: Does x
  io.kubewarden.policy.author: GPU team <gpu@example.org>
  io.kubewarden.policy.url: https://github.com/o/r
  io.kubewarden.policy.source: https://github.com/o/r
  io.kubewarden.policy.license: Apache-2.0
  io.kubewarden.policy.severity: medium
  io.kubewarden.policy.category: Resource validation
  io.kubewarden.policy.ociUrl: ghcr.io/o/policies/gpu-x-policy
  io.artifacthub.displayName: GPU x
  io.artifacthub.resources: Pod
  io.artifacthub.keywords: gpu, x
{extra_annotations}"
        )
    }

    fn problems(text: &str) -> Vec<String> {
        let package = CargoPackage {
            name: "gpu-x-policy".into(),
            version: "0.2.0".into(),
            license: None,
        };
        let metadata = Metadata::from_yaml(text).unwrap();
        metadata_problems(
            "gpu-x-policy",
            &package,
            Some("Apache-2.0"),
            text,
            &metadata,
        )
    }

    #[test]
    fn complete_metadata_has_no_problem() {
        assert_eq!(problems(&metadata_yaml("")), Vec::<String>::new());
    }

    #[test]
    fn drift_is_reported() {
        let text = metadata_yaml("").replace("version: 0.2.0", "version: 0.1.9");
        assert!(problems(&text)[0].contains("Cargo.toml has version 0.2.0"));
        let text = metadata_yaml("").replace("gpu-x-policy/v0.2.0", "v0.2.0");
        assert!(problems(&text)[0].contains("com.github.release.tag"));
        let text = metadata_yaml("").replace("  io.artifacthub.keywords: gpu, x\n", "");
        assert_eq!(
            problems(&text),
            vec!["annotations: io.artifacthub.keywords is missing"]
        );
        let text = metadata_yaml("").replace("policies/gpu-x-policy", "policies/other:v1");
        assert!(problems(&text)[0].contains("without scheme, tag or digest"));
        let text = metadata_yaml("").replace("<gpu@example.org>", "");
        assert!(problems(&text)[0].contains("e-mail"));
        let text = metadata_yaml("").replace("severity: medium", "severity: severe");
        assert!(problems(&text)[0].contains("severity"));
        let text = metadata_yaml("").replace("resources: [pods]", "resources: ['*', pods]");
        assert!(problems(&text)[0].starts_with("rules[0].resources"));
        let text = format!(
            "{}hostCapabilites: [kubernetes/get_resource]\n",
            metadata_yaml("")
        );
        assert!(problems(&text)[0].contains("unknown top-level key \"hostCapabilites\""));
    }

    #[test]
    fn host_calls_need_context_aware_resources() {
        let text = format!(
            "{}hostCapabilities: [kubernetes/list_resources_all]\n",
            metadata_yaml("")
        );
        assert!(problems(&text)[0].starts_with("contextAwareResources: empty"));
        let text = format!(
            "{}contextAwareResources: [{{apiVersion: v1, kind: Node}}]\n",
            metadata_yaml("")
        );
        assert!(problems(&text)[0].starts_with("hostCapabilities: contextAwareResources"));
        let text = format!(
            "{}hostCapabilities: [kubernetes/list_resources_all]\ncontextAwareResources: [{{apiVersion: v1, kind: Node}}]\n",
            metadata_yaml("")
        );
        assert!(problems(&text).is_empty());
        let text = format!("{}hostCapabilities: [kubernetes/list]\n", metadata_yaml(""));
        assert!(
            problems(&text)
                .iter()
                .any(|p| p.contains("not a host capability"))
        );
    }

    #[test]
    fn module_capabilities_against_declared() {
        let text = format!(
            "{}hostCapabilities: [kubernetes/list_resources_all]\ncontextAwareResources: [{{apiVersion: v1, kind: Node}}]\n",
            metadata_yaml("")
        );
        let metadata = Metadata::from_yaml(&text).unwrap();
        let set = |caps: &[&str]| caps.iter().map(|c| c.to_string()).collect::<BTreeSet<_>>();
        let all = set(&["kubernetes/get_resource", "kubernetes/list_resources_all"]);
        let ok = module_problems(
            &metadata,
            &all,
            &set(&["kubernetes/list_resources_all"]),
            "v1",
        );
        assert_eq!(ok.problems.len(), 1, "{ok:?}"); // get_resource named, not declared
        let clean = module_problems(
            &metadata,
            &set(&["kubernetes/list_resources_all"]),
            &set(&["kubernetes/list_resources_all"]),
            "v1",
        );
        assert!(clean.problems.is_empty(), "{clean:?}");
        let called = module_problems(&metadata, &all, &set(&["kubernetes/get_resource"]), "v1");
        assert_eq!(called.problems.len(), 1, "{called:?}"); // called, not declared
        let absent = module_problems(&metadata, &set(&[]), &set(&[]), "v2");
        assert_eq!(absent.problems.len(), 2, "{absent:?}"); // declared, absent; protocol
    }

    #[test]
    fn maintainers_and_semver() {
        assert_eq!(
            parse_maintainers("Tux <tux@example.com>, pidgin@example.com").unwrap(),
            vec![
                Maintainer {
                    name: "Tux".into(),
                    email: "tux@example.com".into()
                },
                Maintainer {
                    name: String::new(),
                    email: "pidgin@example.com".into()
                }
            ]
        );
        assert!(parse_maintainers("gpu-admission developers").is_err());
        assert!(parse_maintainers("Foo missing@chevrons.com").is_err());
        assert!(parse_maintainers("").is_err());
        assert!(is_semver("0.1.0") && is_semver("1.2.3-rc.1+b5"));
        assert!(!is_semver("1.2") && !is_semver("01.2.3") && !is_semver("v1.2.3"));
    }
}
