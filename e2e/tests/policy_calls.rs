//! The fixture policy through the harness: protocol, settings, accept, reject,
//! mutation and malformed input.

mod common;

use common::{assert_rejected_starting, fixture, request, settings};
use gpu_e2e::{AdmissionResponse, Policy, ValidationResponse, module_path};
use serde_json::{Value, json};

#[test]
fn protocol_version_is_v1() {
    assert_eq!(fixture().protocol_version().unwrap(), "v1");
}

#[test]
fn valid_settings() {
    for s in [
        json!({}),
        Value::Null,
        json!({"requiredLabel": "team"}),
        json!({"addLabel": {"key": "k", "value": ""}, "lookupNamespace": true}),
    ] {
        let v = fixture().validate_settings(&s).unwrap();
        assert!(v.valid, "{s}: {v:?}");
        assert_eq!(v.message, None);
    }
}

#[test]
fn invalid_settings_name_the_field() {
    let v = fixture()
        .validate_settings(&settings("settings_invalid.yml"))
        .unwrap();
    assert!(!v.valid);
    assert_eq!(
        v.message.as_deref(),
        Some("requiredLabel: must not be empty")
    );

    let v = fixture()
        .validate_settings(&json!({"addLabel": {"key": "", "value": "v"}}))
        .unwrap();
    assert!(!v.valid);
    assert_eq!(
        v.message.as_deref(),
        Some("addLabel.key: must not be empty")
    );
}

#[test]
fn unknown_settings_fields_are_invalid() {
    let v = fixture()
        .validate_settings(&json!({"requiredLabels": "team"}))
        .unwrap();
    assert!(!v.valid);
    let message = v.message.unwrap();
    assert!(
        message.starts_with("Error invoking settings validation callback:")
            && message.contains("unknown field `requiredLabels`"),
        "{message}"
    );
}

#[test]
fn accepts_without_settings() {
    let response = fixture()
        .validate(&request("pod_in_team_a.json"), &json!({}), None)
        .unwrap();
    assert_eq!(
        response,
        AdmissionResponse {
            uid: "1299d386-525b-4032-98ae-1949f69f9cfc".into(),
            allowed: true,
            ..Default::default()
        }
    );
}

#[test]
fn accepts_when_the_required_label_is_present() {
    let response = fixture()
        .validate(
            &request("pod_with_team_label.json"),
            &settings("settings_required_label.yml"),
            None,
        )
        .unwrap();
    assert!(response.allowed, "{response:?}");
    assert_eq!(response.uid, "8c2f5b8e-3d6a-4b1e-9f2c-7a1d0e5b4c3a");
    assert_eq!(response.status, None);
}

#[test]
fn rejects_with_message_and_echoes_uid() {
    let response = fixture()
        .validate(
            &request("pod_in_team_a.json"),
            &settings("settings_required_label.yml"),
            None,
        )
        .unwrap();
    assert!(!response.allowed);
    assert_eq!(response.uid, "1299d386-525b-4032-98ae-1949f69f9cfc");
    assert_eq!(response.message(), Some("missing required label team"));
    assert_eq!(response.code(), None);
    assert_eq!(response.patch, None);
    assert_eq!(
        serde_json::to_value(&response).unwrap(),
        json!({
            "uid": "1299d386-525b-4032-98ae-1949f69f9cfc",
            "allowed": false,
            "status": {"message": "missing required label team"},
            "auditAnnotations": null,
            "warnings": null
        })
    );
}

#[test]
fn mutation_becomes_a_json_patch() {
    let response = fixture()
        .validate(
            &request("pod_in_team_a.json"),
            &settings("settings_add_label.json"),
            None,
        )
        .unwrap();
    assert!(response.allowed);
    assert_eq!(response.patch_type.as_deref(), Some("JSONPatch"));
    assert_eq!(
        response.patch_ops().unwrap(),
        vec![
            json!({"op": "add", "path": "/metadata/labels/gpu-admission~1checked", "value": "true"})
        ]
    );
}

#[test]
fn mutation_creates_missing_labels_map() {
    // The AdmissionReview's pod has no labels at all.
    let response = fixture()
        .validate(
            &request("admission_review.json"),
            &settings("settings_add_label.json"),
            None,
        )
        .unwrap();
    assert_eq!(response.uid, "0d5d1c5e-2b7f-4c55-a3d8-6e9f0a1b2c3d");
    assert_eq!(
        response.patch_ops().unwrap(),
        vec![
            json!({"op": "add", "path": "/metadata/labels", "value": {"gpu-admission/checked": "true"}})
        ]
    );
}

#[test]
fn no_patch_when_the_label_is_already_there() {
    let mut req = request("pod_in_team_a.json");
    req["object"]["metadata"]["labels"]["gpu-admission/checked"] = json!("false");
    let response = fixture()
        .validate(&req, &settings("settings_add_label.json"), None)
        .unwrap();
    assert!(response.allowed);
    assert_eq!(response.patch, None);
    assert_eq!(response.patch_ops().unwrap(), Vec::<Value>::new());
}

#[test]
fn evaluations_are_isolated() {
    // The same Policy value evaluated repeatedly, alternating outcomes: a fresh
    // instance per call means no answer depends on the previous one.
    let policy = fixture();
    let req = request("pod_in_team_a.json");
    for _ in 0..3 {
        let rejected = policy
            .validate(&req, &settings("settings_required_label.yml"), None)
            .unwrap();
        assert!(!rejected.allowed);
        let mutated = policy
            .validate(&req, &settings("settings_add_label.json"), None)
            .unwrap();
        assert_eq!(mutated.patch_ops().unwrap().len(), 1);
    }
}

#[test]
fn malformed_request_is_rejected_not_a_panic() {
    let response = fixture()
        .validate(&json!("not an admission request"), &json!({}), None)
        .unwrap();
    assert_eq!(response.uid, "");
    assert_rejected_starting(&response, 400, "invalid validation request:");
}

#[test]
fn settings_of_the_wrong_type_are_rejected() {
    let response = fixture()
        .validate(
            &request("pod_in_team_a.json"),
            &json!({"requiredLabel": 42}),
            None,
        )
        .unwrap();
    assert!(!response.allowed);
    assert_eq!(response.uid, "1299d386-525b-4032-98ae-1949f69f9cfc");
    assert!(
        response
            .message()
            .unwrap()
            .contains("invalid type: integer `42`"),
        "{response:?}"
    );
}

#[test]
fn raw_non_json_payload_is_rejected() {
    let bytes = fixture().call("validate", b"\xff not json").unwrap();
    let response: ValidationResponse = serde_json::from_slice(&bytes).unwrap();
    assert!(!response.accepted);
    assert_eq!(response.code, Some(400));
    assert!(
        response
            .message
            .unwrap()
            .starts_with("invalid validation request:")
    );
}

#[test]
fn unknown_guest_function_is_an_error() {
    let err = fixture().call("no_such_function", b"{}").unwrap_err();
    assert!(format!("{err:#}").contains("no_such_function"), "{err:#}");
}

#[test]
fn missing_module_says_to_build() {
    let err = module_path("no-such-policy").unwrap_err().to_string();
    assert!(err.contains("no_such_policy.wasm"), "{err}");
    assert!(err.contains("make build"), "{err}");
    let err = Policy::load("/nonexistent/policy.wasm")
        .unwrap_err()
        .to_string();
    assert!(err.contains("make build"), "{err}");
}

#[test]
fn cached_loads_are_fast() {
    let path = module_path("fixture-policy").unwrap();
    let first = Policy::load(&path).unwrap();
    let second = Policy::load(&path).unwrap();
    eprintln!(
        "fixture-policy load: first {:?}, second {:?}",
        first.load_time(),
        second.load_time()
    );
    // The second load only reads and hashes the file.
    assert!(second.load_time() < std::time::Duration::from_millis(500));
    assert_eq!(second.protocol_version().unwrap(), "v1");
}
