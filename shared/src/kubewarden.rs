//! waPC glue (feature `kubewarden`): parse the payload, run a rule, answer in
//! Kubewarden's format. Policies register these and hold no logic of their own.
//!
//! A payload that cannot be read is *rejected with a message* (code 400), never turned
//! into a 500 "internal server error": with `failurePolicy: Fail` a 500 blocks every
//! deploy, with `Ignore` it lets everything through. A payload over the limits of
//! [`crate::limits`] is rejected before it is parsed (code 413). Messages about a field
//! name it (`settings.pools[0].name: invalid type...`).

use crate::admission::{AdmissionRequest, Payload, ValidateSettings, Verdict};
use crate::cluster::{Cluster, ClusterRequest, OciManifestConfig};
use crate::limits;
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
    if let Err(message) = limits::check_request(payload) {
        return Verdict::reject(message).with_code(413);
    }
    match serde_json::from_slice::<Payload<S>>(payload) {
        Ok(p) => decide(&p.request, &p.settings),
        Err(e) => Verdict::reject(format!(
            "the admission request could not be read: {}",
            read_error::<Payload<S>>(payload, &e)
        ))
        .with_code(400),
    }
}

/// serde_json's error `e` about `payload`, with the path of the field it is about
/// (`settings.exemptNamespaces: invalid type...`): serde_json itself gives only a line
/// and column. The path comes from reading the payload again with serde_path_to_error,
/// on this error path only, so a readable payload is parsed once. Nesting beyond
/// serde_json's recursion limit is said in words, without the path (`[0][0][0]...`).
fn read_error<T: DeserializeOwned>(payload: &[u8], e: &serde_json::Error) -> String {
    if e.to_string().starts_with("recursion limit exceeded") {
        return limits::too_deep_text(e.line(), e.column());
    }
    let mut deserializer = serde_json::Deserializer::from_slice(payload);
    let Err(located) = serde_path_to_error::deserialize::<_, T>(&mut deserializer) else {
        return e.to_string();
    };
    let inner = located.inner().to_string();
    let mut segments: Vec<_> = located.path().iter().collect();
    // "unknown field `x`" names the field itself: the path is where it was found.
    if inner.starts_with("unknown field") {
        segments.pop();
    }
    let mut path = String::new();
    for segment in segments {
        if !path.is_empty() && !matches!(segment, serde_path_to_error::Segment::Seq { .. }) {
            path.push('.');
        }
        path.push_str(&segment.to_string());
    }
    if path.is_empty() {
        inner
    } else {
        format!("{path}: {inner}")
    }
}

/// The `validate_settings` entry point. Unknown fields and wrong types are reported
/// as invalid settings (`settings: <field path>: <serde's message>`), not as errors;
/// so are settings over [`limits::MAX_SETTINGS_BYTES`], before they are parsed.
pub fn validate_settings<S>(payload: &[u8]) -> CallResult
where
    S: DeserializeOwned + ValidateSettings,
{
    let result = limits::check_settings(payload)
        .and_then(|()| {
            // serde reads a struct from a list too (its fields in order): `[]` would pass
            // as the defaults.
            if payload.trim_ascii_start().starts_with(b"[") {
                return Err("must be a map of settings, not a list".to_string());
            }
            serde_json::from_slice::<S>(payload).map_err(|e| read_error::<S>(payload, &e))
        })
        .map_err(|e| format!("settings: {e}"))
        .and_then(|settings| settings.validate());
    let response = SettingsValidationResponse {
        valid: result.is_ok(),
        message: result.err(),
    };
    Ok(serde_json::to_vec(&response)?)
}

/// Serializes a verdict as Kubewarden's `ValidationResponse`, its message cut to
/// [`limits::MAX_MESSAGE_BYTES`].
pub fn respond(v: Verdict) -> CallResult {
    let response = ValidationResponse {
        accepted: v.allowed,
        message: v.message.map(limits::cap_message),
        code: v.code,
        mutated_object: v.mutated_object,
        audit_annotations: (!v.audit_annotations.is_empty())
            .then(|| v.audit_annotations.into_iter().collect::<HashMap<_, _>>()),
        warnings: (!v.warnings.is_empty()).then_some(v.warnings),
    };
    Ok(serde_json::to_vec(&response)?)
}

pub use crate::policy::{
    GET_RESOURCE, LIST_RESOURCES_ALL, LIST_RESOURCES_BY_NAMESPACE, OCI_MANIFEST_CONFIG,
};
/// What [`crate::kubewarden_policy!`] expands to refers to these.
pub use kubewarden_policy_sdk::{protocol_version_guest, wapc_guest as guest};

/// A policy crate's whole code: registers `validate`, `validate_settings` and
/// `protocol_version` for the [`crate::policy::Policy`] `$policy`, with host calls limited
/// to its `HOST_CALLS`.
#[macro_export]
macro_rules! kubewarden_policy {
    ($policy:ty) => {
        #[unsafe(no_mangle)]
        pub extern "C" fn wapc_init() {
            $crate::kubewarden::guest::register_function("validate", validate);
            $crate::kubewarden::guest::register_function("validate_settings", validate_settings);
            $crate::kubewarden::guest::register_function(
                "protocol_version",
                $crate::kubewarden::protocol_version_guest,
            );
        }

        /// Decides one admission request.
        pub fn validate(payload: &[u8]) -> $crate::kubewarden::guest::CallResult {
            use $crate::policy::Policy;
            $crate::kubewarden::validate(
                payload,
                |request, settings: &<$policy as Policy>::Settings| {
                    <$policy>::evaluate(
                        request,
                        settings,
                        &$crate::kubewarden::HostCluster::<{ <$policy as Policy>::HOST_CALLS }>,
                    )
                },
            )
        }

        /// Checks the policy settings.
        pub fn validate_settings(payload: &[u8]) -> $crate::kubewarden::guest::CallResult {
            $crate::kubewarden::validate_settings::<<$policy as $crate::policy::Policy>::Settings>(
                payload,
            )
        }
    };
}

/// The cluster as seen through waPC host calls (binding `kubewarden`, namespaces
/// `kubernetes` and `oci`), limited to the operations in `OPS` (a set of the constants
/// above), the ones the policy's `metadata.yml` declares in `hostCapabilities`.
///
/// The operation names are written here, each behind its own `OPS` test, and not taken
/// from [`ClusterRequest::operation`]: a module then holds only the names of the
/// operations it can call. `kwctl annotate` finds a module's host capabilities by looking
/// for those names in its data, and warns about every one that `metadata.yml` does not
/// declare. A request for an operation outside `OPS` is answered as the host answers a
/// capability it does not grant, without calling it.
pub struct HostCluster<const OPS: u8>;

impl<const OPS: u8> Cluster for HostCluster<OPS> {
    fn call(&self, request: &ClusterRequest) -> Result<Vec<u8>, String> {
        let operation = match request {
            ClusterRequest::Get(_) if OPS & GET_RESOURCE != 0 => "get_resource",
            ClusterRequest::ListAll(_) if OPS & LIST_RESOURCES_ALL != 0 => "list_resources_all",
            ClusterRequest::ListInNamespace(_) if OPS & LIST_RESOURCES_BY_NAMESPACE != 0 => {
                "list_resources_by_namespace"
            }
            _ => {
                return Err(format!(
                    "this policy does not call the host to read {} this way",
                    request.what()
                ));
            }
        };
        wapc_guest::host_call("kubewarden", "kubernetes", operation, &request.payload())
            .map_err(|e| e.to_string())
    }

    fn oci_manifest_config(&self, request: &OciManifestConfig) -> Result<Vec<u8>, String> {
        if OPS & OCI_MANIFEST_CONFIG == 0 {
            return Err(format!(
                "this policy does not call the host to read the config of image {}",
                request.image
            ));
        }
        wapc_guest::host_call(
            "kubewarden",
            "oci",
            "v1/oci_manifest_config",
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
        assert_eq!(
            settings(json!([3]))["message"],
            "settings: must be a map of settings, not a list"
        );
        let unknown = settings(json!({"limt": 3}));
        assert_eq!(unknown["valid"], false);
        assert!(
            unknown["message"]
                .as_str()
                .unwrap()
                .starts_with("settings: unknown field `limt`, expected `limit`"),
            "{unknown}"
        );
        assert!(
            unknown["message"].as_str().unwrap().contains("limt"),
            "{unknown}"
        );
    }

    #[test]
    fn wrong_types_name_the_field() {
        let wrong = settings(json!({"limit": "three"}));
        assert_eq!(wrong["valid"], false);
        assert!(
            wrong["message"]
                .as_str()
                .unwrap()
                .starts_with("settings: limit: invalid type: string \"three\""),
            "{wrong}"
        );
        let out = validate::<S, _>(
            json!({"request": {"operation": "CREATE"}, "settings": {"limit": []}})
                .to_string()
                .as_bytes(),
            |_, _| Verdict::accept(),
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["code"], 400);
        assert!(
            v["message"].as_str().unwrap().starts_with(
                "the admission request could not be read: settings.limit: invalid type: sequence"
            ),
            "{v}"
        );
    }

    #[test]
    fn payloads_over_the_limits_are_413_before_parsing() {
        let mut big = br#"{"request": {}, "settings": {}}"#.to_vec();
        big.resize(limits::MAX_REQUEST_BYTES + 1, b' ');
        let decided = std::cell::Cell::new(false);
        let v = evaluate::<S, _>(&big, |_, _| {
            decided.set(true);
            Verdict::accept()
        });
        assert!(!v.allowed && !decided.get());
        assert_eq!(v.code, Some(413));
        assert!(
            v.message
                .unwrap()
                .starts_with("the admission request is 8.1 MiB;"),
            "over the byte limit"
        );
        let many = format!(
            r#"{{"request": {{"object": [{}]}}, "settings": {{}}}}"#,
            vec!["0"; limits::MAX_REQUEST_VALUES].join(",")
        );
        let v = evaluate::<S, _>(many.as_bytes(), |_, _| Verdict::accept());
        assert_eq!(v.code, Some(413));
        assert!(
            v.message.unwrap().contains("JSON values"),
            "over the value limit"
        );
        let mut big_settings = br#"{"limit": 1}"#.to_vec();
        big_settings.resize(limits::MAX_SETTINGS_BYTES + 1, b' ');
        let out: Value =
            serde_json::from_slice(&validate_settings::<S>(&big_settings).unwrap()).unwrap();
        assert_eq!(out["valid"], false);
        assert_eq!(
            out["message"],
            "settings: the settings are 1.1 MiB; gpu-admission policies read at most 1 MiB of settings"
        );
    }

    #[test]
    fn deep_nesting_is_a_rejection_that_says_so() {
        let deep = format!(
            r#"{{"request": {{"object": {}{}}}, "settings": {{}}}}"#,
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        let v = evaluate::<S, _>(deep.as_bytes(), |_, _| Verdict::accept());
        assert_eq!(v.code, Some(400));
        assert_eq!(
            v.message.unwrap(),
            "the admission request could not be read: its JSON is nested more than 127 levels deep (at line 1, column 149); gpu-admission policies read at most 127 levels"
        );
        // Typed settings stop at the first value of the wrong type, before the depth
        // matters; an untyped reader meets the recursion limit and says so.
        let out: Value =
            serde_json::from_slice(&validate_settings::<S>("[".repeat(10_000).as_bytes()).unwrap())
                .unwrap();
        assert_eq!(out["valid"], false);
        let deep = "[".repeat(10_000);
        let e = serde_json::from_str::<Value>(&deep).unwrap_err();
        assert!(
            read_error::<Value>(deep.as_bytes(), &e).starts_with(
                "its JSON is nested more than 127 levels deep (at line 1, column 128)"
            )
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
