//! `nodeInventory`: whether a policy reads the GPU nodes, which Nodes, by which labels,
//! and the pod-template keys that ask for a driver or CUDA version.

use super::LabelKeys;
use super::version::Version;
use crate::selector::LabelSelector;
use crate::settings::{Action, FieldError, read_node_selector, validate_label_key};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The default pod-template label (or annotation) asking for a driver version.
pub const DEFAULT_MIN_DRIVER_KEY: &str = "gpu-admission/min-driver-version";
/// The default pod-template label (or annotation) asking for a CUDA version.
pub const DEFAULT_MIN_CUDA_KEY: &str = "gpu-admission/min-cuda-version";

/// Settings `nodeInventory`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct InventorySettings {
    /// Read the Nodes (needs `list` and `watch` on Nodes, and `v1/Node` in the policy's
    /// `contextAwareResources`). Off by default.
    pub enabled: bool,
    /// The Nodes read (default: every Node).
    #[serde(deserialize_with = "read_node_selector")]
    pub node_selector: LabelSelector,
    /// The node labels read.
    pub label_keys: LabelKeys,
    /// Pod-template label or annotation giving the least driver version (`""` turns it off).
    pub min_driver_version_key: String,
    /// Pod-template label or annotation giving the least CUDA version (`""` turns it off).
    pub min_cuda_version_key: String,
    /// A GPU pod whose selected product no schedulable node carries (or, selecting none,
    /// when no schedulable node has GPUs): `warn` (accept with a warning: a node pool that
    /// scales from zero may create the nodes), `deny`, or `allow`. A product no node
    /// carries and no catalog knows is denied whatever this says.
    pub no_matching_nodes: Action,
}

impl Default for InventorySettings {
    fn default() -> Self {
        InventorySettings {
            enabled: false,
            node_selector: LabelSelector::default(),
            label_keys: LabelKeys::default(),
            min_driver_version_key: DEFAULT_MIN_DRIVER_KEY.into(),
            min_cuda_version_key: DEFAULT_MIN_CUDA_KEY.into(),
            no_matching_nodes: Action::Warn,
        }
    }
}

impl InventorySettings {
    /// Checks every field; errors name `<field>.<member>`.
    pub fn validate(&self, field: &str) -> Result<(), FieldError> {
        self.node_selector
            .validate(&format!("{field}.nodeSelector"))?;
        self.label_keys.validate(&format!("{field}.labelKeys"))?;
        for (name, key) in [
            ("minDriverVersionKey", &self.min_driver_version_key),
            ("minCudaVersionKey", &self.min_cuda_version_key),
        ] {
            if !key.is_empty() {
                validate_label_key(&format!("{field}.{name}"), key)?;
            }
        }
        Ok(())
    }

    /// The selector of the Nodes read when every GPU pod of a decision selects `product`
    /// by `key`: `nodeSelector` and `key=product`. `None` when `key` is not a product label
    /// the inventory reads (the narrowed nodes would not be those whose product it
    /// compares), or when `nodeSelector` already fixes `key`.
    pub fn narrowed(&self, key: &str, product: &str) -> Option<LabelSelector> {
        let k = &self.label_keys;
        let reads = [&k.product, &k.amd_product, &k.intel_product]
            .iter()
            .any(|p| !p.is_empty() && p.as_str() == key);
        if !reads || self.node_selector.match_labels.contains_key(key) {
            return None;
        }
        let mut selector = self.node_selector.clone();
        selector
            .match_labels
            .insert(key.to_string(), product.to_string());
        Some(selector)
    }

    /// The least driver and CUDA versions a pod template asks for (its label, else its
    /// annotation), with where; a value that is not a version is an error naming it.
    /// `location` is the template's path (`spec.template`).
    #[allow(clippy::type_complexity)]
    pub fn min_versions(
        &self,
        labels: &BTreeMap<String, String>,
        annotations: &BTreeMap<String, String>,
        location: &str,
    ) -> Result<[Option<(Version, String)>; 2], String> {
        let read = |key: &str| -> Result<Option<(Version, String)>, String> {
            if key.is_empty() {
                return Ok(None);
            }
            let found = [(labels, "label"), (annotations, "annotation")]
                .into_iter()
                .find_map(|(map, what)| map.get(key).map(|v| (v, what)));
            let Some((value, what)) = found else {
                return Ok(None);
            };
            let source = format!("{what} {key} on {location}");
            match Version::parse(value) {
                Some(v) => Ok(Some((v, source))),
                None => Err(format!(
                    "{source} is '{value}', not a version like 535.104 (dotted whole numbers)"
                )),
            }
        };
        Ok([
            read(&self.min_driver_version_key)?,
            read(&self.min_cuda_version_key)?,
        ])
    }
}
