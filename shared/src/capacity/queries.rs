//! The capacity gate's own queries (besides a pool's Nodes and ceiling,
//! [`crate::pools`]): a pool's Pods and ResourceQuotas, a namespace's ResourceQuotas, a
//! team's Pods, the workload behind a `scale` request; each with its exact label
//! selector, field selector and field masks. Every pool always produces the same list
//! requests, so policy-server keeps one watch per pool and kind; nothing in a request
//! depends on the admitted object.

use crate::cluster::{ClusterRequest, GetResource, ListAll, ListInNamespace};
use crate::pools::Pool;
use std::collections::BTreeSet;

/// Pods that hold GPUs: everything but finished pods (pending pods are demand too).
pub const POD_FIELD_SELECTOR: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// What crosses the host boundary for each Pod: the inputs of the effective-request rule,
/// and the node it is bound to (the per-node checks).
pub const POD_FIELD_MASKS: &[&str] = &[
    "spec.containers.resources",
    "spec.ephemeralContainers.resources",
    "spec.initContainers.resources",
    "spec.initContainers.restartPolicy",
    "spec.nodeName",
    "spec.resources",
];

/// What crosses the host boundary for each ResourceQuota: what it limits (the GPU
/// resources it counts), its scope (which pods it counts) and what it counted.
pub const QUOTA_FIELD_MASKS: &[&str] = &[
    "spec.hard",
    "spec.scopeSelector",
    "spec.scopes",
    "status.used",
];

/// A ResourceQuota counts an extended resource only under this prefix
/// (`requests.nvidia.com/gpu`): Kubernetes allows no other form for them.
pub const QUOTA_REQUESTS_PREFIX: &str = "requests.";

/// The prefix of a quota's limits of a resource (`limits.cpu`), which Kubernetes never
/// counts for an extended resource.
pub const QUOTA_LIMITS_PREFIX: &str = "limits.";

/// What crosses the host boundary when a scaled workload is read: its pod template's
/// GPU requests (resources, DRA claims, a fractional-GPU scheduler's fields) and what
/// decides its pool.
pub const TEMPLATE_FIELD_MASKS: &[&str] = &[
    "spec.template.metadata.annotations.gpu-fraction",
    "spec.template.metadata.annotations.gpu-fraction-num-devices",
    "spec.template.metadata.annotations.gpu-memory",
    "spec.template.metadata.labels",
    "spec.template.spec.affinity.nodeAffinity",
    "spec.template.spec.containers.resources",
    "spec.template.spec.ephemeralContainers.resources",
    "spec.template.spec.initContainers.resources",
    "spec.template.spec.initContainers.restartPolicy",
    "spec.template.spec.nodeSelector",
    "spec.template.spec.priorityClassName",
    "spec.template.spec.resourceClaims",
    "spec.template.spec.resources",
    "spec.template.spec.schedulerName",
];

fn masks(list: &[&str]) -> Option<BTreeSet<String>> {
    Some(list.iter().map(|s| s.to_string()).collect())
}

/// The pool's Pods in every namespace: pool label, not finished; with their
/// `workload-type` label when the pool has reserves.
pub fn pod_query(pool_label_key: &str, pool: &Pool) -> ClusterRequest {
    let mut field_masks = masks(POD_FIELD_MASKS);
    if pool.has_reserves()
        && let Some(m) = field_masks.as_mut()
    {
        m.insert(format!(
            "metadata.labels.{}",
            crate::labels::settings::WORKLOAD_TYPE_LABEL
        ));
    }
    ClusterRequest::ListAll(ListAll {
        api_version: "v1".into(),
        kind: "Pod".into(),
        label_selector: Some(format!("{pool_label_key}={}", pool.name)),
        field_selector: Some(POD_FIELD_SELECTOR.into()),
        field_masks,
    })
}

/// The pool's ResourceQuotas in every namespace: the pool label.
pub fn quota_query(pool_label_key: &str, pool: &Pool) -> ClusterRequest {
    ClusterRequest::ListAll(ListAll {
        api_version: "v1".into(),
        kind: "ResourceQuota".into(),
        label_selector: Some(format!("{pool_label_key}={}", pool.name)),
        field_selector: None,
        field_masks: masks(QUOTA_FIELD_MASKS),
    })
}

/// The ResourceQuotas of `namespace`: every one, whatever its labels (Kubernetes checks
/// each quota of the namespace that counts the pod). What crosses the host boundary for
/// each is what does for a pool's quotas ([`QUOTA_FIELD_MASKS`]) and its name (in the
/// metadata, which Kubewarden never masks).
pub fn namespace_quota_query(namespace: &str) -> ClusterRequest {
    ClusterRequest::ListInNamespace(ListInNamespace {
        api_version: "v1".into(),
        kind: "ResourceQuota".into(),
        namespace: namespace.into(),
        label_selector: None,
        field_selector: None,
        field_masks: masks(&[&["metadata.name"], QUOTA_FIELD_MASKS].concat()),
    })
}

/// A team's Pods in every namespace, by the team label routing stamps: not finished.
pub fn team_pod_query(team: &str) -> ClusterRequest {
    ClusterRequest::ListAll(ListAll {
        api_version: "v1".into(),
        kind: "Pod".into(),
        label_selector: Some(format!("{}={team}", crate::settings::TEAM_POD_LABEL_KEY)),
        field_selector: Some(POD_FIELD_SELECTOR.into()),
        field_masks: masks(POD_FIELD_MASKS),
    })
}

/// Every Pod of `namespace` that is not finished (a team given by its namespaces).
pub fn namespace_pod_query(namespace: &str) -> ClusterRequest {
    ClusterRequest::ListInNamespace(ListInNamespace {
        api_version: "v1".into(),
        kind: "Pod".into(),
        namespace: namespace.into(),
        label_selector: None,
        field_selector: Some(POD_FIELD_SELECTOR.into()),
        field_masks: masks(POD_FIELD_MASKS),
    })
}

/// The workload behind a `scale` subresource request.
pub fn parent_query(api_version: &str, kind: &str, name: &str, namespace: &str) -> ClusterRequest {
    ClusterRequest::Get(GetResource {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        namespace: Some(namespace.into()),
        disable_cache: false,
        field_masks: masks(TEMPLATE_FIELD_MASKS),
    })
}

#[cfg(test)]
mod tests;
