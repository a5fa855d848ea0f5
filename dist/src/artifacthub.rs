//! Artifact Hub packages, generated from `metadata.yml` (+ `questions-ui.yml`)
//! with the fields and layout of `kwctl scaffold artifacthub`:
//!
//! ```text
//! artifacthub/artifacthub-repo.yml
//! artifacthub/<policy>/<version>/artifacthub-pkg.yml
//! artifacthub/<policy>/<version>/README.md          (the policy's README)
//! ```
//!
//! `createdAt` is the one field that does not come from the sources. It is kept
//! from the existing `artifacthub-pkg.yml` when everything else in it is
//! unchanged, so regenerating does not touch the files; otherwise (a new
//! version, changed metadata or questions) it is the current time, or
//! `SOURCE_DATE_EPOCH` when set (reproducible builds).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use gpu_e2e::metadata::{self as md, ContextAwareResource, Metadata};
use serde::Serialize;

use crate::checks::{Maintainer, is_semver, parse_maintainers};
use crate::policies::PolicyDir;

/// The comment `kwctl scaffold artifacthub` starts its output with.
pub const HEADER: &str = "# Kubewarden Artifacthub Package config
#
# Use this config to submit the policy to https://artifacthub.io.
#
# This config can be saved to its default location with:
#   kwctl scaffold artifacthub > artifacthub-pkg.yml ";

/// The file name of a package.
pub const PKG_FILE: &str = "artifacthub-pkg.yml";
/// The repository metadata file.
pub const REPO_FILE: &str = "artifacthub-repo.yml";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ArtifactHubPkg<'a> {
    version: &'a str,
    name: &'a str,
    display_name: &'a str,
    created_at: &'a str,
    description: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    license: Option<&'a str>,
    #[serde(rename = "homeURL", skip_serializing_if = "Option::is_none")]
    home_url: Option<String>,
    containers_images: Vec<ContainerImage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    keywords: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    links: Option<Vec<Link>>,
    install: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    maintainers: Option<Vec<MaintainerOut>>,
    provider: Provider,
    recommendations: Vec<Recommendation>,
    annotations: BTreeMap<String, String>,
}

#[derive(Serialize)]
struct ContainerImage {
    name: &'static str,
    image: String,
}

#[derive(Serialize)]
struct Link {
    name: &'static str,
    url: String,
}

#[derive(Serialize)]
struct MaintainerOut {
    name: String,
    email: String,
}

#[derive(Serialize)]
struct Provider {
    name: &'static str,
}

#[derive(Serialize)]
struct Recommendation {
    url: &'static str,
}

fn required<'a>(metadata: &'a Metadata, key: &str) -> Result<&'a str> {
    match metadata.annotation(key) {
        Some(v) if !v.trim().is_empty() => Ok(v),
        _ => bail!("annotation {key} is required for Artifact Hub"),
    }
}

/// How the `url` crate prints an http(s) URL, for the cases metadata has:
/// scheme and host lowercased, `/` as the path of a bare host.
fn normalize_url(key: &str, url: &str) -> Result<String> {
    let url = url.trim();
    let Some((scheme, rest)) = url.split_once("://") else {
        bail!("annotation {key}: {url:?} is not a URL");
    };
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "https" && scheme != "http" {
        bail!("annotation {key}: {url:?} is not an http(s) URL");
    }
    let (host, path) = match rest.find(['/', '?', '#']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if host.is_empty() || host.contains(char::is_whitespace) {
        bail!("annotation {key}: {url:?} has no valid host");
    }
    let path = if path.is_empty() || path.starts_with(['?', '#']) {
        format!("/{path}")
    } else {
        path.to_string()
    };
    Ok(format!("{scheme}://{}{path}", host.to_ascii_lowercase()))
}

/// `application/x-www-form-urlencoded` byte serialization (what kwctl applies
/// to `com.github.release.tag` in the release download link).
fn form_urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn install_text(image: &str) -> String {
    format!(
        "The policy can be obtained using [`kwctl`](https://github.com/kubewarden/kwctl):
```console
kwctl pull {image}
```
Then, generate the policy manifest and tune it to your liking. For example:
```console
kwctl scaffold manifest -t ClusterAdmissionPolicy registry://{image}
```
"
    )
}

/// `artifacthub-pkg.yml` for `metadata` (and the questions file's text), with
/// `createdAt` as given: the output of `kwctl scaffold artifacthub`.
pub fn package_yaml(
    metadata: &Metadata,
    questions: Option<&str>,
    created_at: &str,
) -> Result<String> {
    if metadata.annotations.as_ref().is_none_or(BTreeMap::is_empty) {
        bail!("the metadata has no annotations");
    }
    let version = required(metadata, md::ANNOTATION_VERSION)?;
    if !is_semver(version) {
        bail!(
            "annotation {}: {version:?} is not semver",
            md::ANNOTATION_VERSION
        );
    }
    if questions.is_some_and(str::is_empty) {
        bail!("the questions-ui file is empty");
    }
    let name = required(metadata, md::ANNOTATION_TITLE)?;
    let display_name = required(metadata, md::ANNOTATION_ARTIFACTHUB_DISPLAY_NAME)?;
    let description = required(metadata, md::ANNOTATION_DESCRIPTION)?;
    let oci_url = required(metadata, md::ANNOTATION_OCI_URL)?;
    let image = format!("{oci_url}:v{version}");
    let home_url = metadata
        .annotation(md::ANNOTATION_URL)
        .map(|u| normalize_url(md::ANNOTATION_URL, u))
        .transpose()?;
    let keywords = metadata
        .annotation(md::ANNOTATION_ARTIFACTHUB_KEYWORDS)
        .map(|csv| {
            let words: Vec<String> = csv
                .split(',')
                .map(|w| w.trim_matches(' ').to_string())
                .collect();
            if words.iter().any(String::is_empty) {
                bail!(
                    "annotation {}: empty keyword in {csv:?}",
                    md::ANNOTATION_ARTIFACTHUB_KEYWORDS
                );
            }
            Ok(words)
        })
        .transpose()?;
    let links = metadata
        .annotation(md::ANNOTATION_SOURCE)
        .map(|source| -> Result<Vec<Link>> {
            let source = normalize_url(md::ANNOTATION_SOURCE, source)?;
            let on_github = source
                .split_once("://")
                .and_then(|(_, rest)| rest.split('/').next())
                == Some("github.com");
            let mut links = Vec::new();
            if on_github {
                let release = match metadata.annotation(md::ANNOTATION_GITHUB_RELEASE_TAG) {
                    Some(tag) => form_urlencode(tag),
                    None => format!("v{version}"),
                };
                links.push(Link {
                    name: "policy",
                    url: format!("{source}/releases/download/{release}/policy.wasm"),
                });
            }
            links.push(Link {
                name: "source",
                url: source,
            });
            Ok(links)
        })
        .transpose()?;
    let maintainers = metadata
        .annotation(md::ANNOTATION_AUTHOR)
        .map(|a| {
            parse_maintainers(a)
                .map_err(|e| anyhow::anyhow!("annotation {}: {e}", md::ANNOTATION_AUTHOR))
        })
        .transpose()?
        .map(|list| {
            list.into_iter()
                .map(|Maintainer { name, email }| MaintainerOut { name, email })
                .collect()
        });

    let mut annotations = BTreeMap::new();
    annotations.insert(
        "kubewarden/mutation".to_string(),
        metadata.mutating.to_string(),
    );
    if !metadata.context_aware_resources.is_empty() {
        annotations.insert(
            "kubewarden/contextAwareResources".to_string(),
            yaml_serde::to_string::<BTreeSet<ContextAwareResource>>(
                &metadata.context_aware_resources,
            )?,
        );
    }
    annotations.insert(
        "kubewarden/rules".to_string(),
        yaml_serde::to_string(&metadata.rules)?,
    );
    if let Some(q) = questions {
        annotations.insert("kubewarden/questions-ui".to_string(), q.to_string());
    }
    if let Some(hidden) = metadata.annotation(md::ANNOTATION_HIDDEN_UI) {
        let hidden: bool = hidden
            .parse()
            .with_context(|| format!("annotation {}: not a bool", md::ANNOTATION_HIDDEN_UI))?;
        annotations.insert("kubewarden/hidden-ui".to_string(), hidden.to_string());
    }
    if let Some(resources) = metadata.annotation(md::ANNOTATION_ARTIFACTHUB_RESOURCES) {
        annotations.insert("kubewarden/resources".to_string(), resources.to_string());
    }

    let pkg = ArtifactHubPkg {
        version,
        name,
        display_name,
        created_at,
        description,
        license: metadata.annotation(md::ANNOTATION_LICENSE),
        home_url,
        containers_images: vec![ContainerImage {
            name: "policy",
            image: image.clone(),
        }],
        keywords,
        links,
        install: install_text(&image),
        maintainers,
        provider: Provider { name: "kubewarden" },
        recommendations: vec![Recommendation {
            url: "https://artifacthub.io/packages/helm/kubewarden/kubewarden-controller",
        }],
        annotations,
    };
    Ok(format!("{HEADER}\n{}", yaml_serde::to_string(&pkg)?))
}

/// The `createdAt` of an `artifacthub-pkg.yml` text.
pub fn created_at_of(pkg_yaml: &str) -> Option<&str> {
    pkg_yaml
        .lines()
        .find_map(|l| l.strip_prefix("createdAt: "))
        .map(|v| v.trim().trim_matches(['\'', '"']))
}

/// `artifacthub-repo.yml`: the owners are every policy's maintainers.
pub fn repo_yaml(owners: &BTreeSet<Maintainer>) -> Result<String> {
    #[derive(Serialize)]
    struct Repo {
        owners: Vec<MaintainerOut>,
    }
    let repo = Repo {
        owners: owners
            .iter()
            .map(|m| MaintainerOut {
                name: m.name.clone(),
                email: m.email.clone(),
            })
            .collect(),
    };
    Ok(format!(
        "# Artifact Hub repository metadata (https://artifacthub.io/docs/topics/repositories/).\n\
         # Generated by `make artifacthub` from the policies' io.kubewarden.policy.author.\n\
         # Add `repositoryID: <uuid>` here once the repository is registered on Artifact Hub.\n{}",
        yaml_serde::to_string(&repo)?
    ))
}

/// The files of the Artifact Hub directory, relative to it, with their contents.
pub type Files = BTreeMap<PathBuf, Vec<u8>>;

/// Every file `make artifacthub` writes for `policies`, reusing `createdAt`
/// from the files already in `existing_dir` when nothing else changed, and
/// `now` otherwise.
pub fn generate(policies: &[PolicyDir], existing_dir: &Path, now: &str) -> Result<Files> {
    let mut files = Files::new();
    let mut owners = BTreeSet::new();
    for policy in policies {
        let metadata = policy.metadata()?;
        let questions = policy
            .questions_path()
            .map(|p| {
                std::fs::read_to_string(&p).with_context(|| format!("cannot read {}", p.display()))
            })
            .transpose()?;
        let version = required(&metadata, md::ANNOTATION_VERSION)
            .with_context(|| format!("policy {}", policy.name))?;
        let dir = PathBuf::from(&policy.name).join(version);
        let existing = std::fs::read_to_string(existing_dir.join(&dir).join(PKG_FILE)).ok();
        let kept = existing
            .as_deref()
            .and_then(created_at_of)
            .map(|created| package_yaml(&metadata, questions.as_deref(), created))
            .transpose()
            .with_context(|| format!("policy {}", policy.name))?
            .filter(|regenerated| Some(regenerated) == existing.as_ref());
        let pkg = match kept {
            Some(pkg) => pkg,
            None => package_yaml(&metadata, questions.as_deref(), now)
                .with_context(|| format!("policy {}", policy.name))?,
        };
        files.insert(dir.join(PKG_FILE), pkg.into_bytes());
        let readme = std::fs::read(policy.readme_path())
            .with_context(|| format!("cannot read {}", policy.readme_path().display()))?;
        files.insert(dir.join("README.md"), readme);
        if let Some(author) = metadata.annotation(md::ANNOTATION_AUTHOR) {
            owners.extend(
                parse_maintainers(author)
                    .map_err(|e| anyhow::anyhow!("policy {}: {e}", policy.name))?,
            );
        }
    }
    files.insert(PathBuf::from(REPO_FILE), repo_yaml(&owners)?.into_bytes());
    Ok(files)
}

/// Writes `files` under `dir`.
pub fn write(dir: &Path, files: &Files) -> Result<()> {
    for (rel, bytes) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        if std::fs::read(&path).ok().as_deref() != Some(bytes.as_slice()) {
            std::fs::write(&path, bytes)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    Ok(())
}

/// Differences between `files` and what is in `dir`: missing or different files,
/// and policy directories with no policy. Older version directories of existing
/// policies are kept (Artifact Hub lists every released version).
pub fn differences(dir: &Path, files: &Files) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for (rel, bytes) in files {
        let path = dir.join(rel);
        match std::fs::read(&path) {
            Err(_) => out.push(format!("{} is missing", path.display())),
            Ok(on_disk) if on_disk != *bytes => {
                out.push(format!("{} is out of date", path.display()))
            }
            Ok(_) => {}
        }
    }
    let policies: BTreeSet<&std::ffi::OsStr> = files
        .keys()
        .filter_map(|p| p.components().next())
        .map(|c| c.as_os_str())
        .collect();
    if dir.is_dir() {
        for entry in
            std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?
        {
            let path = entry?.path();
            if path.is_dir() && path.file_name().is_some_and(|n| !policies.contains(n)) {
                out.push(format!("{} belongs to no policy", path.display()));
            }
        }
    }
    Ok(out)
}

/// The time for a new `createdAt`: `SOURCE_DATE_EPOCH` if set, else now (UTC,
/// RFC 3339, seconds).
pub fn now_rfc3339() -> Result<String> {
    let secs = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) => v
            .trim()
            .parse::<i64>()
            .context("SOURCE_DATE_EPOCH is not a number of seconds")?,
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .context("the system clock is before 1970")?
            .as_secs()
            .try_into()
            .context("the system clock is too far in the future")?,
    };
    Ok(rfc3339(secs))
}

/// `secs` since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (the rules crate's, which the policies write
/// into their messages).
pub use gpu_rules::clock::rfc3339;

#[cfg(test)]
mod tests {
    use super::*;

    const METADATA: &str = r#"rules:
- apiGroups: [""]
  apiVersions: ["v1"]
  resources: ["services"]
  operations: ["CREATE", "UPDATE"]
mutating: false
contextAwareResources:
- apiVersion: v1
  kind: Service
hostCapabilities: [kubernetes/list_resources_by_namespace]
annotations:
  io.kubewarden.policy.title: demo-policy
  io.kubewarden.policy.version: 1.2.3
  io.kubewarden.policy.description: Demo description
  io.kubewarden.policy.author: Demo developers <demo@example.org>
  io.kubewarden.policy.url: https://github.com/demo/policies
  io.kubewarden.policy.source: https://github.com/demo/policies
  io.kubewarden.policy.license: Apache-2.0
  io.kubewarden.policy.ociUrl: ghcr.io/demo/policies/demo-policy
  io.kubewarden.policy.severity: low
  io.kubewarden.policy.category: Resource validation
  com.github.release.tag: demo-policy/v1.2.3
  io.artifacthub.displayName: Demo policy
  io.artifacthub.resources: Service
  io.artifacthub.keywords: service, demo
"#;

    /// The layout kwctl 1.3x writes (checked against a package it generated).
    const EXPECTED: &str = r#"# Kubewarden Artifacthub Package config
#
# Use this config to submit the policy to https://artifacthub.io.
#
# This config can be saved to its default location with:
#   kwctl scaffold artifacthub > artifacthub-pkg.yml 
version: 1.2.3
name: demo-policy
displayName: Demo policy
createdAt: 2024-02-29T23:59:59Z
description: Demo description
license: Apache-2.0
homeURL: https://github.com/demo/policies
containersImages:
- name: policy
  image: ghcr.io/demo/policies/demo-policy:v1.2.3
keywords:
- service
- demo
links:
- name: policy
  url: https://github.com/demo/policies/releases/download/demo-policy%2Fv1.2.3/policy.wasm
- name: source
  url: https://github.com/demo/policies
install: |
  The policy can be obtained using [`kwctl`](https://github.com/kubewarden/kwctl):
  ```console
  kwctl pull ghcr.io/demo/policies/demo-policy:v1.2.3
  ```
  Then, generate the policy manifest and tune it to your liking. For example:
  ```console
  kwctl scaffold manifest -t ClusterAdmissionPolicy registry://ghcr.io/demo/policies/demo-policy:v1.2.3
  ```
maintainers:
- name: Demo developers
  email: demo@example.org
provider:
  name: kubewarden
recommendations:
- url: https://artifacthub.io/packages/helm/kubewarden/kubewarden-controller
annotations:
  kubewarden/contextAwareResources: |
    - apiVersion: v1
      kind: Service
  kubewarden/mutation: 'false'
  kubewarden/resources: Service
  kubewarden/rules: |
    - apiGroups:
      - ''
      apiVersions:
      - v1
      resources:
      - services
      operations:
      - CREATE
      - UPDATE
"#;

    #[test]
    fn package_matches_kwctl_scaffold_artifacthub() {
        let metadata = Metadata::from_yaml(METADATA).unwrap();
        let pkg = package_yaml(&metadata, None, "2024-02-29T23:59:59Z").unwrap();
        assert_eq!(pkg, EXPECTED);
        assert_eq!(created_at_of(&pkg), Some("2024-02-29T23:59:59Z"));
    }

    #[test]
    fn optional_fields() {
        let text = METADATA
            .replace("  com.github.release.tag: demo-policy/v1.2.3\n", "")
            .replace("https://github.com/demo/policies", "https://Example.org")
            .replace(
                "  io.artifacthub.keywords: service, demo\n",
                "  io.kubewarden.hidden-ui: 'true'\n",
            );
        let metadata = Metadata::from_yaml(&text).unwrap();
        let pkg = package_yaml(&metadata, Some("questions:\n- variable: x\n"), "t").unwrap();
        assert!(pkg.contains("homeURL: https://example.org/\n"), "{pkg}");
        assert!(
            pkg.contains("links:\n- name: source\n  url: https://example.org/\n"),
            "{pkg}"
        );
        assert!(!pkg.contains("keywords"));
        assert!(pkg.contains("  kubewarden/hidden-ui: 'true'\n"));
        assert!(pkg.contains("  kubewarden/questions-ui: |\n    questions:\n    - variable: x\n"));

        let no_tag = Metadata::from_yaml(
            &METADATA.replace("  com.github.release.tag: demo-policy/v1.2.3\n", ""),
        )
        .unwrap();
        assert!(
            package_yaml(&no_tag, None, "t")
                .unwrap()
                .contains("/releases/download/v1.2.3/policy.wasm")
        );
    }

    #[test]
    fn what_kwctl_refuses_is_refused() {
        let metadata = Metadata::from_yaml(METADATA).unwrap();
        assert!(package_yaml(&metadata, Some(""), "t").is_err());
        for (from, to) in [
            (
                "  io.kubewarden.policy.ociUrl: ghcr.io/demo/policies/demo-policy\n",
                "",
            ),
            ("  io.artifacthub.displayName: Demo policy\n", ""),
            ("version: 1.2.3", "version: v1.2.3"),
            ("service, demo", "service,,demo"),
            ("<demo@example.org>", ""),
        ] {
            let m = Metadata::from_yaml(&METADATA.replace(from, to)).unwrap();
            assert!(package_yaml(&m, None, "t").is_err(), "{from} -> {to}");
        }
    }

    #[test]
    fn created_at_is_kept_while_nothing_else_changes() {
        let dir = std::env::temp_dir().join(format!("gpu-dist-ah-{}", std::process::id()));
        let policy_dir = dir.join("policies/demo-policy");
        std::fs::create_dir_all(&policy_dir).unwrap();
        std::fs::write(policy_dir.join("metadata.yml"), METADATA).unwrap();
        std::fs::write(policy_dir.join("README.md"), "# demo\n").unwrap();
        let policies = vec![PolicyDir {
            name: "demo-policy".into(),
            dir: policy_dir.clone(),
        }];
        let out = dir.join("artifacthub");
        let pkg = PathBuf::from("demo-policy/1.2.3").join(PKG_FILE);

        let first = generate(&policies, &out, "2024-01-01T00:00:00Z").unwrap();
        write(&out, &first).unwrap();
        assert!(differences(&out, &first).unwrap().is_empty());
        // Regenerated later: same bytes, the first createdAt.
        let again = generate(&policies, &out, "2025-06-01T00:00:00Z").unwrap();
        assert_eq!(again, first);
        // A changed description is a new package: a new createdAt, and a difference.
        std::fs::write(
            policy_dir.join("metadata.yml"),
            METADATA.replace("Demo description", "Better description"),
        )
        .unwrap();
        let changed = generate(&policies, &out, "2025-06-01T00:00:00Z").unwrap();
        let text = String::from_utf8(changed[&pkg].clone()).unwrap();
        assert_eq!(created_at_of(&text), Some("2025-06-01T00:00:00Z"));
        assert_eq!(
            differences(&out, &changed).unwrap(),
            vec![format!("{} is out of date", out.join(&pkg).display())]
        );
        // A directory for a policy that does not exist is reported.
        std::fs::create_dir_all(out.join("gone-policy/0.1.0")).unwrap();
        assert_eq!(differences(&out, &first).unwrap().len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn times() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_709_251_199), "2024-02-29T23:59:59Z");
        assert_eq!(rfc3339(4_102_444_800), "2100-01-01T00:00:00Z");
        assert_eq!(form_urlencode("a-b/v1.0 x"), "a-b%2Fv1.0+x");
    }
}
