//! Settings of the fixture policy and their validation.

use kubewarden_policy_sdk::settings::Validatable;
use serde::{Deserialize, Serialize};

/// A label the policy adds to objects that lack it.
#[derive(Serialize, Deserialize, Default, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LabelToAdd {
    /// The label key; must not be empty.
    pub key: String,
    /// The label value (may be empty, as in Kubernetes).
    pub value: String,
}

/// The fixture policy's settings; every field is optional.
#[derive(Serialize, Deserialize, Default, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Settings {
    /// Reject objects whose `metadata.labels` lack this key.
    pub required_label: Option<String>,
    /// Add this label (JSONPatch mutation) when the object lacks it.
    pub add_label: Option<LabelToAdd>,
    /// Read the request's Namespace through the `kubernetes/get_resource` host
    /// capability and reject unless it is labelled `gpu-admission/allowed: "true"`.
    pub lookup_namespace: bool,
}

impl Validatable for Settings {
    fn validate(&self) -> Result<(), String> {
        if self.required_label.as_deref() == Some("") {
            return Err("requiredLabel: must not be empty".to_string());
        }
        if let Some(add) = &self.add_label
            && add.key.is_empty()
        {
            return Err("addLabel.key: must not be empty".to_string());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_settings_are_valid() {
        let s: Settings = serde_json::from_str("{}").unwrap();
        assert_eq!(s, Settings::default());
        assert!(s.validate().is_ok());
    }

    #[test]
    fn empty_required_label_is_rejected() {
        let s: Settings = serde_json::from_str(r#"{"requiredLabel": ""}"#).unwrap();
        assert_eq!(
            s.validate().unwrap_err(),
            "requiredLabel: must not be empty"
        );
    }

    #[test]
    fn empty_add_label_key_is_rejected() {
        let s: Settings =
            serde_json::from_str(r#"{"addLabel": {"key": "", "value": "x"}}"#).unwrap();
        assert_eq!(s.validate().unwrap_err(), "addLabel.key: must not be empty");
    }

    #[test]
    fn unknown_fields_are_refused() {
        assert!(serde_json::from_str::<Settings>(r#"{"requiredLabels": "x"}"#).is_err());
    }
}
