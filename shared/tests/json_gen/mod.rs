//! Arbitrary JSON for the property tests that hand the rules objects of any shape
//! (`properties`, `routing_properties`): each test chooses its leaves and the keys its
//! rules read; the nesting is the same.

use proptest::prelude::*;
use serde_json::Value;

/// The keys of a workload's pod templates every rule reads.
pub const TEMPLATE_KEYS: [&str; 11] = [
    "spec",
    "template",
    "jobTemplate",
    "workerGroupSpecs",
    "metadata",
    "labels",
    "containers",
    "initContainers",
    "resources",
    "limits",
    "nvidia.com/gpu",
];

/// JSON up to four levels deep: `leaf` values, arrays of fewer than `items` values, and
/// objects of fewer than `entries` entries keyed by [`TEMPLATE_KEYS`] and `keys`.
pub fn json_tree(
    leaf: impl Strategy<Value = Value> + 'static,
    keys: &[&'static str],
    items: usize,
    entries: usize,
) -> impl Strategy<Value = Value> {
    let keys = [&TEMPLATE_KEYS[..], keys].concat();
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..items).prop_map(Value::Array),
            prop::collection::btree_map(
                prop::sample::select(keys.clone()).prop_map(str::to_string),
                inner,
                0..entries
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
