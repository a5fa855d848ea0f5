//! gpu-labels-policy as a [`Policy`]: its settings checked, its rules ([`super::decide`]),
//! the host calls it may make.

use super::Settings;
use crate::admission::Verdict;
use crate::policy::{Admission, GET_RESOURCE, Policy};
use crate::settings::{FieldError, NamespaceList, ValidateSettings};

/// gpu-labels-policy.
pub struct Labels;

impl Policy for Labels {
    const NAME: &'static str = "gpu-labels-policy";
    const HOST_CALLS: u8 = GET_RESOURCE;
    type Settings = Settings;
    /// The settings as read: every field is typed by serde, and nothing in them is read
    /// differently per request.
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

    /// The rules, exceptions included ([`super::excuses`] drops the problems each covers).
    fn decide(a: Admission<'_, Settings>) -> Verdict {
        super::decide(a)
    }
}
