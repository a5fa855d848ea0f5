//! `evaluate` with `pools[].reserve`: GPUs kept for a workload type deny other types
//! that would eat into them and take the reserved type; the settings check names the field.

use super::*;
use crate::admission::ValidateSettings;
use crate::pools::reserve::ReserveText;

/// `settings()` with pool a100 keeping `reserve` (merged into its JSON).
fn with_reserve(reserve: Value) -> Settings {
    let mut v = serde_json::to_value(settings()).unwrap();
    v["pools"][0]["reserve"] = reserve;
    serde_json::from_value(v).unwrap()
}

/// `s` with pool a100 keeping `headroom`.
fn with_headroom(mut s: Settings, headroom: &str) -> Settings {
    s.pools[0].headroom = Some(ReserveText(headroom.into()));
    s
}

/// Pods of pool a100: (workload type or "" for none, GPUs).
fn typed_pods(pods: &[(&str, u64)]) -> String {
    let items: Vec<Value> = pods
        .iter()
        .map(|(t, n)| {
            let labels = if t.is_empty() {
                json!({"gpu-admission/pool": "a100"})
            } else {
                json!({"gpu-admission/pool": "a100", "workload-type": t})
            };
            json!({"metadata": {"labels": labels},
                   "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": n.to_string()}}}]}})
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items}).to_string()
}

/// A Deployment of `replicas` pods of `gpus` each in pool a100, of `workload_type`.
fn typed_deployment(replicas: u64, gpus: &str, workload_type: &str) -> AdmissionRequest {
    let mut d = deployment(replicas, Some("a100"), gpus);
    d["spec"]["template"]["metadata"]["labels"]["workload-type"] = json!(workload_type);
    create(d)
}

/// [`run`] with `s` on `typed_deployment(replicas, "2", workload_type)` in [`cluster`].
fn run_typed(s: &Settings, replicas: u64, workload_type: &str) -> Verdict {
    run(
        &typed_deployment(replicas, "2", workload_type),
        s,
        &cluster(s),
    )
}

/// Pool a100 with `reserve`: 64 GPUs, 36 held by batch pods and 4 by interactive ones.
fn cluster(s: &Settings) -> Script {
    let pool = s.pool_named("a100").unwrap().1;
    Script::new(vec![
        (node_query(pool), Ok(nodes(&[8; 8]))),
        (
            pod_query("gpu-admission/pool", pool),
            Ok(typed_pods(&[
                ("batch", 32),
                ("batch", 4),
                ("interactive", 4),
            ])),
        ),
    ])
}

/// Pool a100 of [`cluster`] with `s`: `denied` (replicas x 2 GPUs, workload type) is denied
/// with `message`, its capacity note ending with `ending`; each of `accepted` is accepted.
#[rstest]
// 40 of 64 in use, limit 57 at 90%: 16 - 4 = 12 kept for interactive, 45 for batch. The
// same 8 GPUs for interactive work go into the reserve; batch work that stays out of the
// reserve is accepted.
#[case::batch_is_denied_by_the_interactive_reserve_and_interactive_is_accepted_into_it(
    with_reserve(json!({"interactive": 16})),
    (4, "batch"),
    "pool a100: 12 nvidia.com/gpu are kept for workload types interactive (16 reserved, 4 held by its pods); this workload (workload-type batch) may use 45 of the 57 under the threshold, 40 are in use, room for 5 more, it asks for 8. Wait for capacity, lower replicas, or target another pool.",
    "a100: reserve nvidia.com/gpu: 12 kept for interactive (16 reserved, 4 held by its pods) from workload-type batch, over",
    &[(4, "interactive"), (2, "batch")]
)]
// 40 of 64 in use, limit 57; a headroom of 10 leaves 47: 8 more would be 48.
#[case::a_headroom_keeps_gpus_free_for_everyone(
    with_headroom(settings(), "10"),
    (4, "interactive"),
    "pool a100: 10 nvidia.com/gpu are kept free as headroom against admissions that race on the same snapshot of the pool; this workload (workload-type interactive) may use 47 of the 57 under the threshold, 40 are in use, room for 7 more, it asks for 8. Wait for capacity, lower replicas, or target another pool.",
    "reserve nvidia.com/gpu: 10 kept (10 as headroom) from workload-type interactive, over",
    &[(3, "interactive")]
)]
fn what_eats_into_the_kept_gpus_is_denied(
    #[case] s: Settings,
    #[case] denied: (u64, &str),
    #[case] message: &str,
    #[case] ending: &str,
    #[case] accepted: &[(u64, &str)],
) {
    s.validate().unwrap();
    let v = run_typed(&s, denied.0, denied.1);
    denies_with_capacity(&v, message, ending);
    for (replicas, workload_type) in accepted {
        let v = run_typed(&s, *replicas, workload_type);
        assert!(v.allowed, "{v:?}");
    }
}

#[test]
fn a_workload_without_the_label_is_kept_out_of_every_reserve() {
    // 25% of 64 = 16 for interactive, 4 held: 12 kept from an unlabelled workload too.
    let s = with_reserve(json!({"interactive": "25%"}));
    s.validate().unwrap();
    let v = run(&create(deployment(4, Some("a100"), "2")), &s, &cluster(&s));
    denies_saying(&v, "this workload (no single workload-type) may use 45");
}

#[test]
fn a_filled_reserve_keeps_nothing() {
    // Interactive pods hold 20 of their 16: nothing is kept, batch sees the threshold only.
    let s = with_reserve(json!({"interactive": 16}));
    let pool = s.pool_named("a100").unwrap().1;
    let cluster = Script::new(vec![
        (node_query(pool), Ok(nodes(&[8; 8]))),
        (
            pod_query("gpu-admission/pool", pool),
            Ok(typed_pods(&[("batch", 20), ("interactive", 20)])),
        ),
    ]);
    let v = run(&typed_deployment(4, "2", "batch"), &s, &cluster);
    assert!(v.allowed, "{v:?}");
    assert!(!audit(&v, "capacity").contains("reserve"), "{v:?}");
}

#[test]
fn the_pod_list_of_a_pool_with_reserves_keeps_the_workload_type_label() {
    let s = with_reserve(json!({"interactive": 16}));
    assert!(pod_masks(&s.pools[0]).contains("metadata.labels.workload-type"));
    assert!(
        !pod_masks(&s.pools[1])
            .iter()
            .any(|m| m.starts_with("metadata"))
    );
}

/// The field masks of the list of every namespace's Pods that reads `pool`.
fn pod_masks(pool: &Pool) -> std::collections::BTreeSet<String> {
    let ClusterRequest::ListAll(list) = pod_query("gpu-admission/pool", pool) else {
        panic!("a list of every namespace");
    };
    list.field_masks.unwrap()
}

#[rstest]
#[case::zero(json!({"interactive": 0}), "pools[0].reserve.interactive: '0' must be a whole number of GPUs above 0")]
#[case::not_a_number(json!({"interactive": "lots"}), "pools[0].reserve.interactive: 'lots' must be a whole number")]
#[case::percent_over(json!({"interactive": "101%"}), "pools[0].reserve.interactive: '101%' must be a whole percent from 1% to 100%")]
#[case::percents_add_up(json!({"interactive": "60%", "serving": "50%"}), "pools[0].reserve: the percents reserved add up to 110%, more than the pool")]
#[case::bad_type(json!({"inter active": 4}), "pools[0].reserve.inter active: 'inter active' is not a valid label value")]
fn a_wrong_reserve_names_its_field(#[case] reserve: Value, #[case] message: &str) {
    fails_starting(with_reserve(reserve).validate(), message);
}

#[rstest]
#[case::headroom_at_the_threshold(json!({}), json!("90%"), "pools[0].headroom: 90% keeps 90% of the pool free, at or above what its highest threshold (90%) lets it hold (90%): no workload could ever be admitted; keep less free (e.g. 5%)")]
#[case::headroom_and_reserve_over_the_pool(json!({"interactive": "95%"}), json!("10%"), "pools[0].reserve: with the headroom (10%), the reserves keep 105% of the pool, more than the whole pool (100%): lower the reserves or the headroom")]
fn headroom_and_reserves_leave_room(
    #[case] reserve: Value,
    #[case] headroom: Value,
    #[case] message: &str,
) {
    let mut v = serde_json::to_value(with_reserve(reserve)).unwrap();
    v["pools"][0]["headroom"] = headroom;
    let s: Settings = serde_json::from_value(v).unwrap();
    assert_eq!(s.validate().unwrap_err().to_string(), message);
}

#[test]
fn a_reserve_needs_usage_from_pods() {
    let mut s = with_reserve(json!({"interactive": 16}));
    counted_from_quotas(&mut s);
    fails_starting(
        s.validate(),
        "pools[0].reserve: a reserve counts what each workload type holds from the pool's Pods",
    );
}

/// Pool a100 of `s` counted from ResourceQuotas (64 GPUs, priority class a100-high).
fn counted_from_quotas(s: &mut Settings) {
    s.pools[0].usage = Some(Usage::Quotas);
    s.pools[0].priority_classes = vec!["a100-high".into()];
    s.pools[0].capacity = Some(serde_json::from_value(json!({"nvidia.com/gpu": 64})).unwrap());
}

// -- reserves by schedule window, headroom, exceptions -----------------------------------

/// `settings()` with schedule `peak` (Mon-Fri 08:00-20:00 Berlin) and pool a100 keeping
/// 16 GPUs for interactive work in that window only.
fn peak_reserve() -> Settings {
    let mut v = serde_json::to_value(settings()).unwrap();
    v["schedules"] = json!({
        "peak": {"timeZone": "Europe/Berlin", "windows": [{"days": ["Mon", "Tue", "Wed", "Thu", "Fri"], "from": "08:00", "to": "20:00"}]}
    });
    v["pools"][0]["reserveWindows"] = json!([{"window": "peak", "reserve": {"interactive": 16}}]);
    let s: Settings = serde_json::from_value(v).unwrap();
    s.validate().unwrap();
    s
}

/// Tuesday 2026-12-01 at `hh:00` UTC (Berlin is UTC+1 in December).
fn tuesday(hh: i64) -> crate::clock::FixedClock {
    crate::clock::FixedClock(1_796_083_200 + hh * 3600)
}

fn run_at(req: &AdmissionRequest, s: &Settings, at: &crate::clock::FixedClock) -> Verdict {
    // Prepared as a host prepares settings that checked (exceptions end relative to `at`).
    let checked = CapacityGate::prepare(Box::new(s.clone())).unwrap();
    let cluster = cluster(s);
    let v = CapacityGate::evaluate_at(req, &checked, &cluster, at);
    assert!(cluster.done(), "host calls left unmade");
    v
}

#[rstest]
#[case::at_peak(9, false)]
#[case::before_peak(6, true)]
#[case::evening(19, true)]
fn a_window_reserve_keeps_gpus_at_peak_only(#[case] hh: i64, #[case] allowed: bool) {
    let s = peak_reserve();
    let batch = run_at(&typed_deployment(4, "2", "batch"), &s, &tuesday(hh));
    assert_eq!(batch.allowed, allowed, "{batch:?}");
    if !allowed {
        denies(
            &batch,
            "pool a100: 12 nvidia.com/gpu are kept for workload types interactive (16 reserved in window peak, 4 held by its pods); this workload (workload-type batch) may use 45 of the 57 under the threshold, 40 are in use, room for 5 more, it asks for 8. Wait for capacity, lower replicas, or target another pool.",
        );
    } else {
        assert!(!audit(&batch, "capacity").contains("reserve"), "{batch:?}");
    }
    // Interactive work goes into the reserve, at peak or not.
    assert!(run_at(&typed_deployment(4, "2", "interactive"), &s, &tuesday(hh)).allowed);
}

#[test]
fn the_first_window_that_holds_replaces_the_pools_reserve() {
    let mut s = peak_reserve();
    // Outside peak the pool's own reserve keeps 4 for serving; at peak the window's only.
    s.pools[0].reserve = serde_json::from_value(json!({"serving": 4})).unwrap();
    let off_peak = run_at(&typed_deployment(4, "2", "batch"), &s, &tuesday(6));
    notes(
        &off_peak,
        "capacity",
        "reserve nvidia.com/gpu: 4 kept for serving (4 reserved, 0 held by its pods) from workload-type batch, fits",
    );
    let peak = run_at(&typed_deployment(4, "2", "batch"), &s, &tuesday(9));
    assert!(!peak.allowed);
    assert!(!message(&peak).contains("serving"), "{peak:?}");
}

#[test]
fn a_headroom_adds_to_the_reserves_kept_from_other_types() {
    // 5% of 64 = 3 of headroom, 12 kept for interactive: batch may use 57 - 15 = 42.
    let s = with_headroom(with_reserve(json!({"interactive": 16})), "5%");
    s.validate().unwrap();
    let v = run_typed(&s, 2, "batch");
    denies_starting(
        &v,
        "pool a100: 15 nvidia.com/gpu are kept: 3 free as headroom against admissions that race on the same snapshot of the pool, 12 for workload types interactive (16 reserved, 4 held by its pods); this workload (workload-type batch) may use 42 of the 57",
    );
    notes_ending(
        &v,
        "capacity",
        "reserve nvidia.com/gpu: 15 kept (3 as headroom) for interactive (16 reserved, 4 held by its pods) from workload-type batch, over",
    );
    assert!(run_typed(&s, 1, "batch").allowed);
}

#[test]
fn an_exception_for_the_capacity_rule_excuses_a_reserve_denial() {
    let mut v = serde_json::to_value(with_reserve(json!({"interactive": 16}))).unwrap();
    v["exceptions"] = json!([{"name": "quarter-end", "namespaces": ["ml-batch"], "rules": ["capacity"],
        "owner": "ops@example.com", "reason": "quarter-end reports", "expires": "2099-01-31"}]);
    v["maxExceptionDays"] = json!(366);
    let s: Settings = serde_json::from_value(v).unwrap();
    let mut req = typed_deployment(4, "2", "batch");
    req.namespace = "ml-batch".into();
    let at = crate::clock::FixedClock(4_073_500_800 - 100 * 86_400); // 100 days before
    let verdict = run_at(&req, &s, &at);
    allows_noting(
        &verdict,
        crate::exceptions::AUDIT_EXCUSED,
        "kept for workload types interactive",
    );
    // Another namespace is still denied.
    assert!(!run_at(&typed_deployment(4, "2", "batch"), &s, &at).allowed);
}

#[rstest]
#[case::no_schedule(json!([{"window": "night", "reserve": {"interactive": 4}}]), "pools[0].reserveWindows[0].window: 'night' names no schedule")]
#[case::twice(json!([{"window": "peak", "reserve": {"interactive": 4}}, {"window": "peak", "reserve": {"serving": 4}}]), "pools[0].reserveWindows[1].window: 'peak' is listed twice")]
#[case::bad_amount(json!([{"window": "peak", "reserve": {"interactive": "1.5"}}]), "pools[0].reserveWindows[0].reserve.interactive: '1.5' must be a whole number")]
fn a_wrong_reserve_window_names_its_field(#[case] windows: Value, #[case] message: &str) {
    let mut s = peak_reserve();
    s.pools[0].reserve_windows = serde_json::from_value(windows).unwrap();
    fails_starting(s.validate(), message);
}

#[test]
fn a_wrong_headroom_names_its_field() {
    let mut s = settings();
    s.pools[1].headroom = Some(ReserveText("0".into()));
    fails_starting(
        s.validate(),
        "pools[1].headroom: '0' must be a whole number of GPUs above 0",
    );
    // An empty headroom, as forms send, is none.
    s.pools[1].headroom = Some(ReserveText(String::new()));
    s.validate().unwrap();
    assert!(s.pools[1].headroom().is_none());
}

#[test]
fn a_window_reserve_needs_usage_from_pods_and_lists_the_workload_type() {
    let mut s = peak_reserve();
    assert!(pod_masks(&s.pools[0]).contains("metadata.labels.workload-type"));
    counted_from_quotas(&mut s);
    fails_starting(s.validate(), "pools[0].reserveWindows: a reserve counts");
}
