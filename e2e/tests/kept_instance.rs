//! A kept instance (`Policy::instantiate`) evaluates request after request like fresh
//! ones do: same answers, its own replay session and host-call log per evaluation.

mod common;

use common::{fixture, request, session, settings};

#[test]
fn a_kept_instance_answers_like_fresh_instances_call_after_call() {
    let policy = fixture();
    let instance = policy.instantiate().unwrap();
    assert!(instance.instantiate_time() > std::time::Duration::ZERO);
    let lookup = settings("settings_lookup_namespace.yml");
    let pod = request("pod_in_team_a.json");
    for (file, allowed) in [
        ("session_namespace_allowed.yml", true),
        ("session_namespace_not_allowed.yml", false),
        ("session_namespace_allowed.yml", true),
    ] {
        let kept = instance
            .evaluate(&pod, &lookup, Some(session(file)))
            .unwrap();
        let fresh = policy.evaluate(&pod, &lookup, Some(session(file))).unwrap();
        assert_eq!(kept.response, fresh.response, "{file}");
        assert_eq!(kept.response.allowed, allowed, "{file}");
        assert_eq!(kept.host_calls, fresh.host_calls, "{file}");
        assert!(kept.unconsumed_exchanges.is_empty(), "{file}");
    }
}

#[test]
fn a_kept_instance_takes_raw_calls_and_reports_guest_errors() {
    let instance = fixture().instantiate().unwrap();
    let version = instance.call("protocol_version", &[], None).unwrap();
    assert_eq!(version, br#""v1""#);
    let err = instance.call("no_such_function", b"{}", None).unwrap_err();
    assert!(
        err.to_string()
            .contains("guest call no_such_function failed"),
        "{err:#}"
    );
    // Without a session, a context-aware evaluation fails its host call, as in a fresh instance.
    let response = instance
        .validate(
            &request("pod_in_team_a.json"),
            &settings("settings_lookup_namespace.yml"),
            None,
        )
        .unwrap();
    assert!(!response.allowed);
}
