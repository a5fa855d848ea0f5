//! naive-capacity-gate: a benchmark baseline for `make bench`, never shipped.
//!
//! The capacity gate as a straightforward policy would write it: the same demand rules
//! and the same decision (`gpu_rules::capacity`), but the pool's Nodes and Pods are listed
//! **without field masks** and each answer is parsed **whole** into a `serde_json::Value`
//! tree before the few fields that matter are read. gpu-capacity-gate-policy instead asks
//! for masked lists and parses them with streaming, GPU-only readers
//! (`gpu_rules::capacity::pods`, `gpu_rules::pools::nodes`). `gpu-bench` runs both modules
//! on the same synthetic pools; the difference is the price of the naive approach.
//!
//! Only what the benchmark exercises is implemented: CREATE and UPDATE of workload objects
//! (an UPDATE is charged in full). Scale subresources, exemptions and owner rules are not.

use gpu_rules::admission::{AdmissionRequest, Verdict};
use gpu_rules::capacity::decision::decide;
use gpu_rules::capacity::{Checked, PoolSnapshot, Settings, demand};
use gpu_rules::cluster::{Cluster, ClusterRequest, ListAll};
use gpu_rules::gpu::{GpuResources, add_into, pod_gpus};
use gpu_rules::podspec::PodSpec;
use gpu_rules::policy::{Admission, GET_RESOURCE, LIST_RESOURCES_ALL, Policy};
use gpu_rules::quantity::Quantity;
use gpu_rules::workload::Workload;
use serde::Deserialize;
use serde_json::Value;

#[cfg(target_arch = "wasm32")]
mod guest {
    use super::NaiveCapacityGate;
    use gpu_rules::kubewarden::{self as glue, HostCluster};
    use gpu_rules::policy::Policy;
    use kubewarden_policy_sdk::protocol_version_guest;
    use kubewarden_policy_sdk::wapc_guest::{self as guest, CallResult};

    #[unsafe(no_mangle)]
    pub extern "C" fn wapc_init() {
        guest::register_function("validate", validate);
        guest::register_function("validate_settings", validate_settings);
        guest::register_function("protocol_version", protocol_version_guest);
    }

    fn validate(payload: &[u8]) -> CallResult {
        glue::validate::<NaiveCapacityGate, _>(payload, |request, settings| {
            NaiveCapacityGate::evaluate(
                &request,
                settings,
                &HostCluster::<{ NaiveCapacityGate::HOST_CALLS }>,
            )
        })
    }

    fn validate_settings(payload: &[u8]) -> CallResult {
        glue::validate_settings::<NaiveCapacityGate>(payload)
    }
}

/// The naive gate as a [`Policy`]: the capacity gate's settings, checked as the gate checks
/// them, its exempt namespaces included.
pub struct NaiveCapacityGate;

impl Policy for NaiveCapacityGate {
    const NAME: &'static str = "naive-capacity-gate";
    const HOST_CALLS: u8 = LIST_RESOURCES_ALL | GET_RESOURCE;
    type Settings = Settings;
    type Checked = Checked;

    fn decide(a: Admission<'_, Checked>) -> Verdict {
        decide_naively(a.request, a.settings, a.cluster)
    }
}

/// Taints that keep new pods off a node (as the real gate counts them).
const UNSCHEDULABLE_TAINTS: &[&str] = &[
    "node.kubernetes.io/unschedulable",
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
];

/// The pool's Nodes, whole: the real gate's query without field masks.
pub fn node_query(pool: &gpu_rules::capacity::Pool) -> ClusterRequest {
    unmasked(gpu_rules::pools::nodes::node_query(pool))
}

/// The pool's Pods, whole: the real gate's query without field masks.
pub fn pod_query(pool_label_key: &str, pool: &gpu_rules::capacity::Pool) -> ClusterRequest {
    unmasked(gpu_rules::capacity::queries::pod_query(
        pool_label_key,
        pool,
    ))
}

fn unmasked(request: ClusterRequest) -> ClusterRequest {
    match request {
        ClusterRequest::ListAll(list) => ClusterRequest::ListAll(ListAll {
            field_masks: None,
            ..list
        }),
        other => other,
    }
}

/// Decides one admission request like the capacity gate, reading whole objects.
fn decide_naively(
    request: &AdmissionRequest,
    settings: &Settings,
    cluster: &dyn Cluster,
) -> Verdict {
    let names = settings.gpu_resources();
    let workload = match Workload::from_object(&request.object, &settings.custom_kinds) {
        Ok(w) => w,
        Err(e) => return Verdict::reject(format!("the pod templates cannot be read: {e}")),
    };
    let demand = demand::workload_demand(&workload, settings, &names, &Default::default());
    let mut denials = Vec::new();
    let mut pools = Vec::new();
    let mut capacity = Vec::new();
    for (index, incoming) in &demand.per_pool {
        let Some(pool) = settings.pools.get(*index) else {
            continue;
        };
        let snapshot = match read_pool(cluster, settings, pool, &names) {
            Ok(s) => s,
            Err(e) => return Verdict::reject(format!("pool {}: {e}", pool.name)),
        };
        let decision = decide(&snapshot, incoming, pool);
        denials.extend(decision.denial());
        pools.push(pool.name.clone());
        capacity.push(decision.audit());
    }
    let verdict = if denials.is_empty() {
        Verdict::accept()
    } else {
        Verdict::reject(denials.join(" "))
    };
    if pools.is_empty() {
        return verdict;
    }
    verdict
        .with_audit("pool", pools.join(","))
        .with_audit("capacity", capacity.join("; "))
}

/// Lists the pool's Nodes and Pods (whole objects) and sums their GPUs.
pub fn read_pool(
    cluster: &dyn Cluster,
    settings: &Settings,
    pool: &gpu_rules::capacity::Pool,
    names: &GpuResources,
) -> Result<PoolSnapshot, String> {
    let mut snapshot = PoolSnapshot::default();
    let nodes = list(cluster, &node_query(pool))?;
    for node in items(&nodes) {
        snapshot.nodes += 1;
        let unschedulable = node.pointer("/spec/unschedulable") == Some(&Value::Bool(true));
        let tainted = node
            .pointer("/spec/taints")
            .and_then(Value::as_array)
            .is_some_and(|taints| {
                taints.iter().any(|t| {
                    t.get("key")
                        .and_then(Value::as_str)
                        .is_some_and(|k| UNSCHEDULABLE_TAINTS.contains(&k))
                        && matches!(
                            t.get("effect").and_then(Value::as_str),
                            Some("NoSchedule" | "NoExecute")
                        )
                })
            });
        if unschedulable || tainted {
            continue;
        }
        snapshot.schedulable_nodes += 1;
        let Some(allocatable) = node
            .pointer("/status/allocatable")
            .and_then(Value::as_object)
        else {
            continue;
        };
        for (resource, quantity) in allocatable.iter().filter(|(k, _)| names.is_gpu(k)) {
            let count = match quantity {
                Value::String(s) => Quantity::parse_count(s).unwrap_or(0),
                Value::Number(n) => n.as_u64().unwrap_or(0),
                _ => 0,
            };
            let total = snapshot.allocatable.entry(resource.clone()).or_insert(0);
            *total = total.saturating_add(count);
        }
    }
    let pods = list(cluster, &pod_query(&settings.pool_label_key, pool))?;
    for pod in items(&pods) {
        snapshot.pods += 1;
        if let Some(spec) = pod.get("spec") {
            let spec = PodSpec::deserialize(spec).map_err(|e| format!("a Pod's spec: {e}"))?;
            add_into(&mut snapshot.used, &pod_gpus(&spec, names).effective);
        }
    }
    Ok(snapshot)
}

/// One host call, its whole answer parsed into a `Value` tree.
fn list(cluster: &dyn Cluster, request: &ClusterRequest) -> Result<Value, String> {
    let bytes = cluster
        .call(request)
        .map_err(|e| format!("cannot list {}: {e}", request.what()))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("cannot read {}: {e}", request.what()))
}

fn items(list: &Value) -> &[Value] {
    list.get("items")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Fake;

    impl Cluster for Fake {
        fn call(&self, request: &ClusterRequest) -> Result<Vec<u8>, String> {
            let ClusterRequest::ListAll(list) = request else {
                return Err("unexpected".into());
            };
            assert_eq!(
                list.field_masks, None,
                "the baseline asks for whole objects"
            );
            let answer = match list.kind.as_str() {
                "Node" => json!({"items": [
                    {"metadata": {"name": "n1"}, "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "64"}}},
                    {"metadata": {"name": "n2"}, "spec": {"unschedulable": true},
                     "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
                ]}),
                _ => json!({"items": [
                    {"metadata": {"name": "p"}, "spec": {"containers": [
                        {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "6"}}}
                    ]}, "status": {"phase": "Running"}}
                ]}),
            };
            Ok(answer.to_string().into_bytes())
        }
    }

    fn request(gpus: u32) -> AdmissionRequest {
        serde_json::from_value(json!({
            "uid": "1", "operation": "CREATE", "namespace": "ml", "name": "p",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"gpu-admission/pool": "a"}},
                       "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]}}
        }))
        .unwrap()
    }

    fn settings() -> Box<Checked> {
        let settings = serde_json::from_value(json!({"chargePods": "all",
            "pools": [{"name": "a", "nodeSelector": {"matchLabels": {"pool": "a"}}, "thresholdPercent": 100}]}))
        .unwrap();
        NaiveCapacityGate::check(Box::new(settings)).unwrap()
    }

    #[test]
    fn counts_schedulable_gpus_and_decides_like_the_gate() {
        let fits = NaiveCapacityGate::evaluate(&request(2), &settings(), &Fake);
        assert!(fits.allowed, "{:?}", fits.message);
        let over = NaiveCapacityGate::evaluate(&request(3), &settings(), &Fake);
        assert!(!over.allowed);
    }
}
