//! gpu-capacity-gate-policy as a [`Policy`]: its settings checked ([`Checked`]), its rules
//! ([`super::decide`]), its exceptions, the host calls it may make.

use super::check::Checked;
use super::settings::{RULE_NAMES, Settings};
use crate::admission::Verdict;
use crate::policy::{
    Admission, GET_RESOURCE, LIST_RESOURCES_ALL, LIST_RESOURCES_BY_NAMESPACE, Policy,
};
use crate::settings::{FieldError, NamespaceList};

/// gpu-capacity-gate-policy.
pub struct CapacityGate;

impl Policy for CapacityGate {
    const NAME: &'static str = "gpu-capacity-gate-policy";
    const HOST_CALLS: u8 = GET_RESOURCE | LIST_RESOURCES_ALL | LIST_RESOURCES_BY_NAMESPACE;
    type Settings = Settings;
    type Checked = Checked;

    fn check(settings: Box<Settings>) -> Result<Box<Checked>, FieldError> {
        Checked::new(settings).map(Box::new)
    }

    /// The pools' forms and the team budgets read, without the other checks (a host sends
    /// only settings that checked).
    fn prepare(settings: Box<Settings>) -> Result<Box<Checked>, FieldError> {
        Checked::prepared(settings).map(Box::new)
    }

    fn exempt_namespaces(settings: &Checked) -> &NamespaceList {
        &settings.exempt_namespaces
    }

    fn decide(a: Admission<'_, Checked>) -> Verdict {
        super::decide(a)
    }

    fn excuse(verdict: Verdict, a: Admission<'_, Checked>) -> Verdict {
        let s = a.settings;
        crate::exceptions::excuse(
            verdict,
            &**s,
            &RULE_NAMES,
            RULE_NAMES[0],
            a.request,
            &s.custom_kinds,
            a.clock,
        )
    }
}
