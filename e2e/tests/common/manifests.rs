//! The example manifests and deploy/policy-server.yaml, read as the cluster would.

use std::path::Path;

use gpu_e2e::{Policy, read_settings};
use serde::Deserialize;
use serde_json::Value;

/// The YAML documents of a file, each as JSON.
pub fn yaml_documents(path: impl AsRef<Path>) -> Vec<Value> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    yaml_serde::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .collect()
}

/// `examples/cluster-admission-policy.yaml` of the policy in `dir` (a ClusterAdmissionPolicy,
/// its ClusterRole and its ClusterRoleBinding, in that order), checked against metadata.yml:
/// valid settings, the same contextAwareResources, mutating and backgroundAudit, every rule.
/// Returns the documents and the metadata.
pub fn checked_example(policy: &Policy, dir: &Path) -> (Vec<Value>, Value) {
    let docs = yaml_documents(dir.join("examples/cluster-admission-policy.yaml"));
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        vec![
            "ClusterAdmissionPolicy",
            "ClusterRole",
            "ClusterRoleBinding"
        ]
    );
    let cap = &docs[0];
    let metadata = read_settings(dir.join("metadata.yml")).unwrap();
    let v = policy.validate_settings(&cap["spec"]["settings"]).unwrap();
    assert!(v.valid, "{:?}", v.message);
    assert_eq!(
        cap["spec"]["contextAwareResources"],
        metadata["contextAwareResources"]
    );
    assert_eq!(cap["spec"]["mutating"], metadata["mutating"]);
    assert_eq!(cap["spec"]["backgroundAudit"], metadata["backgroundAudit"]);
    for rule in metadata["rules"].as_array().unwrap() {
        assert!(
            cap["spec"]["rules"].as_array().unwrap().contains(rule),
            "rule {rule} of metadata.yml is missing from the example"
        );
    }
    assert_eq!(docs[2]["roleRef"]["name"], docs[1]["metadata"]["name"]);
    (docs, metadata)
}

/// A `contextAwareResources` entry as RBAC names it: (API group, "" for the core group;
/// kind; plural resource name).
pub fn rbac_names(resource: &Value) -> (&str, &str, String) {
    let api_version = resource["apiVersion"].as_str().unwrap();
    let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
    let kind = resource["kind"].as_str().unwrap();
    (group, kind, format!("{}s", kind.to_ascii_lowercase()))
}

/// Fails unless one rule of the ClusterRole `role` grants every verb of `verbs` on `plural`
/// of `group`.
pub fn assert_granted(role: &Value, group: &str, plural: &str, verbs: &[&str]) {
    let granted = role["rules"].as_array().unwrap().iter().any(|r| {
        r["apiGroups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g == group)
            && r["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p == plural)
            && verbs
                .iter()
                .all(|verb| r["verbs"].as_array().unwrap().iter().any(|v| v == verb))
    });
    assert!(
        granted,
        "the ClusterRole does not grant {verbs:?} on {plural}"
    );
}

/// The ClusterRole of deploy/policy-server.yaml that grants every gpu-admission policy the
/// DRA reads (get on ResourceClaimTemplates and ResourceClaims), checked to be bound to the
/// PolicyServer's ServiceAccount.
pub fn deploy_dra_role() -> Value {
    let docs =
        yaml_documents(Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/policy-server.yaml"));
    let binding = docs
        .iter()
        .find(|d| {
            d["kind"] == "ClusterRoleBinding" && d["metadata"]["name"] == "gpu-admission-dra-reader"
        })
        .expect("deploy/policy-server.yaml binds gpu-admission-dra-reader");
    assert_eq!(
        binding["subjects"][0]["name"],
        "gpu-admission-policy-server"
    );
    assert_eq!(binding["roleRef"]["name"], "gpu-admission-dra-reader");
    docs.iter()
        .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == "gpu-admission-dra-reader")
        .expect("deploy/policy-server.yaml has the ClusterRole gpu-admission-dra-reader")
        .clone()
}

/// Fails unless the policy's Cargo.toml is at the version metadata.yml announces.
pub fn assert_metadata_version_matches_the_crate(dir: &Path) {
    let metadata = read_settings(dir.join("metadata.yml")).unwrap();
    let cargo = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let version = metadata["annotations"]["io.kubewarden.policy.version"]
        .as_str()
        .unwrap();
    assert!(
        cargo.contains(&format!("version = \"{version}\"")),
        "Cargo.toml is not at {version}"
    );
}
