//! gpu-capacity-gate-policy as a [`Policy`]: its settings checked ([`Checked`]), its rules
//! ([`super::decide`]), the rules its exceptions may name, the host calls it may make.

use super::check::Checked;
use super::settings::{RULE_NAMES, Settings};
use crate::admission::Verdict;
use crate::policy::{
    Admission, GET_RESOURCE, LIST_RESOURCES_ALL, LIST_RESOURCES_BY_NAMESPACE, Policy,
};

/// gpu-capacity-gate-policy.
pub struct CapacityGate;

impl Policy for CapacityGate {
    const NAME: &'static str = "gpu-capacity-gate-policy";
    const HOST_CALLS: u8 = GET_RESOURCE | LIST_RESOURCES_ALL | LIST_RESOURCES_BY_NAMESPACE;
    type Settings = Settings;
    type Checked = Checked;
    const RULE_NAMES: &'static [&'static str] = &RULE_NAMES;

    fn decide(a: Admission<'_, Checked>) -> Verdict {
        super::decide(a)
    }
}
