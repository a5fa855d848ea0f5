//! `evaluate` with team budgets: a team across three namespaces (found by its Namespace
//! label, counted by the team pod label, or given by its namespaces), per-pool limits,
//! and the budgets ConfigMap missing, not granted and malformed.

use super::*;
use crate::admission::ValidateSettings;
use crate::capacity::queries::{namespace_pod_query, team_pod_query};
use crate::cluster::namespace_request;

/// `settings()` with `budgets` as teamBudgets.
fn with_budgets(budgets: Value) -> Settings {
    let mut v = serde_json::to_value(settings()).unwrap();
    v["teamBudgets"] = budgets;
    let s: Settings = serde_json::from_value(v).unwrap();
    s.validate().unwrap();
    s
}

fn namespace(labels: Value) -> (ClusterRequest, Result<String, String>) {
    (
        namespace_request("ml"),
        Ok(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": labels}}).to_string()),
    )
}

/// Pods (namespace, pool label, GPUs) of a PodList.
fn team_pods(items: &[(&str, Option<&str>, u64)]) -> String {
    let items: Vec<Value> = items
        .iter()
        .enumerate()
        .map(|(i, (ns, pool, gpus))| {
            let mut labels = json!({"gpu-admission/team": "ml-a", "app": format!("app-{i}")});
            if let Some(p) = pool {
                labels["gpu-admission/pool"] = json!(p);
            }
            json!({"metadata": {"name": format!("p{i}"), "namespace": ns, "labels": labels},
                   "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}], "nodeName": format!("n{i}")}})
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "PodList", "items": items}).to_string()
}

/// 12 GPUs of team ml-a in three namespaces: 6 in pool a100, 4 in h100, 2 in none.
fn three_namespaces() -> String {
    team_pods(&[
        ("ml", Some("a100"), 4),
        ("ml-dev", Some("a100"), 2),
        ("ml-prod", Some("h100"), 4),
        ("ml-prod", None, 2),
    ])
}

/// The calls that find team ml-a by the Namespace label and read its pods in
/// [`three_namespaces`].
fn labelled_team() -> Vec<(ClusterRequest, Result<String, String>)> {
    vec![
        namespace(json!({"gpu-admission/team": "ml-a"})),
        (team_pod_query("ml-a"), Ok(three_namespaces())),
    ]
}

/// [`run`] with `s` on the creation of `replicas` x 2 GPUs in no pool, the cluster
/// answering `calls`.
fn run_x2(
    s: &Settings,
    replicas: u64,
    calls: Vec<(ClusterRequest, Result<String, String>)>,
) -> Verdict {
    run(
        &create(deployment(replicas, None, "2")),
        s,
        &Script::new(calls),
    )
}

#[test]
fn a_team_budget_across_three_namespaces_denies_with_the_numbers() {
    let s = with_budgets(json!({"ml-a": {"nvidia.com/gpu": 16}}));
    let v = run_x2(&s, 3, labelled_team());
    denies(
        &v,
        "team ml-a would hold 18 of its 16 nvidia.com/gpu (12 used + 6 incoming): 2 of the 3 incoming replicas (2 nvidia.com/gpu each) fit. Lower replicas, free the team's GPUs, or ask for a larger budget.",
    );
    assert_eq!(
        v.audit_annotations["team"],
        "team ml-a (Namespace label gpu-admission/team; budget in settings; 4 pods): nvidia.com/gpu used 12 + incoming 6 = 18 of 16, over"
    );
    // Within the budget: exactly at it.
    let v = run_x2(&s, 2, labelled_team());
    assert!(v.allowed, "{v:?}");
    notes_ending(
        &v,
        "team",
        "nvidia.com/gpu used 12 + incoming 4 = 16 of 16, fits",
    );
}

#[test]
fn a_team_given_by_its_namespaces_is_read_namespace_by_namespace() {
    let s = with_budgets(
        json!({"ml-a": {"namespaces": ["ml", "ml-dev", "ml-prod"], "nvidia.com/gpu": 16}}),
    );
    let calls = vec![
        (
            namespace_pod_query("ml"),
            Ok(team_pods(&[("ml", Some("a100"), 4)])),
        ),
        (
            namespace_pod_query("ml-dev"),
            Ok(team_pods(&[("ml-dev", Some("a100"), 2)])),
        ),
        (
            namespace_pod_query("ml-prod"),
            Ok(team_pods(&[
                ("ml-prod", Some("h100"), 4),
                ("ml-prod", None, 2),
            ])),
        ),
    ];
    let v = run_x2(&s, 3, calls);
    denies_starting(
        &v,
        "team ml-a would hold 18 of its 16 nvidia.com/gpu (12 used + 6 incoming)",
    );
    assert!(
        audit(&v, "team")
            .starts_with("team ml-a (namespaces listed in its budget in settings; 4 pods)"),
        "{v:?}"
    );
}

#[test]
fn per_pool_team_limits_count_the_pool_label_of_the_team_pods() {
    let s = with_budgets(
        json!({"ml-a": {"nvidia.com/gpu": 32, "pools": {"a100": 8, "h100": {"nvidia.com/gpu": 4}}}}),
    );
    let mut calls = pool_calls("a100", nodes(&[8; 8]), pods(&[8]));
    calls.extend(labelled_team());
    let cluster = Script::new(calls);
    // 3 x 2 in pool a100: 6 used there + 6 = 12 of 8; 18 of 32 in all.
    let v = run(&create(deployment(3, Some("a100"), "2")), &s, &cluster);
    denies(
        &v,
        "team ml-a would hold 12 of its 8 nvidia.com/gpu in pool a100 (6 used + 6 incoming): 1 of the 3 incoming replicas (2 nvidia.com/gpu each) fits. Lower replicas, free the team's GPUs, or ask for a larger budget.",
    );
    assert_eq!(
        v.audit_annotations["team"],
        "team ml-a (Namespace label gpu-admission/team; budget in settings; 4 pods): nvidia.com/gpu used 12 + incoming 6 = 18 of 32, fits; nvidia.com/gpu in pool a100 used 6 + incoming 6 = 12 of 8, over"
    );
}

#[test]
fn a_namespace_without_a_team_is_not_limited() {
    let s = with_budgets(json!({"ml-a": {"nvidia.com/gpu": 1}}));
    allows_recording(
        &run_x2(&s, 3, vec![namespace(json!({"other": "x"}))]),
        "team",
        "namespace ml belongs to no team with a budget",
    );
}

#[test]
fn without_budgets_no_team_call_is_made() {
    let v = run_x2(&settings(), 3, vec![]);
    assert!(v.allowed);
    assert!(!v.audit_annotations.contains_key("team"));
}

fn with_config_map() -> Settings {
    let mut v = serde_json::to_value(settings()).unwrap();
    v["teamBudgetsConfigMap"] = json!({"namespace": "gpu-system", "name": "gpu-team-budgets"});
    let s: Settings = serde_json::from_value(v).unwrap();
    s.validate().unwrap();
    s
}

fn config_map_call(answer: Result<Value, String>) -> (ClusterRequest, Result<String, String>) {
    (
        with_config_map().team_budgets_config_map.unwrap().request(),
        answer.map(|v| v.to_string()),
    )
}

fn config_map(data: Value) -> Result<Value, String> {
    Ok(json!({"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "gpu-team-budgets", "namespace": "gpu-system"}, "data": data}))
}

#[test]
fn budgets_from_the_config_map_replace_the_settings() {
    let mut s = with_config_map();
    s.team_budgets = with_budgets(json!({"ml-a": {"nvidia.com/gpu": 100}})).team_budgets;
    let mut calls = vec![config_map_call(config_map(
        json!({"budgets.json": r#"{"ml-a": {"nvidia.com/gpu": 16, "pools": {"a100": 8}}}"#}),
    ))];
    calls.extend(labelled_team());
    let v = run_x2(&s, 3, calls);
    denies_starting(&v, "team ml-a would hold 18 of its 16 nvidia.com/gpu");
    notes(
        &v,
        "team",
        "budget in ConfigMap gpu-system/gpu-team-budgets",
    );
}

#[rstest]
#[case::missing(
    Err("Cannot find v1/ConfigMap named 'gpu-team-budgets' inside of namespace 'gpu-system'".to_string()),
    "team budget of namespace ml: cannot get v1/ConfigMap gpu-system/gpu-team-budgets: not found. The GPU capacity gate denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error."
)]
#[case::not_granted(
    Err("Policy has not been granted access to Kubernetes v1/ConfigMap resources. The violation has been reported.".to_string()),
    "team budget of namespace ml: cannot get v1/ConfigMap gpu-system/gpu-team-budgets: not granted to this policy: add {apiVersion: v1, kind: ConfigMap} to the ClusterAdmissionPolicy's contextAwareResources. The GPU capacity gate denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error."
)]
#[case::no_key(
    config_map(json!({"other": "x"})),
    "the team budgets ConfigMap gpu-system/gpu-team-budgets is malformed: it has no data key budgets.json (keys present: other); fix the ConfigMap (settings.teamBudgetsConfigMap). The GPU capacity gate denies what it cannot check."
)]
#[case::not_json(
    config_map(json!({"budgets.json": "ml-a: {nvidia.com/gpu: 2}"})),
    "the team budgets ConfigMap gpu-system/gpu-team-budgets is malformed: budgets.json: not JSON (expected value at line 1 column 1), e.g. {\"ml-a\": {\"nvidia.com/gpu\": 16, \"pools\": {\"a100\": 8}}}; fix the ConfigMap (settings.teamBudgetsConfigMap). The GPU capacity gate denies what it cannot check."
)]
#[case::a_list(
    config_map(json!({"budgets.json": "[]"})),
    "the team budgets ConfigMap gpu-system/gpu-team-budgets is malformed: budgets.json: must map team names to budgets"
)]
#[case::not_a_count(
    config_map(json!({"budgets.json": r#"{"ml-a": {"nvidia.com/gpu": true}}"#})),
    "the team budgets ConfigMap gpu-system/gpu-team-budgets is malformed: budgets.json.ml-a.nvidia.com/gpu: must be a whole number of GPUs (got true)"
)]
#[case::not_a_gpu(
    config_map(json!({"budgets.json": r#"{"ml-a": {"cpu": 2}}"#})),
    "the team budgets ConfigMap gpu-system/gpu-team-budgets is malformed: budgets.json.ml-a.cpu: not a GPU resource the gate counts"
)]
#[case::unknown_pool(
    config_map(json!({"budgets.json": r#"{"ml-a": {"pools": {"b200": 2}}}"#})),
    "the team budgets ConfigMap gpu-system/gpu-team-budgets is malformed: budgets.json.ml-a.pools.b200: 'b200' names no pool; use one of a100, h100"
)]
fn the_budgets_config_map_missing_malformed_or_not_granted_fails_closed_naming_it(
    #[case] answer: Result<Value, String>,
    #[case] start: &str,
) {
    let v = run_x2(&with_config_map(), 3, vec![config_map_call(answer)]);
    denies_starting(&v, start);
    assert_eq!(
        v.audit_annotations["team"],
        "team budget of namespace ml: not checked"
    );
}

#[test]
fn a_missing_config_map_with_unreadable_cluster_warn_accepts_with_a_warning() {
    let mut s = with_config_map();
    s.unreadable_cluster = Some(crate::settings::Action::Warn);
    let calls = vec![config_map_call(Err(
        "Cannot find v1/ConfigMap named 'gpu-team-budgets' inside of namespace 'gpu-system'".into(),
    ))];
    let v = run_x2(&s, 3, calls);
    assert!(v.allowed);
    assert_eq!(
        v.warnings,
        vec![
            "team budget of namespace ml: GPU capacity was not checked: cannot get v1/ConfigMap gpu-system/gpu-team-budgets: not found (accepted because unreadableCluster is warn)"
        ]
    );
}

#[rstest]
#[case::no_limit(json!({"ml-a": {}}), "teamBudgets.ml-a: give limits per GPU resource")]
#[case::not_gpu(json!({"ml-a": {"cpu": 4}}), "teamBudgets.ml-a.cpu: not a GPU resource the gate counts")]
#[case::fraction(json!({"ml-a": {"nvidia.com/gpu": "0.5"}}), "teamBudgets.ml-a.nvidia.com/gpu: must be a whole number of GPUs")]
#[case::unknown_pool(json!({"ml-a": {"pools": {"b200": 4}}}), "teamBudgets.ml-a.pools.b200: 'b200' names no pool; use one of a100, h100")]
#[case::bad_namespace(json!({"ml-a": {"namespaces": ["ML"], "nvidia.com/gpu": 4}}), "teamBudgets.ml-a.namespaces[0]: 'ML' is not a namespace name")]
#[case::shared_namespace(json!({"ml-a": {"namespaces": ["ml"], "nvidia.com/gpu": 4}, "ml-b": {"namespaces": ["ml"], "nvidia.com/gpu": 4}}), "teamBudgets.ml-b.namespaces[0]: namespace ml is also in the budget of team ml-a")]
#[case::bad_team(json!({"ML A": {"nvidia.com/gpu": 4}}), "teamBudgets.ML A: 'ML A' is not a team name")]
#[case::not_a_count(json!({"ml-a": {"nvidia.com/gpu": true}}), "teamBudgets.ml-a.nvidia.com/gpu: must be a whole number of GPUs (got true)")]
#[case::not_a_budget(json!({"ml-a": 16}), "teamBudgets.ml-a: must be a budget")]
#[case::namespaces_not_a_list(json!({"ml-a": {"namespaces": "ml", "nvidia.com/gpu": 4}}), "teamBudgets.ml-a.namespaces: must be a list of namespace names")]
#[case::pool_limit_not_a_count(json!({"ml-a": {"pools": {"a100": [8]}}}), "teamBudgets.ml-a.pools.a100: must be a whole number of GPUs (got [8])")]
fn invalid_team_settings_name_the_field(#[case] budgets: Value, #[case] start: &str) {
    let mut v = serde_json::to_value(settings()).unwrap();
    v["teamBudgets"] = budgets;
    fails_starting(
        serde_json::from_value::<Settings>(v).unwrap().validate(),
        start,
    );
}

#[test]
fn teams_need_namespaces_when_no_label_key_is_set() {
    let mut v = serde_json::to_value(settings()).unwrap();
    v["teamLabelKey"] = json!("");
    v["teamBudgets"] = json!({"ml-a": {"nvidia.com/gpu": 4}});
    let err = serde_json::from_value::<Settings>(v)
        .unwrap()
        .validate()
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "teamBudgets.ml-a: list the team's namespaces in teamBudgets.ml-a.namespaces, or set teamLabelKey to find them by their Namespace label"
    );
}
