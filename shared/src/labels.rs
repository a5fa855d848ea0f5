//! gpu-labels-policy (placeholder: being written).

use crate::admission::{AdmissionRequest, ValidateSettings, Verdict};
use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Settings {}

impl ValidateSettings for Settings {
    fn validate(&self) -> Result<(), String> {
        Ok(())
    }
}

pub fn evaluate(_request: &AdmissionRequest, _settings: &Settings) -> Verdict {
    Verdict::reject("not implemented yet")
}
