//! gpu-vram-fit-policy as a [`Policy`]: its settings checked ([`Checked`]: the GPU catalog,
//! percentages and caps as typed values), its rules ([`super::decide`]), the rules its
//! exceptions may name, the host calls it may make.

use super::settings::{Checked, RULE_NAMES, Settings};
use crate::admission::Verdict;
use crate::policy::{Admission, GET_RESOURCE, LIST_RESOURCES_ALL, OCI_MANIFEST_CONFIG, Policy};

/// gpu-vram-fit-policy.
pub struct VramFit;

impl Policy for VramFit {
    const NAME: &'static str = "gpu-vram-fit-policy";
    const HOST_CALLS: u8 = GET_RESOURCE | OCI_MANIFEST_CONFIG | LIST_RESOURCES_ALL;
    type Settings = Settings;
    type Checked = Checked;
    const RULE_NAMES: &'static [&'static str] = &RULE_NAMES;

    fn decide(a: Admission<'_, Checked>) -> Verdict {
        super::decide(a)
    }
}
