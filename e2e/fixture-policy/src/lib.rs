//! A tiny Kubewarden policy whose only purpose is to prove the `gpu-e2e` harness.
//!
//! It exercises every path the harness has to handle: settings validation,
//! acceptance, rejection, mutation (JSONPatch) and a context-aware host call
//! (`kubewarden`/`kubernetes`/`get_resource`) that the harness serves from a
//! kwctl replay session.

use kubewarden_policy_sdk::wapc_guest as guest;
use kubewarden_policy_sdk::{
    accept_request, mutate_request, protocol_version_guest, reject_request,
    request::ValidationRequest, validate_settings,
};
use serde::Serialize;
use serde_json::Value;

use guest::prelude::*;

pub mod settings;

use settings::Settings;

/// The Namespace label that `lookupNamespace` requires.
pub const ALLOWED_LABEL: &str = "gpu-admission/allowed";

/// The waPC entry point: registers the three functions Kubewarden calls.
#[unsafe(no_mangle)]
pub extern "C" fn wapc_init() {
    register_function("validate", validate);
    register_function("validate_settings", validate_settings::<Settings>);
    register_function("protocol_version", protocol_version_guest);
}

/// The JSON the SDK's `host_capabilities::kubernetes::GetResourceRequest`
/// serializes to (SDK 0.17.3), built here so the policy does not need the
/// SDK's `cluster-context` feature (k8s-openapi).
#[derive(Serialize, Debug)]
struct GetResourceRequest<'a> {
    api_version: &'a str,
    kind: &'a str,
    name: &'a str,
    namespace: Option<&'a str>,
    disable_cache: bool,
    field_masks: Option<Vec<&'a str>>,
}

fn validate(payload: &[u8]) -> CallResult {
    let request = match ValidationRequest::<Settings>::new(payload) {
        Ok(r) => r,
        Err(e) => {
            return reject_request(
                Some(format!("invalid validation request: {e}")),
                Some(400),
                None,
                None,
            );
        }
    };
    match decide(
        &request.settings,
        &request.request.namespace,
        &request.request.object,
        read_namespace,
    ) {
        Decision::Accept => accept_request(),
        Decision::Reject(message) => reject_request(Some(message), None, None, None),
        Decision::Mutate(object) => mutate_request(object),
    }
}

/// What the policy decided for one request.
#[derive(Debug, PartialEq)]
pub enum Decision {
    /// Accept the object unchanged.
    Accept,
    /// Reject with this message.
    Reject(String),
    /// Accept the object with these changes.
    Mutate(Value),
}

/// The policy's logic, independent of waPC: `read_namespace` returns the
/// Namespace JSON (or the host's error text).
pub fn decide(
    settings: &Settings,
    namespace: &str,
    object: &Value,
    read_namespace: impl Fn(&str) -> Result<Vec<u8>, String>,
) -> Decision {
    if settings.lookup_namespace {
        if namespace.is_empty() {
            return Decision::Reject(
                "cannot read Namespace: the request has no namespace".to_string(),
            );
        }
        let raw = match read_namespace(namespace) {
            Ok(raw) => raw,
            Err(e) => return Decision::Reject(format!("cannot read Namespace {namespace}: {e}")),
        };
        let ns: Value = match serde_json::from_slice(&raw) {
            Ok(v) => v,
            Err(e) => {
                return Decision::Reject(format!(
                    "cannot read Namespace {namespace}: invalid JSON: {e}"
                ));
            }
        };
        let allowed = ns
            .pointer("/metadata/labels")
            .and_then(|labels| labels.get(ALLOWED_LABEL))
            .and_then(Value::as_str)
            == Some("true");
        if !allowed {
            return Decision::Reject(format!(
                "Namespace {namespace} is not labelled {ALLOWED_LABEL}=true"
            ));
        }
    }

    let labels = object
        .pointer("/metadata/labels")
        .and_then(Value::as_object);
    let has_label = |key: &str| labels.is_some_and(|l| l.contains_key(key));

    if let Some(required) = &settings.required_label
        && !has_label(required)
    {
        return Decision::Reject(format!("missing required label {required}"));
    }

    if let Some(add) = &settings.add_label
        && !has_label(&add.key)
    {
        return match with_label(object, &add.key, &add.value) {
            Ok(mutated) => Decision::Mutate(mutated),
            Err(e) => Decision::Reject(format!("cannot add a label: {e}")),
        };
    }

    Decision::Accept
}

/// `object` with `metadata.labels[key] = value`, creating the maps as needed.
fn with_label(object: &Value, key: &str, value: &str) -> Result<Value, &'static str> {
    let mut mutated = object.clone();
    let obj = mutated
        .as_object_mut()
        .ok_or("the object is not a JSON object")?;
    let metadata = obj
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    let metadata = metadata
        .as_object_mut()
        .ok_or("metadata is not a JSON object")?;
    let labels = metadata.entry("labels").or_insert(Value::Null);
    if labels.is_null() {
        *labels = Value::Object(Default::default());
    }
    labels
        .as_object_mut()
        .ok_or("metadata.labels is not a JSON object")?
        .insert(key.to_string(), Value::String(value.to_string()));
    Ok(mutated)
}

/// Reads a Namespace through the raw waPC host call the SDK's
/// `kubernetes::get_resource` makes.
fn read_namespace(name: &str) -> Result<Vec<u8>, String> {
    let req = GetResourceRequest {
        api_version: "v1",
        kind: "Namespace",
        name,
        namespace: None,
        disable_cache: false,
        field_masks: None,
    };
    let msg = serde_json::to_vec(&req).map_err(|e| e.to_string())?;
    guest::host_call("kubewarden", "kubernetes", "get_resource", &msg).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use settings::LabelToAdd;

    fn no_host(_: &str) -> Result<Vec<u8>, String> {
        panic!("no host call expected")
    }

    fn pod(labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": labels}})
    }

    #[test]
    fn accepts_by_default() {
        assert_eq!(
            decide(&Settings::default(), "ns", &pod(json!({})), no_host),
            Decision::Accept
        );
    }

    #[test]
    fn rejects_missing_required_label() {
        let s = Settings {
            required_label: Some("team".into()),
            ..Default::default()
        };
        assert_eq!(
            decide(&s, "ns", &pod(json!({"x": "y"})), no_host),
            Decision::Reject("missing required label team".into())
        );
        assert_eq!(
            decide(&s, "ns", &pod(json!({"team": "a"})), no_host),
            Decision::Accept
        );
    }

    #[test]
    fn adds_label_even_without_metadata() {
        let s = Settings {
            add_label: Some(LabelToAdd {
                key: "k".into(),
                value: "v".into(),
            }),
            ..Default::default()
        };
        assert_eq!(
            decide(&s, "ns", &json!({"kind": "Pod"}), no_host),
            Decision::Mutate(json!({"kind": "Pod", "metadata": {"labels": {"k": "v"}}}))
        );
        assert_eq!(
            decide(&s, "ns", &json!(3), no_host),
            Decision::Reject("cannot add a label: the object is not a JSON object".into())
        );
    }

    #[test]
    fn namespace_lookup() {
        let s = Settings {
            lookup_namespace: true,
            ..Default::default()
        };
        let allowed = |name: &str| {
            assert_eq!(name, "team-a");
            Ok(
                br#"{"metadata":{"name":"team-a","labels":{"gpu-admission/allowed":"true"}}}"#
                    .to_vec(),
            )
        };
        assert_eq!(
            decide(&s, "team-a", &pod(json!({})), allowed),
            Decision::Accept
        );
        let unlabelled = |_: &str| Ok(br#"{"metadata":{"name":"team-a"}}"#.to_vec());
        assert_eq!(
            decide(&s, "team-a", &pod(json!({})), unlabelled),
            Decision::Reject("Namespace team-a is not labelled gpu-admission/allowed=true".into())
        );
        let failing = |_: &str| Err("boom".to_string());
        assert_eq!(
            decide(&s, "team-a", &pod(json!({})), failing),
            Decision::Reject("cannot read Namespace team-a: boom".into())
        );
    }

    #[test]
    fn get_resource_request_matches_the_sdk_wire_format() {
        let req = GetResourceRequest {
            api_version: "v1",
            kind: "Namespace",
            name: "team-a",
            namespace: None,
            disable_cache: false,
            field_masks: None,
        };
        assert_eq!(
            serde_json::to_value(&req).unwrap(),
            json!({"api_version": "v1", "kind": "Namespace", "name": "team-a",
                   "namespace": null, "disable_cache": false, "field_masks": null})
        );
    }
}
