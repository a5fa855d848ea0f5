//! Context-aware evaluations served from kwctl replay sessions.

mod common;

use std::collections::BTreeSet;

use common::{fixture, request, session, settings};
use gpu_e2e::{CallbackRequest, ContextAwareAccess, Evaluation, ReplaySession};
use serde_json::json;

fn lookup() -> serde_json::Value {
    settings("settings_lookup_namespace.yml")
}

/// The message `pod_in_team_a.json` is denied with, host calls answered from `session`.
fn denial_of_team_a(session: &str) -> String {
    let response = evaluate_team_a(session).response;
    assert!(!response.allowed, "{session}: allowed");
    response.message().unwrap_or_default().to_string()
}

/// The fixture on the Pod of team-a with the Namespace lookup settings, the Namespace read
/// from the session file.
fn evaluate_team_a(session_file: &str) -> Evaluation {
    fixture()
        .evaluate(
            &request("pod_in_team_a.json"),
            &lookup(),
            Some(session(session_file)),
        )
        .unwrap()
}

#[test]
fn success_exchange_with_allowed_namespace_accepts() {
    let evaluation = evaluate_team_a("session_namespace_allowed.yml");
    assert!(evaluation.response.allowed, "{:?}", evaluation.response);
    assert!(evaluation.unconsumed_exchanges.is_empty());
    assert_eq!(evaluation.host_calls.len(), 1);
    let call = &evaluation.host_calls[0];
    assert_eq!(call.target(), ("kubewarden", "kubernetes", "get_resource"));
    // The guest sent exactly what the SDK's GetResourceRequest serializes to.
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&call.payload).unwrap(),
        json!({"api_version": "v1", "kind": "Namespace", "name": "team-a",
               "namespace": null, "disable_cache": false, "field_masks": null})
    );
}

#[test]
fn success_exchange_with_unlabelled_namespace_rejects() {
    assert_eq!(
        denial_of_team_a("session_namespace_not_allowed.yml"),
        "Namespace team-a is not labelled gpu-admission/allowed=true"
    );
}

#[test]
fn error_exchange_rejects_with_the_recorded_text() {
    assert_eq!(
        denial_of_team_a("session_namespace_not_found.yml"),
        "cannot read Namespace team-a: Host error: Callback evaluation failure: Cannot find v1/Namespace named 'team-a' inside of namespace 'None'"
    );
}

#[test]
fn mismatched_request_gives_the_replay_error() {
    let evaluation = evaluate_team_a("session_other_namespace.yml");
    let message = evaluation.response.message().unwrap();
    assert!(
        message.starts_with("cannot read Namespace team-a: Host error: Callback evaluation failure: Replay error: unexpected request. Was expecting KubernetesGetResource"),
        "{message}"
    );
    // Both the recorded and the actual request are shown.
    assert!(message.contains(r#"name: "team-b""#), "{message}");
    assert!(message.contains(r#"got KubernetesGetResource { api_version: "v1", kind: "Namespace", name: "team-a", namespace: None, disable_cache: false, field_masks: None } instead"#), "{message}");
    // Like kwctl, the mismatched exchange is consumed.
    assert!(evaluation.unconsumed_exchanges.is_empty());
}

#[test]
fn exhausted_session_gives_the_empty_list_error() {
    assert_eq!(
        denial_of_team_a("session_empty.yml"),
        "cannot read Namespace team-a: Host error: Callback evaluation failure: the list of recorded responses is empty"
    );
}

#[test]
fn no_session_names_the_host_call() {
    let response = fixture()
        .validate(&request("pod_in_team_a.json"), &lookup(), None)
        .unwrap();
    assert_eq!(
        response.message(),
        Some(
            "cannot read Namespace team-a: Host error: no replay session: cannot serve host call kubewarden/kubernetes/get_resource"
        )
    );
}

#[test]
fn unconsumed_exchanges_are_reported() {
    let evaluation = evaluate_team_a("session_two_exchanges.yml");
    assert!(evaluation.response.allowed);
    assert_eq!(evaluation.unconsumed_exchanges.len(), 1);
    assert_eq!(
        evaluation.unconsumed_exchanges[0].request,
        CallbackRequest::KubernetesListResourceAll {
            api_version: "v1".into(),
            kind: "Node".into(),
            label_selector: Some("nvidia.com/gpu.present=true".into()),
            field_selector: None,
            field_masks: None,
        }
    );
}

#[test]
fn sessions_are_not_shared_between_evaluations() {
    // Each evaluation consumes its own copy of the session.
    let s = session("session_namespace_allowed.yml");
    for _ in 0..2 {
        let response = fixture()
            .validate(&request("pod_in_team_a.json"), &lookup(), Some(s.clone()))
            .unwrap();
        assert!(response.allowed, "{response:?}");
    }
    assert_eq!(s.len(), 1);
}

#[test]
fn resources_outside_the_allow_list_are_denied_before_replay() {
    let denied = fixture().with_context_aware_access(ContextAwareAccess::Only(BTreeSet::from([(
        "v1".to_string(),
        "Node".to_string(),
    )])));
    let evaluation = denied
        .evaluate(
            &request("pod_in_team_a.json"),
            &lookup(),
            Some(session("session_namespace_allowed.yml")),
        )
        .unwrap();
    assert_eq!(
        evaluation.response.message(),
        Some(
            "cannot read Namespace team-a: Host error: Policy has not been granted access to Kubernetes v1/Namespace resources. The violation has been reported."
        )
    );
    assert_eq!(evaluation.unconsumed_exchanges.len(), 1);
}

#[test]
fn session_files_round_trip() {
    let s = session("session_two_exchanges.yml");
    let again = ReplaySession::from_yaml_str(&s.to_yaml_string().unwrap()).unwrap();
    assert_eq!(s, again);
}
