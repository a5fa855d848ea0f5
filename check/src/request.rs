//! The AdmissionRequest the API server would send for a manifest: CREATE, or UPDATE with
//! the previous version of the object.

use serde_json::{Value, json};

/// Kinds that are not namespaced (the rest are): the built-in cluster-scoped kinds and
/// those of Kubewarden, Karpenter and the GPU operators a GPU cluster runs.
const CLUSTER_SCOPED: &[&str] = &[
    "APIService",
    "CertificateSigningRequest",
    "ClusterAdmissionPolicy",
    "ClusterAdmissionPolicyGroup",
    "ClusterPolicy",
    "ClusterQueue",
    "ClusterRole",
    "ClusterRoleBinding",
    "ComponentStatus",
    "CSIDriver",
    "CSINode",
    "CustomResourceDefinition",
    "DeviceClass",
    "FlowSchema",
    "IngressClass",
    "MutatingWebhookConfiguration",
    "Namespace",
    "Node",
    "NodeClaim",
    "NodePool",
    "PersistentVolume",
    "PolicyServer",
    "PriorityClass",
    "PriorityLevelConfiguration",
    "ResourceFlavor",
    "ResourceSlice",
    "RuntimeClass",
    "StorageClass",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "ValidatingWebhookConfiguration",
    "VolumeAttachment",
];

/// Resource names that are not the kind's regular plural.
const IRREGULAR_PLURALS: &[(&str, &str)] = &[("Endpoints", "endpoints")];

/// Whether objects of `kind` live in a namespace.
pub fn is_namespaced(kind: &str) -> bool {
    !CLUSTER_SCOPED.contains(&kind)
}

/// The API resource of a kind (`Deployment` -> `deployments`, `Ingress` -> `ingresses`,
/// `NetworkPolicy` -> `networkpolicies`).
pub fn resource_of(kind: &str) -> String {
    IRREGULAR_PLURALS
        .iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, r)| r.to_string())
        .unwrap_or_else(|| gpu_dist::manifests::plural(kind))
}

/// `group` and `version` of an `apiVersion` (`v1` is the core group, `""`).
pub fn group_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

/// What identifies an object: apiVersion's group, kind, namespace, name.
pub fn identity(object: &Value, default_namespace: &str) -> (String, String, String, String) {
    let (group, _) = group_version(object["apiVersion"].as_str().unwrap_or_default());
    let kind = object["kind"].as_str().unwrap_or_default();
    (
        group.to_string(),
        kind.to_string(),
        namespace_of(object, default_namespace).unwrap_or_default(),
        object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

/// The namespace the object is created in: its own, or `default_namespace` (as
/// `kubectl apply -n`); `None` for cluster-scoped kinds.
pub fn namespace_of(object: &Value, default_namespace: &str) -> Option<String> {
    let kind = object["kind"].as_str().unwrap_or_default();
    if !is_namespaced(kind) {
        return None;
    }
    Some(
        object["metadata"]["namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
            .unwrap_or(default_namespace)
            .to_string(),
    )
}

/// A short name for the object: `Kind namespace/name` or `Kind name`.
pub fn describe(object: &Value, default_namespace: &str) -> String {
    let kind = object["kind"].as_str().unwrap_or("?");
    let name = object["metadata"]["name"]
        .as_str()
        .or_else(|| object["metadata"]["generateName"].as_str())
        .unwrap_or("(no name)");
    match namespace_of(object, default_namespace) {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// Who the requests come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// `userInfo.username`.
    pub username: String,
    /// `userInfo.groups`.
    pub groups: Vec<String>,
}

impl Default for UserInfo {
    fn default() -> Self {
        Self {
            username: "gpu-admission-check".into(),
            groups: vec!["system:authenticated".into()],
        }
    }
}

/// The AdmissionRequest for `object`: CREATE, or UPDATE of `old`. The object gets its
/// namespace filled in, as the API server does before admission.
pub fn admission_request(
    uid: &str,
    object: &Value,
    old: Option<&Value>,
    default_namespace: &str,
    user: &UserInfo,
) -> Value {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = group_version(api_version);
    let kind = object["kind"].as_str().unwrap_or_default();
    let namespace = namespace_of(object, default_namespace);
    let with_namespace = |o: &Value| {
        let mut o = o.clone();
        if let (Some(ns), Some(meta)) = (&namespace, o.get_mut("metadata")) {
            if let Some(meta) = meta.as_object_mut() {
                meta.insert("namespace".into(), Value::String(ns.clone()));
            }
        } else if let (Some(ns), Some(map)) = (&namespace, o.as_object_mut()) {
            map.insert("metadata".into(), json!({ "namespace": ns }));
        }
        o
    };
    let (operation, options) = match old {
        Some(_) => ("UPDATE", "UpdateOptions"),
        None => ("CREATE", "CreateOptions"),
    };
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let gvr = json!({"group": group, "version": version, "resource": resource_of(kind)});
    let mut request = json!({
        "uid": uid,
        "kind": gvk,
        "resource": gvr,
        "requestKind": gvk,
        "requestResource": gvr,
        "name": object["metadata"]["name"].as_str().unwrap_or_default(),
        "operation": operation,
        "userInfo": {"username": user.username, "groups": user.groups},
        "object": with_namespace(object),
        "oldObject": old.map(with_namespace),
        "dryRun": false,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": options},
    });
    if let Some(ns) = namespace {
        request["namespace"] = Value::String(ns);
    }
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_and_scopes() {
        assert_eq!(resource_of("Deployment"), "deployments");
        assert_eq!(resource_of("Ingress"), "ingresses");
        assert_eq!(resource_of("NetworkPolicy"), "networkpolicies");
        assert_eq!(resource_of("Endpoints"), "endpoints");
        assert!(is_namespaced("Pod"));
        assert!(!is_namespaced("PriorityClass"));
    }

    #[test]
    fn create_and_update_requests() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
        let create = admission_request("u1", &pod, None, "ml", &UserInfo::default());
        assert_eq!(create["operation"], "CREATE");
        assert_eq!(create["namespace"], "ml");
        assert_eq!(create["object"]["metadata"]["namespace"], "ml");
        assert_eq!(
            create["kind"],
            json!({"group": "", "version": "v1", "kind": "Pod"})
        );
        assert_eq!(create["resource"]["resource"], "pods");
        assert!(create["oldObject"].is_null());
        let update = admission_request("u2", &pod, Some(&pod), "ml", &UserInfo::default());
        assert_eq!(update["operation"], "UPDATE");
        assert_eq!(update["oldObject"]["metadata"]["namespace"], "ml");
        let pc = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "x"}});
        let r = admission_request("u3", &pc, None, "ml", &UserInfo::default());
        assert!(r.get("namespace").is_none());
        assert_eq!(r["kind"]["group"], "scheduling.k8s.io");
        assert_eq!(describe(&pc, "ml"), "PriorityClass x");
        assert_eq!(describe(&pod, "ml"), "Pod ml/p");
    }
}
