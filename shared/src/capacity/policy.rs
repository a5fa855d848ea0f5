//! gpu-capacity-gate-policy as a [`Policy`]: its settings checked ([`Checked`]), its rules
//! ([`super::decide`]), its exceptions, the host calls it may make.

use super::check::Checked;
use super::settings::{RULE_NAMES, Settings};
use crate::admission::Verdict;
use crate::exceptions::HasExceptions;
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
    const RULE_NAMES: &'static [&'static str] = &RULE_NAMES;

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

    fn exceptions(settings: &Checked) -> Option<&dyn HasExceptions> {
        Some(&**settings)
    }
}
