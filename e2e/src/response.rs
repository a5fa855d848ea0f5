//! What a policy answers, and the Kubernetes `AdmissionResponse` kwctl prints for it.

use std::collections::HashMap;

use anyhow::{Context, Result};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The guest's answer to `validate` (the SDK's `response::ValidationResponse`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ValidationResponse {
    /// Whether the request is accepted.
    pub accepted: bool,
    /// Message shown to the user.
    pub message: Option<String>,
    /// HTTP-like status code shown to the user.
    pub code: Option<u16>,
    /// The object after the policy's changes, for mutating policies.
    pub mutated_object: Option<Value>,
    /// Audit annotations.
    pub audit_annotations: Option<HashMap<String, String>>,
    /// Warnings returned to the API client.
    pub warnings: Option<Vec<String>>,
}

/// The guest's answer to `validate_settings` (the SDK's `SettingsValidationResponse`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettingsValidation {
    /// True when the settings are valid.
    pub valid: bool,
    /// Why they are not.
    pub message: Option<String>,
}

/// `status` of an [`AdmissionResponse`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdmissionResponseStatus {
    /// Message shown to the user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// HTTP-like status code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
}

/// A Kubernetes `admission/v1` `AdmissionResponse`, serialized exactly as
/// policy-evaluator does (and so as `kwctl run` prints it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    /// Copied from the request.
    pub uid: String,
    /// Whether the request is admitted.
    pub allowed: bool,
    /// `"JSONPatch"` when there is a patch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<String>,
    /// Base64 of the RFC 6902 JSONPatch document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// Why the request was rejected (or a message/code given on acceptance).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<AdmissionResponseStatus>,
    /// Audit annotations (printed as `null` when absent, like policy-evaluator).
    pub audit_annotations: Option<HashMap<String, String>>,
    /// Warnings (printed as `null` when absent, like policy-evaluator).
    pub warnings: Option<Vec<String>>,
}

/// Message policy-evaluator gives when a policy mutates a request with no object.
pub const MUTATION_WITHOUT_OBJECT: &str = "Incoming object is null, which happens only with DELETE operations, but the policy is attempting a mutation. This is not allowed";

impl AdmissionResponse {
    /// A rejection with this message and code.
    pub fn reject(uid: impl Into<String>, message: impl Into<String>, code: u16) -> Self {
        Self {
            uid: uid.into(),
            allowed: false,
            status: Some(AdmissionResponseStatus {
                message: Some(message.into()),
                code: Some(code),
            }),
            ..Default::default()
        }
    }

    /// The answer policy-evaluator gives when the guest call fails (the policy
    /// returned `Err`, trapped, or answered something unreadable).
    pub fn reject_internal_server_error(uid: impl Into<String>, message: impl AsRef<str>) -> Self {
        Self::reject(
            uid,
            format!("internal server error: {}", message.as_ref()),
            500,
        )
    }

    /// Converts a guest answer, as policy-evaluator's
    /// `AdmissionResponse::from_policy_validation_response`: the patch is
    /// `json_patch::diff(request.object, mutated_object)`, base64 encoded, and an
    /// empty diff gives no patch. `object` is `None` for requests with no object
    /// (DELETE), where a mutation is refused.
    pub fn from_validation_response(
        uid: impl Into<String>,
        object: Option<&Value>,
        response: &ValidationResponse,
    ) -> Result<Self> {
        let uid = uid.into();
        let patch = match (&response.mutated_object, object) {
            (Some(_), None) => {
                return Ok(Self {
                    uid,
                    allowed: false,
                    status: Some(AdmissionResponseStatus {
                        message: Some(MUTATION_WITHOUT_OBJECT.to_string()),
                        code: None,
                    }),
                    ..Default::default()
                });
            }
            (Some(mutated), Some(original)) => {
                let diff = json_patch::diff(original, mutated);
                if diff.0.is_empty() {
                    None
                } else {
                    let text =
                        serde_json::to_string(&diff).context("cannot serialize JSONPatch")?;
                    Some(STANDARD.encode(text))
                }
            }
            (None, _) => None,
        };
        let status = (response.message.is_some() || response.code.is_some()).then(|| {
            AdmissionResponseStatus {
                message: response.message.clone(),
                code: response.code,
            }
        });
        Ok(Self {
            uid,
            allowed: response.accepted,
            patch_type: patch.as_ref().map(|_| "JSONPatch".to_string()),
            patch,
            status,
            audit_annotations: response.audit_annotations.clone(),
            warnings: response.warnings.clone(),
        })
    }

    /// The decoded JSONPatch operations; empty when there is no patch.
    pub fn patch_ops(&self) -> Result<Vec<Value>> {
        let Some(patch) = &self.patch else {
            return Ok(Vec::new());
        };
        let bytes = STANDARD.decode(patch).context("patch is not base64")?;
        serde_json::from_slice(&bytes).context("patch is not a JSON array")
    }

    /// `status.message`, if any.
    pub fn message(&self) -> Option<&str> {
        self.status.as_ref()?.message.as_deref()
    }

    /// `status.code`, if any.
    pub fn code(&self) -> Option<u16> {
        self.status.as_ref()?.code
    }

    /// The audit annotation `key`, if any.
    pub fn audit(&self, key: &str) -> Option<&str> {
        self.audit_annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn serializes_like_kwctl() {
        let r = AdmissionResponse::reject("u1", "no", 403);
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"uid":"u1","allowed":false,"status":{"message":"no","code":403},"auditAnnotations":null,"warnings":null}"#
        );
    }

    #[test]
    fn mutation_becomes_a_json_patch() {
        let obj = json!({"metadata": {"labels": {"a": "1"}}});
        let resp = ValidationResponse {
            accepted: true,
            mutated_object: Some(json!({"metadata": {"labels": {"a": "1", "b": "2"}}})),
            ..Default::default()
        };
        let r = AdmissionResponse::from_validation_response("u", Some(&obj), &resp).unwrap();
        assert_eq!(r.patch_type.as_deref(), Some("JSONPatch"));
        assert_eq!(
            r.patch_ops().unwrap(),
            vec![json!({"op": "add", "path": "/metadata/labels/b", "value": "2"})]
        );
        assert!(r.status.is_none());
    }

    #[test]
    fn identical_mutation_gives_no_patch() {
        let obj = json!({"a": 1});
        let resp = ValidationResponse {
            accepted: true,
            mutated_object: Some(obj.clone()),
            ..Default::default()
        };
        let r = AdmissionResponse::from_validation_response("u", Some(&obj), &resp).unwrap();
        assert_eq!(r.patch, None);
        assert_eq!(r.patch_type, None);
        assert_eq!(r.patch_ops().unwrap(), Vec::<Value>::new());
    }

    #[test]
    fn mutation_without_object_is_refused() {
        let resp = ValidationResponse {
            accepted: true,
            mutated_object: Some(json!({})),
            ..Default::default()
        };
        let r = AdmissionResponse::from_validation_response("u", None, &resp).unwrap();
        assert!(!r.allowed);
        assert_eq!(r.message(), Some(MUTATION_WITHOUT_OBJECT));
        assert_eq!(r.code(), None);
    }

    #[test]
    fn audit_reads_one_annotation() {
        let r = AdmissionResponse {
            audit_annotations: Some([("exception".to_string(), "e".to_string())].into()),
            ..Default::default()
        };
        assert_eq!(r.audit("exception"), Some("e"));
        assert_eq!(r.audit("excused"), None);
        assert_eq!(AdmissionResponse::default().audit("exception"), None);
    }

    #[test]
    fn undecodable_patch_is_an_error() {
        let r = AdmissionResponse {
            patch: Some("%%%".into()),
            ..Default::default()
        };
        assert!(r.patch_ops().is_err());
    }
}
