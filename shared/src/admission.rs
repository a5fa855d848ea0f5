//! The admission request as the rules read it, and the verdict they give.
//!
//! These mirror Kubernetes' `AdmissionRequest` and Kubewarden's `ValidationResponse`
//! with plain serde types, so the rules are tested without the SDK; the `kubewarden`
//! feature (see [`crate::kubewarden`]) connects them to the waPC entry points.

use crate::podspec::null_as_default;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// Group, version and kind (or resource) of the request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct GroupVersionKind {
    #[serde(deserialize_with = "null_as_default")]
    pub group: String,
    #[serde(deserialize_with = "null_as_default")]
    pub version: String,
    #[serde(deserialize_with = "null_as_default")]
    pub kind: String,
}

/// Group, version and resource (`deployments`) of the request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct GroupVersionResource {
    #[serde(deserialize_with = "null_as_default")]
    pub group: String,
    #[serde(deserialize_with = "null_as_default")]
    pub version: String,
    #[serde(deserialize_with = "null_as_default")]
    pub resource: String,
}

/// Who is asking.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct UserInfo {
    #[serde(deserialize_with = "null_as_default")]
    pub username: String,
    #[serde(deserialize_with = "null_as_default")]
    pub groups: Vec<String>,
}

/// The fields of a Kubernetes `AdmissionRequest` that the rules read.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AdmissionRequest {
    #[serde(deserialize_with = "null_as_default")]
    pub uid: String,
    pub kind: GroupVersionKind,
    pub resource: GroupVersionResource,
    #[serde(deserialize_with = "null_as_default")]
    pub sub_resource: String,
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(deserialize_with = "null_as_default")]
    pub namespace: String,
    /// CREATE, UPDATE, DELETE or CONNECT.
    #[serde(deserialize_with = "null_as_default")]
    pub operation: String,
    pub user_info: UserInfo,
    pub object: Value,
    pub old_object: Value,
    pub dry_run: bool,
}

impl AdmissionRequest {
    /// True for CREATE.
    pub fn is_create(&self) -> bool {
        self.operation == "CREATE"
    }

    /// True for UPDATE.
    pub fn is_update(&self) -> bool {
        self.operation == "UPDATE"
    }

    /// True for CREATE and UPDATE, the operations that can ask for GPUs.
    pub fn creates_or_updates(&self) -> bool {
        self.is_create() || self.is_update()
    }
}

/// What `validate` receives: `{"request": ..., "settings": ...}`.
#[derive(Debug, Clone, Deserialize)]
pub struct Payload<S> {
    pub request: AdmissionRequest,
    /// Boxed: a policy's settings are large, and the payload lives in the frames of the
    /// functions that read it.
    pub settings: Box<S>,
}

/// The outcome of a rule: allow (possibly with a changed object) or deny, with the
/// warnings and audit annotations operators see.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    pub allowed: bool,
    pub message: Option<String>,
    pub code: Option<u16>,
    /// The changed object, for mutating policies. `None`: no change.
    pub mutated_object: Option<Value>,
    pub audit_annotations: BTreeMap<String, String>,
    pub warnings: Vec<String>,
}

impl Verdict {
    /// Allow unchanged.
    pub fn accept() -> Verdict {
        Verdict {
            allowed: true,
            ..Verdict::default()
        }
    }

    /// Allow with `object` as the new object.
    pub fn mutate(object: Value) -> Verdict {
        Verdict {
            allowed: true,
            mutated_object: Some(object),
            ..Verdict::default()
        }
    }

    /// Deny with a message that says what to change.
    pub fn reject(message: impl Into<String>) -> Verdict {
        Verdict {
            allowed: false,
            message: Some(message.into()),
            ..Verdict::default()
        }
    }

    /// Sets the HTTP-like status code of a rejection.
    pub fn with_code(mut self, code: u16) -> Verdict {
        self.code = Some(code);
        self
    }

    /// Adds a warning for the API client.
    pub fn with_warning(mut self, warning: impl Into<String>) -> Verdict {
        self.warnings.push(warning.into());
        self
    }

    /// Adds an audit annotation.
    pub fn with_audit(mut self, key: impl Into<String>, value: impl Into<String>) -> Verdict {
        self.audit_annotations.insert(key.into(), value.into());
        self
    }
}

pub use crate::settings::ValidateSettings;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_an_admission_request_with_nulls() {
        let p: Payload<Value> = serde_json::from_value(json!({
            "request": {"uid": "u1", "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
                        "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
                        "subResource": null, "operation": "CREATE", "namespace": "ml",
                        "userInfo": {"username": "alice", "groups": null},
                        "object": {"kind": "Deployment"}, "oldObject": null},
            "settings": {"x": 1}
        }))
        .unwrap();
        assert_eq!(p.request.kind.kind, "Deployment");
        assert_eq!(p.request.resource.resource, "deployments");
        assert_eq!(p.request.sub_resource, "");
        assert!(p.request.is_create() && p.request.creates_or_updates() && !p.request.is_update());
        assert!(p.request.old_object.is_null());
        assert_eq!(p.settings["x"], 1);
    }

    #[test]
    fn verdict_builders() {
        let v = Verdict::reject("no")
            .with_code(403)
            .with_warning("w")
            .with_audit("k", "v");
        assert!(!v.allowed);
        assert_eq!(v.message.as_deref(), Some("no"));
        assert_eq!(v.code, Some(403));
        assert_eq!(v.warnings, vec!["w"]);
        assert_eq!(v.audit_annotations["k"], "v");
        assert!(Verdict::accept().allowed);
        assert_eq!(
            Verdict::mutate(json!({"a": 1})).mutated_object,
            Some(json!({"a": 1}))
        );
    }
}
