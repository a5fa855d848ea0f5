//! gpu-vram-fit-policy as a [`Policy`]: its settings checked ([`Checked`]: the GPU catalog,
//! percentages and caps as typed values), its rules
//! ([`super::decide`]), its exceptions, the host calls it may make.

use super::settings::{Checked, RULE_NAMES, Settings};
use crate::admission::Verdict;
use crate::exceptions::HasExceptions;
use crate::policy::{Admission, GET_RESOURCE, LIST_RESOURCES_ALL, OCI_MANIFEST_CONFIG, Policy};
use crate::settings::{FieldError, NamespaceList};

/// gpu-vram-fit-policy.
pub struct VramFit;

impl Policy for VramFit {
    const NAME: &'static str = "gpu-vram-fit-policy";
    const HOST_CALLS: u8 = GET_RESOURCE | OCI_MANIFEST_CONFIG | LIST_RESOURCES_ALL;
    type Settings = Settings;
    type Checked = Checked;
    const RULE_NAMES: &'static [&'static str] = &RULE_NAMES;

    fn check(settings: Box<Settings>) -> Result<Box<Checked>, FieldError> {
        settings.check_models()?;
        Checked::new(settings).map(Box::new)
    }

    /// [`Policy::check`] but the `models` entries: each is read and checked when a request
    /// names it ([`super::catalog::model::ModelEntry::model`]), once per instance. Reading one
    /// costs about 17k x86 instructions, for entries the request does not name.
    fn prepare(settings: Box<Settings>) -> Result<Box<Checked>, FieldError> {
        Checked::new(settings).map(Box::new)
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
