//! The capacity gate's `nodeOffers` is monotonic in the pool's nodes: adding a node that
//! offers the product a Deployment selects never turns an acceptance into a denial, whatever
//! the other nodes carry (products, GPU counts, drivers, cordoned), the pool's use, and what
//! the Deployment asks for (GPUs per pod, replicas, a least driver version). (Run natively;
//! the unit tests also run in wasm.)
#![cfg(not(target_arch = "wasm32"))]

mod pool_gen;

use gpu_rules::capacity::Settings;
use pool_gen::{FakeCluster, GPU, POOL_KEY, create_deployment, evaluate};
use proptest::prelude::*;
use serde_json::{Value, json};

const PRODUCTS: [&str; 3] = [
    "NVIDIA-A100-SXM4-40GB",
    "NVIDIA-A100-SXM4-80GB",
    "NVIDIA-H100-80GB-HBM3",
];
const DRIVERS: [&str; 3] = ["525.85.12", "535.104.05", "550.54.15"];

/// One GFD-labelled node of pool a100.
#[derive(Debug, Clone)]
struct LabelledNode {
    product: usize,
    gpus: u64,
    driver: usize,
    cordoned: bool,
}

impl LabelledNode {
    fn to_json(&self, i: usize) -> Value {
        let mut driver = DRIVERS[self.driver].split('.');
        json!({"metadata": {"name": format!("gpu-{i}"), "labels": {
                   POOL_KEY: "a100",
                   "nvidia.com/gpu.product": PRODUCTS[self.product],
                   "nvidia.com/gpu.count": "8",
                   "nvidia.com/cuda.driver.major": driver.next(),
                   "nvidia.com/cuda.driver.minor": driver.next(),
                   "nvidia.com/cuda.driver.rev": driver.next()}},
               "spec": {"unschedulable": self.cordoned},
               "status": {"allocatable": {GPU: self.gpus.to_string(), "cpu": "64"}}})
    }
}

fn labelled_node() -> impl Strategy<Value = LabelledNode> {
    (
        0..PRODUCTS.len(),
        0u64..=8,
        0..DRIVERS.len(),
        prop::bool::weighted(0.15),
    )
        .prop_map(|(product, gpus, driver, cordoned)| LabelledNode {
            product,
            gpus,
            driver,
            cordoned,
        })
}

fn cluster(nodes: &[LabelledNode], used: &[u64]) -> FakeCluster {
    let node_items: Vec<Value> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| n.to_json(i))
        .collect();
    let pod_items: Vec<Value> = used
        .iter()
        .map(|n| json!({"spec": {"containers": [{"resources": {"limits": {GPU: n.to_string()}}}]}}))
        .collect();
    FakeCluster::new([
        (
            "v1/Node",
            json!({"apiVersion": "v1", "kind": "NodeList", "items": node_items}).to_string(),
        ),
        (
            "v1/Pod",
            json!({"apiVersion": "v1", "kind": "PodList", "items": pod_items}).to_string(),
        ),
    ])
}

fn settings(threshold: u32) -> Settings {
    serde_json::from_value(json!({"checkNamespaceQuotas": false, "pools": [
        {"name": "a100", "nodeSelector": {"matchLabels": {POOL_KEY: "a100"}}, "thresholdPercent": threshold}
    ]}))
    .unwrap()
}

/// The gate on a Deployment of `replicas` pods of `gpus` GPUs selecting `product`, asking for
/// at least driver `min_driver` when given.
fn allowed(
    nodes: &[LabelledNode],
    used: &[u64],
    threshold: u32,
    (replicas, gpus, product, min_driver): (u64, u64, usize, Option<usize>),
) -> bool {
    let mut request = create_deployment(replicas, gpus);
    let template = &mut request.object["spec"]["template"];
    template["spec"]["nodeSelector"] = json!({"nvidia.com/gpu.product": PRODUCTS[product]});
    if let Some(d) = min_driver {
        template["metadata"]["labels"]["gpu-admission/min-driver-version"] = json!(DRIVERS[d]);
    }
    evaluate(&request, &settings(threshold), &cluster(nodes, used)).allowed
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn adding_a_node_of_the_selected_product_never_turns_an_acceptance_into_a_denial(
        nodes in prop::collection::vec(labelled_node(), 0..6),
        added in labelled_node(),
        at in any::<prop::sample::Index>(),
        used in prop::collection::vec(1u64..=8, 0..6),
        threshold in 1u32..=100,
        replicas in 1u64..=4,
        gpus in 1u64..=8,
        product in 0..PRODUCTS.len(),
        min_driver in prop::option::of(0..DRIVERS.len()),
    ) {
        let workload = (replicas, gpus, product, min_driver);
        let before = allowed(&nodes, &used, threshold, workload);
        let mut more = nodes.clone();
        let added = LabelledNode { product, ..added };
        more.insert(at.index(nodes.len() + 1), added.clone());
        let after = allowed(&more, &used, threshold, workload);
        prop_assert!(!before || after, "accepted before, denied with {added:?} added");
    }

    /// The same, and a node of the product that offers what the workload asks for (GPUs per
    /// pod, the driver) turns a denial by nodeOffers alone into no nodeOffers denial.
    #[test]
    fn a_node_that_offers_everything_selected_clears_the_node_offers_denial(
        nodes in prop::collection::vec(labelled_node(), 0..6),
        gpus in 1u64..=8,
        product in 0..PRODUCTS.len(),
        min_driver in prop::option::of(0..DRIVERS.len()),
    ) {
        let workload = (1, gpus, product, min_driver);
        let mut more = nodes.clone();
        more.push(LabelledNode { product, gpus: 8, driver: DRIVERS.len() - 1, cordoned: false });
        // An empty pool at a 100% threshold: only nodeOffers (and node sizes) can deny.
        prop_assert!(allowed(&more, &[], 100, workload), "denied with a node offering all of it");
    }
}
