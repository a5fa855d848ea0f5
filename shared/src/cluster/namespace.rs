//! A workload's Namespace, read for its labels: what users who can create pods cannot set
//! (changing a Namespace's labels takes `update` on namespaces), so the policies take a
//! team, a right to GPUs or a tenant's trust from there. One `get_resource` of v1 Namespace,
//! masked to `metadata.labels`, from the host's cache.

use super::{Cluster, ClusterRequest, GetResource, HostError, HostFailure, call};
use crate::podspec::null_as_default;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

/// `get_resource` of the Namespace `name`, masked to its labels.
pub fn namespace_request(name: &str) -> ClusterRequest {
    ClusterRequest::Get(GetResource {
        api_version: "v1".into(),
        kind: "Namespace".into(),
        name: name.into(),
        namespace: None,
        disable_cache: false,
        field_masks: Some(BTreeSet::from(["metadata.labels".to_string()])),
    })
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct NamespaceObject {
    #[serde(deserialize_with = "null_as_default")]
    metadata: NamespaceMeta,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct NamespaceMeta {
    #[serde(deserialize_with = "null_as_default")]
    labels: BTreeMap<String, String>,
}

/// The labels of the Namespace `name`; a failed call or an answer that is not a Namespace
/// is a [`HostFailure`] (worded by [`HostFailure::explanation`]).
pub fn namespace_labels(
    cluster: &dyn Cluster,
    name: &str,
) -> Result<BTreeMap<String, String>, HostFailure> {
    let request = namespace_request(name);
    let bytes = call(cluster, &request)?;
    let object: NamespaceObject = serde_json::from_slice(&bytes).map_err(|e| HostFailure {
        request: Box::new(request),
        error: HostError::Unreadable(format!("not a Namespace: {e}")),
    })?;
    Ok(object.metadata.labels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::FailureClass;
    use crate::cluster::fake::Objects;
    use serde_json::json;

    #[test]
    fn reads_the_labels_of_the_namespace() {
        let cluster = Objects::default().with(
            "Namespace",
            "ml",
            json!({"metadata": {"name": "ml", "labels": {"gpu-access": "true"}}}),
        );
        let labels = namespace_labels(&cluster, "ml").unwrap();
        assert_eq!(labels.get("gpu-access").map(String::as_str), Some("true"));
        assert_eq!(cluster.calls.borrow()[0], namespace_request("ml"));
        let bare = Objects::default().with("Namespace", "b", json!({"metadata": {"labels": null}}));
        assert!(namespace_labels(&bare, "b").unwrap().is_empty());
    }

    #[test]
    fn failures_keep_their_class() {
        let cluster = Objects::default()
            .failing(
                "Namespace",
                "ml",
                "Policy has not been granted access to Kubernetes v1/Namespace resources. The violation has been reported.",
            )
            .with("Namespace", "odd", json!([1, 2]));
        let failure = namespace_labels(&cluster, "ml").unwrap_err();
        assert_eq!(failure.class(), FailureClass::NotGranted);
        assert_eq!(
            failure.explanation(),
            "cannot get v1/Namespace ml: not granted to this policy: add {apiVersion: v1, kind: Namespace} to the ClusterAdmissionPolicy's contextAwareResources"
        );
        let odd = namespace_labels(&cluster, "odd").unwrap_err();
        assert_eq!(odd.class(), FailureClass::Unreadable);
        assert_eq!(
            namespace_labels(&cluster, "gone").unwrap_err().class(),
            FailureClass::NotFound
        );
    }
}
