//! Exceptions in gpu-labels-policy, rule by rule, at a fixed time.

use super::super::Settings;
use super::super::policy::Labels;
use crate::admission::{AdmissionRequest, ValidateSettings, Verdict};
use crate::clock::FixedClock;
use crate::cluster::NoCluster;
use crate::exceptions::{AUDIT_EXCUSED, AUDIT_KEY};
use crate::policy::{Policy, checked};
use crate::testing::{audit, denies, ends_saying, says, starts_saying};
use serde_json::{Value, json};

// 2026-12-01T00:00:00Z, a Tuesday.
const NOW: i64 = 1_796_083_200;

/// Settings with the serving and training rules on, and these exceptions.
fn settings(exceptions: Value) -> Settings {
    serde_json::from_value(json!({
        "workloadRules": {"activeDeadline": {"workloadTypes": ["batch"], "maxSeconds": 86400}},
        "exceptions": exceptions
    }))
    .unwrap()
}

/// One exception for namespace ml-lab, owned by alice, until the end of `expires`.
fn exception(rules: &[&str], expires: &str) -> Value {
    json!({"name": "lab", "namespaces": ["ml-lab"], "rules": rules, "owner": "alice",
           "reason": "OPS-1234", "expires": expires})
}

fn container(extra: Value) -> Value {
    let mut c = json!({"name": "main", "image": "x", "resources": {
        "limits": {"nvidia.com/gpu": "1", "cpu": "4", "memory": "16Gi"}}});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

fn pod(labels: Value, containers: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": labels},
           "spec": {"containers": containers}})
}

fn labelled() -> Value {
    json!({"workload-type": "interactive", "team": "ml"})
}

fn request(namespace: &str, object: Value) -> AdmissionRequest {
    serde_json::from_value(json!({
        "uid": "u", "operation": "CREATE", "namespace": namespace,
        "kind": {"group": "", "version": "v1", "kind": object["kind"]},
        "userInfo": {"username": "alice"}, "object": object
    }))
    .unwrap()
}

fn at(now: i64, namespace: &str, object: Value, settings: &Settings) -> Verdict {
    Labels::evaluate_at(
        &request(namespace, object),
        &checked::<Labels>(settings),
        &NoCluster,
        &FixedClock(now),
    )
}

/// A GPU pod without its labels: one requiredLabels problem per label.
fn unlabelled() -> Value {
    pod(json!({}), json!([container(json!({}))]))
}

/// A GPU request that is not a whole number and no labels: requiredLabels and gpuRequests.
fn unlabelled_half_gpu() -> Value {
    pod(
        json!({}),
        json!([{"name": "main", "image": "x", "resources": {
            "limits": {"nvidia.com/gpu": "500m", "cpu": "4", "memory": "16Gi"}}}]),
    )
}

const AUDIT: &str = "exception=lab owner=alice expires=2027-01-01T00:00:00Z";

#[test]
fn a_valid_exception_accepts_with_its_audit_and_what_it_excused() {
    let s = settings(json!([exception(&[], "2026-12-31")]));
    s.validate().unwrap();
    let v = at(NOW, "ml-lab", unlabelled(), &s);
    assert!(v.allowed, "{v:?}");
    assert_eq!(audit(&v, AUDIT_KEY), AUDIT);
    assert_eq!(
        audit(&v, AUDIT_EXCUSED),
        "Pod 'p' breaks the GPU admission rules (2 problems): 1) label 'workload-type' is missing (GPU pods must carry it): add workload-type: <one of interactive, batch, training> to metadata.labels; 2) label 'team' is missing (GPU pods must carry it): add team: <a non-empty value> to metadata.labels"
    );
    assert!(v.warnings.is_empty(), "{:?}", v.warnings);
    // Another namespace: the same pod is denied, and no exception is named.
    let other = at(NOW, "ml-prod", unlabelled(), &s);
    assert!(!other.allowed);
    assert!(other.audit_annotations.is_empty(), "{other:?}");
    assert!(!other.message.unwrap().contains("exception"));
    // A compliant pod needs no exception and gets no annotation.
    let fine = at(
        NOW,
        "ml-lab",
        pod(labelled(), json!([container(json!({}))])),
        &s,
    );
    assert!(
        fine.allowed && fine.audit_annotations.is_empty(),
        "{fine:?}"
    );
}

#[test]
fn only_the_rules_an_exception_names_are_excused() {
    let s = settings(json!([exception(&["requiredLabels"], "2026-12-31")]));
    let v = at(NOW, "ml-lab", unlabelled_half_gpu(), &s);
    denies(
        &v,
        "Pod 'p' breaks the GPU admission rules (1 problem): 1) container 'main' asks for nvidia.com/gpu: 500m, which is not a whole number: GPUs are whole devices, so ask for nvidia.com/gpu: 1 (for part of a GPU, use a MIG resource such as nvidia.com/mig-1g.10gb)",
    );
    // The denial still says which exception applied to what.
    assert_eq!(audit(&v, AUDIT_KEY), AUDIT);
    assert!(v.audit_annotations[AUDIT_EXCUSED].contains("(2 problems): 1) label 'workload-type'"));
    // A second exception for gpuRequests: both named, the pod accepted.
    let mut second = exception(&["gpuRequests"], "2026-12-15");
    second["name"] = json!("half-gpus");
    second["owner"] = json!("bob");
    let s = settings(json!([
        exception(&["requiredLabels"], "2026-12-31"),
        second
    ]));
    let v = at(NOW, "ml-lab", unlabelled_half_gpu(), &s);
    assert!(v.allowed, "{v:?}");
    assert_eq!(
        audit(&v, AUDIT_KEY),
        format!("{AUDIT}; exception=half-gpus owner=bob expires=2026-12-16T00:00:00Z")
    );
    assert!(
        v.audit_annotations[AUDIT_EXCUSED]
            .starts_with("Pod 'p' breaks the GPU admission rules (3 problems)")
    );
}

/// For each rule: a request whose one problem is of that rule.
fn one_problem_of(rule: &str) -> Value {
    match rule {
        "requiredLabels" => pod(json!({"team": "ml"}), json!([container(json!({}))])),
        "gpuRequests" => pod(
            labelled(),
            json!([{"name": "main", "image": "x", "resources": {
                "limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}}]),
        ),
        "gpuNodes" => json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "web", "image": "nginx"}],
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}}),
        "deviceAccess" => pod(
            labelled(),
            json!([container(json!({"securityContext": {"privileged": true}}))]),
        ),
        "workloadRules" => {
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
            "spec": {"template": {"metadata": {"labels": {"workload-type": "batch", "team": "ml"}},
                     "spec": {"restartPolicy": "Never", "containers": [container(json!({}))]}}}})
        }
        // The Namespace cannot be read (no cluster): a gpuAccess problem.
        "gpuAccess" => pod(labelled(), json!([container(json!({}))])),
        "gpuSharing" => pod(
            labelled(),
            json!([{"name": "main", "image": "x", "resources": {
                "limits": {"nvidia.com/gpu.shared": "1", "cpu": "1", "memory": "1Gi"}}}]),
        ),
        other => panic!("{other}"),
    }
}

/// [`settings`] with `rule` switched on where it is off by default.
fn settings_for(rule: &str, exceptions: Value) -> Settings {
    let mut s = settings(exceptions);
    match rule {
        "gpuAccess" => {
            s.gpu_access_label = Some(super::super::RequiredLabel::present("gpu-access"));
        }
        "gpuSharing" => s.gpu_sharing.enabled = true,
        _ => {}
    }
    s
}

#[test]
fn each_rule_is_excused_by_its_name_and_by_no_other() {
    for rule in super::super::RULE_NAMES {
        let object = one_problem_of(rule);
        let plain = at(
            NOW,
            "ml-lab",
            object.clone(),
            &settings_for(rule, json!([])),
        );
        assert!(!plain.allowed, "{rule}: {plain:?}");
        assert!(
            plain.message.as_deref().unwrap().contains("(1 problem)"),
            "{rule}: {:?}",
            plain.message
        );
        let own = at(
            NOW,
            "ml-lab",
            object.clone(),
            &settings_for(rule, json!([exception(&[rule], "2026-12-31")])),
        );
        assert!(own.allowed, "{rule}: {own:?}");
        assert_eq!(audit(&own, AUDIT_KEY), AUDIT, "{rule}");
        for other in super::super::RULE_NAMES.iter().filter(|r| **r != rule) {
            let v = at(
                NOW,
                "ml-lab",
                object.clone(),
                &settings_for(rule, json!([exception(&[other], "2026-12-31")])),
            );
            assert!(!v.allowed, "{rule} excused by {other}");
            assert_eq!(v.message, plain.message, "{rule} / {other}");
        }
    }
}

#[test]
fn near_its_end_it_warns_after_the_other_warnings() {
    let s = settings(json!([exception(&[], "2026-12-03")]));
    let mut object = unlabelled();
    // envFrom on a GPU pod: the policy's own warning comes first.
    object["spec"]["containers"][0]["envFrom"] = json!([{"configMapRef": {"name": "env"}}]);
    let v = at(NOW, "ml-lab", object, &s);
    assert!(v.allowed, "{v:?}");
    assert_eq!(v.warnings.len(), 2, "{:?}", v.warnings);
    assert!(v.warnings[0].contains("envFrom"), "{:?}", v.warnings);
    assert_eq!(
        v.warnings[1],
        "exception lab (owner alice) ends 2026-12-04T00:00:00Z (in 3 days); renew it or fix the workload before then"
    );
    // Its last second still applies; the next one it has expired.
    let last = NOW + 3 * 86_400 - 1; // 2026-12-03T23:59:59Z
    assert!(at(last, "ml-lab", unlabelled(), &s).allowed);
    let late = at(last + 1, "ml-lab", unlabelled(), &s);
    assert!(!late.allowed);
}

#[test]
fn after_its_end_the_denial_says_it_expired() {
    let s = settings(json!([exception(&["requiredLabels"], "2026-11-20")]));
    s.validate().unwrap();
    let v = at(NOW, "ml-lab", unlabelled(), &s);
    assert!(!v.allowed);
    starts_saying(
        &v,
        "Pod 'p' breaks the GPU admission rules (2 problems): 1) label 'workload-type' is missing",
    );
    ends_saying(
        &v,
        " (exception lab (owner alice) expired at 2026-11-21T00:00:00Z; renew it or fix the workload)",
    );
    assert!(v.audit_annotations.is_empty(), "{:?}", v.audit_annotations);
    // Expired for requiredLabels, nothing for gpuRequests: the note follows the problems
    // it covered, once.
    let v = at(NOW, "ml-lab", unlabelled_half_gpu(), &s);
    assert_eq!(
        v.message
            .as_deref()
            .unwrap()
            .matches("expired at 2026-11-21T00:00:00Z")
            .count(),
        1
    );
    // A live exception wins over the expired one.
    let mut live = exception(&["requiredLabels"], "2026-12-31");
    live["name"] = json!("lab-renewed");
    let s = settings(json!([exception(&["requiredLabels"], "2026-11-20"), live]));
    let v = at(NOW, "ml-lab", unlabelled(), &s);
    assert!(v.allowed);
    assert!(v.audit_annotations[AUDIT_KEY].starts_with("exception=lab-renewed "));
}

#[test]
fn two_expired_exceptions_are_both_named() {
    let mut bob = exception(&["gpuRequests"], "2026-11-25");
    bob["name"] = json!("half-gpus");
    bob["owner"] = json!("bob");
    let s = settings(json!([exception(&["requiredLabels"], "2026-11-20"), bob]));
    let v = at(NOW, "ml-lab", unlabelled_half_gpu(), &s);
    ends_saying(
        &v,
        " (exception lab (owner alice) expired at 2026-11-21T00:00:00Z; exception half-gpus (owner bob) expired at 2026-11-26T00:00:00Z; renew them or fix the workload)",
    );
}

#[test]
fn uncountable_or_unreadable_gpus_are_never_excused() {
    let s = settings(json!([exception(&[], "2026-12-31")]));
    for limits in [
        json!({"nvidia.com/gpu": "-1"}),
        json!({"nvidia.com/gpu": "lots"}),
    ] {
        let object = pod(
            labelled(),
            json!([{"name": "main", "image": "x", "resources": {"limits": limits}}]),
        );
        let v = at(NOW, "ml-lab", object, &s);
        assert!(!v.allowed, "{limits}: {v:?}");
        says(&v, "invalid nvidia.com/gpu quantity");
    }
    let debug = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": labelled()},
        "spec": {"containers": [container(json!({}))],
                 "ephemeralContainers": [{"name": "debug", "image": "x",
                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}});
    assert!(!at(NOW, "ml-lab", debug, &s).allowed);
}

#[test]
fn a_selector_must_match_every_template() {
    let mut e = exception(&["requiredLabels"], "2026-12-31");
    e["selector"] = json!({"matchLabels": {"app": "trainer"}});
    let s = settings(json!([e]));
    let trainer = pod(json!({"app": "trainer"}), json!([container(json!({}))]));
    assert!(at(NOW, "ml-lab", trainer, &s).allowed);
    let web = pod(json!({"app": "web"}), json!([container(json!({}))]));
    assert!(!at(NOW, "ml-lab", web, &s).allowed);
}

#[test]
fn a_claim_template_over_max_gpus_per_pod_is_excused_as_gpu_requests() {
    let template = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "big"},
        "spec": {"spec": {"devices": {"requests": [{"name": "g", "exactly": {
            "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 16}}]}}}});
    let mut s = settings(json!([exception(&["gpuRequests"], "2026-12-31")]));
    s.max_gpus_per_pod = Some(8);
    let v = at(NOW, "ml-lab", template.clone(), &s);
    assert!(v.allowed, "{v:?}");
    assert_eq!(audit(&v, AUDIT_KEY), AUDIT);
    s.exceptions = settings(json!([exception(&["requiredLabels"], "2026-12-31")])).exceptions;
    assert!(!at(NOW, "ml-lab", template, &s).allowed);
}

#[test]
fn an_unchanged_update_keeps_only_what_is_not_excused() {
    let s = settings(json!([exception(&["requiredLabels"], "2026-12-31")]));
    let object = unlabelled_half_gpu();
    let r: AdmissionRequest = serde_json::from_value(json!({
        "uid": "u", "operation": "UPDATE", "namespace": "ml-lab",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "object": object, "oldObject": object
    }))
    .unwrap();
    let v = Labels::evaluate_at(&r, &checked::<Labels>(&s), &NoCluster, &FixedClock(NOW));
    assert!(v.allowed);
    assert!(v.warnings[0].contains("(1 problem)"), "{:?}", v.warnings);
    assert_eq!(audit(&v, AUDIT_KEY), AUDIT);
}

#[test]
fn malformed_exceptions_are_refused_by_settings_validation_naming_the_field() {
    for (exceptions, max_days, says) in [
        (
            json!([{"name": "lab", "namespaces": ["ml-lab"], "reason": "r", "expires": "2026-12-31"}]),
            90,
            "exceptions[0].owner: exception 'lab' has no owner; say who answers for it (a person or team)",
        ),
        (
            json!([{"name": "lab", "namespaces": ["ml-lab"], "owner": "alice"}]),
            90,
            "exceptions[0].expires: exception 'lab' has no end date; give one (YYYY-MM-DD, at most 90 days ahead)",
        ),
        (
            json!([exception(&["maxGpusPerPod"], "2026-12-31")]),
            90,
            "exceptions[0].rules[0]: 'maxGpusPerPod' is not a rule of this policy; use one of requiredLabels, gpuRequests, gpuNodes, deviceAccess, workloadRules, gpuAccess, gpuSharing",
        ),
        (
            json!([exception(&[], "2099-01-31")]),
            90,
            "exceptions[0].expires: 2099-01-31 is more than 90 days (maxExceptionDays) from now (",
        ),
        (
            json!([exception(&[], "31/12/2026")]),
            90,
            "exceptions[0].expires: '31/12/2026' is not a date (YYYY-MM-DD) or an RFC 3339 time (2027-01-31T18:00:00Z)",
        ),
        (
            json!([{"name": "all", "owner": "alice", "expires": "2026-12-31"}]),
            90,
            "exceptions[0]: exception 'all' names no namespaces and no selector, so it would cover every workload; list namespaces or give a selector",
        ),
        (json!([]), 0, "maxExceptionDays: 0 is not from 1 to 366"),
        (json!([]), 400, "maxExceptionDays: 400 is not from 1 to 366"),
    ] {
        let mut s = settings(exceptions);
        s.max_exception_days = max_days;
        let err = s.validate().unwrap_err().to_string();
        assert!(err.starts_with(says), "{err}");
    }
    let typo: Result<Settings, _> =
        serde_json::from_value(json!({"exceptions": [{"name": "lab", "owners": "alice"}]}));
    assert!(
        typo.unwrap_err()
            .to_string()
            .contains("unknown field `owners`")
    );
}

#[test]
fn exceptions_that_did_not_validate_are_ignored_at_admission() {
    // Settings validation refuses them first; evaluated anyway, they excuse nothing.
    // The rules on the settings as read (the policy's checked form), without the check.
    let s = settings(json!([{"name": "lab", "namespaces": ["ml-lab"], "expires": "2026-12-31"}]));
    assert!(Labels::check(Box::new(s.clone())).is_err());
    let r = request("ml-lab", unlabelled());
    assert!(!Labels::evaluate_at(&r, &s, &NoCluster, &FixedClock(NOW)).allowed);
}
