//! `evaluate` with the namespace's ResourceQuotas: over and within a quota, exactly at
//! it, PriorityClass scopes, UPDATE and `scale` increases, quotas Kubernetes would not
//! count, unreadable quotas, and quota and pool denials reported together.

use super::*;
use crate::capacity::queries::namespace_quota_query;

const GPU: &str = "nvidia.com/gpu";

/// `settings()` with namespace quotas checked, switched on explicitly.
fn checked() -> Settings {
    Settings {
        check_namespace_quotas: Some(true),
        ..settings()
    }
}

/// A ResourceQuota `name` of namespace ml: `hard` and `used` of `requests.nvidia.com/gpu`.
fn quota(name: &str, hard: u64, used: Option<u64>, scope: Option<Value>) -> Value {
    let mut q = json!({"metadata": {"name": name, "namespace": "ml"},
        "spec": {"hard": {"requests.nvidia.com/gpu": hard.to_string(), "requests.cpu": "64"}},
        "status": {"used": {"requests.cpu": "10"}}});
    if let Some(u) = used {
        q["status"]["used"]["requests.nvidia.com/gpu"] = json!(u.to_string());
    }
    if let Some(s) = scope {
        q["spec"]["scopeSelector"] = s;
    }
    q
}

fn quota_call(items: Vec<Value>) -> (ClusterRequest, Result<String, String>) {
    (
        namespace_quota_query("ml"),
        Ok(json!({"apiVersion": "v1", "kind": "ResourceQuotaList", "items": items}).to_string()),
    )
}

fn priority(class: &str) -> Value {
    json!({"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": [class]}]})
}

/// A Deployment of `replicas` x `gpus` in no pool, with `class`.
fn with_class(replicas: u64, gpus: &str, class: Option<&str>) -> Value {
    let mut d = deployment(replicas, None, gpus);
    if let Some(c) = class {
        d["spec"]["template"]["spec"]["priorityClassName"] = json!(c);
    }
    d
}

#[test]
fn a_deployment_over_its_namespace_quota_is_denied_with_the_numbers() {
    let cluster = Script::new(vec![quota_call(vec![quota("gpus", 16, Some(12), None)])]);
    let v = run(&create(deployment(4, None, "2")), &checked(), &cluster);
    denies(
        &v,
        "namespace ml: ResourceQuota gpus would hold 20 of its 16 requests.nvidia.com/gpu (12 used + 8 incoming): 2 of the 4 incoming replicas (2 nvidia.com/gpu each) fit. Lower replicas, free GPUs in the namespace, or ask for a larger quota.",
    );
    assert_eq!(
        v.audit_annotations["quota"],
        "namespace ml: gpus: requests.nvidia.com/gpu used 12 + incoming 8 = 20 of 16, over"
    );
}

#[rstest]
#[case::within(7, true)]
#[case::exactly_at_the_quota(8, true)]
#[case::one_more(9, false)]
fn exactly_at_the_quota_fits_and_one_more_does_not(#[case] used: u64, #[case] allowed: bool) {
    let cluster = Script::new(vec![quota_call(vec![quota("gpus", 16, Some(used), None)])]);
    let v = run(&create(deployment(4, None, "2")), &checked(), &cluster);
    assert_eq!(v.allowed, allowed, "{v:?}");
    if allowed {
        assert!(v.warnings.is_empty(), "{v:?}");
        assert_eq!(
            v.audit_annotations["quota"],
            format!(
                "namespace ml: gpus: requests.nvidia.com/gpu used {used} + incoming 8 = {} of 16, fits",
                used + 8
            )
        );
    }
}

#[rstest]
#[case::applies(Some("high"), false)]
#[case::another_class(Some("low"), true)]
#[case::no_class(None, true)]
fn a_priority_class_scoped_quota_counts_only_its_class(
    #[case] class: Option<&str>,
    #[case] allowed: bool,
) {
    let cluster = Script::new(vec![quota_call(vec![quota(
        "high-gpus",
        4,
        Some(0),
        Some(priority("high")),
    )])]);
    let v = run(&create(with_class(4, "2", class)), &checked(), &cluster);
    assert_eq!(v.allowed, allowed, "{v:?}");
    if allowed {
        assert_eq!(
            v.audit_annotations["quota"],
            "namespace ml: 1 ResourceQuota, none counts this workload's GPUs"
        );
    } else {
        assert!(
            message(&v).starts_with(
                "namespace ml: ResourceQuota high-gpus would hold 8 of its 4 requests.nvidia.com/gpu (0 used + 8 incoming): 2 of the 4 incoming replicas"
            ),
            "{v:?}"
        );
    }
}

#[test]
fn every_quota_that_counts_the_pods_is_checked() {
    // An unscoped quota with room and a scoped one without: the scoped one denies.
    let cluster = Script::new(vec![quota_call(vec![
        quota("all", 100, Some(10), None),
        quota("high-gpus", 8, Some(4), Some(priority("high"))),
    ])]);
    let v = run(
        &create(with_class(2, "4", Some("high"))),
        &checked(),
        &cluster,
    );
    denies_starting(
        &v,
        "namespace ml: ResourceQuota high-gpus would hold 12 of its 8",
    );
    assert_eq!(
        v.audit_annotations["quota"],
        "namespace ml: all: requests.nvidia.com/gpu used 10 + incoming 8 = 18 of 100, fits; high-gpus: requests.nvidia.com/gpu used 4 + incoming 8 = 12 of 8, over"
    );
}

#[test]
fn an_update_is_charged_its_increase() {
    // 2 -> 4 replicas of 2 GPUs: 4 more on 12 used = 16 of 16.
    let cluster = Script::new(vec![quota_call(vec![quota("gpus", 16, Some(12), None)])]);
    let req = request("UPDATE", deployment(4, None, "2"), deployment(2, None, "2"));
    let v = run(
        &req,
        &Settings {
            charge_rollout_surge: false,
            ..checked()
        },
        &cluster,
    );
    assert!(v.allowed, "{v:?}");
    assert_eq!(
        v.audit_annotations["quota"],
        "namespace ml: gpus: requests.nvidia.com/gpu used 12 + incoming 4 = 16 of 16, fits"
    );
    // Scaling down adds nothing: no host call.
    let req = request("UPDATE", deployment(1, None, "2"), deployment(2, None, "2"));
    let v = run(&req, &checked(), &Script::none());
    assert!(v.allowed);
}

#[test]
fn a_scale_up_over_the_quota_is_denied_on_the_scale_subresource() {
    let cluster = Script::new(vec![
        (
            parent_query("apps/v1", "Deployment", "llm", "ml"),
            Ok(json!({"metadata": {"name": "llm", "namespace": "ml"},
                "spec": {"template": {"spec": {"containers": [{"resources": {"limits": {GPU: "2"}}}]}}}})
            .to_string()),
        ),
        quota_call(vec![quota("gpus", 16, Some(12), None)]),
    ]);
    // 2 -> 6 replicas: 8 more.
    let v = run(
        &scale("apps", "deployments", json!(2), json!(6)),
        &checked(),
        &cluster,
    );
    denies(
        &v,
        "namespace ml: ResourceQuota gpus would hold 20 of its 16 requests.nvidia.com/gpu (12 used + 8 incoming): 2 of the 4 incoming replicas (2 nvidia.com/gpu each) fit. Lower replicas, free GPUs in the namespace, or ask for a larger quota.",
    );
}

#[test]
fn quota_and_pool_denials_are_reported_together() {
    let mut calls = pool_calls("a100", nodes(&[8; 8]), pods(&[8, 8, 8, 8, 8, 8, 2]));
    calls.push(quota_call(vec![quota("gpus", 16, Some(12), None)]));
    let cluster = Script::new(calls);
    let v = run(
        &create(deployment(4, Some("a100"), "2")),
        &checked(),
        &cluster,
    );
    assert!(!v.allowed);
    let m = message(&v);
    assert!(
        m.starts_with("pool a100: nvidia.com/gpu would be 58 of 64"),
        "{m}"
    );
    assert!(
        m.contains(" namespace ml: ResourceQuota gpus would hold 20 of its 16"),
        "{m}"
    );
    assert!(v.audit_annotations.contains_key("capacity"));
    assert!(v.audit_annotations.contains_key("quota"));
}

#[test]
fn a_workload_with_no_gpu_demand_makes_no_host_call() {
    let mut d = deployment(4, None, "0");
    d["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({"limits": {"cpu": "2"}});
    let v = run(&create(d), &settings(), &Script::none());
    assert!(v.allowed);
    // Nor a pod of a charged controller.
    let owned = pod(None, "2", Some(rs_owner()));
    let v = run(&create(owned), &checked(), &Script::none());
    assert!(v.allowed);
}

#[test]
fn exempt_and_poolless_templates_are_still_counted_by_the_quota() {
    let mut s = checked();
    s.exempt_priority_classes = vec!["batch-low".into()];
    let cluster = Script::new(vec![quota_call(vec![quota("gpus", 4, Some(0), None)])]);
    let v = run(&create(with_class(4, "2", Some("batch-low"))), &s, &cluster);
    denies_saying(&v, "would hold 8 of its 4");
}

#[test]
fn limits_and_bare_gpu_keys_are_not_counted_and_are_named() {
    let mut q = quota("gpus", 16, Some(0), None);
    q["spec"]["hard"] = json!({"limits.nvidia.com/gpu": "1", "nvidia.com/gpu": "1"});
    let cluster = Script::new(vec![quota_call(vec![q])]);
    let v = run(&create(deployment(4, None, "2")), &checked(), &cluster);
    assert!(v.allowed, "{v:?}");
    assert_eq!(
        v.warnings,
        vec![
            "ResourceQuota ml/gpus: spec.hard limits.nvidia.com/gpu is not counted by Kubernetes (for an extended resource it counts only requests.nvidia.com/gpu), so it limits nothing and the capacity gate does not check it: rename it to requests.nvidia.com/gpu",
            "ResourceQuota ml/gpus: spec.hard nvidia.com/gpu is not counted by Kubernetes (for an extended resource it counts only requests.nvidia.com/gpu), so it limits nothing and the capacity gate does not check it: rename it to requests.nvidia.com/gpu",
        ]
    );
}

#[test]
fn a_quota_not_counted_yet_is_denied_with_a_retry() {
    let cluster = Script::new(vec![quota_call(vec![quota("gpus", 16, None, None)])]);
    let v = run(&create(deployment(1, None, "1")), &checked(), &cluster);
    denies(
        &v,
        "ResourceQuota ml/gpus has no status.used for requests.nvidia.com/gpu yet (the quota controller has not counted it): retry in a few seconds",
    );
}

#[test]
fn a_template_without_cpu_or_memory_under_a_not_best_effort_quota_is_said_to_be_assumed() {
    let mut q = quota("gpus", 1, Some(0), None);
    q["spec"]["scopes"] = json!(["NotBestEffort"]);
    let cluster = Script::new(vec![quota_call(vec![q])]);
    let v = run(&create(deployment(1, None, "2")), &checked(), &cluster);
    denies_saying(
        &v,
        "(taken to count these pods: scope NotBestEffort: the pod template sets no cpu or memory",
    );
    // With a cpu request the pods are Burstable: counted without a word.
    let mut d = deployment(1, None, "2");
    d["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = json!({"cpu": "1"});
    let cluster = Script::new(vec![quota_call(vec![json!({"metadata": {"name": "gpus"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "1"}, "scopes": ["NotBestEffort"]},
        "status": {"used": {"requests.nvidia.com/gpu": "0"}}})])]);
    let v = run(&create(d), &checked(), &cluster);
    assert!(!message(&v).contains("taken to count"), "{v:?}");
}

const NOT_GRANTED: &str = "Policy has not been granted access to Kubernetes v1/ResourceQuota resources. The violation has been reported.";

#[test]
fn unreadable_quotas_with_warn_accept_naming_the_permission() {
    let cluster = Script::new(vec![(namespace_quota_query("ml"), Err(NOT_GRANTED.into()))]);
    let s = Settings {
        unreadable_namespace_quotas: Some(crate::settings::Action::Warn),
        ..checked()
    };
    let v = run(&create(deployment(1, None, "1")), &s, &cluster);
    assert!(v.allowed, "{v:?}");
    assert_eq!(
        v.warnings,
        vec![
            "namespace ml: its ResourceQuotas were not checked: cannot list v1/ResourceQuota: not granted to this policy: add {apiVersion: v1, kind: ResourceQuota} to the ClusterAdmissionPolicy's contextAwareResources (unreadableNamespaceQuotas: warn; Kubernetes still enforces them when the pods are created)"
        ]
    );
    assert_eq!(v.audit_annotations["host-error"], NOT_GRANTED);
    assert_eq!(v.audit_annotations["quota"], "namespace ml: not checked");
}

#[rstest]
#[case::fail_closed(None, false)]
#[case::unreadable_cluster_warn(Some(crate::settings::Action::Warn), true)]
fn unreadable_quotas_fail_closed_unless_unreadable_cluster_warn(
    #[case] unreadable_cluster: Option<crate::settings::Action>,
    #[case] allowed: bool,
) {
    let s = Settings {
        unreadable_cluster,
        ..checked()
    };
    assert_eq!(s.unreadable_namespace_quotas, None);
    let cluster = Script::new(vec![(
        namespace_quota_query("ml"),
        Err("resourcequotas is forbidden: User cannot list resource resourcequotas".into()),
    )]);
    let v = run(&create(deployment(1, None, "1")), &s, &cluster);
    assert_eq!(v.allowed, allowed, "{v:?}");
    let text = if allowed {
        v.warnings.join(" ")
    } else {
        message(&v).to_string()
    };
    assert!(
        text.contains("cannot list v1/ResourceQuota: forbidden by RBAC: grant the policy-server's ServiceAccount list and watch on resourcequotas"),
        "{text}"
    );
}
