//! Who may use GPUs (`gpuAccessLabel`) and who may share them (`gpuSharing`), through the
//! policy, with the Namespace answered by a fake cluster.

use super::super::Settings;
use super::super::policy::Labels;
use super::*;
use crate::admission::{AdmissionRequest, Verdict};
use crate::clock::FixedClock;
use crate::cluster::fake::Objects;
use crate::cluster::namespace_request;
use crate::exceptions::AUDIT_KEY;
use crate::policy::{Policy, checked};
use crate::testing::{message, says};
use serde_json::{Value, json};

// 2026-12-01T00:00:00Z.
const NOW: i64 = 1_796_083_200;

const NOT_GRANTED: &str = "Policy has not been granted access to Kubernetes v1/Namespace resources. The violation has been reported.";

fn settings(v: Value) -> Settings {
    let s: Settings = serde_json::from_value(v).unwrap();
    crate::admission::ValidateSettings::validate(&s).unwrap();
    s
}

fn access() -> Settings {
    settings(json!({"gpuAccessLabel": {"key": "gpu-access", "allowedValues": ["true"]}}))
}

/// Time-slicing and KAI fractions for interactive work and for trusted namespaces; MIG
/// for everyone.
fn sharing() -> Settings {
    settings(json!({"gpuSharing": {"enabled": true, "allow": [
        {"models": ["mig"]},
        {"models": ["timeSlicing", "kai"], "workloadTypes": ["interactive"]},
        {"models": ["timeSlicing", "kai", "hami"],
         "namespaceSelector": {"matchLabels": {"tenant-trust": "trusted"}}}
    ]}}))
}

fn cluster() -> Objects {
    Objects::default()
        .with(
            "Namespace",
            "ml",
            json!({"metadata": {"name": "ml", "labels": {"gpu-access": "true"}}}),
        )
        .with(
            "Namespace",
            "trusted",
            json!({"metadata": {"name": "trusted", "labels": {"gpu-access": "true", "tenant-trust": "trusted"}}}),
        )
        .with(
            "Namespace",
            "lab",
            json!({"metadata": {"name": "lab", "labels": {"gpu-access": "false"}}}),
        )
        .with("Namespace", "bare", json!({"metadata": {"name": "bare"}}))
        .failing("Namespace", "locked", NOT_GRANTED)
}

fn pod(workload_type: &str, resources: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "labels": {"workload-type": workload_type, "team": "ml"}},
           "spec": {"containers": [{"name": "main", "resources": {
               "limits": resources, "requests": {"cpu": "1", "memory": "1Gi"}}}]}})
}

fn whole(workload_type: &str) -> Value {
    pod(workload_type, json!({"nvidia.com/gpu": "1"}))
}

fn shared(workload_type: &str) -> Value {
    pod(workload_type, json!({"nvidia.com/gpu.shared": "1"}))
}

fn kai(workload_type: &str) -> Value {
    let mut p = pod(workload_type, json!({}));
    p["metadata"]["annotations"] = json!({"gpu-fraction": "0.5"});
    p["spec"]["schedulerName"] = json!("kai-scheduler");
    p
}

fn request(operation: &str, namespace: &str, object: Value, old: Value) -> AdmissionRequest {
    serde_json::from_value(json!({
        "uid": "u", "operation": operation, "namespace": namespace,
        "kind": {"group": "", "version": "v1", "kind": object["kind"]},
        "userInfo": {"username": "alice"}, "object": object, "oldObject": old
    }))
    .unwrap()
}

fn run(namespace: &str, object: Value, s: &Settings, cluster: &Objects) -> Verdict {
    let r = request("CREATE", namespace, object, Value::Null);
    Labels::evaluate_at(&r, &checked::<Labels>(s), cluster, &FixedClock(NOW))
}

#[test]
fn both_rules_are_off_by_default_and_read_nothing() {
    let c = cluster();
    for object in [whole("batch"), shared("batch"), kai("batch")] {
        assert!(run("locked", object, &Settings::default(), &c).allowed);
    }
    assert!(c.calls.borrow().is_empty());
}

#[test]
fn gpus_only_in_namespaces_with_the_access_label() {
    let c = cluster();
    let ok = run("ml", whole("batch"), &access(), &c);
    assert_eq!(ok, Verdict::accept());
    assert_eq!(*c.calls.borrow(), vec![namespace_request("ml")]);
    let v = run("bare", whole("batch"), &access(), &c);
    assert_eq!(
        message(&v),
        "Pod 'p' breaks the GPU admission rules (1 problem): 1) namespace bare may not use GPUs: its Namespace has no label gpu-access (gpuAccessLabel), which the cluster admins set on the namespaces allowed GPUs; ask them to set gpu-access: <one of true> on it, or run the workload without GPUs"
    );
    says(
        &run("lab", whole("batch"), &access(), &c),
        "1) namespace lab may not use GPUs: its Namespace label gpu-access is 'false', not <one of true> (gpuAccessLabel)",
    );
}

#[test]
fn a_workload_without_gpus_reads_no_namespace() {
    let c = cluster();
    let no_gpu = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
                        "spec": {"containers": [{"name": "web"}]}});
    assert!(run("bare", no_gpu, &access(), &c).allowed);
    assert!(c.calls.borrow().is_empty());
}

#[test]
fn any_value_or_a_pattern_grants_when_configured_so() {
    let c = cluster();
    let any = settings(json!({"gpuAccessLabel": {"key": "gpu-access"}}));
    assert!(
        run("lab", whole("batch"), &any, &c).allowed,
        "any non-empty value"
    );
    assert!(!run("bare", whole("batch"), &any, &c).allowed);
    let pattern = settings(json!({"gpuAccessLabel": {"key": "gpu-access", "pattern": "t*"}}));
    assert!(run("ml", whole("batch"), &pattern, &c).allowed);
    let v = run("lab", whole("batch"), &pattern, &c);
    says(&v, "not <a value matching t*>");
}

#[test]
fn gpus_in_init_containers_and_every_template_need_access_once() {
    let c = cluster();
    let init = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "labels": {"workload-type": "batch", "team": "ml"}},
        "spec": {"initContainers": [{"name": "warm", "resources": {"limits": {"nvidia.com/gpu": "1"},
                                     "requests": {"cpu": "1", "memory": "1Gi"}}}],
                 "containers": [{"name": "main"}]}});
    let v = run("bare", init, &access(), &c);
    says(&v, "namespace bare may not use GPUs");
    assert_eq!(c.calls.borrow().len(), 1);
}

#[test]
fn an_unreadable_namespace_denies_with_the_class_of_failure() {
    let c = cluster();
    let v = run("locked", whole("batch"), &access(), &c);
    assert!(!v.allowed);
    assert_eq!(
        message(&v),
        "Pod 'p' breaks the GPU admission rules (1 problem): 1) whether namespace locked may use GPUs (gpuAccessLabel gpu-access) cannot be checked: cannot get v1/Namespace locked: not granted to this policy: add {apiVersion: v1, kind: Namespace} to the ClusterAdmissionPolicy's contextAwareResources; the workload is denied until the policy can read its Namespace"
    );
    assert_eq!(
        v.audit_annotations
            .get(super::super::AUDIT_HOST_ERROR)
            .map(String::as_str),
        Some(NOT_GRANTED)
    );
}

#[test]
fn models_are_read_from_resources_claims_and_shares() {
    use crate::dra::ClaimBook;
    use crate::gpu::{GpuResources, template_gpus};
    use crate::workload::Workload;
    let of = |object: Value| {
        let w = Workload::from_object(&object, &[]).unwrap();
        models(&template_gpus(
            &w.templates[0],
            &GpuResources::default(),
            &ClaimBook::default(),
        ))
    };
    assert!(of(whole("batch")).is_empty());
    assert_eq!(
        of(shared("batch")),
        vec![(SharingModel::TimeSlicing, "nvidia.com/gpu.shared".into())]
    );
    assert_eq!(
        of(pod("batch", json!({"nvidia.com/mig-1g.10gb.shared": "1"}))),
        vec![
            (
                SharingModel::TimeSlicing,
                "nvidia.com/mig-1g.10gb.shared".into()
            ),
            (SharingModel::Mig, "nvidia.com/mig-1g.10gb.shared".into())
        ]
    );
    assert_eq!(
        of(kai("batch")),
        vec![(
            SharingModel::Kai,
            "0.5 of one GPU through KAI Scheduler".into()
        )]
    );
    assert_eq!(
        of(pod(
            "batch",
            json!({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "30"})
        )),
        vec![(SharingModel::Hami, "0.3 of one GPU through HAMi".into())]
    );
    // A DRA claim in the mig.nvidia.com class without a profile counts as nvidia.com/mig.
    let claimed = PodGpus {
        effective: [("nvidia.com/mig".to_string(), 1)].into_iter().collect(),
        ..PodGpus::default()
    };
    assert_eq!(
        models(&claimed),
        vec![(SharingModel::Mig, "nvidia.com/mig".into())]
    );
}

#[test]
fn sharing_by_workload_type() {
    let c = cluster();
    let s = sharing();
    assert!(run("ml", shared("interactive"), &s, &c).allowed);
    assert!(run("ml", kai("interactive"), &s, &c).allowed);
    assert!(
        run("ml", whole("batch"), &s, &c).allowed,
        "whole GPUs are not shared"
    );
    assert!(c.calls.borrow().is_empty(), "no namespace read was needed");
    let v = run("ml", shared("batch"), &s, &c);
    assert_eq!(
        message(&v),
        "Pod 'p' breaks the GPU admission rules (1 problem): 1) shares a GPU through time-slicing (nvidia.com/gpu.shared), which gpuSharing.allow does not allow to workload-type=batch in namespace ml (time-slicing is allowed to workload-type=interactive; namespaces matching tenant-trust=trusted); ask for whole GPUs instead, or share through MIG"
    );
    assert_eq!(*c.calls.borrow(), vec![namespace_request("ml")]);
}

#[test]
fn sharing_by_namespace_label() {
    let c = cluster();
    let s = sharing();
    assert!(run("trusted", shared("batch"), &s, &c).allowed);
    let hami = pod(
        "batch",
        json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"}),
    );
    assert!(run("trusted", hami.clone(), &s, &c).allowed);
    let v = run("ml", hami, &s, &c);
    says(
        &v,
        "shares a GPU through HAMi fractions (4000 MiB of one GPU through HAMi), which gpuSharing.allow does not allow to workload-type=batch in namespace ml (HAMi fractions is allowed to namespaces matching tenant-trust=trusted)",
    );
    let unlabelled = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu.shared": "1"}}}]}});
    let v = run("ml", unlabelled, &s, &c);
    says(
        &v,
        "does not allow to a workload without the label workload-type in namespace ml",
    );
}

#[test]
fn an_unreadable_namespace_denies_only_what_it_would_have_allowed() {
    let c = cluster();
    let s = sharing();
    assert!(run("locked", shared("interactive"), &s, &c).allowed);
    let mig = pod("batch", json!({"nvidia.com/mig-1g.10gb": "1"}));
    assert!(run("locked", mig, &s, &c).allowed);
    assert!(c.calls.borrow().is_empty());
    let v = run("locked", shared("batch"), &s, &c);
    says(
        &v,
        "1) whether namespace locked may use time-slicing (nvidia.com/gpu.shared) under gpuSharing.allow cannot be checked: cannot get v1/Namespace locked: not granted to this policy",
    );
}

#[test]
fn enabled_without_entries_allows_no_sharing() {
    let c = cluster();
    let s = settings(json!({"gpuSharing": {"enabled": true}}));
    let v = run("trusted", shared("interactive"), &s, &c);
    assert!(
        message(&v)
            .ends_with("(time-slicing is allowed to no workload); ask for whole GPUs instead"),
        "{v:?}"
    );
    assert!(run("trusted", whole("interactive"), &s, &c).allowed);
}

#[test]
fn an_update_that_adds_a_share_is_judged() {
    let c = cluster();
    let s = sharing();
    let r = request("UPDATE", "ml", kai("batch"), whole("batch"));
    let v = Labels::evaluate_at(&r, &checked::<Labels>(&s), &c, &FixedClock(NOW));
    says(
        &v,
        "shares a GPU through KAI Scheduler fractions (0.5 of one GPU through KAI Scheduler)",
    );
}

#[test]
fn exceptions_apply_by_rule_name() {
    let c = cluster();
    let mut s = access();
    s.gpu_sharing = sharing().gpu_sharing;
    s.exceptions = serde_json::from_value(json!([
        {"name": "lab-gpus", "namespaces": ["bare"], "rules": ["gpuAccess"], "owner": "alice",
         "expires": "2026-12-31"}
    ]))
    .unwrap();
    let ok = run("bare", whole("batch"), &s, &c);
    assert!(ok.allowed, "{ok:?}");
    assert_eq!(
        ok.audit_annotations.get(AUDIT_KEY).map(String::as_str),
        Some("exception=lab-gpus owner=alice expires=2027-01-01T00:00:00Z")
    );
    // gpuAccess is excused, gpuSharing is not.
    let v = run("bare", shared("batch"), &s, &c);
    assert!(!v.allowed);
    says(&v, "(1 problem): 1) shares a GPU through time-slicing");
}

#[test]
fn settings_name_the_field() {
    let bad = |v: Value| {
        let s: Settings = serde_json::from_value(v).unwrap();
        crate::admission::ValidateSettings::validate(&s)
            .unwrap_err()
            .to_string()
    };
    assert!(bad(json!({"gpuAccessLabel": {"key": "bad key"}})).starts_with("gpuAccessLabel.key: "));
    assert!(
        bad(json!({"gpuAccessLabel": {"key": "a", "allowedValues": [""]}}))
            .starts_with("gpuAccessLabel.allowedValues[0]: an empty value")
    );
    assert!(
        bad(json!({"gpuSharing": {"enabled": true, "allow": [{"models": []}]}}))
            .starts_with("gpuSharing.allow[0].models: list the sharing models")
    );
    assert!(
        bad(json!({"gpuSharing": {"allow": [{"models": ["mig"], "workloadTypes": [""]}]}}))
            .starts_with("gpuSharing.allow[0].workloadTypes[0]: ")
    );
    assert!(
        bad(json!({"gpuSharing": {"allow": [{"models": ["mig"], "namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}]}}))
            .starts_with("gpuSharing.allow[0].namespaceSelector.matchExpressions[0].values: ")
    );
    let unknown =
        serde_json::from_value::<Settings>(json!({"gpuSharing": {"allow": [{"models": ["mps"]}]}}))
            .unwrap_err()
            .to_string();
    assert!(
        unknown
            .contains("unknown variant `mps`, expected one of `timeSlicing`, `mig`, `kai`, `hami`"),
        "{unknown}"
    );
    // Forms send an empty key for an untouched field: off.
    let s = settings(json!({"gpuAccessLabel": {"key": ""}}));
    assert!(access_label(&s.gpu_access_label).is_none());
}

#[test]
fn settings_round_trip() {
    let v = json!({
        "gpuAccessLabel": {"key": "gpu-access", "allowedValues": ["true"]},
        "gpuSharing": {"enabled": true, "workloadTypeLabel": "workload-type", "allow": [
            {"models": ["mig"]},
            {"models": ["timeSlicing"], "workloadTypes": ["interactive"],
             "namespaceSelector": {"matchLabels": {"trust": "high"}, "matchExpressions": []}}
        ]}
    });
    let s = settings(v.clone());
    let back = serde_json::to_value(&s).unwrap();
    assert_eq!(back["gpuAccessLabel"], v["gpuAccessLabel"]);
    assert_eq!(back["gpuSharing"], v["gpuSharing"]);
    assert!(
        serde_json::to_value(Settings::default())
            .unwrap()
            .get("gpuSharing")
            .is_none()
    );
}
