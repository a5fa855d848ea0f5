//! gpu-autoscaler-policy as a [`Policy`]: its settings checked ([`Checked`]), the requests it
//! judges (an autoscaler's own), its rules ([`super::decide`]), the host calls it may make.

use super::settings::{Checked, Settings};
use crate::admission::{AdmissionRequest, Verdict};
use crate::policy::{Admission, GET_RESOURCE, LIST_RESOURCES_ALL, Policy};

/// gpu-autoscaler-policy.
pub struct Autoscaler;

impl Policy for Autoscaler {
    const NAME: &'static str = "gpu-autoscaler-policy";
    const HOST_CALLS: u8 = GET_RESOURCE | LIST_RESOURCES_ALL;
    type Settings = Settings;
    type Checked = Checked;

    fn judges(request: &AdmissionRequest) -> bool {
        super::judges(request)
    }

    fn decide(a: Admission<'_, Checked>) -> Verdict {
        super::decide(a)
    }
}
