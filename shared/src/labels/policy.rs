//! gpu-labels-policy as a [`Policy`]: its settings (checked, its rules take them as read),
//! its rules ([`super::decide`]), the host calls it may make.

use super::Settings;
use crate::admission::Verdict;
use crate::policy::{Admission, GET_RESOURCE, Policy};

/// gpu-labels-policy.
pub struct Labels;

impl Policy for Labels {
    const NAME: &'static str = "gpu-labels-policy";
    const HOST_CALLS: u8 = GET_RESOURCE;
    type Settings = Settings;
    type Checked = Settings;

    /// The rules, exceptions included ([`super::excuses`] drops the problems each covers).
    fn decide(a: Admission<'_, Settings>) -> Verdict {
        super::decide(a)
    }
}
