//! Reading requests and settings the way `kwctl run` accepts them.

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// Parses JSON, or YAML when it is not JSON.
pub fn parse_json_or_yaml(text: &str) -> Result<Value> {
    match serde_json::from_str(text) {
        Ok(v) => Ok(v),
        Err(json_err) => yaml_serde::from_str(text)
            .map_err(|yaml_err| anyhow::anyhow!("neither JSON ({json_err}) nor YAML ({yaml_err})")),
    }
}

/// An `AdmissionRequest` from JSON or YAML text; a full `AdmissionReview` is
/// accepted too and its `.request` used, like `kwctl run --request-path`.
pub fn admission_request_from_str(text: &str) -> Result<Value> {
    let value = parse_json_or_yaml(text)?;
    let request = match value.get("request") {
        Some(inner) if inner.is_object() => inner.clone(),
        _ => value,
    };
    if !request.is_object() {
        bail!("an AdmissionRequest must be a JSON/YAML object");
    }
    Ok(request)
}

/// [`admission_request_from_str`] on a file's contents.
pub fn read_admission_request(path: impl AsRef<Path>) -> Result<Value> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read request {}", path.display()))?;
    admission_request_from_str(&text).with_context(|| format!("invalid request {}", path.display()))
}

/// Policy settings from a YAML or JSON file (an empty file is `{}`).
pub fn read_settings(path: impl AsRef<Path>) -> Result<Value> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read settings {}", path.display()))?;
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    parse_json_or_yaml(&text).with_context(|| format!("invalid settings {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unwraps_admission_reviews() {
        let review = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x"}}"#;
        assert_eq!(
            admission_request_from_str(review).unwrap(),
            json!({"uid": "x"})
        );
        assert_eq!(
            admission_request_from_str("uid: y\n").unwrap(),
            json!({"uid": "y"})
        );
        assert!(admission_request_from_str("[1]").is_err());
    }

    #[test]
    fn yaml_settings() {
        assert_eq!(
            parse_json_or_yaml("requiredLabel: team\n").unwrap(),
            json!({"requiredLabel": "team"})
        );
    }
}
