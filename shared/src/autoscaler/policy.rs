//! gpu-autoscaler-policy as a [`Policy`]: its settings checked, the requests it judges (an
//! autoscaler's own), its rules ([`super::decide`]), the host calls it may make.

use super::settings::Settings;
use crate::admission::{AdmissionRequest, Verdict};
use crate::policy::{Admission, GET_RESOURCE, LIST_RESOURCES_ALL, Policy};
use crate::settings::{FieldError, NamespaceList, ValidateSettings};

/// gpu-autoscaler-policy.
pub struct Autoscaler;

impl Policy for Autoscaler {
    const NAME: &'static str = "gpu-autoscaler-policy";
    const HOST_CALLS: u8 = GET_RESOURCE | LIST_RESOURCES_ALL;
    type Settings = Settings;
    /// The settings as read, once checked.
    type Checked = Settings;

    fn check(settings: Box<Settings>) -> Result<Box<Settings>, FieldError> {
        settings.validate()?;
        Ok(settings)
    }

    /// The settings as read: the rules take them so, and a host sends only settings that
    /// checked ([`Policy::prepare`]).
    fn prepare(settings: Box<Settings>) -> Result<Box<Settings>, FieldError> {
        Ok(settings)
    }

    fn judges(request: &AdmissionRequest) -> bool {
        super::judges(request)
    }

    fn exempt_namespaces(settings: &Settings) -> &NamespaceList {
        &settings.exempt_namespaces
    }

    fn decide(a: Admission<'_, Settings>) -> Verdict {
        super::decide(a)
    }
}
