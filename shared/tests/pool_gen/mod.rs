//! The pool generators the capacity gate's property tests share (`capacity_properties`,
//! `reserve_properties`, `brake_properties`): a pool at a threshold, GPU counts over three resources (a
//! resource absent now and then), and a demand of one to three resources.
#![allow(dead_code)]

use gpu_rules::capacity::Pool;
use gpu_rules::gpu::GpuCounts;
use gpu_rules::selector::LabelSelector;
use proptest::prelude::*;

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
