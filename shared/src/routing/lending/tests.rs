//! Lending through the whole policy, at fixed times.
use super::super::AUDIT_LENT;
use super::super::policy::Routing;
use super::super::settings::Settings;
use crate::admission::{AdmissionRequest, ValidateSettings, Verdict};
use crate::clock::FixedClock;
use crate::cluster::NoCluster;
use crate::policy::{Policy, checked};
use serde_json::{Value, json};

// 2026-12-01 is a Tuesday.
pub(crate) const TUESDAY_NOON: i64 = 1_796_126_400; // 12:00 UTC
pub(crate) const TUESDAY_NIGHT: i64 = 1_796_162_400; // 22:00 UTC

/// Pool interactive lends its nodes to pool batch off-peak (20:00 to 07:00 UTC on weekdays).
pub(crate) fn settings() -> Settings {
    let s: Settings = serde_json::from_value(json!({
        "schedules": {"off-peak": {"timeZone": "UTC", "windows": [
            {"days": ["Mon", "Tue", "Wed", "Thu", "Fri"], "from": "20:00", "to": "07:00"}]}},
        "pools": [
            {"name": "batch", "selector": {"matchLabels": {"workload-type": "batch"}},
             "nodeSelector": {"gpu-admission/node-pool": "batch"},
             "priorityClassName": "batch-low"},
            {"name": "interactive", "selector": {"matchLabels": {"workload-type": "interactive"}},
             "nodeSelector": {"gpu-admission/node-pool": "interactive"},
             "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "interactive", "effect": "NoSchedule"}],
             "priorityClassName": "interactive-high",
             "lendTo": [{"pool": "batch", "window": "off-peak"}],
             "guestPriorityClassName": "interactive-guest"}
        ]
    }))
    .unwrap();
    s.validate().unwrap();
    s
}

fn job(labels: Value) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "ml"},
           "spec": {"template": {"metadata": {"labels": labels}, "spec": {
               "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}})
}

fn request(operation: &str, object: Value, old: Value) -> AdmissionRequest {
    serde_json::from_value(json!({
        "uid": "u", "operation": operation, "namespace": "ml",
        "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "object": object, "oldObject": old
    }))
    .unwrap()
}

/// The whole policy's verdict on `r` at `now`, with [`settings`].
pub(crate) fn at(now: i64, r: &AdmissionRequest) -> Verdict {
    Routing::evaluate_at(
        r,
        &checked::<Routing>(&settings()),
        &NoCluster,
        &FixedClock(now),
    )
}

/// The verdict on creating a [`job`] with `labels` at `now`.
fn create_at(now: i64, labels: Value) -> Verdict {
    at(now, &request("CREATE", job(labels), Value::Null))
}

fn template_of(v: &Verdict) -> Value {
    v.mutated_object.as_ref().expect("a mutation")["spec"]["template"].clone()
}

#[test]
fn off_peak_batch_goes_to_the_lending_pool() {
    let v = create_at(TUESDAY_NIGHT, json!({"workload-type": "batch"}));
    assert!(v.allowed);
    let t = template_of(&v);
    assert_eq!(t["metadata"]["labels"]["gpu-admission/pool"], "interactive");
    assert_eq!(
        t["spec"]["nodeSelector"]["gpu-admission/node-pool"],
        "interactive"
    );
    assert_eq!(t["spec"]["tolerations"][0]["value"], "interactive");
    assert_eq!(t["spec"]["priorityClassName"], "interactive-guest");
    assert_eq!(
        v.audit_annotations.get(AUDIT_LENT).map(String::as_str),
        Some(
            "spec.template.spec: pool interactive lends its nodes to pool batch during off-peak, open at 2026-12-01T22:00:00Z"
        )
    );
}

/// A workload that is not lent: its own pool and priority class, no lending annotation.
#[rstest::rstest]
#[case::at_peak_batch_stays_in_its_own_pool(TUESDAY_NOON, "batch", "batch-low")]
#[case::interactive_work_is_never_lent(TUESDAY_NIGHT, "interactive", "interactive-high")]
fn not_lent(#[case] now: i64, #[case] workload_type: &str, #[case] priority_class: &str) {
    let v = create_at(now, json!({ "workload-type": workload_type }));
    let t = template_of(&v);
    assert_eq!(t["metadata"]["labels"]["gpu-admission/pool"], workload_type);
    assert_eq!(t["spec"]["priorityClassName"], priority_class);
    assert!(!v.audit_annotations.contains_key(AUDIT_LENT));
}

#[test]
fn a_lent_workload_is_left_alone_when_updated_after_the_window() {
    let lent = template_of(&create_at(TUESDAY_NIGHT, json!({"workload-type": "batch"})));
    let mut object = job(json!({}));
    object["spec"]["template"] = lent;
    let v = at(
        TUESDAY_NOON,
        &request("UPDATE", object.clone(), object.clone()),
    );
    assert!(v.allowed);
    assert!(v.mutated_object.is_none(), "idempotent: {v:?}");
    assert!(v.audit_annotations[AUDIT_LENT].contains("stays on pool interactive"));
    // Created outside the window, the same template naming the lender is not lent.
    let v = at(TUESDAY_NOON, &request("CREATE", object, Value::Null));
    assert!(!v.allowed, "{v:?}");
}

#[test]
fn a_pool_label_naming_the_own_pool_opts_out() {
    let v = create_at(
        TUESDAY_NIGHT,
        json!({"workload-type": "batch", "gpu-admission/pool": "batch"}),
    );
    let t = template_of(&v);
    assert_eq!(
        t["spec"]["nodeSelector"]["gpu-admission/node-pool"],
        "batch"
    );
}

#[test]
fn lending_settings_are_validated_by_field() {
    for (patch, says) in [
        (
            json!({"pool": "interactive", "window": "off-peak"}),
            "pools[1].lendTo[0].pool: a pool cannot lend to itself",
        ),
        (
            json!({"pool": "gpu", "window": "off-peak"}),
            "pools[1].lendTo[0].pool: 'gpu' names no pool; use one of batch",
        ),
        (
            json!({"pool": "batch", "window": "nights"}),
            "pools[1].lendTo[0].window: 'nights' names no schedule; define it under schedules (defined: off-peak)",
        ),
    ] {
        let mut v = serde_json::to_value(settings()).unwrap();
        v["pools"][1]["lendTo"] = json!([patch]);
        let s: Settings = serde_json::from_value(v).unwrap();
        assert_eq!(s.validate().unwrap_err().to_string(), says);
    }
    let mut v = serde_json::to_value(settings()).unwrap();
    v["schedules"]["off-peak"]["windows"][0]["from"] = json!("25:00");
    let s: Settings = serde_json::from_value(v).unwrap();
    assert!(
        s.validate()
            .unwrap_err()
            .to_string()
            .starts_with("schedules.off-peak.windows[0].from: '25:00'")
    );
}

/// The Job a CronJob creates, and the ReplicaSet a Deployment creates, copy a template
/// that was lent when their owner was admitted: created after the window has closed, they
/// stay on the lending pool (denying them would stop the CronJob or the rollout).
#[test]
fn objects_a_controller_creates_from_a_lent_template_stay_after_the_window() {
    let lent = template_of(&create_at(TUESDAY_NIGHT, json!({"workload-type": "batch"})));
    let mut owned = job(json!({}));
    owned["spec"]["template"] = lent.clone();
    owned["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "CronJob",
        "name": "nightly", "uid": "c", "controller": true}]);
    let v = at(TUESDAY_NOON, &request("CREATE", owned.clone(), Value::Null));
    assert!(v.allowed, "{v:?}");
    assert!(v.mutated_object.is_none(), "{v:?}");
    assert!(v.audit_annotations[AUDIT_LENT].contains("stays on pool interactive"));
    let mut rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "embed-5d8f", "namespace": "ml", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "embed", "uid": "d", "controller": true}]},
        "spec": {"replicas": 2, "template": lent}});
    let r: AdmissionRequest = serde_json::from_value(json!({
        "uid": "u", "operation": "CREATE", "namespace": "ml",
        "kind": {"group": "apps", "version": "v1", "kind": "ReplicaSet"}, "object": rs
    }))
    .unwrap();
    let v = at(TUESDAY_NOON, &r);
    assert!(v.allowed, "{v:?}");
    assert!(v.mutated_object.is_none() && v.warnings.is_empty(), "{v:?}");
    // Without a controller, the same template created outside the window is not lent.
    rs = r.object.clone();
    rs["metadata"]["ownerReferences"] = json!([]);
    let r = AdmissionRequest { object: rs, ..r };
    assert!(!at(TUESDAY_NOON, &r).allowed);
}

/// A bare Pod gets no priority class (its priority is resolved before webhooks run): the
/// warning names the guest class it should set, not the lending pool's own (which the
/// guest pool does not allow).
#[test]
fn a_lent_bare_pod_is_told_the_guest_priority_class() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml", "labels": {"workload-type": "batch"}},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}});
    let r: AdmissionRequest = serde_json::from_value(json!({
        "uid": "u", "operation": "CREATE", "namespace": "ml",
        "kind": {"group": "", "version": "v1", "kind": "Pod"}, "object": pod
    }))
    .unwrap();
    let v = at(TUESDAY_NIGHT, &r);
    assert_eq!(
        v.warnings,
        vec![
            "spec.priorityClassName: pool interactive runs guests from pool batch with priority class interactive-guest, but a Pod's priority is resolved before this policy runs, so it is not set on a bare Pod; set spec.priorityClassName: interactive-guest (Pods of routed Deployments, Jobs and other controllers already carry it)"
        ]
    );
    // Following the advice is accepted; the lending pool's own class is not.
    let mut told = r.object.clone();
    told["spec"]["priorityClassName"] = json!("interactive-guest");
    let ok = AdmissionRequest {
        object: told.clone(),
        ..r.clone()
    };
    assert!(at(TUESDAY_NIGHT, &ok).allowed);
    told["spec"]["priorityClassName"] = json!("interactive-high");
    let own = AdmissionRequest {
        object: told,
        ..r.clone()
    };
    assert!(!at(TUESDAY_NIGHT, &own).allowed);
    // At peak it joins its own pool and is told its own pool's class.
    let v = at(TUESDAY_NOON, &r);
    assert!(v.warnings[0].starts_with(
        "spec.priorityClassName: pool batch runs its workloads with priority class batch-low"
    ));
}
