//! Property test of the capacity gate's count of DRA claims (`countDraClaims`): adding an
//! allocated ResourceClaim to a pool's pods never lowers the pool's counted use, and so never
//! turns a denial into an acceptance, through `evaluate` with a fake cluster serving generated
//! Node, Pod and ResourceClaim lists (the generators of `pool_gen`). (Run natively.)
#![cfg(not(target_arch = "wasm32"))]

mod pool_gen;

use gpu_rules::admission::Verdict;
use gpu_rules::capacity::Settings;
use pool_gen::{FakeCluster, GPU, Node, POOL_KEY, create_deployment, evaluate, nodes};
use proptest::prelude::*;
use serde_json::{Value, json};

/// One generated claim: devices allocated (`None`: pending), and how many pods of the pool
/// reference it (more than one: shared), one of them through its status (template-made).
#[derive(Debug, Clone)]
struct Claim {
    devices: Option<u64>,
    pods: usize,
    from_template: bool,
}

fn claims() -> impl Strategy<Value = Vec<Claim>> {
    prop::collection::vec(
        (
            prop::option::weighted(0.8, 1u64..=8),
            1usize..=3,
            prop::bool::ANY,
        )
            .prop_map(|(devices, pods, from_template)| Claim {
                devices,
                pods,
                from_template,
            }),
        0..8,
    )
}

fn cluster(nodes: &[Node], plain: &[u64], claims: &[Claim]) -> FakeCluster {
    let node_items: Vec<Value> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            json!({"metadata": {"name": format!("n{i}"), "labels": {POOL_KEY: "a100"}},
                   "spec": {"unschedulable": n.cordoned},
                   "status": {"allocatable": {GPU: n.gpus.to_string()}}})
        })
        .collect();
    let mut pods: Vec<Value> = plain
        .iter()
        .map(|n| {
            json!({"metadata": {"name": "p", "namespace": "ml", "labels": {POOL_KEY: "a100"}},
                   "spec": {"containers": [{"resources": {"limits": {GPU: n.to_string()}}}]}})
        })
        .collect();
    let mut claim_items = Vec::new();
    for (i, c) in claims.iter().enumerate() {
        let name = format!("claim-{i}");
        for k in 0..c.pods {
            let mut pod = json!({"metadata": {"name": format!("d{i}-{k}"), "namespace": "ml",
                                              "labels": {POOL_KEY: "a100"}},
                                 "spec": {"containers": [{}]}});
            if c.from_template && k == 0 {
                pod["status"] = json!({"resourceClaimStatuses": [{"resourceClaimName": name}]});
            } else {
                pod["spec"]["resourceClaims"] = json!([{"resourceClaimName": name}]);
            }
            pods.push(pod);
        }
        let mut claim = json!({"metadata": {"name": name, "namespace": "ml"},
            "spec": {"devices": {"requests": [{"name": "gpus",
                "exactly": {"deviceClassName": "gpu.nvidia.com", "count": c.devices.unwrap_or(1)}}]}}});
        if let Some(n) = c.devices {
            let results: Vec<Value> = (0..n)
                .map(|d| json!({"request": "gpus", "driver": "gpu.nvidia.com", "pool": "n0", "device": format!("gpu-{d}")}))
                .collect();
            claim["status"] = json!({"allocation": {"devices": {"results": results}}});
        }
        claim_items.push(claim);
    }
    FakeCluster::new([
        (
            "v1/Node",
            json!({"kind": "NodeList", "items": node_items}).to_string(),
        ),
        (
            "v1/Pod",
            json!({"kind": "PodList", "items": pods}).to_string(),
        ),
        (
            "resource.k8s.io/v1/ResourceClaim",
            json!({"kind": "ResourceClaimList", "items": claim_items}).to_string(),
        ),
    ])
}

fn settings(threshold: u32) -> Settings {
    serde_json::from_value(json!({"checkNamespaceQuotas": false, "countDraClaims": true, "pools": [
        {"name": "a100", "nodeSelector": {"matchLabels": {POOL_KEY: "a100"}}, "thresholdPercent": threshold}
    ]}))
    .unwrap()
}

/// The GPUs in use the `capacity` audit annotation reports.
fn used(v: &Verdict) -> u64 {
    let capacity = &v.audit_annotations["capacity"];
    let after = capacity
        .split(" used ")
        .nth(1)
        .unwrap_or_else(|| panic!("no used count in {capacity}"));
    after.split(' ').next().unwrap().parse().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Adding an allocated claim (referenced by a new pod, or shared with an existing claim's
    /// pods by name) never lowers the counted use, adds exactly its devices when it is a new
    /// claim, and never turns a denial into an acceptance.
    #[test]
    fn adding_an_allocated_claim_never_lowers_the_counted_use(
        nodes in nodes(), plain in prop::collection::vec(0u64..=4, 0..6), claims in claims(),
        extra in 1u64..=8, shared_pods in 1usize..=3, threshold in 1u32..=100,
        replicas in 1u64..4, gpus_per_pod in 1u64..=4,
    ) {
        let request = create_deployment(replicas, gpus_per_pod);
        let before = evaluate(&request, &settings(threshold), &cluster(&nodes, &plain, &claims));
        let mut more = claims.clone();
        more.push(Claim { devices: Some(extra), pods: shared_pods, from_template: false });
        let after = evaluate(&request, &settings(threshold), &cluster(&nodes, &plain, &more));
        prop_assert_eq!(used(&after), used(&before) + extra, "{:?} then {:?}", before, after);
        prop_assert!(!after.allowed || before.allowed, "an added claim admitted: {:?} then {:?}", before, after);
    }

    /// A claim shared by more pods holds the same devices: the count does not grow with them.
    #[test]
    fn more_pods_sharing_a_claim_count_nothing_more(
        nodes in nodes(), claims in claims(), threshold in 1u32..=100,
    ) {
        let request = create_deployment(1, 1);
        let base = evaluate(&request, &settings(threshold), &cluster(&nodes, &[], &claims));
        let wider: Vec<Claim> = claims.iter().map(|c| Claim { pods: c.pods + 2, ..c.clone() }).collect();
        let shared = evaluate(&request, &settings(threshold), &cluster(&nodes, &[], &wider));
        prop_assert_eq!(used(&base), used(&shared));
        let allocated: u64 = claims.iter().filter_map(|c| c.devices).sum();
        prop_assert_eq!(used(&base), allocated);
    }
}
