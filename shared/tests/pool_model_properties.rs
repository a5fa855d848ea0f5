//! One `pools` block means the same thing to the capacity gate and to the autoscaler
//! policy. For any pools block (a pool with declared `capacity`, `maxAllocatable`, a
//! Karpenter NodePool, a cluster-autoscaler node shape, or Nodes only; its Nodes generated)
//! and any Deployment scaled by an HPA:
//!
//! - if the gate, on the pool with no GPUs in use, accepts the Deployment at the HPA's
//!   `maxReplicas`, the autoscaler policy accepts the HPA;
//! - if the autoscaler policy denies the HPA for the pool's ceiling, the gate denies that
//!   many replicas.
//!
//! Both policies run through `evaluate` with the same settings block and one fake cluster.
//! (Run natively; the unit tests also run in wasm.)
#![cfg(not(target_arch = "wasm32"))]

use gpu_rules::admission::{AdmissionRequest, Verdict};
use gpu_rules::cluster::{Cluster, ClusterRequest};
use gpu_rules::policies::{Autoscaler, CapacityGate};
use gpu_rules::policy::Policy;
use proptest::prelude::*;
use serde_json::{Value, json};

const GPU: &str = "nvidia.com/gpu";
const POOL_KEY: &str = "gpu-admission/pool";

/// The kinds of pool the block may give.
#[derive(Debug, Clone)]
enum Kind {
    Capacity(u64),
    MaxAllocatable(u64),
    /// `None`: a NodePool without a GPU limit.
    Karpenter(Option<u64>),
    ClusterAutoscaler {
        max_nodes: u64,
        per_node: u64,
    },
    NodesOnly,
}

#[derive(Debug, Clone)]
struct Setup {
    kind: Kind,
    threshold: u32,
    /// (allocatable GPUs, schedulable) per Node.
    nodes: Vec<(u64, bool)>,
    max_replicas: u64,
    gpus_per_pod: u64,
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        (1u64..=256).prop_map(Kind::Capacity),
        (1u64..=256).prop_map(Kind::MaxAllocatable),
        prop::option::weighted(0.8, 0u64..=256).prop_map(Kind::Karpenter),
        (1u64..=32, 1u64..=8).prop_map(|(max_nodes, per_node)| Kind::ClusterAutoscaler {
            max_nodes,
            per_node
        }),
        Just(Kind::NodesOnly),
    ]
}

fn setup() -> impl Strategy<Value = Setup> {
    (
        kind(),
        1u32..=100,
        prop::collection::vec((0u64..=8, prop::bool::weighted(0.8)), 0..6),
        1u64..=64,
        1u64..=8,
    )
        .prop_map(
            |(kind, threshold, nodes, max_replicas, gpus_per_pod)| Setup {
                kind,
                threshold,
                nodes,
                max_replicas,
                gpus_per_pod,
            },
        )
}

/// The one `pools` block both policies are given.
fn pools(s: &Setup) -> Value {
    let mut pool = json!({"name": "serve", "nodeSelector": {"matchLabels": {POOL_KEY: "serve"}},
                          "thresholdPercent": s.threshold});
    match &s.kind {
        Kind::Capacity(n) => pool["capacity"] = json!({GPU: n}),
        Kind::MaxAllocatable(n) => pool["maxAllocatable"] = json!({GPU: n}),
        Kind::Karpenter(_) => pool["karpenterNodePool"] = json!("serve"),
        Kind::ClusterAutoscaler {
            max_nodes,
            per_node,
        } => {
            pool["clusterAutoscaler"] =
                json!({"maxNodes": max_nodes, "gpusPerNode": {GPU: per_node}})
        }
        Kind::NodesOnly => {}
    }
    json!([pool])
}

/// The cluster: the pool's Nodes, no Pods, the NodePool, the Deployment.
struct Fake<'a>(&'a Setup);

impl Cluster for Fake<'_> {
    fn call(&self, request: &ClusterRequest) -> Result<Vec<u8>, String> {
        let s = self.0;
        let answer = match (request, request.what().as_str()) {
            (ClusterRequest::ListAll(_), "v1/Node") => {
                let items: Vec<Value> = s
                    .nodes
                    .iter()
                    .enumerate()
                    .map(|(i, (gpus, schedulable))| {
                        json!({"metadata": {"name": format!("n{i}")},
                               "spec": {"unschedulable": !schedulable},
                               "status": {"allocatable": {GPU: gpus.to_string()}}})
                    })
                    .collect();
                json!({"items": items})
            }
            (ClusterRequest::ListAll(_), "v1/Pod") => json!({"items": []}),
            (ClusterRequest::Get(_), "karpenter.sh/v1/NodePool") => match s.kind {
                Kind::Karpenter(Some(n)) => {
                    json!({"spec": {"limits": {"cpu": "1000", GPU: n.to_string()}}})
                }
                _ => json!({"spec": {"limits": {"cpu": "1000"}}}),
            },
            (ClusterRequest::Get(_), "apps/v1/Deployment") => deployment(s, 1),
            _ => return Err(format!("unexpected call {request:?}")),
        };
        Ok(answer.to_string().into_bytes())
    }
}

fn deployment(s: &Setup, replicas: u64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "llm", "namespace": "ml"},
           "spec": {"replicas": replicas, "template": {
               "metadata": {"labels": {"app": "llm", POOL_KEY: "serve"}},
               "spec": {"containers": [{"name": "server",
                   "resources": {"limits": {GPU: s.gpus_per_pod.to_string()}}}]}}}})
}

fn request(kind: (&str, &str, &str), object: Value) -> AdmissionRequest {
    serde_json::from_value(json!({
        "uid": "u", "operation": "CREATE", "namespace": "ml", "name": "llm",
        "kind": {"group": kind.0, "version": kind.1, "kind": kind.2},
        "object": object
    }))
    .unwrap()
}

/// The gate on the Deployment at `maxReplicas`.
fn gate(s: &Setup) -> Verdict {
    let settings: gpu_rules::capacity::Settings =
        serde_json::from_value(json!({"pools": pools(s), "checkNamespaceQuotas": false})).unwrap();
    let settings = CapacityGate::check(Box::new(settings)).unwrap();
    let object = deployment(s, s.max_replicas);
    CapacityGate::evaluate(
        &request(("apps", "v1", "Deployment"), object),
        &settings,
        &Fake(s),
    )
}

/// The autoscaler policy on an HPA of the Deployment (scaling on a load signal).
fn autoscaler(s: &Setup) -> Verdict {
    let settings: gpu_rules::autoscaler::Settings =
        serde_json::from_value(json!({"pools": pools(s)})).unwrap();
    let settings = Autoscaler::check(Box::new(settings)).unwrap();
    let hpa = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "llm", "namespace": "ml"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm"},
                 "minReplicas": 1, "maxReplicas": s.max_replicas,
                 "metrics": [{"type": "External", "external": {
                     "metric": {"name": "vllm:num_requests_waiting"},
                     "target": {"type": "AverageValue", "averageValue": "5"}}}]}});
    Autoscaler::evaluate(
        &request(("autoscaling", "v2", "HorizontalPodAutoscaler"), hpa),
        &settings,
        &Fake(s),
    )
}

fn check(s: &Setup) -> Result<(), TestCaseError> {
    let (g, a) = (gate(s), autoscaler(s));
    if g.allowed {
        prop_assert!(
            a.allowed,
            "the gate accepts {} x {} GPUs, the autoscaler policy denies: {:?}",
            s.max_replicas,
            s.gpus_per_pod,
            a.message
        );
    }
    if !a.allowed {
        let message = a.message.clone().unwrap_or_default();
        prop_assert!(message.contains("can ever hold"), "{message}");
        prop_assert!(
            !g.allowed,
            "the autoscaler policy denies for the ceiling ({message}), the gate accepts"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn one_pools_block_means_the_same_to_the_gate_and_the_autoscaler(s in setup()) {
        check(&s)?;
    }
}

/// The serving pool that scales from zero: `maxAllocatable: 64`, no Node yet. An HPA of
/// 8 x 2 GPUs fits (the gate accepts the 8 replicas too); 40 x 2 do not.
#[test]
fn scale_from_zero_with_max_allocatable() {
    let mut s = Setup {
        kind: Kind::MaxAllocatable(64),
        threshold: 90,
        nodes: Vec::new(),
        max_replicas: 8,
        gpus_per_pod: 2,
    };
    assert!(gate(&s).allowed, "{:?}", gate(&s).message);
    let a = autoscaler(&s);
    assert!(a.allowed, "{:?}", a.message);
    assert_eq!(
        a.audit_annotations.get("ceiling").map(String::as_str),
        Some("serve: 64 nvidia.com/gpu (maxAllocatable), 32 fit")
    );
    s.max_replicas = 40;
    assert!(!gate(&s).allowed);
    assert_eq!(
        autoscaler(&s).message.as_deref(),
        Some(
            "HorizontalPodAutoscaler ml/llm: maxReplicas 40 x 2 nvidia.com/gpu per replica = 80 nvidia.com/gpu, more than pool serve can ever hold (64 nvidia.com/gpu from maxAllocatable in settings). The largest maxReplicas that fits is 32: set maxReplicas to 32 or less."
        )
    );
    check(&s).unwrap();
}
