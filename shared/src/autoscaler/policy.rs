//! gpu-autoscaler-policy as a [`Policy`]: its settings checked ([`Checked`]), the requests it judges (an
//! autoscaler's own), its rules ([`super::decide`]), the host calls it may make.

use super::settings::{Checked, Settings};
use crate::admission::{AdmissionRequest, Verdict};
use crate::policy::{Admission, GET_RESOURCE, LIST_RESOURCES_ALL, Policy};
use crate::settings::{FieldError, NamespaceList};

/// gpu-autoscaler-policy.
pub struct Autoscaler;

impl Policy for Autoscaler {
    const NAME: &'static str = "gpu-autoscaler-policy";
    const HOST_CALLS: u8 = GET_RESOURCE | LIST_RESOURCES_ALL;
    type Settings = Settings;
    type Checked = Checked;

    fn check(settings: Box<Settings>) -> Result<Box<Checked>, FieldError> {
        Checked::new(settings).map(Box::new)
    }

    /// The pools' forms, without the checks (a host sends only settings that checked).
    fn prepare(settings: Box<Settings>) -> Result<Box<Checked>, FieldError> {
        Ok(Box::new(Checked::prepared(settings)))
    }

    fn judges(request: &AdmissionRequest) -> bool {
        super::judges(request)
    }

    fn exempt_namespaces(settings: &Checked) -> &NamespaceList {
        &settings.exempt_namespaces
    }

    fn decide(a: Admission<'_, Checked>) -> Verdict {
        super::decide(a)
    }
}
