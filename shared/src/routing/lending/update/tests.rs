//! Lending judged on the change, through the whole policy at fixed times: an UPDATE stays on
//! the lending pool outside the window only when the old object was there and no template
//! changed; a move onto it, or a change of a lent template, is denied with the reason.

use super::super::super::AUDIT_LENT;
use super::super::tests::{TUESDAY_NIGHT, TUESDAY_NOON, at, settings};
use super::{Stay, stay};
use crate::admission::{AdmissionRequest, Verdict};
use serde_json::{Value, json};

/// A batch Deployment whose template is routed to `pool` (its pool label, node selector,
/// priority class and, on pool interactive, its toleration), running `image`.
fn deployment(pool: &str, image: &str, replicas: u64) -> Value {
    let (class, tolerations) = if pool == "batch" {
        ("batch-low", json!([]))
    } else {
        (
            "interactive-guest",
            json!([{"key": "dedicated", "operator": "Equal", "value": "interactive", "effect": "NoSchedule"}]),
        )
    };
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "embed", "namespace": "ml"},
        "spec": {"replicas": replicas, "template": {
            "metadata": {"labels": {"workload-type": "batch", "gpu-admission/pool": pool}},
            "spec": {"containers": [{"name": "c", "image": image, "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                     "nodeSelector": {"gpu-admission/node-pool": pool}, "priorityClassName": class,
                     "tolerations": tolerations}}}})
}

fn update(new: Value, old: Value) -> AdmissionRequest {
    serde_json::from_value(json!({
        "uid": "u", "operation": "UPDATE", "namespace": "ml",
        "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "object": new, "oldObject": old
    }))
    .unwrap()
}

fn message(v: &Verdict) -> &str {
    v.message.as_deref().unwrap_or_default()
}

#[test]
fn the_stay_of_a_request() {
    let s = settings();
    let lent = deployment("interactive", "x:1", 2);
    assert_eq!(
        stay(
            &update(deployment("interactive", "x:1", 4), lent.clone()),
            &s
        ),
        Stay::Keep
    );
    assert_eq!(
        stay(
            &update(deployment("interactive", "x:2", 2), lent.clone()),
            &s
        ),
        Stay::Changed
    );
    assert_eq!(
        stay(&update(lent.clone(), deployment("batch", "x:1", 2)), &s),
        Stay::Moved
    );
    // An old object that cannot be read proves nothing.
    assert_eq!(
        stay(&update(lent.clone(), json!("garbage")), &s),
        Stay::Moved
    );
    let create: AdmissionRequest = serde_json::from_value(json!({
        "uid": "u", "operation": "CREATE", "namespace": "ml",
        "kind": {"group": "apps", "version": "v1", "kind": "Deployment"}, "object": lent
    }))
    .unwrap();
    assert_eq!(stay(&create, &s), Stay::New);
}

#[test]
fn a_move_onto_the_lending_pool_at_noon_is_denied_naming_the_window() {
    let r = update(
        deployment("interactive", "x:1", 2),
        deployment("batch", "x:1", 2),
    );
    let v = at(TUESDAY_NOON, &r);
    assert!(!v.allowed, "{v:?}");
    let m = message(&v);
    assert!(
        m.starts_with("spec.template.metadata.labels.gpu-admission/pool: names pool interactive, which lends its nodes to pool batch only during off-peak, closed at 2026-12-01T12:00:00Z; the object was not on pool interactive before this update: a workload joins a lending pool only while the window is open. Remove the label and the lending pool's nodeSelector, tolerations and priority class (the policy routes it to pool batch), or make the change while off-peak is open"),
        "{m}"
    );
    // The plain pool-label contradiction is not repeated.
    assert!(!m.contains("not set by hand"), "{m}");
    assert!(!v.audit_annotations.contains_key(AUDIT_LENT), "{v:?}");
    // The same move at night is lent by the open window.
    let v = at(TUESDAY_NIGHT, &r);
    assert!(v.allowed, "{v:?}");
    assert!(
        v.audit_annotations[AUDIT_LENT].contains("during off-peak, open at 2026-12-01T22:00:00Z")
    );
}

#[test]
fn a_lent_deployment_stays_at_noon_only_while_its_template_is_unchanged() {
    let lent = deployment("interactive", "x:1", 2);
    let scaled = at(
        TUESDAY_NOON,
        &update(deployment("interactive", "x:1", 8), lent.clone()),
    );
    assert!(scaled.allowed, "{scaled:?}");
    assert!(scaled.mutated_object.is_none(), "{scaled:?}");
    assert!(scaled.audit_annotations[AUDIT_LENT].contains("stays on pool interactive"));
    let rolled = at(
        TUESDAY_NOON,
        &update(deployment("interactive", "x:2", 2), lent.clone()),
    );
    assert!(!rolled.allowed, "{rolled:?}");
    assert!(
        message(&rolled).contains("; this update changes its pod template: a lent workload stays on pool interactive only while its template is unchanged, so that no new pod starts on the lender's nodes outside the window."),
        "{rolled:?}"
    );
    // At night the new template is lent again.
    let v = at(
        TUESDAY_NIGHT,
        &update(deployment("interactive", "x:2", 2), lent),
    );
    assert!(v.allowed, "{v:?}");
}
