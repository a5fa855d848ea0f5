//! Generators and a fake cluster the capacity gate's property tests share
//! (`capacity_properties`, `reserve_properties`, `brake_properties`, `dra_claims_properties`):
//! a pool at a threshold, GPU counts over three resources (a resource absent now and then), a
//! demand of one to three resources, generated Nodes, a Deployment, and a cluster answering the
//! gate's host calls from generated lists. Each test crate uses some of them.
#![allow(dead_code)]

use gpu_rules::admission::AdmissionRequest;
use gpu_rules::capacity::Pool;
use gpu_rules::capacity::PoolSnapshot;
use gpu_rules::capacity::Settings;
use gpu_rules::capacity::decision::{Inputs, decide_with};
use gpu_rules::cluster::{Cluster, ClusterRequest};
use gpu_rules::gpu::GpuCounts;
use gpu_rules::policies::CapacityGate;
use gpu_rules::policy::Policy;
use gpu_rules::pools::reserve::InForce;
use gpu_rules::selector::LabelSelector;
use proptest::prelude::*;
use serde_json::json;

pub const GPU: &str = "nvidia.com/gpu";
pub const MIG: &str = "nvidia.com/mig-3g.40gb";
pub const AMD: &str = "amd.com/gpu";
pub const RESOURCES: [&str; 3] = [GPU, MIG, AMD];
pub const POOL_KEY: &str = "gpu-admission/pool";

/// Pool `a100` (node selector on the pool label) at `threshold_percent`.
pub fn pool(threshold_percent: u32) -> Pool {
    Pool {
        name: "a100".into(),
        node_selector: LabelSelector::from_labels([(POOL_KEY.to_string(), "a100".to_string())]),
        threshold_percent,
        ..Pool::default()
    }
}

/// Per resource: 0 (absent) or a count, so pools that offer nothing of a resource appear.
pub fn counts(max: u64) -> impl Strategy<Value = GpuCounts> {
    prop::collection::vec(prop_oneof![1 => Just(0u64), 4 => 0..=max], RESOURCES.len()).prop_map(
        |ns| {
            RESOURCES
                .iter()
                .zip(ns)
                .filter(|(_, n)| *n > 0)
                .map(|(r, n)| (r.to_string(), n))
                .collect()
        },
    )
}

/// A demand of 1 to 3 resources, each at least 1.
pub fn demand() -> impl Strategy<Value = GpuCounts> {
    prop::collection::btree_map(
        prop::sample::select(RESOURCES.to_vec()).prop_map(str::to_string),
        1u64..64,
        1..=3,
    )
}

/// The gate on `request`, its settings checked (the generated settings are valid).
pub fn evaluate(
    request: &gpu_rules::admission::AdmissionRequest,
    settings: &Settings,
    cluster: &dyn gpu_rules::cluster::Cluster,
) -> gpu_rules::admission::Verdict {
    let checked = CapacityGate::check(Box::new(settings.clone()))
        .unwrap_or_else(|e| panic!("invalid settings: {e}"));
    CapacityGate::evaluate(request, &checked, cluster)
}
/// Answers the gate's host calls by what they read (`v1/Node`, `v1/Pod`, ...) from generated
/// lists; fails any other call.
pub struct FakeCluster {
    pub answers: Vec<(&'static str, String)>,
}

impl FakeCluster {
    pub fn new<const N: usize>(answers: [(&'static str, String); N]) -> Self {
        FakeCluster {
            answers: answers.into(),
        }
    }
}

impl Cluster for FakeCluster {
    fn call(&self, request: &ClusterRequest) -> Result<Vec<u8>, String> {
        let what = request.what();
        self.answers
            .iter()
            .find(|(kind, _)| *kind == what.as_str())
            .map(|(_, body)| body.clone().into_bytes())
            .ok_or_else(|| format!("unexpected host call for {what}"))
    }
}

/// One generated Node: its allocatable GPUs and whether it takes new pods.
#[derive(Debug, Clone)]
pub struct Node {
    pub gpus: u64,
    pub cordoned: bool,
}

pub fn nodes() -> impl Strategy<Value = Vec<Node>> {
    prop::collection::vec(
        (0u64..=8, prop::bool::weighted(0.15)).prop_map(|(gpus, cordoned)| Node { gpus, cordoned }),
        0..8,
    )
}

pub fn create_deployment(replicas: u64, gpus_per_pod: u64) -> AdmissionRequest {
    serde_json::from_value(json!({
        "uid": "u", "operation": "CREATE", "namespace": "ml", "name": "llm",
        "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "object": {"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "llm", "namespace": "ml"},
                   "spec": {"replicas": replicas, "template": {
                       "metadata": {"labels": {"app": "llm", POOL_KEY: "a100"}},
                       "spec": {"containers": [{"name": "server",
                           "resources": {"limits": {GPU: gpus_per_pod.to_string()}}}]}}}}
    }))
    .unwrap()
}

/// Whether the gate allows demand `d` in pool [`pool`]`(threshold)` as `s` finds it, with
/// `reserve` in force, for a workload of `workload_type`; its `allowed()` and `denial()`
/// agree.
pub fn allowed_in(
    s: &PoolSnapshot,
    d: &GpuCounts,
    threshold: u32,
    reserve: InForce,
    workload_type: Option<&str>,
) -> bool {
    let p = pool(threshold);
    let decision = decide_with(
        s,
        d,
        &p,
        &Inputs {
            threshold_percent: threshold,
            reserve,
            workload_type,
            ..Inputs::of(&p)
        },
    );
    assert_eq!(
        decision.allowed(),
        decision.denial().is_none(),
        "allowed() and denial() disagree: {decision:?}"
    );
    decision.allowed()
}
