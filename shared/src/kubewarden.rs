//! waPC glue (feature `kubewarden`): parse the payload, run a rule, answer in
//! Kubewarden's format. Policies register these and hold no logic of their own.
//!
//! A payload that cannot be read is *rejected with a message* (code 400), never turned
//! into a 500 "internal server error": with `failurePolicy: Fail` a 500 blocks every
//! deploy, with `Ignore` it lets everything through.

use crate::admission::{AdmissionRequest, Payload, ValidateSettings, Verdict};
use crate::cluster::{Cluster, ClusterRequest};
use kubewarden_policy_sdk::response::ValidationResponse;
use kubewarden_policy_sdk::settings::SettingsValidationResponse;
use kubewarden_policy_sdk::wapc_guest::{self, CallResult};
use serde::de::DeserializeOwned;
use std::collections::HashMap;

/// The `validate` entry point: runs `decide` on the request and the settings.
pub fn validate<S, F>(payload: &[u8], decide: F) -> CallResult
where
    S: DeserializeOwned,
    F: FnOnce(&AdmissionRequest, &S) -> Verdict,
{
    respond(evaluate(payload, decide))
}

/// Parses and decides, without serializing the answer (for native tests and benches).
pub fn evaluate<S, F>(payload: &[u8], decide: F) -> Verdict
where
    S: DeserializeOwned,
    F: FnOnce(&AdmissionRequest, &S) -> Verdict,
{
    match serde_json::from_slice::<Payload<S>>(payload) {
        Ok(p) => decide(&p.request, &p.settings),
        Err(e) => {
            Verdict::reject(format!("the admission request could not be read: {e}")).with_code(400)
        }
    }
}

/// The `validate_settings` entry point. Unknown fields and wrong types are reported
/// as invalid settings (with serde's message, which names the field), not as errors.
pub fn validate_settings<S>(payload: &[u8]) -> CallResult
where
    S: DeserializeOwned + ValidateSettings,
{
    let result = match serde_json::from_slice::<S>(payload) {
        Ok(settings) => settings.validate(),
        Err(e) => Err(format!("settings: {e}")),
    };
    let response = SettingsValidationResponse {
        valid: result.is_ok(),
        message: result.err(),
    };
    Ok(serde_json::to_vec(&response)?)
}

/// Serializes a verdict as Kubewarden's `ValidationResponse`.
pub fn respond(v: Verdict) -> CallResult {
    let response = ValidationResponse {
        accepted: v.allowed,
        message: v.message,
        code: v.code,
        mutated_object: v.mutated_object,
        audit_annotations: (!v.audit_annotations.is_empty())
            .then(|| v.audit_annotations.into_iter().collect::<HashMap<_, _>>()),
        warnings: (!v.warnings.is_empty()).then_some(v.warnings),
    };
    Ok(serde_json::to_vec(&response)?)
}

/// The cluster as seen through waPC host calls (binding `kubewarden`, namespace `kubernetes`).
pub struct HostCluster;

impl Cluster for HostCluster {
    fn call(&self, request: &ClusterRequest) -> Result<Vec<u8>, String> {
        wapc_guest::host_call(
            "kubewarden",
            "kubernetes",
            request.operation(),
            &request.payload(),
        )
        .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::{Value, json};

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct S {
        #[serde(default)]
        limit: u32,
    }

    impl ValidateSettings for S {
        fn validate(&self) -> Result<(), String> {
            if self.limit > 10 {
                Err("limit: must be at most 10".into())
            } else {
                Ok(())
            }
        }
    }

    fn settings(payload: Value) -> Value {
        serde_json::from_slice(&validate_settings::<S>(payload.to_string().as_bytes()).unwrap())
            .unwrap()
    }

    #[test]
    fn settings_valid_invalid_and_unknown() {
        assert_eq!(
            settings(json!({"limit": 3})),
            json!({"valid": true, "message": null})
        );
        assert_eq!(
            settings(json!({"limit": 30}))["message"],
            "limit: must be at most 10"
        );
        let unknown = settings(json!({"limt": 3}));
        assert_eq!(unknown["valid"], false);
        assert!(
            unknown["message"].as_str().unwrap().contains("limt"),
            "{unknown}"
        );
    }

    #[test]
    fn malformed_payload_is_a_rejection_not_an_error() {
        let out = validate::<S, _>(b"{not json", |_, _| Verdict::accept()).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["accepted"], false);
        assert_eq!(v["code"], 400);
        assert!(v["message"].as_str().unwrap().contains("could not be read"));
    }

    #[test]
    fn verdict_is_serialized_for_kubewarden() {
        let payload = json!({"request": {"uid": "1", "namespace": "ml"}, "settings": {}});
        let out = validate::<S, _>(payload.to_string().as_bytes(), |r, s| {
            Verdict::reject(format!("{} {}", r.namespace, s.limit))
                .with_warning("w")
                .with_audit("a", "b")
        })
        .unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v,
            json!({"accepted": false, "message": "ml 0", "code": null, "mutated_object": null,
                   "audit_annotations": {"a": "b"}, "warnings": ["w"]})
        );
    }
}
