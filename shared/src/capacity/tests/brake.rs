//! `evaluate` with `burstBrakes` and `pools[].sustained`: what the pool's Pod list says of
//! when its pods were created, at a fixed time.

use super::*;
use crate::admission::ValidateSettings;
use crate::capacity::timeline;
use crate::clock::{FixedClock, rfc3339};
use crate::cluster::namespace_request;

/// 2026-12-01T00:00:00Z.
const NOW: i64 = 1_796_083_200;

/// `settings()` with `fields` merged in (and into pool a100 under `pool`).
fn with(fields: Value, pool: Value) -> Settings {
    let mut v = serde_json::to_value(settings()).unwrap();
    for (k, x) in fields.as_object().unwrap() {
        v[k] = x.clone();
    }
    for (k, x) in pool.as_object().unwrap() {
        v["pools"][0][k] = x.clone();
    }
    serde_json::from_value(v).unwrap()
}

fn brakes() -> Settings {
    with(
        json!({"burstBrakes": {"perNamespace": {"gpus": 32, "per": "10m"},
                               "perTeam": {"gpus": 48, "per": "10m"}}}),
        json!({}),
    )
}

/// Pods of pool a100: (namespace, team label or "", GPUs, created seconds before NOW).
/// Those of namespace ml belong to Deployment llm, those of ml-b to Job train; the others
/// have no owner.
fn timed_pods(pods: &[(&str, &str, u64, i64)]) -> String {
    let items: Vec<Value> = pods
        .iter()
        .enumerate()
        .map(|(i, (ns, team, n, ago))| {
            let mut labels = json!({"gpu-admission/pool": "a100"});
            if !team.is_empty() {
                labels["gpu-admission/team"] = json!(team);
            }
            let owners = match *ns {
                "ml" => {
                    labels["pod-template-hash"] = json!("5c6f7");
                    json!([{"kind": "ReplicaSet", "name": "llm-5c6f7", "controller": true}])
                }
                "ml-b" => json!([{"kind": "Job", "name": "train", "controller": true}]),
                _ => json!([]),
            };
            json!({"metadata": {"name": format!("{ns}-{i}"), "namespace": ns, "labels": labels,
                                "ownerReferences": owners,
                                "creationTimestamp": rfc3339(NOW - ago)},
                   "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": n.to_string()}}}]}})
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items}).to_string()
}

/// Pool a100 (4 nodes of 64: room under the threshold) with the pods of team ml-a in
/// namespaces ml (24 GPUs within the last 10 minutes, 8 an hour ago) and ml-b (16
/// recent), and of team ml-z (8 recent); then the request's Namespace when `team` names
/// its team label.
fn cluster(s: &Settings, team: Option<(&str, &str)>) -> Script {
    let pool = s.pool_named("a100").unwrap().1;
    let mut calls = vec![
        (node_query(pool), Ok(nodes(&[64; 4]))),
        (
            timeline::pod_query(s, pool),
            Ok(timed_pods(&[
                ("ml", "ml-a", 8, 60),
                ("ml", "ml-a", 8, 120),
                ("ml", "ml-a", 8, 300),
                ("ml", "ml-a", 8, 3600),
                ("ml-b", "ml-a", 8, 30),
                ("ml-b", "ml-a", 8, 200),
                ("ml-z", "ml-z", 8, 10),
            ])),
        ),
    ];
    if let Some((ns, team)) = team {
        calls.push((
            namespace_request(ns),
            Ok(
                json!({"metadata": {"name": ns, "labels": {"gpu-admission/team": team}}})
                    .to_string(),
            ),
        ));
    }
    Script::new(calls)
}

/// The creation of a Deployment of `replicas` x 2 GPUs in pool a100, in `namespace`.
fn deployment_in(namespace: &str, replicas: u64) -> AdmissionRequest {
    let mut d = deployment(replicas, Some("a100"), "2");
    d["metadata"]["namespace"] = json!(namespace);
    let mut r = create(d);
    r.namespace = namespace.into();
    r
}

/// [`at_now`] with `s` on `deployment_in(namespace, replicas)` in [`cluster`], the
/// namespace's team label `team`.
fn braked(s: &Settings, namespace: &str, replicas: u64, team: Option<&str>) -> Verdict {
    let cluster = cluster(s, team.map(|t| (namespace, t)));
    at_now(&deployment_in(namespace, replicas), s, &cluster)
}

fn at_now(req: &AdmissionRequest, s: &Settings, cluster: &Script) -> Verdict {
    let v = CapacityGate::evaluate_at(
        req,
        &crate::policy::checked::<CapacityGate>(s),
        cluster,
        &FixedClock(NOW),
    );
    assert!(
        cluster.done(),
        "host calls left unmade: {:?}",
        cluster.answers.borrow()
    );
    v
}

#[test]
fn a_namespace_over_its_brake_is_denied_with_when_it_may_try_again() {
    let s = brakes();
    s.validate().unwrap();
    // ml: 24 admitted in the window; 4 x 2 = 8 more is 32, the brake: accepted.
    allows_recording(
        &braked(&s, "ml", 4, Some("ml-a")),
        "burst-brake",
        "a100: namespace ml nvidia.com/gpu admitted 24 + incoming 8 = 32 of 32 per 10m, fits; a100: team ml-a nvidia.com/gpu admitted 40 + incoming 8 = 48 of 48 per 10m, fits",
    );
    // 10 more is 34: 2 over; the pod created 300 s ago leaves the window at 00:05:00.
    let v = braked(&s, "ml", 5, Some("ml-a"));
    // The pool itself has room: only the brakes deny.
    denies_with_capacity(
        &v,
        "pool a100: namespace ml was admitted 24 nvidia.com/gpu in the last 10m (3 pods: 24 by deployment llm); with this workload's 10 that is 34, over its burst brake of 32 per 10m (burstBrakes.perNamespace): it may try again at 2026-12-01T00:05:00Z (when enough of those pods have left the window, if nothing else is admitted meanwhile); team ml-a was admitted 40 nvidia.com/gpu in the last 10m (5 pods: 24 by deployment llm, 16 by job train); with this workload's 10 that is 50, over its burst brake of 48 per 10m (burstBrakes.perTeam): it may try again at 2026-12-01T00:05:00Z (when enough of those pods have left the window, if nothing else is admitted meanwhile).",
        "fits",
    );
}

#[test]
fn the_sibling_namespace_is_accepted_and_the_team_brake_spans_namespaces() {
    let namespace_only = with(
        json!({"burstBrakes": {"perNamespace": {"gpus": 32, "per": "10m"}}}),
        json!({}),
    );
    // ml-b: 16 admitted + 10 = 26 of 32; no team brake, no Namespace read.
    let v = braked(&namespace_only, "ml-b", 5, None);
    assert!(v.allowed, "{v:?}");
    // With the team brake: ml and ml-b are team ml-a, 40 admitted + 10 = 50 of 48.
    let s = brakes();
    let v = braked(&s, "ml-b", 5, Some("ml-a"));
    denies_starting(
        &v,
        "pool a100: team ml-a was admitted 40 nvidia.com/gpu in the last 10m (5 pods",
    );
    assert!(
        !message(&v).contains("namespace ml-b was admitted"),
        "{v:?}"
    );
    // Pods created 30 and 60 s ago leave at 00:09:30 and 00:09:00... the two oldest
    // (300 s: 00:05:00, 200 s: 00:06:40) free 16, enough for 2 over.
    says(&v, "may try again at 2026-12-01T00:05:00Z");
    // A namespace of another team, and one without a team label: their own counts.
    let v = braked(&s, "ml-z", 5, Some("ml-z"));
    assert!(v.allowed, "{v:?}");
    let mut calls = cluster(&s, None).answers.into_inner();
    calls.push((
        namespace_request("ml-b"),
        Ok(json!({"metadata": {"name": "ml-b"}}).to_string()),
    ));
    let v = at_now(&deployment_in("ml-b", 5), &s, &Script::new(calls));
    allows_noting(
        &v,
        "burst-brake",
        "namespace ml-b has no label gpu-admission/team: no team brake",
    );
}

#[test]
fn a_workload_larger_than_the_brake_is_told_to_come_in_parts() {
    let s = brakes();
    denies(
        &braked(&s, "ml-q", 17, Some("ml-q")),
        "pool a100: namespace ml-q was admitted 0 nvidia.com/gpu in the last 10m (0 pods); with this workload's 34 that is 34, over its burst brake of 32 per 10m (burstBrakes.perNamespace): this workload alone asks for more than the brake allows: admit it in parts of at most 32 over time.",
    );
}

#[test]
fn an_exception_for_the_brake_excuses_it_alone() {
    let exception = |rules: Value, expires: &str| {
        let mut v = serde_json::to_value(brakes()).unwrap();
        v["exceptions"] = json!([{"name": "launch", "namespaces": ["ml"], "rules": rules,
            "owner": "alice@example.com", "reason": "launch day", "expires": expires}]);
        serde_json::from_value::<Settings>(v).unwrap()
    };
    let s = exception(json!(["burstBrake"]), "2026-12-20");
    s.validate().unwrap();
    let v = braked(&s, "ml", 5, Some("ml-a"));
    allows_recording(
        &v,
        "exception",
        "exception=launch owner=alice@example.com expires=2026-12-21T00:00:00Z",
    );
    assert!(
        audit(&v, "excused").starts_with("pool a100: namespace ml was admitted 24"),
        "{v:?}"
    );
    // An exception for the sustained rule does not excuse the brake.
    let s = exception(json!(["sustained"]), "2026-12-20");
    let v = braked(&s, "ml", 5, Some("ml-a"));
    assert!(!v.allowed, "{v:?}");
    // An expired one says so.
    let s = exception(json!(["burstBrake"]), "2026-11-20");
    denies_saying(
        &braked(&s, "ml", 5, Some("ml-a")),
        "(exception launch (owner alice@example.com) expired at 2026-11-21T00:00:00Z; renew it or fix the workload)",
    );
}

/// Pool a100 (64 GPUs) with `sustained`, pods of (GPUs, created seconds ago).
fn sustained_case(old: u64, recent: u64) -> (Settings, Script) {
    let s = with(
        json!({}),
        json!({"sustained": {"thresholdPercent": 50, "for": "2m"}}),
    );
    s.validate().unwrap();
    let pool = s.pool_named("a100").unwrap().1;
    let pods = timed_pods(&[("ml", "", old, 600), ("ml-b", "", recent, 60)]);
    let cluster = Script::new(vec![
        (node_query(pool), Ok(nodes(&[8; 8]))),
        (timeline::pod_query(&s, pool), Ok(pods)),
    ]);
    (s, cluster)
}

#[test]
fn a_pool_held_above_its_sustained_percent_for_the_whole_time_is_denied() {
    // 32 of 64 held since before 23:58:00 (50%), 16 more since a minute ago; 48 + 8 fits
    // the 90% threshold, but the pool has been at 50% for 2 minutes.
    let (s, c) = sustained_case(32, 16);
    denies(
        &at_now(&deployment_in("ml", 4), &s, &c),
        "pool a100: at least 32 of its 64 nvidia.com/gpu (50.0%) have been held for the whole of the last 2m (by pods created before then and still there), at or above its sustained limit of 50% for 2m (pools[].sustained); it takes new work once that load falls below 50%.",
    );
    // A spike is not a sustained load: 24 held for 2 minutes (37.5%), 24 more since a
    // minute ago (75% now) is accepted.
    let (s, c) = sustained_case(24, 24);
    allows_recording(
        &at_now(&deployment_in("ml", 4), &s, &c),
        "sustained",
        "a100: sustained nvidia.com/gpu held 24 of 64 (37.5%) for 2m, limit 50%, fits",
    );
}

#[test]
fn the_pod_list_keeps_creation_namespace_and_team_only_when_a_rule_reads_them() {
    let ClusterRequest::ListAll(q) = timeline::pod_query(&brakes(), &pool("a100")) else {
        panic!()
    };
    let masks = q.field_masks.unwrap();
    for m in [
        "metadata.creationTimestamp",
        "metadata.namespace",
        "metadata.labels.gpu-admission/team",
        "spec.containers.resources",
    ] {
        assert!(masks.contains(m), "{m}: {masks:?}");
    }
    assert_eq!(
        timeline::pod_query(&settings(), &pool("a100")),
        pod_query("gpu-admission/pool", &pool("a100"))
    );
}

#[rstest]
#[case::zero_gpus(json!({"burstBrakes": {"perNamespace": {"gpus": 0, "per": "10m"}}}), json!({}), "burstBrakes.perNamespace.gpus: give the most GPUs")]
#[case::bad_window(json!({"burstBrakes": {"perTeam": {"gpus": 8, "per": "10 minutes"}}}), json!({}), "burstBrakes.perTeam.per: '10 minutes' is not a window from 1s to 24h")]
#[case::long_window(json!({"burstBrakes": {"perTeam": {"gpus": 8, "per": "25h"}}}), json!({}), "burstBrakes.perTeam.per: '25h' is not a window")]
#[case::no_team_key(json!({"teamLabelKey": "", "burstBrakes": {"perTeam": {"gpus": 8, "per": "1h"}}}), json!({}), "burstBrakes.perTeam: a team brake finds the team of a namespace by its label teamLabelKey")]
#[case::quotas(json!({"burstBrakes": {"perNamespace": {"gpus": 8, "per": "1h"}}}), json!({"usage": "quotas", "capacity": {"nvidia.com/gpu": 8}, "priorityClasses": ["a100"]}), "burstBrakes: pools[0] (a100) counts its GPUs in use from ResourceQuotas (usage: quotas)")]
#[case::sustained_percent(json!({}), json!({"sustained": {"thresholdPercent": 101, "for": "2m"}}), "pools[0].sustained.thresholdPercent: must be between 1 and 100 (got 101)")]
#[case::sustained_for(json!({}), json!({"sustained": {"thresholdPercent": 95, "for": "2"}}), "pools[0].sustained.for: '2' is not a duration from 1s to 1h")]
fn invalid_brake_settings_name_the_field(
    #[case] fields: Value,
    #[case] pool: Value,
    #[case] start: &str,
) {
    fails_starting(with(fields, pool).validate(), start);
}

#[test]
fn empty_forms_are_no_rule_and_unknown_fields_are_refused() {
    let s = with(
        json!({"burstBrakes": {"perNamespace": {"gpus": 0, "per": ""}}}),
        json!({"sustained": {"thresholdPercent": 0, "for": ""}}),
    );
    s.validate().unwrap();
    assert_eq!(
        timeline::pod_query(&s, &s.pools[0]),
        pod_query("gpu-admission/pool", &s.pools[0])
    );
    let mut v = serde_json::to_value(settings()).unwrap();
    v["burstBrakes"] = json!({"perNamespace": {"gpus": 8, "window": "10m"}});
    assert!(serde_json::from_value::<Settings>(v).is_err());
}
