//! Reading a pool's state through context-aware host calls: the exact requests (label
//! selectors, field selector, field masks), parsing the answers with small lenient types,
//! and turning failures into messages that name the missing permission.
//!
//! A pool's allocatable GPUs come from its Nodes or from the capacity declared in
//! settings; its GPUs in use from its Pods or from its ResourceQuotas ([`quota_usage`]).
//! Every pool always produces the same list requests, so policy-server keeps one watch per
//! pool and kind; nothing in a request depends on the admitted object.

use super::decision::{CapacitySource, Ceiling, CeilingSource, NodeUse, PoolSnapshot, UsageSource};
use super::settings::{Pool, Settings, Usage};
use crate::cluster::{Cluster, ClusterRequest, GetResource, ListAll, ListInNamespace};
use crate::gpu::{GpuCounts, GpuResources, add_into, pod_gpus};
use crate::podspec::null_as_default;
use serde::Deserialize;
use serde::de::DeserializeSeed;
use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::rc::Rc;

/// Pods that hold GPUs: everything but finished pods (pending pods are demand too).
pub const POD_FIELD_SELECTOR: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// What crosses the host boundary for each Node.
pub const NODE_FIELD_MASKS: &[&str] = &["spec.taints", "spec.unschedulable", "status.allocatable"];

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

/// What crosses the host boundary for a Karpenter NodePool: its limits.
pub const NODE_POOL_FIELD_MASKS: &[&str] = &["spec.limits"];

/// Karpenter's NodePool, whose `spec.limits` is a pool's ceiling.
pub const NODE_POOL_API_VERSION: &str = "karpenter.sh/v1";
pub const NODE_POOL_KIND: &str = "NodePool";

/// What crosses the host boundary for each ResourceQuota: what it limits (the GPU
/// resources it counts), its scope (which pods it counts) and what it counted.
pub const QUOTA_FIELD_MASKS: &[&str] = &[
    "spec.hard",
    "spec.scopeSelector",
    "spec.scopes",
    "status.used",
];

/// What crosses the host boundary for each ResourceQuota of the request's namespace (its
/// name is in the metadata, which Kubewarden never masks).
pub const NAMESPACE_QUOTA_FIELD_MASKS: &[&str] = &[
    "metadata.name",
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

/// Node taints that keep new pods off a node (set by the node lifecycle controller and
/// by `kubectl cordon`): such nodes' GPUs are not counted as allocatable.
const UNSCHEDULABLE_TAINTS: &[&str] = &[
    "node.kubernetes.io/unschedulable",
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
];

fn masks(list: &[&str]) -> Option<BTreeSet<String>> {
    Some(list.iter().map(|s| s.to_string()).collect())
}

/// The pool's Nodes: `list_resources_all` of `v1/Node` by the pool's node selector.
pub fn node_query(pool: &Pool) -> ClusterRequest {
    ClusterRequest::ListAll(ListAll {
        api_version: "v1".into(),
        kind: "Node".into(),
        label_selector: Some(pool.node_selector.to_query()),
        field_selector: None,
        field_masks: masks(NODE_FIELD_MASKS),
    })
}

/// The pool's Pods in every namespace: pool label, not finished.
pub fn pod_query(pool_label_key: &str, pool: &Pool) -> ClusterRequest {
    ClusterRequest::ListAll(ListAll {
        api_version: "v1".into(),
        kind: "Pod".into(),
        label_selector: Some(format!("{pool_label_key}={}", pool.name)),
        field_selector: Some(POD_FIELD_SELECTOR.into()),
        field_masks: masks(POD_FIELD_MASKS),
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
/// each quota of the namespace that counts the pod).
pub fn namespace_quota_query(namespace: &str) -> ClusterRequest {
    ClusterRequest::ListInNamespace(ListInNamespace {
        api_version: "v1".into(),
        kind: "ResourceQuota".into(),
        namespace: namespace.into(),
        label_selector: None,
        field_selector: None,
        field_masks: masks(NAMESPACE_QUOTA_FIELD_MASKS),
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

/// The Karpenter NodePool `name` (cluster-scoped), masked to its limits.
pub fn node_pool_query(name: &str) -> ClusterRequest {
    ClusterRequest::Get(GetResource {
        api_version: NODE_POOL_API_VERSION.into(),
        kind: NODE_POOL_KIND.into(),
        name: name.into(),
        namespace: None,
        disable_cache: false,
        field_masks: masks(NODE_POOL_FIELD_MASKS),
    })
}

/// The GPU entries of a NodePool's `spec.limits` (resource names the gate counts). A
/// NodePool without limits, or without a GPU limit, gives no entry (it may grow without
/// bound: the gate then judges on what is allocatable). A GPU limit that is not a whole,
/// non-negative count makes the answer unreadable.
pub fn parse_node_pool_limits(bytes: &[u8], names: &GpuResources) -> Result<GpuCounts, String> {
    let object: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if !object.is_object() {
        return Err(format!("expected an object, got {object}"));
    }
    let mut limits = GpuCounts::new();
    let entries = object.pointer("/spec/limits").and_then(|l| l.as_object());
    for (resource, quantity) in entries.into_iter().flatten() {
        if !names.is_gpu(resource) {
            continue;
        }
        let text = match quantity {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let n = crate::quantity::Quantity::parse_count(&text)
            .map_err(|e| format!("spec.limits.{resource}: {e}"))?;
        limits.insert(resource.clone(), n);
    }
    Ok(limits)
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

/// A host call that failed, or whose answer could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFailure {
    /// Boxed: failures travel in `Result`s and are rare.
    pub request: Box<ClusterRequest>,
    pub error: HostError,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostError {
    /// The host refused or failed the call (its text, possibly long).
    Call(String),
    /// The host answered, but not with what was asked for.
    Unreadable(String),
}

impl HostFailure {
    /// What the policy could not do and what to change, without the raw host text:
    /// `cannot list v1/Node: add {apiVersion: v1, kind: Node} to the policy's
    /// contextAwareResources and grant ...`.
    pub fn explanation(&self) -> String {
        let (verb, rbac_verbs, what) = match self.request.as_ref() {
            ClusterRequest::Get(g) => (
                "get",
                "get",
                match &g.namespace {
                    Some(namespace) => {
                        format!("{}/{} {namespace}/{}", g.api_version, g.kind, g.name)
                    }
                    None => format!("{}/{} {}", g.api_version, g.kind, g.name),
                },
            ),
            ClusterRequest::ListAll(_) | ClusterRequest::ListInNamespace(_) => {
                ("list", "list and watch", self.request.what())
            }
        };
        let (api_version, kind) = api_version_kind(&self.request);
        let group = api_version.rsplit_once('/').map(|(g, _)| g);
        let plural = format!("{}s", kind.to_ascii_lowercase());
        let on = match group {
            Some(g) => format!("{plural} (apiGroup {g})"),
            None => plural,
        };
        let context_aware = format!(
            "add {{apiVersion: {api_version}, kind: {kind}}} to the ClusterAdmissionPolicy's contextAwareResources"
        );
        let rbac = format!("grant the policy-server's ServiceAccount {rbac_verbs} on {on}");
        match &self.error {
            HostError::Unreadable(e) => {
                format!("cannot {verb} {what}: the answer could not be read ({e})")
            }
            HostError::Call(raw) if raw.contains("has not been granted access") => {
                format!("cannot {verb} {what}: {context_aware}")
            }
            HostError::Call(raw)
                if matches!(self.request.as_ref(), ClusterRequest::Get(_)) && is_not_found(raw) =>
            {
                format!("cannot {verb} {what}: it does not exist")
            }
            HostError::Call(raw) if raw.to_ascii_lowercase().contains("forbidden") => {
                format!("cannot {verb} {what}: {rbac}")
            }
            HostError::Call(_) => format!("cannot {verb} {what}: {context_aware} and {rbac}"),
        }
    }

    /// The host's own text, cut to `max` bytes (at a character boundary), for an audit
    /// annotation.
    pub fn raw(&self, max: usize) -> String {
        let text = match &self.error {
            HostError::Call(s) | HostError::Unreadable(s) => s.as_str(),
        };
        if text.len() <= max {
            return text.to_string();
        }
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &text[..end])
    }
}

/// The host's text for an object that does not exist (the API server's `NotFound`, or
/// kwctl's and policy-server's "Cannot find ...").
fn is_not_found(raw: &str) -> bool {
    let lower = raw.to_ascii_lowercase();
    lower.contains("not found") || lower.contains("notfound") || lower.contains("cannot find")
}

fn api_version_kind(request: &ClusterRequest) -> (&str, &str) {
    match request {
        ClusterRequest::Get(r) => (&r.api_version, &r.kind),
        ClusterRequest::ListAll(r) => (&r.api_version, &r.kind),
        ClusterRequest::ListInNamespace(r) => (&r.api_version, &r.kind),
    }
}

/// Makes `request` and returns the raw answer. The waPC guest library prefixes host
/// errors with `Host error: `; that prefix is dropped.
pub fn call(cluster: &dyn Cluster, request: &ClusterRequest) -> Result<Vec<u8>, HostFailure> {
    cluster.call(request).map_err(|e| HostFailure {
        request: Box::new(request.clone()),
        error: HostError::Call(match e.strip_prefix("Host error: ") {
            Some(rest) => rest.to_string(),
            None => e,
        }),
    })
}

/// Why a pool's state is not known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolError {
    /// A host call failed or its answer could not be read.
    Host(HostFailure),
    /// The pool's ResourceQuotas cannot count what the request needs (what is wrong and
    /// how to fix it).
    Uncountable(String),
}

impl From<HostFailure> for PoolError {
    fn from(f: HostFailure) -> Self {
        PoolError::Host(f)
    }
}

/// Reads the pool's allocatable GPUs (its Nodes, or the capacity declared in settings)
/// and its GPUs in use (its Pods, or its ResourceQuotas), in that order. `namespace` and
/// `demand` are the request's: with quotas, the namespace must have its quota and every
/// quota must count the resources asked for.
pub fn read_pool(
    cluster: &dyn Cluster,
    settings: &Settings,
    pool: &Pool,
    names: &GpuResources,
    namespace: &str,
    demand: &GpuCounts,
) -> Result<PoolSnapshot, PoolError> {
    let unreadable = |request: &ClusterRequest, e: &dyn fmt::Display| HostFailure {
        request: Box::new(request.clone()),
        error: HostError::Unreadable(e.to_string()),
    };
    let mut snapshot = PoolSnapshot::default();
    let mut per_node = None;
    match pool.declared_capacity() {
        Some(declared) => {
            snapshot.allocatable = declared;
            snapshot.allocatable_from = CapacitySource::Declared;
        }
        None => {
            let nodes_request = node_query(pool);
            let nodes = call(cluster, &nodes_request)?;
            let nodes = parse_nodes(&nodes, names).map_err(|e| unreadable(&nodes_request, &e))?;
            snapshot.nodes = nodes.nodes;
            snapshot.schedulable_nodes = nodes.schedulable;
            snapshot.allocatable = nodes.allocatable;
            per_node = Some(nodes.per_node);
        }
    }
    snapshot.ceiling = read_ceiling(cluster, pool, names)?;
    match settings.usage_of(pool) {
        Usage::Pods => {
            let pods_request = pod_query(&settings.pool_label_key, pool);
            let pods = call(cluster, &pods_request)?;
            let nodes = per_node.unwrap_or_default();
            let (pods, used) =
                parse_pods_on(&pods, names, &nodes).map_err(|e| unreadable(&pods_request, &e))?;
            snapshot.pods = pods.pods;
            snapshot.used = pods.used;
            if pool.declared_capacity().is_none() {
                snapshot.per_node = Some(
                    nodes
                        .into_iter()
                        .zip(used)
                        .map(|(n, used)| NodeUse {
                            name: n.name,
                            allocatable: n.allocatable,
                            used,
                        })
                        .collect(),
                );
                snapshot.per_node_used = true;
            }
        }
        Usage::Quotas => {
            let quotas_request = quota_query(&settings.pool_label_key, pool);
            let quotas = call(cluster, &quotas_request)?;
            let quotas =
                parse_quotas(&quotas, names).map_err(|e| unreadable(&quotas_request, &e))?;
            let target = QuotaTarget {
                pool_label_key: &settings.pool_label_key,
                pool,
                namespace,
                demand,
                allocatable: &snapshot.allocatable,
            };
            snapshot.used = quota_usage(&quotas, &target).map_err(PoolError::Uncountable)?;
            snapshot.used_from = UsageSource::Quotas(quotas.len() as u64);
            // Quotas say nothing of where pods run: only node sizes are known.
            snapshot.per_node = per_node.map(|nodes| {
                nodes
                    .into_iter()
                    .map(|n| NodeUse {
                        name: n.name,
                        allocatable: n.allocatable,
                        used: GpuCounts::new(),
                    })
                    .collect()
            });
        }
    }
    Ok(snapshot)
}

/// The pool's ceiling: `maxAllocatable`, `clusterAutoscaler` (`maxNodes` x
/// `gpusPerNode`), or the `spec.limits` of its Karpenter NodePool (one `get_resource`).
pub fn read_ceiling(
    cluster: &dyn Cluster,
    pool: &Pool,
    names: &GpuResources,
) -> Result<Option<Ceiling>, HostFailure> {
    if let Some(gpus) = pool.static_ceiling() {
        return Ok(Some(Ceiling {
            gpus,
            source: CeilingSource::MaxAllocatable,
            node_shape: None,
        }));
    }
    if let Some((max_nodes, shape)) = pool.node_count_ceiling() {
        return Ok(Some(Ceiling {
            gpus: crate::gpu::scale(&shape, max_nodes),
            source: CeilingSource::ClusterAutoscaler { max_nodes },
            node_shape: Some(shape),
        }));
    }
    let Some(name) = pool.node_pool() else {
        return Ok(None);
    };
    let request = node_pool_query(name);
    let bytes = call(cluster, &request)?;
    let gpus = parse_node_pool_limits(&bytes, names).map_err(|e| HostFailure {
        request: Box::new(request.clone()),
        error: HostError::Unreadable(e),
    })?;
    Ok(Some(Ceiling {
        gpus,
        source: CeilingSource::NodePool(name.to_string()),
        node_shape: None,
    }))
}

/// One ResourceQuota of a pool, as far as the gate reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Quota {
    pub namespace: String,
    pub name: String,
    /// GPU resources it counts: its `spec.hard` entries `requests.<gpu>`, prefix removed.
    pub counts: BTreeSet<String>,
    /// Those entries' limits.
    pub hard: GpuCounts,
    /// `spec.hard` keys naming a GPU resource in a form Kubernetes accepts but never
    /// counts for an extended resource (`limits.<gpu>`, bare `<gpu>`), with the resource.
    pub unenforced: Vec<(String, String)>,
    /// `status.used` of those, prefix removed.
    pub used: GpuCounts,
    /// `spec.scopes`.
    pub scopes: Vec<String>,
    /// `spec.scopeSelector.matchExpressions`; `None` without a `scopeSelector`.
    pub scope_selector: Option<Vec<ScopeRequirement>>,
}

/// One entry of a quota's `scopeSelector.matchExpressions` (fields that are not strings
/// read as empty, which no scope check accepts).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScopeRequirement {
    pub scope_name: String,
    pub operator: String,
    pub values: Vec<String>,
}

/// The pool's quotas in a `ResourceQuotaList`, GPU entries only, in list order. Quotas are
/// few (one per namespace) and small, so each item's `metadata`, `spec` and `status` are
/// read as JSON values. A used or hard GPU amount that is not a whole number makes the
/// list unreadable (Kubernetes keeps extended resources in quotas whole).
pub fn parse_quotas(bytes: &[u8], names: &GpuResources) -> Result<Vec<Quota>, ListError> {
    use serde_json::Value;
    let gpu = |key: &str| {
        key.strip_prefix(QUOTA_REQUESTS_PREFIX)
            .filter(|r| names.is_gpu(r))
            .map(str::to_string)
    };
    let text = |v: &Value, key: &str| {
        v.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let texts = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|s| s.as_str().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let count = |namespace: &str, name: &str, field: &str, key: &str, quantity: &Value| {
        let text = match quantity {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        crate::quantity::Quantity::parse_count(&text).map_err(|e| {
            ListError::Invalid(format!(
                "ResourceQuota {namespace}/{name}: {field}.{key}: {e}"
            ))
        })
    };
    let mut quotas = Vec::new();
    super::scan::for_each_item(
        bytes,
        [b"metadata", b"spec", b"status"],
        |[metadata, spec, status]| {
            let [metadata, spec, status] = [metadata, spec, status]
                .map(|b| b.map_or(Ok(Value::Null), serde_json::from_slice::<Value>));
            let (metadata, spec, status) = (metadata?, spec?, status?);
            let (namespace, name) = (text(&metadata, "namespace"), text(&metadata, "name"));
            let mut used = GpuCounts::new();
            let entries = status.get("used").and_then(Value::as_object);
            for (key, quantity) in entries.into_iter().flatten() {
                let Some(resource) = gpu(key) else {
                    continue;
                };
                used.insert(
                    resource,
                    count(&namespace, &name, "status.used", key, quantity)?,
                );
            }
            let mut hard = GpuCounts::new();
            let mut unenforced = Vec::new();
            let entries = spec.get("hard").and_then(Value::as_object);
            for (key, quantity) in entries.into_iter().flatten() {
                let Some(resource) = gpu(key) else {
                    let bare = key.strip_prefix(QUOTA_LIMITS_PREFIX).unwrap_or(key);
                    if names.is_gpu(bare) {
                        unenforced.push((key.clone(), bare.to_string()));
                    }
                    continue;
                };
                hard.insert(
                    resource,
                    count(&namespace, &name, "spec.hard", key, quantity)?,
                );
            }
            let selector = spec.get("scopeSelector").filter(|s| !s.is_null());
            quotas.push(Quota {
                counts: hard.keys().cloned().collect(),
                hard,
                unenforced,
                used,
                scopes: texts(spec.get("scopes")),
                scope_selector: selector.map(|s| {
                    s.get("matchExpressions")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .map(|e| ScopeRequirement {
                            scope_name: text(e, "scopeName"),
                            operator: text(e, "operator"),
                            values: texts(e.get("values")),
                        })
                        .collect()
                }),
                namespace,
                name,
            });
            Ok::<(), ListError>(())
        },
    )?;
    Ok(quotas)
}

/// What the pool's quotas are checked against.
pub struct QuotaTarget<'a> {
    pub pool_label_key: &'a str,
    pub pool: &'a Pool,
    /// The request's namespace: it must have the pool's quota.
    pub namespace: &'a str,
    /// The resources asked for: every quota must count them.
    pub demand: &'a GpuCounts,
    /// The pool's allocatable GPUs, suggested as the `hard` of a quota to create.
    pub allocatable: &'a GpuCounts,
}

/// The pool's GPUs in use: the sum of its quotas' `status.used`. Refused, with what is
/// wrong and the fix, when that sum would miss pods: the request's namespace has no quota
/// for the pool (its pods would not be counted), a quota is not scoped to exactly the
/// pool's PriorityClasses, does not count a resource asked for, has not been counted yet
/// by the quota controller, or two quotas of one namespace would count its pods twice.
pub fn quota_usage(quotas: &[Quota], target: &QuotaTarget) -> Result<GpuCounts, String> {
    if !quotas.iter().any(|q| q.namespace == target.namespace) {
        return Err(missing_quota(target));
    }
    let mut by_namespace: HashMap<&str, Vec<&str>> = HashMap::new();
    for q in quotas {
        by_namespace.entry(&q.namespace).or_default().push(&q.name);
    }
    let mut classes: Vec<&str> = target
        .pool
        .priority_classes
        .iter()
        .map(String::as_str)
        .collect();
    classes.sort_unstable();
    let label = format!("{}={}", target.pool_label_key, target.pool.name);
    let mut used = GpuCounts::new();
    for q in quotas {
        let names = &by_namespace[q.namespace.as_str()];
        if names.len() > 1 {
            return Err(format!(
                "namespace {} has {} ResourceQuotas labelled {label} ({}), which count the same pods twice: keep one",
                q.namespace,
                names.len(),
                names.join(", ")
            ));
        }
        if let Err(scope) = scoped_to(q, &classes) {
            let remove = if q.scopes.is_empty() {
                ""
            } else {
                " and remove its spec.scopes"
            };
            return Err(format!(
                "ResourceQuota {}/{} is not scoped to the pool's priority classes ({scope}): set its spec.scopeSelector to {}{remove}",
                q.namespace,
                q.name,
                scope_selector_text(&classes)
            ));
        }
        for resource in target.demand.keys() {
            if !q.counts.contains(resource) {
                return Err(format!(
                    "ResourceQuota {}/{} does not count {QUOTA_REQUESTS_PREFIX}{resource} (it is not in its spec.hard), so the pool's {resource} pods in {} would not be counted: add {QUOTA_REQUESTS_PREFIX}{resource} to its spec.hard",
                    q.namespace, q.name, q.namespace
                ));
            }
            if !q.used.contains_key(resource) {
                return Err(not_counted_yet(&q.namespace, &q.name, resource));
            }
        }
        add_into(&mut used, &q.used);
    }
    Ok(used)
}

/// A quota whose `status.used` lacks `resource`: the quota controller has not counted it
/// yet (Kubernetes refuses the pods it would count until it has).
pub fn not_counted_yet(namespace: &str, name: &str, resource: &str) -> String {
    format!(
        "ResourceQuota {namespace}/{name} has no status.used for {QUOTA_REQUESTS_PREFIX}{resource} yet (the quota controller has not counted it): retry in a few seconds"
    )
}

/// `Ok` when the quota counts exactly the pods of `classes` (sorted): no `scopes` and one
/// `PriorityClass In` expression naming those classes. Otherwise what its scope is.
fn scoped_to(q: &Quota, classes: &[&str]) -> Result<(), String> {
    let expressions = q.scope_selector.as_deref().unwrap_or_default();
    if let ([only], true) = (expressions, q.scopes.is_empty()) {
        let mut values: Vec<&str> = only.values.iter().map(String::as_str).collect();
        values.sort_unstable();
        values.dedup();
        if only.scope_name == "PriorityClass" && only.operator == "In" && values == classes {
            return Ok(());
        }
    }
    if expressions.is_empty() && q.scopes.is_empty() {
        return Err(format!(
            "it has no scope, so it counts the pods of every pool in {}",
            q.namespace
        ));
    }
    let mut parts = Vec::new();
    if !q.scopes.is_empty() {
        parts.push(format!("scopes [{}]", q.scopes.join(", ")));
    }
    for e in expressions {
        parts.push(if e.values.is_empty() {
            format!("{} {}", e.scope_name, e.operator)
        } else {
            format!("{} {} [{}]", e.scope_name, e.operator, e.values.join(", "))
        });
    }
    Err(format!("its scope is {}", parts.join(" and ")))
}

fn scope_selector_text(classes: &[&str]) -> String {
    format!(
        "{{matchExpressions: [{{scopeName: PriorityClass, operator: In, values: [{}]}}]}}",
        classes.join(", ")
    )
}

/// The request's namespace has no quota for the pool: the quota to create.
fn missing_quota(target: &QuotaTarget) -> String {
    let mut classes: Vec<&str> = target
        .pool
        .priority_classes
        .iter()
        .map(String::as_str)
        .collect();
    classes.sort_unstable();
    let hard: Vec<String> = target
        .demand
        .keys()
        .map(|resource| match target.allocatable.get(resource) {
            Some(all) if *all > 0 => format!("{QUOTA_REQUESTS_PREFIX}{resource}: \"{all}\""),
            // A quota of 0 would refuse every such pod of the namespace: no number to offer.
            _ => format!("{QUOTA_REQUESTS_PREFIX}{resource}: <the GPUs the namespace may hold>"),
        })
        .collect();
    format!(
        "namespace {ns} has no ResourceQuota labelled {key}={pool}, so the pool's pods there would not be counted. Create it: {{apiVersion: v1, kind: ResourceQuota, metadata: {{name: gpu-{pool}, namespace: {ns}, labels: {{{key}: \"{pool}\"}}}}, spec: {{hard: {{{hard}}}, scopeSelector: {selector}}}}} (spec.hard at the pool's size caps nothing; lower it to cap the namespace)",
        ns = target.namespace,
        key = target.pool_label_key,
        pool = target.pool.name,
        hard = hard.join(", "),
        selector = scope_selector_text(&classes),
    )
}

/// GPUs of a pool's Nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeTotals {
    pub nodes: u64,
    pub schedulable: u64,
    /// GPU resources allocatable on schedulable nodes.
    pub allocatable: GpuCounts,
    /// Each schedulable node, in list order.
    pub per_node: Vec<NodeGpus>,
}

/// One schedulable node: its name and allocatable GPUs (shared by the nodes of one
/// machine type).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeGpus {
    pub name: String,
    pub allocatable: Rc<GpuCounts>,
}

/// GPUs held by a pool's Pods.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodTotals {
    pub pods: u64,
    pub used: GpuCounts,
    /// GPUs held by the pods bound to each node (`spec.nodeName`); pending pods hold
    /// theirs in `used` only.
    pub per_node: HashMap<String, GpuCounts>,
}

// Every field optional: field masks drop whatever they do not name.
#[derive(Deserialize, Default)]
#[serde(default)]
struct NodeSpec {
    unschedulable: Option<bool>,
    #[serde(deserialize_with = "null_as_default")]
    taints: Vec<Taint>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Taint {
    key: Option<String>,
    effect: Option<String>,
}

/// Sums the GPU resources of schedulable nodes in a `NodeList`. An allocatable GPU
/// quantity that is not a whole number counts as 0 (less capacity, never more). Like
/// [`parse_pods`], the list is walked by [`super::scan`] and only each node's `spec` and
/// `status` are parsed: metadata (GPU Feature Discovery puts dozens of labels there) is
/// skipped without being read. Nodes of one machine type have the same masked `spec`
/// and `status` text, so each distinct pair is read once.
pub fn parse_nodes(bytes: &[u8], names: &GpuResources) -> Result<NodeTotals, ListError> {
    let mut totals = NodeTotals::default();
    // (spec, status) text -> allocatable GPUs, `None` when unschedulable; shared by the
    // nodes of one machine type.
    type Key<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);
    let mut seen: HashMap<Key, Option<Rc<GpuCounts>>> = HashMap::new();
    let mut last: Option<(Key, Option<Rc<GpuCounts>>)> = None;
    super::scan::for_each_item_split(
        bytes,
        [b"metadata", b"spec", b"status"],
        Some((0, b"name")),
        |[_, spec, status], metadata| {
            totals.nodes += 1;
            // Nodes of one machine type are usually listed together (see parse_pods).
            let gpus = match &last {
                Some((key, gpus)) if *key == (spec, status) => gpus.clone(),
                _ => {
                    let gpus = match seen.entry((spec, status)) {
                        Entry::Occupied(e) => e.get().clone(),
                        Entry::Vacant(e) => e
                            .insert(node_gpus(spec, status, names)?.map(Rc::new))
                            .clone(),
                    };
                    last = Some(((spec, status), gpus.clone()));
                    gpus
                }
            };
            if let Some(gpus) = gpus {
                totals.schedulable += 1;
                add_scaled(&mut totals.allocatable, &gpus, 1);
                totals.per_node.push(NodeGpus {
                    name: node_name(metadata.and_then(|m| m.value))?,
                    allocatable: gpus,
                });
            }
            Ok::<(), ListError>(())
        },
    )?;
    Ok(totals)
}

/// `into[k] += from[k] * times` for every k, cloning a key only when `into` lacks it.
fn add_scaled(into: &mut GpuCounts, from: &GpuCounts, times: u64) {
    for (k, v) in from {
        let n = v.saturating_mul(times);
        match into.get_mut(k) {
            Some(e) => *e = e.saturating_add(n),
            None => {
                into.insert(k.clone(), n);
            }
        }
    }
}

/// `metadata.name` of a node, from its raw value (empty when absent).
fn node_name(name: Option<&[u8]>) -> Result<String, ListError> {
    match name {
        None | Some(b"null") => Ok(String::new()),
        Some(raw) => json_string(raw),
    }
}

/// A node's allocatable GPUs, `None` when new pods cannot be scheduled on it.
fn node_gpus(
    spec: Option<&[u8]>,
    status: Option<&[u8]>,
    names: &GpuResources,
) -> Result<Option<GpuCounts>, serde_json::Error> {
    let spec: NodeSpec = parse_or_default(spec)?;
    let blocked = spec.unschedulable == Some(true)
        || spec.taints.iter().any(|t| {
            t.key
                .as_deref()
                .is_some_and(|k| UNSCHEDULABLE_TAINTS.contains(&k))
                && matches!(t.effect.as_deref(), Some("NoSchedule" | "NoExecute"))
        });
    if blocked {
        return Ok(None);
    }
    let allocatable = match status {
        None | Some(b"null") => Default::default(),
        Some(status) => {
            let mut de = serde_json::Deserializer::from_slice(status);
            let allocatable = lean::AllocatableSeed { names }.deserialize(&mut de)?;
            de.end()?;
            allocatable
        }
    };
    let mut gpus = GpuCounts::new();
    for (resource, quantity) in allocatable {
        let n = crate::quantity::Quantity::parse_count(&quantity.0).unwrap_or(0);
        let e = gpus.entry(resource).or_insert(0);
        *e = e.saturating_add(n);
    }
    Ok(Some(gpus))
}

/// A field's value parsed as `T`; absent or `null` is `T::default()`.
fn parse_or_default<T: serde::de::DeserializeOwned + Default>(
    bytes: Option<&[u8]>,
) -> Result<T, serde_json::Error> {
    match bytes {
        None | Some(b"null") => Ok(T::default()),
        Some(b) => serde_json::from_slice(b),
    }
}

/// Sums the effective GPU requests of the pods in a `PodList`, one pod at a time (the
/// list is never held in memory as a whole). The list's framing is walked by
/// [`super::scan`], which skips metadata and status without parsing them; each pod's
/// `spec` is parsed by serde_json keeping only GPU entries of `limits` / `requests`
/// (keys borrowed while reading), then goes through the shared effective-request rule
/// ([`pod_gpus`]).
///
/// Replicas of one workload have the same masked `spec` but for `nodeName` (the masks keep
/// only resources and the node), so each distinct `spec` text without its `nodeName`
/// member is read once and its GPUs are counted per occurrence: a pool of thousands of
/// pods from a few dozen workloads parses a few dozen specs. The memo borrows the input
/// and holds one entry per distinct spec; GPUs are summed per node (one entry per node
/// name, borrowed too) and for pending pods, and the pool's total is their sum.
pub fn parse_pods(bytes: &[u8], names: &GpuResources) -> Result<PodTotals, ListError> {
    let counts = count_pods(bytes, names)?;
    let mut totals = counts.totals();
    for ((node, shape), n) in &counts.on_node {
        add_scaled(
            totals.per_node.entry(json_string(node)?).or_default(),
            &counts.shapes[*shape],
            *n,
        );
    }
    Ok(totals)
}

/// [`parse_pods`] for the nodes of `nodes` (as [`parse_nodes`] lists them): the totals,
/// and the GPUs held by the pods bound to each of those nodes, in their order (pods bound
/// to other nodes count in the totals only). No node name is copied.
pub fn parse_pods_on(
    bytes: &[u8],
    names: &GpuResources,
    nodes: &[NodeGpus],
) -> Result<(PodTotals, Vec<GpuCounts>), ListError> {
    let counts = count_pods(bytes, names)?;
    let totals = counts.totals();
    let index: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let mut used = vec![GpuCounts::new(); nodes.len()];
    for ((node, shape), n) in &counts.on_node {
        let found = match raw_str(node) {
            Some(name) => index.get(name).copied(),
            None => index.get(json_string(node)?.as_str()).copied(),
        };
        if let Some(i) = found {
            add_scaled(&mut used[i], &counts.shapes[*shape], *n);
        }
    }
    Ok((totals, used))
}

/// What [`count_pods`] found: the GPUs of each distinct pod shape, how many pods have
/// it, and how many of those are bound to each node (raw `nodeName` values).
struct PodCounts<'a> {
    pods: u64,
    shapes: Vec<GpuCounts>,
    per_shape: Vec<u64>,
    on_node: HashMap<(&'a [u8], usize), u64>,
    /// Per (raw value of the counted label, shape), when a label is counted.
    per_label: HashMap<(&'a [u8], usize), u64>,
}

impl PodCounts<'_> {
    fn totals(&self) -> PodTotals {
        let mut totals = PodTotals {
            pods: self.pods,
            ..PodTotals::default()
        };
        for (shape, n) in self.shapes.iter().zip(&self.per_shape) {
            add_scaled(&mut totals.used, shape, *n);
        }
        totals
    }
}

fn count_pods<'a>(bytes: &'a [u8], names: &GpuResources) -> Result<PodCounts<'a>, ListError> {
    count_pods_labelled(bytes, names, None)
}

/// [`count_pods`], also counting the pods of each shape per raw value of the pod label
/// `label` (pods without it under `null`) when it is given.
fn count_pods_labelled<'a>(
    bytes: &'a [u8],
    names: &GpuResources,
    label: Option<&[u8]>,
) -> Result<PodCounts<'a>, ListError> {
    let mut pods = 0u64;
    let mut per_label: HashMap<(&[u8], usize), u64> = HashMap::new();
    // The spec without its nodeName member (the text before and after it) -> its index in
    // `shapes`, the GPUs of one such pod.
    let mut seen: HashMap<(&[u8], &[u8]), usize> = HashMap::new();
    let mut shapes: Vec<GpuCounts> = Vec::new();
    // Pods per shape (all of them), and per (raw nodeName value, shape) for bound pods:
    // per pod one lookup in `seen` and one here, nothing allocated.
    let mut per_shape: Vec<u64> = Vec::new();
    let mut on_node: HashMap<(&[u8], usize), u64> = HashMap::new();
    type SpecKey<'a> = (&'a [u8], &'a [u8]);
    let mut recent: [Option<(SpecKey, usize)>; 4] = [None; 4];
    let mut run: Option<(&[u8], usize, u64)> = None;
    let keys = [b"spec".as_slice(), b"metadata".as_slice()];
    let on_pod = |[spec, metadata]: [Option<&'a [u8]>; 2],
                  split: Option<super::scan::Split<'a>>|
     -> Result<(), ListError> {
        pods += 1;
        // The label's raw value, read only for the pods that hold GPUs (below).
        let label_value = || -> Result<&'a [u8], ListError> {
            let labels = match (label, metadata) {
                (Some(_), Some(m)) => super::scan::member(m, b"labels")?,
                _ => None,
            };
            Ok(match (label, labels) {
                (Some(key), Some(l)) if l != b"null" => {
                    super::scan::member(l, key)?.unwrap_or(b"null")
                }
                _ => b"null",
            })
        };
        let (Some(spec), Some(split)) = (spec, split) else {
            return Ok(());
        };
        let key = (split.before, split.after);
        // Replicas are listed near each other (lists come sorted by namespace and name):
        // comparing with the few specs seen last is cheaper than hashing this one.
        let cached = recent
            .iter()
            .flatten()
            .find(|(k, _)| *k == key)
            .map(|(_, s)| *s);
        let shape = match cached {
            Some(shape) => shape,
            None => {
                let shape = match seen.entry(key) {
                    Entry::Occupied(e) => *e.get(),
                    Entry::Vacant(e) => {
                        let gpus = spec_gpus(spec, names)?;
                        if gpus.is_empty() {
                            // A pod without GPUs counts nowhere: remember it as such.
                            *e.insert(usize::MAX)
                        } else {
                            shapes.push(gpus);
                            per_shape.push(0);
                            *e.insert(shapes.len() - 1)
                        }
                    }
                };
                recent.rotate_right(1);
                recent[0] = Some((key, shape));
                shape
            }
        };
        if shape == usize::MAX {
            return Ok(());
        }
        per_shape[shape] += 1;
        if label.is_some() {
            *per_label.entry((label_value()?, shape)).or_insert(0) += 1;
        }
        if let Some(node) = split.value.filter(|v| *v != b"null") {
            // Pods of one node in a row are counted together, then added to `on_node`.
            match &mut run {
                Some((n, s, count)) if *n == node && *s == shape => *count += 1,
                _ => {
                    if let Some((n, s, count)) = run.replace((node, shape, 1)) {
                        *on_node.entry((n, s)).or_insert(0) += count;
                    }
                }
            }
        }
        Ok(())
    };
    super::scan::for_each_item_split(bytes, keys, Some((0, b"nodeName")), on_pod)?;
    if let Some((n, s, count)) = run {
        *on_node.entry((n, s)).or_insert(0) += count;
    }
    Ok(PodCounts {
        pods,
        shapes,
        per_shape,
        on_node,
        per_label,
    })
}

/// GPUs held by a set of Pods (a team's), in total and per value of one pod label (the
/// pool label).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelledUse {
    pub pods: u64,
    pub used: GpuCounts,
    /// Per value of the label (in no order; values are few); pods without it are in
    /// `used` only.
    pub per_value: Vec<(String, GpuCounts)>,
}

impl LabelledUse {
    /// What the pods with label value `value` hold.
    pub fn of_value(&self, value: &str) -> Option<&GpuCounts> {
        self.per_value
            .iter()
            .find(|(v, _)| v == value)
            .map(|(_, used)| used)
    }

    fn value_mut(&mut self, value: &str) -> &mut GpuCounts {
        let i = match self.per_value.iter().position(|(v, _)| v == value) {
            Some(i) => i,
            None => {
                self.per_value.push((value.to_string(), GpuCounts::new()));
                self.per_value.len() - 1
            }
        };
        &mut self.per_value[i].1
    }

    /// Adds another list's counts (a team read namespace by namespace).
    pub fn add(&mut self, other: &LabelledUse) {
        self.pods += other.pods;
        add_into(&mut self.used, &other.used);
        for (value, used) in &other.per_value {
            add_into(self.value_mut(value), used);
        }
    }
}

/// Sums the effective GPU requests of the pods of a `PodList` as [`parse_pods`] does, and
/// per value of the pod label `label_key` (a team's pods per pool).
pub fn parse_pods_by_label(
    bytes: &[u8],
    names: &GpuResources,
    label_key: &str,
) -> Result<LabelledUse, ListError> {
    let counts = count_pods_labelled(bytes, names, Some(label_key.as_bytes()))?;
    let totals = counts.totals();
    let mut labelled = LabelledUse::default();
    for ((raw, shape), n) in &counts.per_label {
        if *raw == b"null" {
            continue;
        }
        add_scaled(
            labelled.value_mut(&json_string(raw)?),
            &counts.shapes[*shape],
            *n,
        );
    }
    labelled.pods = totals.pods;
    labelled.used = totals.used;
    Ok(labelled)
}

/// The text of a raw JSON string value without escapes (names of Kubernetes objects
/// never have any), borrowed.
fn raw_str(raw: &[u8]) -> Option<&str> {
    raw.strip_prefix(b"\"")
        .and_then(|r| r.strip_suffix(b"\""))
        .filter(|inner| !inner.contains(&b'\\'))
        .and_then(|inner| std::str::from_utf8(inner).ok())
}

/// A raw JSON string value as a `String` ([`raw_str`], else decoded by serde_json).
fn json_string(raw: &[u8]) -> Result<String, ListError> {
    match raw_str(raw) {
        Some(text) => Ok(text.to_string()),
        None => Ok(serde_json::from_slice(raw)?),
    }
}

/// The effective GPU request of one masked pod `spec` (empty for `null`).
fn spec_gpus(spec: &[u8], names: &GpuResources) -> Result<GpuCounts, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(spec);
    let seed = lean::SpecSeed { names };
    let gpus = match seed.deserialize(&mut de)? {
        Some(spec) => pod_gpus(&spec, names).effective,
        None => GpuCounts::new(),
    };
    de.end()?;
    Ok(gpus)
}

/// Why a list answer could not be read.
#[derive(Debug)]
pub enum ListError {
    Scan(super::scan::ScanError),
    Json(serde_json::Error),
    /// Well-formed, but a value is not what it must be.
    Invalid(String),
}

impl From<super::scan::ScanError> for ListError {
    fn from(e: super::scan::ScanError) -> Self {
        ListError::Scan(e)
    }
}

impl From<serde_json::Error> for ListError {
    fn from(e: serde_json::Error) -> Self {
        ListError::Json(e)
    }
}

impl fmt::Display for ListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListError::Scan(e) => write!(f, "{e}"),
            ListError::Json(e) => write!(f, "{e}"),
            ListError::Invalid(e) => f.write_str(e),
        }
    }
}

/// Streaming readers for masked Pod lists (see [`parse_pods`]).
mod lean {
    use crate::gpu::GpuResources;
    use crate::podspec::{Container, PodSpec, QuantityText, ResourceList, Resources};
    use serde::de::{
        DeserializeSeed, Deserializer, Error, IgnoredAny, MapAccess, SeqAccess, Visitor,
    };
    use std::borrow::Cow;
    use std::fmt;

    /// A map key, borrowed from the input when it has no escapes.
    struct Key<'de>(Cow<'de, str>);

    impl<'de> serde::Deserialize<'de> for Key<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Key<'de>;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("a string")
                }
                fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                    Ok(Key(Cow::Borrowed(v)))
                }
                fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                    Ok(Key(Cow::Owned(v.to_string())))
                }
                fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                    Ok(Key(Cow::Owned(v)))
                }
            }
            d.deserialize_str(V)
        }
    }

    /// A quantity given as a string or a number (as `QuantityText` reads it).
    pub(super) struct Quantity(pub(super) String);

    impl<'de> serde::Deserialize<'de> for Quantity {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl Visitor<'_> for V {
                type Value = Quantity;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("a quantity (string or number)")
                }
                fn visit_str<E>(self, v: &str) -> Result<Quantity, E> {
                    Ok(Quantity(v.to_string()))
                }
                fn visit_u64<E>(self, v: u64) -> Result<Quantity, E> {
                    Ok(Quantity(v.to_string()))
                }
                fn visit_i64<E>(self, v: i64) -> Result<Quantity, E> {
                    Ok(Quantity(v.to_string()))
                }
                fn visit_f64<E: Error>(self, v: f64) -> Result<Quantity, E> {
                    serde_json::Number::from_f64(v)
                        .map(|n| Quantity(n.to_string()))
                        .ok_or_else(|| E::custom("a quantity must be a finite number"))
                }
            }
            d.deserialize_any(V)
        }
    }

    /// Declares a seed carrying the GPU names, read with `deserialize_any` (so `null`
    /// reads as the empty value through `visit_unit`).
    macro_rules! seed {
        ($name:ident => $value:ty) => {
            pub(super) struct $name<'n> {
                pub(super) names: &'n GpuResources,
            }
            impl<'de> DeserializeSeed<'de> for $name<'_> {
                type Value = $value;
                fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<$value, D::Error> {
                    d.deserialize_any(self)
                }
            }
        };
    }

    seed!(GpuList => ResourceList);
    seed!(ResourcesSeed => Resources);
    seed!(ContainerSeed => Container);
    seed!(ContainersSeed => Vec<Container>);
    seed!(SpecSeed => Option<PodSpec>);
    seed!(AllocatableSeed => ResourceList);

    /// A Node's `status`: the GPU entries of `allocatable` (nothing else is read).
    impl<'de> Visitor<'de> for AllocatableSeed<'_> {
        type Value = ResourceList;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a node status")
        }
        fn visit_unit<E>(self) -> Result<ResourceList, E> {
            Ok(ResourceList::new())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ResourceList, A::Error> {
            let mut allocatable = ResourceList::new();
            while let Some(Key(key)) = map.next_key()? {
                if key == "allocatable" {
                    allocatable = map.next_value_seed(GpuList { names: self.names })?;
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(allocatable)
        }
    }

    /// `limits` / `requests`: GPU entries only.
    impl<'de> Visitor<'de> for GpuList<'_> {
        type Value = ResourceList;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map of resource quantities")
        }
        fn visit_unit<E>(self) -> Result<ResourceList, E> {
            Ok(ResourceList::new())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ResourceList, A::Error> {
            let mut list = ResourceList::new();
            while let Some(Key(key)) = map.next_key()? {
                if self.names.is_gpu(&key) {
                    let Quantity(q) = map.next_value()?;
                    list.insert(key.into_owned(), QuantityText(q));
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(list)
        }
    }

    impl<'de> Visitor<'de> for ResourcesSeed<'_> {
        type Value = Resources;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("resources (limits, requests)")
        }
        fn visit_unit<E>(self) -> Result<Resources, E> {
            Ok(Resources::default())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Resources, A::Error> {
            let mut r = Resources::default();
            let names = self.names;
            while let Some(Key(key)) = map.next_key()? {
                match key.as_ref() {
                    "limits" => r.limits = map.next_value_seed(GpuList { names })?,
                    "requests" => r.requests = map.next_value_seed(GpuList { names })?,
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(r)
        }
    }

    impl<'de> Visitor<'de> for ContainerSeed<'_> {
        type Value = Container;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a container")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Container, A::Error> {
            let mut c = Container::default();
            while let Some(Key(key)) = map.next_key()? {
                match key.as_ref() {
                    "resources" => {
                        c.resources = map.next_value_seed(ResourcesSeed { names: self.names })?
                    }
                    "restartPolicy" => c.restart_policy = map.next_value()?,
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(c)
        }
    }

    impl<'de> Visitor<'de> for ContainersSeed<'_> {
        type Value = Vec<Container>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list of containers")
        }
        fn visit_unit<E>(self) -> Result<Vec<Container>, E> {
            Ok(Vec::new())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Container>, A::Error> {
            let mut out = Vec::new();
            while let Some(c) = seq.next_element_seed(ContainerSeed { names: self.names })? {
                out.push(c);
            }
            Ok(out)
        }
    }

    impl<'de> Visitor<'de> for SpecSeed<'_> {
        type Value = Option<PodSpec>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a pod spec")
        }
        fn visit_unit<E>(self) -> Result<Option<PodSpec>, E> {
            Ok(None)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<PodSpec>, A::Error> {
            let mut spec = PodSpec::default();
            let names = self.names;
            while let Some(Key(key)) = map.next_key()? {
                match key.as_ref() {
                    "containers" => {
                        spec.containers = map.next_value_seed(ContainersSeed { names })?
                    }
                    "initContainers" => {
                        spec.init_containers = map.next_value_seed(ContainersSeed { names })?
                    }
                    "ephemeralContainers" => {
                        spec.ephemeral_containers = map.next_value_seed(ContainersSeed { names })?
                    }
                    "resources" => {
                        spec.resources = Some(map.next_value_seed(ResourcesSeed { names })?)
                    }
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(Some(spec))
        }
    }
}

#[cfg(test)]
mod tests;
