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
        .evaluate(
            &request("pod_in_team_a.json"),
            &settings("settings_lookup_namespace.yml"),
            None,
        )
        .unwrap()
        .response;
    assert!(!response.allowed);
}

/// Every case of every policy (`test_data/cases.yml`), one after another on one kept
/// instance of the policy's module, then again in reverse order, answers as a fresh
/// instance does: what an instance keeps between requests (the settings it read last, the
/// arena its requests allocate from, tables built on first use) never changes an answer.
/// The settings change from case to case, as they do when a policy is reconfigured.
#[test]
fn every_case_of_every_policy_answers_alike_on_one_kept_instance() {
    for policy in common::cases::policies() {
        let module = common::built(&policy);
        let access = gpu_e2e::ContextAwareAccess::from_metadata(module.metadata());
        let module = module.with_context_aware_access(access);
        let cases = common::cases::read_cases(&policy).unwrap();
        let dir = common::cases::policies_dir().join(&policy);
        let inputs: Vec<_> = cases
            .iter()
            .map(|case| {
                let request = gpu_e2e::read_admission_request(dir.join(&case.request)).unwrap();
                let settings = case.settings.as_ref().map_or(serde_json::json!({}), |f| {
                    gpu_e2e::read_settings(dir.join(f)).unwrap()
                });
                (case, request, settings)
            })
            .collect();
        let session = |case: &common::cases::Case| {
            case.session
                .as_ref()
                .map(|f| gpu_e2e::ReplaySession::from_file(dir.join(f)).unwrap())
        };
        let fresh: Vec<_> = inputs
            .iter()
            .map(|(case, request, settings)| {
                module
                    .evaluate(request, settings, session(case))
                    .unwrap_or_else(|e| panic!("{}: {e:#}", case.label()))
            })
            .collect();
        let instance = module.instantiate().unwrap();
        let order = (0..inputs.len()).chain((0..inputs.len()).rev());
        for i in order {
            let (case, request, settings) = &inputs[i];
            let kept = instance
                .evaluate(request, settings, session(case))
                .unwrap_or_else(|e| panic!("{}: {e:#}", case.label()));
            assert_eq!(kept.response, fresh[i].response, "{}", case.label());
            assert_eq!(kept.host_calls, fresh[i].host_calls, "{}", case.label());
        }
    }
}
