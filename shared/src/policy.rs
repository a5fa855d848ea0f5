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

impl Policy for Labels {
    const NAME: &'static str = "gpu-labels-policy";
    const HOST_CALLS: u8 = GET_RESOURCE;
    type Settings = crate::labels::Settings;
    fn evaluate(r: &AdmissionRequest, s: &Self::Settings, c: &dyn Cluster) -> Verdict {
        crate::labels::evaluate(r, s, c)
    }
}

impl Policy for Routing {
    const NAME: &'static str = "gpu-pool-routing-policy";
    const HOST_CALLS: u8 = GET_RESOURCE;
    type Settings = crate::routing::Settings;
    fn evaluate(r: &AdmissionRequest, s: &Self::Settings, c: &dyn Cluster) -> Verdict {
        crate::routing::evaluate(r, s, c)
    }
}

impl Policy for VramFit {
    const NAME: &'static str = "gpu-vram-fit-policy";
    const HOST_CALLS: u8 = GET_RESOURCE | OCI_MANIFEST_CONFIG;
    type Settings = crate::vram::Settings;
    fn evaluate(r: &AdmissionRequest, s: &Self::Settings, c: &dyn Cluster) -> Verdict {
        crate::vram::evaluate(r, s, c)
    }
}

impl Policy for CapacityGate {
    const NAME: &'static str = "gpu-capacity-gate-policy";
    const HOST_CALLS: u8 = GET_RESOURCE | LIST_RESOURCES_ALL;
    type Settings = crate::capacity::Settings;
    fn evaluate(r: &AdmissionRequest, s: &Self::Settings, c: &dyn Cluster) -> Verdict {
        crate::capacity::evaluate(r, s, c)
    }
}

impl Policy for Autoscaler {
    const NAME: &'static str = "gpu-autoscaler-policy";
    const HOST_CALLS: u8 = GET_RESOURCE | LIST_RESOURCES_ALL;
    type Settings = crate::autoscaler::Settings;
    fn evaluate(r: &AdmissionRequest, s: &Self::Settings, c: &dyn Cluster) -> Verdict {
        crate::autoscaler::evaluate(r, s, c)
    }
}
