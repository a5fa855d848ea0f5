//! The pool the unit tests of pools, the capacity gate and their queries read.

use super::Pool;
use crate::gpu::GpuResources;
use crate::selector::LabelSelector;
use serde_json::json;

/// Pool `a100`: the nodes labelled `gpu-admission/pool=a100` that have `nvidia.com/gpu.present`,
/// threshold 90%.
pub(crate) fn pool() -> Pool {
    Pool {
        name: "a100".into(),
        node_selector: serde_json::from_value::<LabelSelector>(json!({
            "matchLabels": {"gpu-admission/pool": "a100"},
            "matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "Exists"}]
        }))
        .unwrap(),
        threshold_percent: 90,
        ..Pool::default()
    }
}

/// The GPU resources counted by default.
pub(crate) fn names() -> GpuResources<'static> {
    GpuResources::default()
}
