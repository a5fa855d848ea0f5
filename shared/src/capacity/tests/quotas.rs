//! `evaluate` with `usage: quotas` and declared capacity: the host calls each mode makes,
//! the numbers and where they come from, and every quota set-up that cannot count the
//! request's pods (denied with the fix, or accepted with a warning under `unreadableCluster: warn`).

use super::*;
use crate::admission::ValidateSettings;
use crate::capacity::queries::quota_query;

/// Pool a100 counted from quotas with 64 declared GPUs; pool h100 counted from quotas and
/// measured from its nodes; pool l4 counted from its pods with declared capacity.
fn quota_settings() -> Settings {
    serde_json::from_value(json!({
        "pools": [
            {"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}},
             "capacity": {"nvidia.com/gpu": 64, "nvidia.com/mig-1g.10gb": "28"},
             "usage": "quotas", "priorityClasses": ["a100-high", "a100-low"]},
            {"name": "h100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "h100"}},
             "usage": "quotas", "priorityClasses": ["h100"], "thresholdPercent": 80},
            {"name": "l4", "capacity": {"nvidia.com/gpu": "16"}}
        ],
        "exemptNamespaces": ["gpu-operator"],
        "checkNamespaceQuotas": false
    }))
    .unwrap()
}

fn quota_pool(name: &str) -> Pool {
    quota_settings().pool_named(name).unwrap().1.clone()
}

/// A quota of pool `pool` in `namespace`, scoped to `classes`, holding `used` GPUs.
fn quota(namespace: &str, pool: &str, classes: &[&str], used: u64) -> Value {
    json!({
        "metadata": {"name": format!("gpu-{pool}"), "namespace": namespace,
                     "labels": {"gpu-admission/pool": pool}},
        "spec": {"hard": {"requests.nvidia.com/gpu": "64", "requests.cpu": "512"},
                 "scopeSelector": {"matchExpressions": [
                     {"scopeName": "PriorityClass", "operator": "In", "values": classes}]}},
        "status": {"hard": {"requests.nvidia.com/gpu": "64"},
                   "used": {"requests.nvidia.com/gpu": used.to_string(), "requests.cpu": "40"}}
    })
}

fn quota_list(items: Vec<Value>) -> String {
    json!({"apiVersion": "v1", "kind": "ResourceQuotaList", "metadata": {"resourceVersion": "7"}, "items": items})
        .to_string()
}

/// Six quotas of pool a100 (namespace ml first) holding 40 GPUs together.
fn a100_quotas() -> Vec<Value> {
    let classes = ["a100-low", "a100-high"];
    let mut items = vec![quota("ml", "a100", &classes, 8)];
    for (i, used) in [8, 8, 8, 4, 4].into_iter().enumerate() {
        items.push(quota(&format!("team-{i}"), "a100", &classes, used));
    }
    items
}

fn quota_call(
    pool: &str,
    answer: Result<String, String>,
) -> (ClusterRequest, Result<String, String>) {
    (quota_query("gpu-admission/pool", &quota_pool(pool)), answer)
}

/// A Deployment in namespace ml of pool `pool` with `priorityClassName` `class`.
fn classed(replicas: u64, pool: &str, gpus: &str, class: Option<&str>) -> Value {
    let mut d = deployment(replicas, Some(pool), gpus);
    if let Some(c) = class {
        d["spec"]["template"]["spec"]["priorityClassName"] = json!(c);
    }
    d
}

/// [`quota_run`] with `quota_settings()` on one pod of 2 GPUs of pool a100 (priority class
/// a100-high), the quota list answered by `answer`.
fn one_high_a100(answer: Result<String, String>) -> Verdict {
    quota_run(
        classed(1, "a100", "2", Some("a100-high")),
        &quota_settings(),
        vec![quota_call("a100", answer)],
    )
}

/// [`quota_run`] with `quota_settings()` on one pod of 8 GPUs of pool h100 (priority class
/// h100), its nodes of `node_gpus` each and its ResourceQuotas `quotas`.
fn one_h100(node_gpus: &[u64], quotas: Vec<Value>) -> Verdict {
    quota_run(
        classed(1, "h100", "8", Some("h100")),
        &quota_settings(),
        vec![
            (node_query(&quota_pool("h100")), Ok(nodes(node_gpus))),
            quota_call("h100", Ok(quota_list(quotas))),
        ],
    )
}

fn quota_run(
    object: Value,
    s: &Settings,
    calls: Vec<(ClusterRequest, Result<String, String>)>,
) -> Verdict {
    run(&create(object), s, &Script::new(calls))
}

#[test]
fn quotas_and_declared_capacity_make_one_call_and_say_so() {
    let v = quota_run(
        classed(4, "a100", "2", Some("a100-high")),
        &quota_settings(),
        vec![quota_call("a100", Ok(quota_list(a100_quotas())))],
    );
    allows_recording(
        &v,
        "capacity",
        "a100: nvidia.com/gpu used 40 from 6 ResourceQuotas + incoming 8 = 48 of capacity 64 declared in settings (75.0%), threshold 90%, fits",
    );
}

#[test]
fn quotas_over_the_threshold_deny_with_where_the_numbers_come_from() {
    let mut items = a100_quotas();
    items.push(quota("team-9", "a100", &["a100-high", "a100-low"], 10));
    let v = quota_run(
        classed(4, "a100", "2", Some("a100-low")),
        &quota_settings(),
        vec![quota_call("a100", Ok(quota_list(items)))],
    );
    denies(
        &v,
        "pool a100: nvidia.com/gpu would be 58 of capacity 64 declared in settings (90.6%) with this workload's 8 (50 in use from 7 ResourceQuotas), above the 90% threshold (room for 7 more). Wait for capacity, lower replicas, or target another pool.",
    );
}

#[test]
fn quotas_with_measured_nodes_list_nodes_then_quotas() {
    let v = one_h100(&[8, 8, 8, 8], vec![quota("ml", "h100", &["h100"], 16)]);
    allows_recording(
        &v,
        "capacity",
        "h100: nvidia.com/gpu used 16 from 1 ResourceQuota + incoming 8 = 24 of 32 allocatable (75.0%), threshold 80%, fits",
    );
}

#[test]
fn pods_with_declared_capacity_list_only_pods() {
    let v = quota_run(
        deployment(2, Some("l4"), "1"),
        &quota_settings(),
        vec![(
            pod_query("gpu-admission/pool", &quota_pool("l4")),
            Ok(pods(&[4, 4, 4])),
        )],
    );
    allows_recording(
        &v,
        "capacity",
        "l4: nvidia.com/gpu used 12 + incoming 2 = 14 of capacity 16 declared in settings (87.5%), threshold 90%, fits",
    );
}

#[test]
fn a_resource_the_declared_capacity_lacks_is_denied_naming_the_declaration() {
    let mut d = classed(1, "a100", "1", Some("a100-high"));
    d["spec"]["template"]["spec"]["containers"][0]["resources"] =
        json!({"limits": {"amd.com/gpu": "1"}});
    let mut item = quota("ml", "a100", &["a100-high", "a100-low"], 0);
    item["spec"]["hard"]["requests.amd.com/gpu"] = json!("8");
    item["status"]["used"]["requests.amd.com/gpu"] = json!("0");
    let v = quota_run(
        d,
        &quota_settings(),
        vec![quota_call("a100", Ok(quota_list(vec![item])))],
    );
    denies(
        &v,
        "pool a100: the capacity declared in settings has no amd.com/gpu for this workload's 1 (it declares nvidia.com/gpu: 64, nvidia.com/mig-1g.10gb: 28). Request a resource the pool offers, target another pool, or declare the resource in the pool's capacity in the policy settings.",
    );
}

#[test]
fn a_namespace_without_the_pools_quota_is_denied_with_the_quota_to_create() {
    let items: Vec<Value> = a100_quotas().into_iter().skip(1).collect();
    let v = one_high_a100(Ok(quota_list(items)));
    denies(
        &v,
        "pool a100: namespace ml has no ResourceQuota labelled gpu-admission/pool=a100, so the pool's pods there would not be counted. Create it: {apiVersion: v1, kind: ResourceQuota, metadata: {name: gpu-a100, namespace: ml, labels: {gpu-admission/pool: \"a100\"}}, spec: {hard: {requests.nvidia.com/gpu: \"64\"}, scopeSelector: {matchExpressions: [{scopeName: PriorityClass, operator: In, values: [a100-high, a100-low]}]}}} (spec.hard at the pool's size caps nothing; lower it to cap the namespace). The GPU capacity gate denies what it cannot count (unreadableCluster: deny).",
    );
    assert_eq!(v.audit_annotations["capacity"], "pool a100: not checked");
}

#[test]
fn the_quota_to_create_never_suggests_a_hard_of_zero() {
    // Pool h100 measured from its nodes, none of which is schedulable now.
    let v = one_h100(&[], Vec::new());
    says(
        &v,
        "spec: {hard: {requests.nvidia.com/gpu: <the GPUs the namespace may hold>}, scopeSelector: {matchExpressions: [{scopeName: PriorityClass, operator: In, values: [h100]}]}}",
    );
}

#[test]
fn unreadable_cluster_warn_accepts_an_uncountable_pool_with_a_warning() {
    let mut s = quota_settings();
    s.unreadable_cluster = Some(crate::settings::Action::Warn);
    let v = quota_run(
        classed(1, "a100", "2", Some("a100-high")),
        &s,
        vec![quota_call("a100", Ok(quota_list(Vec::new())))],
    );
    assert!(v.allowed, "{v:?}");
    assert_eq!(v.warnings.len(), 1);
    assert!(
        v.warnings[0].starts_with(
            "pool a100: GPU capacity was not checked: namespace ml has no ResourceQuota labelled gpu-admission/pool=a100"
        ) && v.warnings[0].ends_with("(accepted because unreadableCluster is warn)"),
        "{v:?}"
    );
}

/// `a100_quotas()` with quota `index` changed by `edit`.
fn with_quota(index: usize, edit: impl FnOnce(&mut Value)) -> String {
    let mut items = a100_quotas();
    edit(&mut items[index]);
    quota_list(items)
}

#[rstest]
#[case::unscoped(
    with_quota(2, |q| { q["spec"].as_object_mut().unwrap().remove("scopeSelector"); }),
    "ResourceQuota team-1/gpu-a100 is not scoped to the pool's priority classes (it has no scope, so it counts the pods of every pool in team-1): set its spec.scopeSelector to {matchExpressions: [{scopeName: PriorityClass, operator: In, values: [a100-high, a100-low]}]}"
)]
#[case::other_class(
    with_quota(0, |q| { q["spec"]["scopeSelector"]["matchExpressions"][0]["values"] = json!(["batch-low"]); }),
    "ResourceQuota ml/gpu-a100 is not scoped to the pool's priority classes (its scope is PriorityClass In [batch-low]): set its spec.scopeSelector to {matchExpressions: [{scopeName: PriorityClass, operator: In, values: [a100-high, a100-low]}]}"
)]
#[case::one_class_missing(
    with_quota(0, |q| { q["spec"]["scopeSelector"]["matchExpressions"][0]["values"] = json!(["a100-high"]); }),
    "ResourceQuota ml/gpu-a100 is not scoped to the pool's priority classes (its scope is PriorityClass In [a100-high]): set its spec.scopeSelector to"
)]
#[case::not_in(
    with_quota(0, |q| { q["spec"]["scopeSelector"]["matchExpressions"][0]["operator"] = json!("NotIn"); }),
    "ResourceQuota ml/gpu-a100 is not scoped to the pool's priority classes (its scope is PriorityClass NotIn [a100-low, a100-high]): set"
)]
#[case::narrower_scopes(
    with_quota(0, |q| { q["spec"]["scopes"] = json!(["Terminating"]); }),
    "ResourceQuota ml/gpu-a100 is not scoped to the pool's priority classes (its scope is scopes [Terminating] and PriorityClass In [a100-low, a100-high]): set its spec.scopeSelector to {matchExpressions: [{scopeName: PriorityClass, operator: In, values: [a100-high, a100-low]}]} and remove its spec.scopes"
)]
#[case::two_expressions(
    with_quota(0, |q| { q["spec"]["scopeSelector"]["matchExpressions"].as_array_mut().unwrap().push(json!({"scopeName": "BestEffort", "operator": "DoesNotExist"})); }),
    "ResourceQuota ml/gpu-a100 is not scoped to the pool's priority classes (its scope is PriorityClass In [a100-low, a100-high] and BestEffort DoesNotExist): set"
)]
#[case::not_tracked(
    with_quota(3, |q| { q["spec"]["hard"].as_object_mut().unwrap().remove("requests.nvidia.com/gpu"); }),
    "ResourceQuota team-2/gpu-a100 does not count requests.nvidia.com/gpu (it is not in its spec.hard), so the pool's nvidia.com/gpu pods in team-2 would not be counted: add requests.nvidia.com/gpu to its spec.hard"
)]
#[case::not_counted_yet(
    with_quota(1, |q| { q.as_object_mut().unwrap().remove("status"); }),
    "ResourceQuota team-0/gpu-a100 has no status.used for requests.nvidia.com/gpu yet (the quota controller has not counted it): retry in a few seconds"
)]
#[case::twice_in_a_namespace(
    with_quota(4, |q| { q["metadata"]["namespace"] = json!("team-0"); q["metadata"]["name"] = json!("gpu-a100-more"); }),
    "namespace team-0 has 2 ResourceQuotas labelled gpu-admission/pool=a100 (gpu-a100, gpu-a100-more), which count the same pods twice: keep one"
)]
fn quotas_that_would_miss_pods_are_denied_naming_them(#[case] list: String, #[case] start: &str) {
    let v = one_high_a100(Ok(list));
    denies_starting(&v, &format!("pool a100: {start}"));
    ends_saying(
        &v,
        ". The GPU capacity gate denies what it cannot count (unreadableCluster: deny).",
    );
}

#[test]
fn quotas_of_other_pools_and_resources_do_not_matter() {
    // A quota that counts only MIG slices is fine for a workload that asks for none.
    let mut items = a100_quotas();
    items[1]["spec"]["hard"] =
        json!({"requests.nvidia.com/gpu": "8", "requests.nvidia.com/mig-1g.10gb": "4"});
    items[1]["status"]["used"]["requests.nvidia.com/mig-1g.10gb"] = json!("3");
    let v = one_high_a100(Ok(quota_list(items)));
    allows_noting(&v, "capacity", "used 40 from 6 ResourceQuotas");
}

#[rstest]
#[case::other_class(
    Some("batch-low"),
    "spec.template.spec has priorityClassName batch-low"
)]
#[case::no_class(None, "spec.template.spec has no priorityClassName")]
fn a_template_whose_pods_the_quotas_would_not_count_is_denied_without_a_call(
    #[case] class: Option<&str>,
    #[case] why: &str,
) {
    let v = quota_run(
        classed(1, "a100", "2", class),
        &quota_settings(),
        Vec::new(),
    );
    denies(
        &v,
        &format!(
            "pool a100: its GPUs in use are counted by ResourceQuotas scoped to its priority classes (a100-high, a100-low), which would not count this workload's pods: {why}. Set priorityClassName to one of a100-high, a100-low (gpu-pool-routing-policy sets it on the pool's workloads)."
        ),
    );
    assert_eq!(v.audit_annotations["capacity"], "pool a100: not checked");
}

#[rstest]
#[case::forbidden(
    Err(r#"resourcequotas is forbidden: User "system:serviceaccount:kubewarden:policy-server" cannot list resource "resourcequotas""#.to_string()),
    "pool a100: cannot list v1/ResourceQuota: forbidden by RBAC: grant the policy-server's ServiceAccount list and watch on resourcequotas. The GPU capacity gate denies what it cannot check"
)]
#[case::not_granted(
    Err("Policy has not been granted access to Kubernetes v1/ResourceQuota resources. The violation has been reported.".to_string()),
    "pool a100: cannot list v1/ResourceQuota: not granted to this policy: add {apiVersion: v1, kind: ResourceQuota} to the ClusterAdmissionPolicy's contextAwareResources. The GPU"
)]
#[case::fractional_used(
    Ok(with_quota(0, |q| { q["status"]["used"]["requests.nvidia.com/gpu"] = json!("1500m"); })),
    "pool a100: cannot list v1/ResourceQuota: the answer could not be read (ResourceQuota ml/gpu-a100: status.used.requests.nvidia.com/gpu: '1500m' must be a whole number)"
)]
#[case::not_a_list(Ok("[]".to_string()), "pool a100: cannot list v1/ResourceQuota: the answer could not be read (")]
fn quota_list_failures_fail_closed(#[case] answer: Result<String, String>, #[case] start: &str) {
    let v = one_high_a100(answer);
    denies_starting(&v, start);
}

#[test]
fn scale_up_in_quota_mode_checks_the_parents_priority_class() {
    let req = scale("apps", "deployments", json!(2), json!(6));
    let parent = |class: &str| {
        json!({"spec": {"template": {
            "metadata": {"labels": {"gpu-admission/pool": "a100"}},
            "spec": {"priorityClassName": class,
                     "containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}}})
        .to_string()
    };
    let get = || parent_query("apps/v1", "Deployment", "llm", "ml");
    let s = quota_settings();
    let v = run(
        &req,
        &s,
        &Script::new(vec![
            (get(), Ok(parent("a100-low"))),
            quota_call("a100", Ok(quota_list(a100_quotas()))),
        ]),
    );
    allows_noting(
        &v,
        "capacity",
        "used 40 from 6 ResourceQuotas + incoming 8 ",
    );
    let v = run(&req, &s, &Script::new(vec![(get(), Ok(parent("other")))]));
    says(&v, "spec.template.spec has priorityClassName other");
}

#[test]
fn the_default_usage_applies_to_pools_that_do_not_say() {
    let s: Settings = serde_json::from_value(json!({
        "checkNamespaceQuotas": false,
        "usage": "quotas",
        "pools": [
            {"name": "a100", "capacity": {"nvidia.com/gpu": 64}, "priorityClasses": ["a100-high", "a100-low"]},
            {"name": "l4", "capacity": {"nvidia.com/gpu": 16}, "usage": "pods"}
        ]
    }))
    .unwrap();
    s.validate().unwrap();
    let a100 = s.pool_named("a100").unwrap().1;
    let v = quota_run(
        classed(1, "a100", "2", Some("a100-high")),
        &s,
        vec![(
            quota_query("gpu-admission/pool", a100),
            Ok(quota_list(a100_quotas())),
        )],
    );
    assert!(v.allowed, "{v:?}");
    let l4 = s.pool_named("l4").unwrap().1;
    let v = quota_run(
        deployment(1, Some("l4"), "1"),
        &s,
        vec![(pod_query("gpu-admission/pool", l4), Ok(pods(&[1])))],
    );
    assert!(v.allowed, "{v:?}");
}
