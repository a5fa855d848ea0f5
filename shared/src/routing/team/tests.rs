//! The team label through the policy: stamped on Pods, controllers' templates and custom
//! kinds from the namespace's label, idempotent, forged values denied, restamped when the
//! namespace's team changed, and no host call where it is not needed.

use super::*;
use crate::admission::{AdmissionRequest, ValidateSettings, Verdict};
use crate::cluster::ClusterRequest;
use crate::cluster::fake::Objects;
use crate::routing::Settings;
use crate::testing::starts_saying;
use rstest::rstest;
use serde_json::{Value, json};

fn settings_with(team_label_key: Option<&str>) -> Settings {
    let mut s: Settings = serde_json::from_value(json!({
        "pools": [
            {"name": "batch", "selector": {"matchLabels": {"workload-type": "batch"}},
             "nodeSelector": {"gpu-admission/node-pool": "batch"}},
            {"name": "interactive", "selector": {"matchLabels": {"workload-type": "interactive"}},
             "nodeSelector": {"gpu-admission/node-pool": "interactive"}}
        ],
        "customKinds": crate::workload::presets::all(),
        "exemptNamespaces": ["gpu-operator"]
    }))
    .unwrap();
    s.team_label_key = team_label_key.map(str::to_string);
    s.validate().unwrap();
    s
}

fn settings() -> Settings {
    settings_with(Some("team"))
}

fn namespace(labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"labels": labels}})
}

/// Namespace team-a of team ml-a.
fn ml_a() -> Objects {
    Objects::default().with("Namespace", "team-a", namespace(json!({"team": "ml-a"})))
}

fn gpu_spec() -> Value {
    json!({"containers": [{"name": "main", "image": "vllm", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]})
}

fn deployment(labels: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "llm", "namespace": "team-a"},
           "spec": {"replicas": 2, "template": {"metadata": {"labels": labels}, "spec": gpu_spec()}}})
}

fn pod(labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "team-a", "labels": labels}, "spec": gpu_spec()})
}

fn request(operation: &str, object: Value, old: Value) -> AdmissionRequest {
    serde_json::from_value(json!({
        "uid": "u", "operation": operation, "namespace": "team-a",
        "object": object, "oldObject": old
    }))
    .unwrap()
}

/// The policy on `request`, with `settings` checked.
fn evaluate(request: &AdmissionRequest, settings: &Settings, cluster: &dyn Cluster) -> Verdict {
    use crate::policy::{Policy, checked};
    use crate::routing::policy::Routing;
    Routing::evaluate(request, &checked::<Routing>(settings), cluster)
}

fn create(object: Value, cluster: &Objects) -> Verdict {
    evaluate(
        &request("CREATE", object, Value::Null),
        &settings(),
        cluster,
    )
}

fn update(object: Value, old: Value, cluster: &Objects) -> Verdict {
    evaluate(&request("UPDATE", object, old), &settings(), cluster)
}

fn calls(cluster: &Objects) -> Vec<ClusterRequest> {
    cluster.calls.borrow().clone()
}

/// The team label at `pointer` (the template's metadata) of the mutated object.
fn team_at(v: &Verdict, pointer: &str) -> Option<String> {
    v.mutated_object
        .as_ref()?
        .pointer(&format!("{pointer}/labels/gpu-admission~1team"))?
        .as_str()
        .map(str::to_string)
}

const TEAM_A: &str = "team-a";

fn team(t: Option<&str>) -> NamespaceTeam {
    NamespaceTeam {
        namespace: TEAM_A.into(),
        label_key: "team".into(),
        team: t.map(str::to_string),
    }
}

#[rstest]
#[case::right(Some("ml-a"), Some("ml-a"), false, TeamLabel::Right)]
#[case::missing(None, Some("ml-a"), false, TeamLabel::Stamp("ml-a".into()))]
#[case::no_team_no_label(None, None, false, TeamLabel::Right)]
#[case::forged(Some("ml-b"), Some("ml-a"), false, TeamLabel::Forged("ml-b".into()))]
#[case::forged_without_team(Some("ml-b"), None, false, TeamLabel::Forged("ml-b".into()))]
#[case::carried_over(Some("ml-b"), Some("ml-a"), true, TeamLabel::Restamp { from: "ml-b".into(), to: Some("ml-a".into()) })]
#[case::carried_over_no_team(Some("ml-b"), None, true, TeamLabel::Restamp { from: "ml-b".into(), to: None })]
#[case::carried_over_right(Some("ml-a"), Some("ml-a"), true, TeamLabel::Right)]
fn labels_are_judged(
    #[case] have: Option<&str>,
    #[case] ns: Option<&str>,
    #[case] carried_over: bool,
    #[case] expected: TeamLabel,
) {
    assert_eq!(judge(have, &team(ns), carried_over), expected);
}

#[test]
fn the_namespace_is_read_with_one_masked_get() {
    let request = namespace_request(TEAM_A);
    assert_eq!(
        String::from_utf8(request.payload()).unwrap(),
        r#"{"api_version":"v1","kind":"Namespace","name":"team-a","namespace":null,"disable_cache":false,"field_masks":["metadata.labels"]}"#
    );
    assert_eq!(read(&ml_a(), TEAM_A, "team").unwrap(), team(Some("ml-a")));
    // An empty value is no team; so is a namespace without labels at all.
    let empty = Objects::default().with("Namespace", TEAM_A, namespace(json!({"team": ""})));
    assert_eq!(read(&empty, TEAM_A, "team").unwrap(), team(None));
    let bare = Objects::default().with("Namespace", TEAM_A, json!({"metadata": {"labels": null}}));
    assert_eq!(read(&bare, TEAM_A, "team").unwrap(), team(None));
    // No namespace: no call, no team.
    let none = Objects::default();
    assert_eq!(read(&none, "", "team").unwrap().team, None);
    assert!(calls(&none).is_empty());
}

#[test]
fn unset_makes_no_call_and_changes_nothing() {
    let cluster = ml_a();
    let object = deployment(json!({"workload-type": "batch"}));
    let r = request("CREATE", object, Value::Null);
    let plain = settings_with(None);
    let v = evaluate(&r, &plain, &cluster);
    assert!(calls(&cluster).is_empty());
    assert_eq!(v, evaluate(&r, &plain, &crate::cluster::NoCluster));
    assert_eq!(team_at(&v, "/spec/template/metadata"), None);
    assert!(v.mutated_object.is_some(), "routed as before");
}

#[test]
fn a_deployment_is_stamped_and_then_left_alone() {
    let cluster = ml_a();
    let v = create(deployment(json!({"workload-type": "batch"})), &cluster);
    assert!(v.allowed, "{:?}", v.message);
    assert_eq!(v.warnings, Vec::<String>::new());
    assert_eq!(calls(&cluster), vec![namespace_request(TEAM_A)]);
    let routed = v.mutated_object.clone().unwrap();
    assert_eq!(
        routed["spec"]["template"]["metadata"]["labels"],
        json!({"workload-type": "batch", "gpu-admission/pool": "batch", "gpu-admission/team": "ml-a"})
    );
    // Again (kubectl apply of the routed object): no patch.
    let again = create(routed.clone(), &cluster);
    assert_eq!(again, Verdict::accept());
    // Scaled (UPDATE): no patch.
    let mut scaled = routed.clone();
    scaled["spec"]["replicas"] = json!(5);
    assert_eq!(update(scaled, routed, &cluster), Verdict::accept());
}

#[test]
fn only_the_team_label_missing_is_stamped_alone() {
    // Routed before teamLabelKey was set: the team label is the only change.
    let cluster = ml_a();
    let routed = create(
        deployment(json!({"workload-type": "batch"})),
        &Objects::default().with("Namespace", TEAM_A, namespace(json!({}))),
    )
    .mutated_object
    .unwrap();
    assert!(
        routed["spec"]["template"]["metadata"]["labels"]
            .get("gpu-admission/team")
            .is_none()
    );
    let v = update(routed.clone(), routed.clone(), &cluster);
    let mut expected = routed;
    expected["spec"]["template"]["metadata"]["labels"]["gpu-admission/team"] = json!("ml-a");
    assert_eq!(v.mutated_object, Some(expected));
    assert!(v.warnings.is_empty(), "{:?}", v.warnings);
}

#[test]
fn a_pod_is_stamped_on_its_metadata() {
    let cluster = ml_a();
    let v = create(pod(json!({"workload-type": "batch"})), &cluster);
    assert_eq!(team_at(&v, "/metadata").as_deref(), Some("ml-a"));
    assert_eq!(calls(&cluster).len(), 1);
}

#[test]
fn custom_kinds_are_stamped_where_their_template_metadata_is() {
    let cluster = ml_a();
    let isvc = json!({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "llm", "namespace": "team-a", "labels": {"workload-type": "interactive"}},
        "spec": {"predictor": gpu_spec()}});
    let v = create(isvc, &cluster);
    assert_eq!(team_at(&v, "/metadata").as_deref(), Some("ml-a"));
    // A RayCluster: the GPU workers are stamped, the head without GPUs is left alone.
    let ray = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "r", "namespace": "team-a"},
        "spec": {
            "headGroupSpec": {"template": {"metadata": {"labels": {"workload-type": "batch"}},
                "spec": {"containers": [{"name": "head", "image": "ray"}]}}},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2,
                "template": {"metadata": {"labels": {"workload-type": "batch"}}, "spec": gpu_spec()}}]}});
    let v = create(ray, &cluster);
    assert!(v.allowed, "{:?}", v.message);
    assert_eq!(
        team_at(&v, "/spec/workerGroupSpecs/0/template/metadata").as_deref(),
        Some("ml-a")
    );
    assert_eq!(team_at(&v, "/spec/headGroupSpec/template/metadata"), None);
    assert_eq!(calls(&cluster).len(), 2, "one read per object");
}

/// A batch workload's labels with the team set by hand (to ml-b).
fn team_by_hand() -> Value {
    json!({"workload-type": "batch", "gpu-admission/team": "ml-b"})
}

const FORGED: &str = "spec.template.metadata.labels.gpu-admission/team: 'ml-b' is not the team of namespace team-a, which is ml-a (its label team). The team is taken from the namespace, not set by hand: remove the label (the policy sets it to ml-a)";

#[test]
fn a_forged_team_label_is_denied() {
    let cluster = ml_a();
    let v = create(deployment(team_by_hand()), &cluster);
    assert!(!v.allowed);
    assert_eq!(v.message.as_deref(), Some(FORGED));
    assert_eq!(v.mutated_object, None);
    // On a bare Pod too.
    let v = create(pod(team_by_hand()), &cluster);
    assert_eq!(
        v.message.as_deref(),
        Some(
            FORGED
                .replacen("spec.template.metadata", "metadata", 1)
                .as_str()
        )
    );
    // An UPDATE that changes it.
    let routed = create(deployment(json!({"workload-type": "batch"})), &cluster)
        .mutated_object
        .unwrap();
    let mut moved = routed.clone();
    moved["spec"]["template"]["metadata"]["labels"]["gpu-admission/team"] = json!("ml-b");
    let v = update(moved, routed.clone(), &cluster);
    assert_eq!(v.message.as_deref(), Some(FORGED));
    // Removed by an UPDATE: put back.
    let mut removed = routed.clone();
    removed["spec"]["template"]["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("gpu-admission/team");
    let v = update(removed, routed.clone(), &cluster);
    assert_eq!(v.mutated_object, Some(routed));
}

#[test]
fn a_namespace_without_a_team_stamps_nothing_and_denies_a_hand_set_label() {
    let cluster = Objects::default().with("Namespace", TEAM_A, namespace(json!({"other": "x"})));
    let v = create(deployment(json!({"workload-type": "batch"})), &cluster);
    assert!(v.allowed);
    assert_eq!(team_at(&v, "/spec/template/metadata"), None);
    assert!(v.mutated_object.is_some(), "routed to its pool");
    let v = create(deployment(team_by_hand()), &cluster);
    assert_eq!(
        v.message.as_deref(),
        Some(
            "spec.template.metadata.labels.gpu-admission/team: 'ml-b' names a team, but namespace team-a has no label team, so its workloads belong to no team. The team is taken from the namespace, not set by hand: remove the label (or ask the cluster admins to label the namespace team=<team>)"
        )
    );
}

#[test]
fn a_namespace_moved_to_another_team_restamps_on_update() {
    let routed = create(deployment(json!({"workload-type": "batch"})), &ml_a())
        .mutated_object
        .unwrap();
    let ml_b = Objects::default().with("Namespace", TEAM_A, namespace(json!({"team": "ml-b"})));
    let mut scaled = routed.clone();
    scaled["spec"]["replicas"] = json!(3);
    let v = update(scaled, routed.clone(), &ml_b);
    assert!(v.allowed, "{:?}", v.message);
    assert_eq!(
        team_at(&v, "/spec/template/metadata").as_deref(),
        Some("ml-b")
    );
    assert_eq!(
        v.warnings,
        vec![
            "spec.template.metadata.labels.gpu-admission/team: set to ml-b, the team of namespace team-a (its label team); it was ml-a"
        ]
    );
    // The namespace lost its team: the label is removed.
    let unlabelled = Objects::default().with("Namespace", TEAM_A, namespace(json!({})));
    let v = update(routed.clone(), routed, &unlabelled);
    assert!(v.allowed);
    let out = v.mutated_object.unwrap();
    assert!(
        out["spec"]["template"]["metadata"]["labels"]
            .get("gpu-admission/team")
            .is_none()
    );
    assert_eq!(
        out["spec"]["template"]["metadata"]["labels"]["gpu-admission/pool"],
        "batch"
    );
    assert_eq!(
        v.warnings,
        vec![
            "spec.template.metadata.labels.gpu-admission/team: removed, as namespace team-a has no label team and so belongs to no team; it was ml-a"
        ]
    );
}

#[test]
fn a_pod_its_controller_created_with_the_old_team_is_restamped() {
    let mut p = pod(
        json!({"workload-type": "batch", "gpu-admission/pool": "batch", "gpu-admission/team": "ml-old"}),
    );
    p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "name": "llm-5d4f", "uid": "1", "controller": true}]);
    p["spec"]["nodeSelector"] = json!({"gpu-admission/node-pool": "batch"});
    let v = create(p, &ml_a());
    assert!(v.allowed, "{:?}", v.message);
    assert_eq!(team_at(&v, "/metadata").as_deref(), Some("ml-a"));
    assert_eq!(v.warnings.len(), 1, "{:?}", v.warnings);
}

#[test]
fn no_call_where_there_is_nothing_to_stamp() {
    let cluster = ml_a();
    // No GPU.
    let mut cpu = deployment(json!({"workload-type": "batch"}));
    cpu["spec"]["template"]["spec"] = json!({"containers": [{"name": "c", "image": "x"}]});
    assert_eq!(create(cpu, &cluster), Verdict::accept());
    // Denied by routing already (no pool).
    assert!(!create(deployment(json!({"app": "x"})), &cluster).allowed);
    // An exempt namespace.
    let mut exempt = pod(json!({"workload-type": "batch"}));
    exempt["metadata"]["namespace"] = json!("gpu-operator");
    let r: AdmissionRequest = serde_json::from_value(
        json!({"uid": "u", "operation": "CREATE", "namespace": "gpu-operator", "object": exempt}),
    )
    .unwrap();
    assert_eq!(
        evaluate(&r, &settings(), &cluster),
        Verdict::accept().with_audit(
            crate::policy::AUDIT_EXEMPT,
            "namespace gpu-operator is in exemptNamespaces: not checked"
        )
    );
    // A ReplicaSet its Deployment manages (its Pods are stamped).
    let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "llm-5d4f", "namespace": "team-a", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm", "uid": "1", "controller": true}]},
        "spec": {"template": {"metadata": {"labels": {"workload-type": "batch"}}, "spec": gpu_spec()}}});
    assert!(create(rs, &cluster).allowed);
    // An UPDATE of a Job, whose template cannot change.
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "team-a"},
        "spec": {"template": {"metadata": {"labels": {"workload-type": "batch", "gpu-admission/pool": "batch"}},
                              "spec": {"nodeSelector": {"gpu-admission/node-pool": "batch"},
                                       "containers": gpu_spec()["containers"].clone()}}}});
    let mut annotated = job.clone();
    annotated["metadata"]["annotations"] = json!({"note": "x"});
    assert_eq!(update(annotated, job, &cluster), Verdict::accept());
    assert!(calls(&cluster).is_empty(), "{:?}", calls(&cluster));
}

#[test]
fn an_old_pod_relabelled_to_another_team_is_not_let_through() {
    // A Pod from before the policy (unrouted); an UPDATE that only removes a finalizer is
    // let through, one that sets the team label is judged (and the Pod cannot be routed).
    let cluster = ml_a();
    let old = pod(json!({"workload-type": "batch"}));
    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"]["gpu-admission/team"] = json!("ml-b");
    let v = update(relabelled, old.clone(), &cluster);
    assert!(!v.allowed);
    let mut finalized = old.clone();
    finalized["metadata"]["finalizers"] = json!([]);
    assert!(update(finalized, old, &cluster).allowed);
}

/// Every class of host failure fails closed, and the denial names the class and what to
/// change for it (not the grant whatever happened), with the host's own text after it.
#[rstest]
#[case::not_granted(
    "Callback evaluation failure: Policy has not been granted access to Kubernetes v1/Namespace resources. The violation has been reported.",
    "not granted to this policy: add {apiVersion: v1, kind: Namespace} to the ClusterAdmissionPolicy's contextAwareResources"
)]
#[case::forbidden(
    "Callback evaluation failure: ApiError: namespaces \"team-a\" is forbidden: User \"system:serviceaccount:kubewarden:gpu-admission-policy-server\" cannot get resource \"namespaces\" in API group \"\" at the cluster scope: Forbidden (Status { code: 403 })",
    "forbidden by RBAC: grant the policy-server's ServiceAccount get on namespaces"
)]
#[case::not_found(
    "Callback evaluation failure: Cannot find v1/Namespace named 'team-a' inside of namespace 'None'",
    "not found"
)]
#[case::unreachable(
    "Callback evaluation failure: ServiceError: client error (Connect): tcp connect error: Connection refused (os error 111)",
    "API server unreachable (connection refused): policy-server could not read the cluster; the next request retries"
)]
#[case::timed_out(
    "Callback evaluation failure: ServiceError: client error (SendRequest): connection error: timed out",
    "API server timed out: policy-server could not read the cluster; the next request retries"
)]
fn host_errors_fail_closed_naming_their_class(#[case] error: &str, #[case] why: &str) {
    let cluster = Objects::default().failing("Namespace", TEAM_A, error);
    let v = create(deployment(json!({"workload-type": "batch"})), &cluster);
    assert!(!v.allowed);
    assert_eq!(v.mutated_object, None);
    assert_eq!(
        v.message.unwrap(),
        format!(
            "namespace team-a cannot be read, so the team label gpu-admission/team of this workload cannot be set from the namespace's label team: cannot get v1/Namespace team-a: {why} (the host's error: {error})"
        )
    );
}

#[test]
fn an_unreadable_answer_fails_closed() {
    let cluster = Objects::default().with(
        "Namespace",
        TEAM_A,
        json!({"metadata": {"labels": {"team": 7}}}),
    );
    let v = create(deployment(json!({"workload-type": "batch"})), &cluster);
    assert!(!v.allowed);
    starts_saying(
        &v,
        "namespace team-a: the host's answer is not a readable Namespace (",
    );
}
