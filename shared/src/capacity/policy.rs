//! gpu-capacity-gate-policy as a [`Policy`]: its settings checked, its rules
//! ([`super::decide`]), its exceptions, the host calls it may make.

use super::settings::{RULE_NAMES, Settings};
use crate::admission::Verdict;
use crate::policy::{
    Admission, GET_RESOURCE, LIST_RESOURCES_ALL, LIST_RESOURCES_BY_NAMESPACE, Policy,
};
use crate::settings::{FieldError, NamespaceList, ValidateSettings};

/// gpu-capacity-gate-policy.
pub struct CapacityGate;

impl Policy for CapacityGate {
    const NAME: &'static str = "gpu-capacity-gate-policy";
    const HOST_CALLS: u8 = GET_RESOURCE | LIST_RESOURCES_ALL | LIST_RESOURCES_BY_NAMESPACE;
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

    fn exempt_namespaces(settings: &Settings) -> &NamespaceList {
        &settings.exempt_namespaces
    }

    fn decide(a: Admission<'_, Settings>) -> Verdict {
        super::decide(a)
    }

    fn excuse(verdict: Verdict, a: Admission<'_, Settings>) -> Verdict {
        let s = a.settings;
        crate::exceptions::excuse(
            verdict,
            s,
            &RULE_NAMES,
            RULE_NAMES[0],
            a.request,
            &s.custom_kinds,
            a.clock,
        )
    }
}
