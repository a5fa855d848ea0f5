//! Policy metadata (`metadata.yml`) as Kubewarden's policy-evaluator models it,
//! and the JSON `kwctl annotate` embeds in the `io.kubewarden.metadata` section.
//!
//! [`Metadata`] mirrors policy-evaluator's `policy_metadata::Metadata` field by
//! field, with the same serde attributes, so `serde_json::to_vec(&metadata)` is
//! the byte-for-byte shape kwctl writes: camelCase keys in struct order, sorted
//! annotations, defaults filled in (`backgroundAudit`, `executionMode`,
//! `policyType`, `contextAwareResources`), unknown keys dropped.
//! [`Metadata::validate`] is policy-evaluator's validation (the checks `kwctl
//! annotate` runs before it writes anything).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// `io.kubewarden.policy.title`
pub const ANNOTATION_TITLE: &str = "io.kubewarden.policy.title";
/// `io.kubewarden.policy.version`
pub const ANNOTATION_VERSION: &str = "io.kubewarden.policy.version";
/// `io.kubewarden.policy.description`
pub const ANNOTATION_DESCRIPTION: &str = "io.kubewarden.policy.description";
/// `io.kubewarden.policy.author`
pub const ANNOTATION_AUTHOR: &str = "io.kubewarden.policy.author";
/// `io.kubewarden.policy.url`
pub const ANNOTATION_URL: &str = "io.kubewarden.policy.url";
/// `io.kubewarden.policy.source`
pub const ANNOTATION_SOURCE: &str = "io.kubewarden.policy.source";
/// `io.kubewarden.policy.license`
pub const ANNOTATION_LICENSE: &str = "io.kubewarden.policy.license";
/// `io.kubewarden.policy.usage` (`kwctl annotate -u README.md`)
pub const ANNOTATION_USAGE: &str = "io.kubewarden.policy.usage";
/// `io.kubewarden.policy.severity`
pub const ANNOTATION_SEVERITY: &str = "io.kubewarden.policy.severity";
/// `io.kubewarden.policy.category`
pub const ANNOTATION_CATEGORY: &str = "io.kubewarden.policy.category";
/// `io.kubewarden.policy.ociUrl`
pub const ANNOTATION_OCI_URL: &str = "io.kubewarden.policy.ociUrl";
/// `io.kubewarden.kwctl`: the kwctl version `kwctl annotate` adds.
pub const ANNOTATION_KWCTL_VERSION: &str = "io.kubewarden.kwctl";
/// `io.artifacthub.displayName`
pub const ANNOTATION_ARTIFACTHUB_DISPLAY_NAME: &str = "io.artifacthub.displayName";
/// `io.artifacthub.resources`
pub const ANNOTATION_ARTIFACTHUB_RESOURCES: &str = "io.artifacthub.resources";
/// `io.artifacthub.keywords`
pub const ANNOTATION_ARTIFACTHUB_KEYWORDS: &str = "io.artifacthub.keywords";
/// `io.kubewarden.hidden-ui`
pub const ANNOTATION_HIDDEN_UI: &str = "io.kubewarden.hidden-ui";
/// `com.github.release.tag`
pub const ANNOTATION_GITHUB_RELEASE_TAG: &str = "com.github.release.tag";

/// The keys policy-evaluator reads from `metadata.yml`; others are ignored.
pub const KNOWN_KEYS: &[&str] = &[
    "protocolVersion",
    "rules",
    "annotations",
    "mutating",
    "backgroundAudit",
    "executionMode",
    "policyType",
    "contextAwareResources",
    "hostCapabilities",
    "minimumKubewardenVersion",
];

/// An admission operation of a [`Rule`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Operation {
    /// `CREATE`
    #[serde(rename = "CREATE")]
    Create,
    /// `UPDATE`
    #[serde(rename = "UPDATE")]
    Update,
    /// `DELETE`
    #[serde(rename = "DELETE")]
    Delete,
    /// `CONNECT`
    #[serde(rename = "CONNECT")]
    Connect,
    /// `*`
    #[serde(rename = "*")]
    All,
}

/// The scope of the resources a [`Rule`] matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Scope {
    /// `Cluster`
    Cluster,
    /// `Namespaced`
    Namespaced,
    /// `*`
    #[serde(rename = "*")]
    All,
}

/// One webhook rule (`RuleWithOperations`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// API groups (`""` is the core group).
    pub api_groups: Vec<String>,
    /// API versions.
    pub api_versions: Vec<String>,
    /// Resources, `resource/subresource` for subresources.
    pub resources: Vec<String>,
    /// Operations.
    pub operations: Vec<Operation>,
    /// Optional scope.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
}

/// A Kubernetes resource a context-aware policy reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextAwareResource {
    /// `v1` for the core group, `group/version` otherwise.
    pub api_version: String,
    /// The kind, e.g. `Node`.
    pub kind: String,
}

/// `executionMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ExecutionMode {
    /// `kubewarden-wapc` (the default; SDK policies)
    #[default]
    #[serde(rename = "kubewarden-wapc")]
    KubewardenWapc,
    /// `opa`
    #[serde(rename = "opa")]
    Opa,
    /// `gatekeeper`
    #[serde(rename = "gatekeeper")]
    OpaGatekeeper,
    /// `wasi`
    #[serde(rename = "wasi")]
    Wasi,
}

/// `policyType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum PolicyType {
    /// `kubernetes` (the default)
    #[default]
    #[serde(rename = "kubernetes")]
    Kubernetes,
    /// `raw`
    #[serde(rename = "raw")]
    Raw,
}

fn default_true() -> bool {
    true
}

/// Policy metadata, field for field as policy-evaluator's `Metadata`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// Filled in by `kwctl annotate` from the module's `protocol_version` (`v1`).
    pub protocol_version: Option<String>,
    /// Webhook rules (required).
    pub rules: Vec<Rule>,
    /// Annotations (title, version, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Whether the policy may mutate requests (required).
    pub mutating: bool,
    /// Whether the audit scanner evaluates the policy (default `true`).
    #[serde(default = "default_true")]
    pub background_audit: bool,
    /// How the module is run.
    #[serde(default)]
    pub execution_mode: ExecutionMode,
    /// `kubernetes` or `raw`.
    #[serde(default)]
    pub policy_type: PolicyType,
    /// Kubernetes resources the policy reads through host capabilities.
    #[serde(default)]
    pub context_aware_resources: BTreeSet<ContextAwareResource>,
    /// Host capabilities the policy calls (`kubernetes/list_resources_all`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_capabilities: Option<BTreeSet<String>>,
    /// Oldest Kubewarden release able to run the policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minimum_kubewarden_version: Option<String>,
}

impl Metadata {
    /// Parses `metadata.yml` (YAML or JSON) the way kwctl does: unknown keys are
    /// ignored, `rules` and `mutating` are required.
    pub fn from_yaml(text: &str) -> Result<Self> {
        yaml_serde::from_str(text).context("cannot parse the policy metadata")
    }

    /// The annotation `key`, if set.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.as_ref()?.get(key).map(String::as_str)
    }

    /// What `kwctl annotate -m metadata.yml [-u usage]` embeds, minus the
    /// `io.kubewarden.kwctl` annotation (this is not kwctl): the metadata with
    /// `protocolVersion` set and the usage text as `io.kubewarden.policy.usage`.
    pub fn annotated(mut self, protocol_version: &str, usage: Option<&str>) -> Self {
        self.protocol_version = Some(protocol_version.to_string());
        if let Some(usage) = usage {
            self.annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(ANNOTATION_USAGE.to_string(), usage.to_string());
        }
        self
    }

    /// The JSON `kwctl annotate` writes into `io.kubewarden.metadata`.
    pub fn to_section_bytes(&self) -> Result<Vec<u8>> {
        serde_json::to_vec(self).context("cannot serialize the policy metadata")
    }

    /// policy-evaluator's validation, one message per problem: every rule list
    /// non-empty, `*` alone, Kubernetes' resource/subresource wildcard rules,
    /// a protocol version for waPC policies, non-empty context-aware resources.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        match self.protocol_version.as_deref() {
            None => problems.push("protocolVersion: required".to_string()),
            Some("Unknown") if self.execution_mode == ExecutionMode::KubewardenWapc => {
                problems.push("protocolVersion: must specify a valid protocol version".into());
            }
            _ => {}
        }
        for (i, rule) in self.rules.iter().enumerate() {
            for problem in rule.problems() {
                problems.push(format!("rules[{i}].{problem}"));
            }
        }
        for r in &self.context_aware_resources {
            if r.api_version.is_empty() || r.kind.is_empty() {
                problems.push(format!(
                    "contextAwareResources: apiVersion and kind must not be empty ({r:?})"
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }
}

impl Rule {
    /// What policy-evaluator (and Kubernetes) reject in this rule.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (field, list) in [
            ("apiGroups", &self.api_groups),
            ("apiVersions", &self.api_versions),
        ] {
            if list.is_empty() {
                out.push(format!("{field}: must not be empty"));
            } else if list.len() > 1 && list.iter().any(|v| v == "*") {
                out.push(format!(
                    "{field}: no other elements can be defined when '*' is used"
                ));
            }
        }
        if self.resources.is_empty() {
            out.push("resources: must not be empty".to_string());
        } else if let Err(e) = validate_resources(&self.resources) {
            out.push(format!("resources: {e}"));
        }
        if self.operations.is_empty() {
            out.push("operations: must not be empty".to_string());
        } else if self.operations.len() > 1 && self.operations.contains(&Operation::All) {
            out.push("operations: no other elements can be defined when '*' is used".to_string());
        }
        out
    }
}

/// Kubernetes' check of a rule's resources (admissionregistration validation),
/// as transposed by policy-evaluator.
fn validate_resources(resources: &[String]) -> Result<(), String> {
    let mut with_wildcard_subresource: HashSet<&str> = HashSet::new();
    let mut subresources_with_wildcard_resource: HashSet<&str> = HashSet::new();
    let mut has_double_wildcard = false;
    let mut has_single_wildcard = false;
    let mut has_resource_without_subresource = false;
    for resource in resources {
        if resource.is_empty() {
            return Err("empty resource is not allowed".into());
        }
        match resource.as_str() {
            "*/*" => has_double_wildcard = true,
            "*" => has_single_wildcard = true,
            _ => {}
        }
        let Some((res, sub)) = resource.split_once('/') else {
            has_resource_without_subresource = resource != "*";
            continue;
        };
        if with_wildcard_subresource.contains(res) {
            return Err(format!(
                "if '{resource}/*' is present, must not specify {res}"
            ));
        }
        if subresources_with_wildcard_resource.contains(sub) {
            return Err(format!(
                "if '*/{sub}' is present, must not specify {resource}"
            ));
        }
        if sub == "*" {
            with_wildcard_subresource.insert(res);
        }
        if res == "*" {
            subresources_with_wildcard_resource.insert(sub);
        }
    }
    if resources.len() > 1 && has_double_wildcard {
        return Err("if '*/*' is present, must not specify other resources".into());
    }
    if has_single_wildcard && has_resource_without_subresource {
        return Err(
            "if '*' is present, must not specify other resources without subresources".into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MINIMAL: &str = "rules:\n- apiGroups: ['']\n  apiVersions: [v1]\n  resources: [pods]\n  operations: [CREATE]\nmutating: false\n";

    #[test]
    fn defaults_and_key_order_are_policy_evaluators() {
        let m = Metadata::from_yaml(MINIMAL).unwrap().annotated("v1", None);
        let text = String::from_utf8(m.to_section_bytes().unwrap()).unwrap();
        assert_eq!(
            text,
            r#"{"protocolVersion":"v1","rules":[{"apiGroups":[""],"apiVersions":["v1"],"resources":["pods"],"operations":["CREATE"]}],"mutating":false,"backgroundAudit":true,"executionMode":"kubewarden-wapc","policyType":"kubernetes","contextAwareResources":[]}"#
        );
        assert!(m.validate().is_ok());
    }

    #[test]
    fn unknown_keys_are_dropped_and_sets_sorted() {
        let yaml = format!(
            "{MINIMAL}contextAware: true\ncontextAwareResources:\n- {{apiVersion: v1, kind: Pod}}\n- {{apiVersion: v1, kind: Node}}\nhostCapabilities: [kubernetes/list_resources_all, kubernetes/get_resource]\nannotations: {{b: '2', a: '1'}}\n"
        );
        let m = Metadata::from_yaml(&yaml)
            .unwrap()
            .annotated("v1", Some("# usage\n"));
        let v: serde_json::Value = serde_json::from_slice(&m.to_section_bytes().unwrap()).unwrap();
        assert!(v.get("contextAware").is_none());
        assert_eq!(
            v["contextAwareResources"],
            json!([{"apiVersion": "v1", "kind": "Node"}, {"apiVersion": "v1", "kind": "Pod"}])
        );
        assert_eq!(
            v["hostCapabilities"],
            json!(["kubernetes/get_resource", "kubernetes/list_resources_all"])
        );
        assert_eq!(
            v["annotations"],
            json!({"a": "1", "b": "2", "io.kubewarden.policy.usage": "# usage\n"})
        );
    }

    #[test]
    fn required_fields_and_enums_are_enforced() {
        assert!(Metadata::from_yaml("rules: []\n").is_err()); // no `mutating`
        assert!(Metadata::from_yaml("mutating: true\n").is_err()); // no `rules`
        let bad_op = MINIMAL.replace("CREATE", "CREATED");
        assert!(Metadata::from_yaml(&bad_op).is_err());
        let bad_mode = format!("{MINIMAL}executionMode: wapc\n");
        assert!(Metadata::from_yaml(&bad_mode).is_err());
    }

    #[test]
    fn rule_validation_matches_kubernetes() {
        let rule = |resources: &[&str], ops: Vec<Operation>| Rule {
            api_groups: vec!["".into()],
            api_versions: vec!["v1".into()],
            resources: resources.iter().map(|s| s.to_string()).collect(),
            operations: ops,
            scope: None,
        };
        // (resources, operations, valid)
        let create = || vec![Operation::Create];
        let cases: [(&[&str], Vec<Operation>, bool); 8] = [
            (&["pods"], create(), true),
            (&["*", "a/b", "a/*", "*/b"], create(), true),
            (&["*", "pods"], create(), false),
            (&["a/*", "a/x"], create(), false),
            (&["*/a", "x/a"], create(), false),
            (&["*/*", "pods"], create(), false),
            (&["pods"], vec![], false),
            (&["pods"], vec![Operation::All, Operation::Create], false),
        ];
        for (resources, operations, valid) in cases {
            let problems = rule(resources, operations.clone()).problems();
            assert_eq!(
                problems.is_empty(),
                valid,
                "{resources:?} {operations:?}: {problems:?}"
            );
        }
        let mut wild = rule(&["pods"], vec![Operation::Create]);
        wild.api_groups = vec!["".into(), "*".into()];
        assert_eq!(wild.problems().len(), 1);

        let mut m = Metadata::from_yaml(MINIMAL).unwrap();
        assert_eq!(m.validate().unwrap_err(), vec!["protocolVersion: required"]);
        m.protocol_version = Some("v1".into());
        m.rules.push(rule(&["*", "pods"], vec![]));
        assert_eq!(m.validate().unwrap_err().len(), 2);
    }
}
