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
use crate::workload::At;
use serde::Deserialize;
use serde::de::DeserializeSeed;
use serde_json::value::RawValue;
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
    let entries = object.at("/spec/limits").and_then(|l| l.as_object());
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
        [&["metadata"], &["spec"], &["status"]],
        |[metadata, spec, status]| {
            let [metadata, spec, status] = [metadata, spec, status]
                .map(|b| b.map_or(Ok(Value::Null), |b| serde_json::from_str::<Value>(b.get())));
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
/// [`parse_pods`], the list is read item by item by [`super::scan`], which keeps each
/// node's name and the raw values of its `spec` and `status.allocatable`: the rest of the
/// metadata (GPU Feature Discovery puts dozens of labels there) is skipped. Nodes of one
/// machine type have the same masked `spec` and `allocatable` text, so each distinct pair
/// is read once.
pub fn parse_nodes(bytes: &[u8], names: &GpuResources) -> Result<NodeTotals, ListError> {
    let mut totals = NodeTotals::default();
    // (spec, allocatable) text -> allocatable GPUs, `None` when unschedulable; shared by the
    // nodes of one machine type.
    type Key<'a> = (Option<&'a str>, Option<&'a str>);
    let mut seen: HashMap<Key, Option<Rc<GpuCounts>>> = HashMap::new();
    let mut last: Option<(Key, Option<Rc<GpuCounts>>)> = None;
    super::scan::for_each_item(
        bytes,
        [&["metadata", "name"], &["spec"], &["status", "allocatable"]],
        |[name, spec, allocatable]| {
            totals.nodes += 1;
            let key = (spec.map(RawValue::get), allocatable.map(RawValue::get));
            // Nodes of one machine type are usually listed together (see parse_pods).
            let gpus = match &last {
                Some((k, gpus)) if *k == key => gpus.clone(),
                _ => {
                    let gpus = match seen.entry(key) {
                        Entry::Occupied(e) => e.get().clone(),
                        Entry::Vacant(e) => e
                            .insert(node_gpus(key.0, key.1, names)?.map(Rc::new))
                            .clone(),
                    };
                    last = Some((key, gpus.clone()));
                    gpus
                }
            };
            if let Some(gpus) = gpus {
                totals.schedulable += 1;
                add_scaled(&mut totals.allocatable, &gpus, 1);
                totals.per_node.push(NodeGpus {
                    name: name.map_or(Ok(String::new()), |n| json_string(n.get()))?,
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

/// A node's allocatable GPUs, `None` when new pods cannot be scheduled on it.
fn node_gpus(
    spec: Option<&str>,
    allocatable: Option<&str>,
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
    let allocatable = allocatable
        .map(|raw| read_raw(raw, lean::Object(lean::GpuList(names))))
        .transpose()?
        .unwrap_or_default();
    let mut gpus = GpuCounts::new();
    for (resource, quantity) in allocatable {
        let n = crate::quantity::Quantity::parse_count(&quantity.0).unwrap_or(0);
        let e = gpus.entry(resource).or_insert(0);
        *e = e.saturating_add(n);
    }
    Ok(Some(gpus))
}

/// A raw value read by `seed` (the whole of it).
fn read_raw<'de, S: DeserializeSeed<'de>>(
    raw: &'de str,
    seed: S,
) -> Result<S::Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(raw);
    let value = seed.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// A field's raw value parsed as `T`; absent (or `null`) is `T::default()`.
fn parse_or_default<T: serde::de::DeserializeOwned + Default>(
    raw: Option<&str>,
) -> Result<T, serde_json::Error> {
    raw.map_or_else(|| Ok(T::default()), serde_json::from_str)
}

/// Sums the effective GPU requests of the pods in a `PodList`, one pod at a time (the
/// list is never held in memory as a whole). The list is read by [`super::scan`], which
/// keeps the raw values of the `spec` members that hold GPU requests and the pod's
/// `nodeName`, and skips the rest (metadata, status); those values are parsed by
/// serde_json keeping only GPU entries of `limits` / `requests` (keys borrowed while
/// reading), then go through the shared effective-request rule ([`pod_gpus`]).
///
/// Replicas of one workload have the same masked `spec` but for `nodeName` (the masks keep
/// only resources and the node), so each distinct text of those members is read once and
/// its GPUs are counted per occurrence: a pool of thousands of pods from a few dozen
/// workloads parses a few dozen specs. The memo borrows the input and holds one entry per
/// distinct spec; GPUs are summed per node (one entry per node name, borrowed too) and for
/// pending pods, and the pool's total is their sum.
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
    on_node: HashMap<(&'a str, usize), u64>,
    /// Per (raw value of the counted label, `None` without it; shape), when a label is
    /// counted.
    per_label: HashMap<(Option<&'a str>, usize), u64>,
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

/// The raw `spec` members a pod's GPUs depend on: `containers`, `initContainers`,
/// `ephemeralContainers`, `resources`.
type SpecParts<'a> = [Option<&'a str>; 4];

/// What [`count_pods_labelled`] reads of a pod: its [`SpecParts`], `spec.nodeName` and the
/// counted label.
type PodValues<'a> = [Option<&'a RawValue>; 6];

/// [`count_pods`], also counting the pods of each shape per raw value of the pod label
/// `label` (pods without it under `None`) when it is given.
fn count_pods_labelled<'a>(
    bytes: &'a [u8],
    names: &GpuResources,
    label: Option<&str>,
) -> Result<PodCounts<'a>, ListError> {
    let mut pods = 0u64;
    let mut per_label: HashMap<(Option<&str>, usize), u64> = HashMap::new();
    // The spec's members but nodeName -> its index in `shapes`, the GPUs of one such pod.
    let mut seen: HashMap<SpecParts, usize> = HashMap::new();
    let mut shapes: Vec<GpuCounts> = Vec::new();
    // Pods per shape (all of them), and per (raw nodeName value, shape) for bound pods:
    // per pod one lookup in `seen` and one here, nothing allocated.
    let mut per_shape: Vec<u64> = Vec::new();
    let mut on_node: HashMap<(&str, usize), u64> = HashMap::new();
    let mut recent: [Option<(SpecParts, usize)>; 4] = [None; 4];
    let mut run: Option<(&str, usize, u64)> = None;
    // Without a label to count, the last path names no member of a pod.
    let label_path = ["metadata", "labels", label.unwrap_or_default()];
    let label_path: &[&str] = if label.is_some() { &label_path } else { &[""] };
    let paths: [&[&str]; 6] = [
        &["spec", "containers"],
        &["spec", "initContainers"],
        &["spec", "ephemeralContainers"],
        &["spec", "resources"],
        &["spec", "nodeName"],
        label_path,
    ];
    let on_pod = |[containers, init, ephemeral, resources, node, label_value]: PodValues<'a>|
     -> Result<(), ListError> {
        pods += 1;
        let key: SpecParts = [containers, init, ephemeral, resources].map(|p| p.map(RawValue::get));
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
                        let gpus = spec_gpus(&key, names)?;
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
            *per_label
                .entry((label_value.map(RawValue::get), shape))
                .or_insert(0) += 1;
        }
        if let Some(node) = node.map(RawValue::get) {
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
    super::scan::for_each_item(bytes, paths, on_pod)?;
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
    let counts = count_pods_labelled(bytes, names, Some(label_key))?;
    let totals = counts.totals();
    let mut labelled = LabelledUse::default();
    for ((raw, shape), n) in &counts.per_label {
        let Some(raw) = raw else {
            continue;
        };
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
fn raw_str(raw: &str) -> Option<&str> {
    raw.strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .filter(|inner| !inner.contains('\\'))
}

/// A raw JSON string value as a `String` ([`raw_str`], else decoded by serde_json).
fn json_string(raw: &str) -> Result<String, ListError> {
    match raw_str(raw) {
        Some(text) => Ok(text.to_string()),
        None => Ok(serde_json::from_str(raw)?),
    }
}

/// The effective GPU request of one masked pod spec, given by the raw values of its
/// members `containers`, `initContainers`, `ephemeralContainers` and `resources`.
fn spec_gpus(parts: &SpecParts, names: &GpuResources) -> Result<GpuCounts, serde_json::Error> {
    let [containers, init, ephemeral, resources] = *parts;
    let list = |raw: Option<&str>| {
        raw.map_or_else(|| Ok(Vec::new()), |r| read_raw(r, lean::Containers(names)))
    };
    let spec = crate::podspec::PodSpec {
        containers: list(containers)?,
        init_containers: list(init)?,
        ephemeral_containers: list(ephemeral)?,
        resources: resources
            .map(|r| read_raw(r, lean::Object(lean::ResourcesOf(names))))
            .transpose()?,
        ..Default::default()
    };
    Ok(pod_gpus(&spec, names).effective)
}

/// Why a list answer could not be read.
#[derive(Debug)]
pub enum ListError {
    Json(serde_json::Error),
    /// Well-formed, but a value is not what it must be.
    Invalid(String),
}

impl From<serde_json::Error> for ListError {
    fn from(e: serde_json::Error) -> Self {
        ListError::Json(e)
    }
}

impl fmt::Display for ListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListError::Json(e) => write!(f, "{e}"),
            ListError::Invalid(e) => f.write_str(e),
        }
    }
}

/// Streaming readers for masked Pod and Node fields (see [`parse_pods`]): GPU entries
/// only, keys borrowed while reading.
mod lean {
    use crate::gpu::GpuResources;
    use crate::podspec::{Container, QuantityText, ResourceList, Resources};
    use serde::de::{
        DeserializeSeed, Deserializer, Error, IgnoredAny, MapAccess, SeqAccess, Unexpected, Visitor,
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
    struct Quantity(String);

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

    /// The members of one kind of object that are read; the others are skipped.
    pub(super) trait Members {
        type Value: Default;
        /// What the object is, for errors.
        const WHAT: &'static str;
        /// Whether `null` reads as the default value (else it is an error).
        const NULLABLE: bool = true;
        /// Reads the value of member `key` into `out` if it is one that counts; `false`
        /// leaves the value to be skipped.
        fn member<'de, A: MapAccess<'de>>(
            &self,
            out: &mut Self::Value,
            key: &str,
            map: &mut A,
        ) -> Result<bool, A::Error>;
    }

    /// Reads an object (or `null`) as `M` says.
    pub(super) struct Object<M>(pub(super) M);

    impl<'de, M: Members> DeserializeSeed<'de> for Object<M> {
        type Value = M::Value;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<M::Value, D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de, M: Members> Visitor<'de> for Object<M> {
        type Value = M::Value;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str(M::WHAT)
        }
        fn visit_unit<E: Error>(self) -> Result<M::Value, E> {
            if M::NULLABLE {
                Ok(M::Value::default())
            } else {
                Err(E::invalid_type(Unexpected::Unit, &self))
            }
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<M::Value, A::Error> {
            let mut out = M::Value::default();
            while let Some(Key(key)) = map.next_key()? {
                if !self.0.member(&mut out, &key, &mut map)? {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(out)
        }
    }

    /// `limits` / `requests` (and a Node's `allocatable`): GPU entries only.
    pub(super) struct GpuList<'n>(pub(super) &'n GpuResources<'n>);

    impl Members for GpuList<'_> {
        type Value = ResourceList;
        const WHAT: &'static str = "a map of resource quantities";
        fn member<'de, A: MapAccess<'de>>(
            &self,
            out: &mut ResourceList,
            key: &str,
            map: &mut A,
        ) -> Result<bool, A::Error> {
            if !self.0.is_gpu(key) {
                return Ok(false);
            }
            let Quantity(q) = map.next_value()?;
            out.insert(key.to_string(), QuantityText(q));
            Ok(true)
        }
    }

    /// `resources`: its `limits` and `requests`.
    pub(super) struct ResourcesOf<'n>(pub(super) &'n GpuResources<'n>);

    impl Members for ResourcesOf<'_> {
        type Value = Resources;
        const WHAT: &'static str = "resources (limits, requests)";
        fn member<'de, A: MapAccess<'de>>(
            &self,
            out: &mut Resources,
            key: &str,
            map: &mut A,
        ) -> Result<bool, A::Error> {
            let list = match key {
                "limits" => &mut out.limits,
                "requests" => &mut out.requests,
                _ => return Ok(false),
            };
            *list = map.next_value_seed(Object(GpuList(self.0)))?;
            Ok(true)
        }
    }

    /// A container: its `resources` and `restartPolicy`.
    struct ContainerOf<'n>(&'n GpuResources<'n>);

    impl Members for ContainerOf<'_> {
        type Value = Container;
        const WHAT: &'static str = "a container";
        const NULLABLE: bool = false;
        fn member<'de, A: MapAccess<'de>>(
            &self,
            out: &mut Container,
            key: &str,
            map: &mut A,
        ) -> Result<bool, A::Error> {
            match key {
                "resources" => out.resources = map.next_value_seed(Object(ResourcesOf(self.0)))?,
                "restartPolicy" => out.restart_policy = map.next_value()?,
                _ => return Ok(false),
            }
            Ok(true)
        }
    }

    /// `containers`, `initContainers`, `ephemeralContainers` (`null` is none).
    pub(super) struct Containers<'n>(pub(super) &'n GpuResources<'n>);

    impl<'de> DeserializeSeed<'de> for Containers<'_> {
        type Value = Vec<Container>;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Container>, D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Containers<'_> {
        type Value = Vec<Container>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list of containers")
        }
        fn visit_unit<E>(self) -> Result<Vec<Container>, E> {
            Ok(Vec::new())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Container>, A::Error> {
            let mut out = Vec::new();
            while let Some(c) = seq.next_element_seed(Object(ContainerOf(self.0)))? {
                out.push(c);
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests;
