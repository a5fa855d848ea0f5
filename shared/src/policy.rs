//! What makes a policy: its settings, the host calls it may make, its decision. Each
//! policy crate registers one with [`crate::kubewarden_policy!`] and holds nothing else;
//! the benchmarks and fuzz targets reach every policy through the same trait.

use crate::admission::{AdmissionRequest, ValidateSettings, Verdict};
use crate::cluster::Cluster;
use serde::de::DeserializeOwned;

/// `get_resource`, in [`Policy::HOST_CALLS`].
pub const GET_RESOURCE: u8 = 1;
/// `list_resources_all`, in [`Policy::HOST_CALLS`].
pub const LIST_RESOURCES_ALL: u8 = 2;
/// `list_resources_by_namespace`, in [`Policy::HOST_CALLS`].
pub const LIST_RESOURCES_BY_NAMESPACE: u8 = 4;
/// `oci/v1/oci_manifest_config`, in [`Policy::HOST_CALLS`].
pub const OCI_MANIFEST_CONFIG: u8 = 8;

pub trait Policy {
    /// The module's name (`gpu-labels-policy`).
    const NAME: &'static str;
    /// The host operations the module may call (a set of the constants above): the ones
    /// its `metadata.yml` declares in `hostCapabilities`.
    const HOST_CALLS: u8;
    type Settings: DeserializeOwned + ValidateSettings;
    fn evaluate(
        request: &AdmissionRequest,
        settings: &Self::Settings,
        cluster: &dyn Cluster,
    ) -> Verdict;
}

/// gpu-labels-policy.
pub struct Labels;
/// gpu-pool-routing-policy.
pub struct Routing;
/// gpu-vram-fit-policy.
pub struct VramFit;
/// gpu-capacity-gate-policy.
pub struct CapacityGate;
/// gpu-autoscaler-policy.
pub struct Autoscaler;

/// `impl Policy` for a policy whose rules are the module `$rules` (`evaluate`, `Settings`).
macro_rules! policy {
    ($policy:ty, $name:literal, $host_calls:expr, $rules:ident) => {
        impl Policy for $policy {
            const NAME: &'static str = $name;
            const HOST_CALLS: u8 = $host_calls;
            type Settings = crate::$rules::Settings;
            fn evaluate(r: &AdmissionRequest, s: &Self::Settings, c: &dyn Cluster) -> Verdict {
                crate::$rules::evaluate(r, s, c)
            }
        }
    };
}

policy!(Labels, "gpu-labels-policy", GET_RESOURCE, labels);
policy!(Routing, "gpu-pool-routing-policy", GET_RESOURCE, routing);
policy!(
    VramFit,
    "gpu-vram-fit-policy",
    GET_RESOURCE | OCI_MANIFEST_CONFIG,
    vram
);
policy!(
    CapacityGate,
    "gpu-capacity-gate-policy",
    GET_RESOURCE | LIST_RESOURCES_ALL | LIST_RESOURCES_BY_NAMESPACE,
    capacity
);
policy!(
    Autoscaler,
    "gpu-autoscaler-policy",
    GET_RESOURCE | LIST_RESOURCES_ALL,
    autoscaler
);
