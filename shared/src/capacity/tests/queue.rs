//! `evaluate` with the queue label ([`crate::capacity::queue`]): the label alone excuses
//! nothing; a workload is left to its queue only when Kueue manages its kind, holds it
//! (suspended, or gated for a Pod) and its LocalQueue exists. Team budget 16 GPUs, no pool
//! (so that only the queue and the budget make calls).

use super::*;
use crate::admission::ValidateSettings;
use crate::capacity::queries::team_pod_query;
use crate::capacity::queue::local_queue_query;
use crate::cluster::namespace_request;

const QUEUE_KEY: &str = "kueue.x-k8s.io/queue-name";
const NOT_GRANTED: &str = "Policy has not been granted access to Kubernetes kueue.x-k8s.io/v1beta1/LocalQueue resources. The violation has been reported.";

/// `settings()` with team ml-a's budget of 16 nvidia.com/gpu, and `extra` on top.
fn budget_of_16(extra: Value) -> Settings {
    let mut v = serde_json::to_value(settings()).unwrap();
    v["teamBudgets"] = json!({"ml-a": {"nvidia.com/gpu": 16}});
    if let Value::Object(extra) = extra {
        for (k, x) in extra {
            v[k] = x;
        }
    }
    let s: Settings = serde_json::from_value(v).unwrap();
    s.validate().unwrap();
    s
}

/// The team calls: namespace ml is team ml-a, which holds 4 GPUs.
fn team_calls() -> Vec<(ClusterRequest, Result<String, String>)> {
    vec![
        (
            namespace_request("ml"),
            Ok(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": {"gpu-admission/team": "ml-a"}}}).to_string()),
        ),
        (
            team_pod_query("ml-a"),
            Ok(json!({"apiVersion": "v1", "kind": "PodList", "items": [
                {"metadata": {"name": "p0", "namespace": "ml", "labels": {"gpu-admission/team": "ml-a"}},
                 "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "4"}}}], "nodeName": "n0"}}]}).to_string()),
        ),
    ]
}

fn local_queue(answer: Result<&str, &str>) -> (ClusterRequest, Result<String, String>) {
    (
        local_queue_query("ml", "team-a"),
        answer.map(str::to_string).map_err(str::to_string),
    )
}

const FOUND: Result<&str, &str> = Ok(
    r#"{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"LocalQueue","metadata":{"name":"team-a","namespace":"ml"}}"#,
);
const MISSING: Result<&str, &str> = Err(
    "Cannot find kueue.x-k8s.io/v1beta1/LocalQueue named 'team-a' inside of namespace 'Some(\"ml\")'",
);

fn labelled(mut object: Value) -> Value {
    object["metadata"]["labels"] = json!({QUEUE_KEY: "team-a"});
    object
}

/// A Job of `pods` x `gpus` GPUs, in no pool, `suspend` as given.
fn job(pods: u64, gpus: &str, suspend: bool) -> Value {
    labelled(json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "llm", "namespace": "ml"},
        "spec": {"parallelism": pods, "completions": pods, "suspend": suspend, "template": template(None, gpus)}}))
}

/// The UPDATE by which Kueue unsuspends `job(pods, gpus, _)`.
fn unsuspend(pods: u64, gpus: &str) -> AdmissionRequest {
    request("UPDATE", job(pods, gpus, false), job(pods, gpus, true))
}

/// [`run`] with `budget_of_16(json!({}))` on `req`, the cluster answering `calls`.
fn queued(req: &AdmissionRequest, calls: Vec<(ClusterRequest, Result<String, String>)>) -> Verdict {
    run(req, &budget_of_16(json!({})), &Script::new(calls))
}

const OVER_BUDGET: &str = "team ml-a would hold 36 of its 16 nvidia.com/gpu (4 used + 32 incoming)";

#[test]
fn a_labelled_deployment_is_gated_kueue_does_not_manage_it() {
    // The issue's case: 30 x 8 GPUs against a budget of 16, with the queue label.
    let v = queued(&create(labelled(deployment(30, None, "8"))), team_calls());
    denies_starting(
        &v,
        "team ml-a would hold 244 of its 16 nvidia.com/gpu (4 used + 240 incoming)",
    );
    assert_eq!(
        v.audit_annotations["queue"],
        "Deployment ml/llm carries kueue.x-k8s.io/queue-name=team-a, but Kueue does not manage Deployment here (queueManagedKinds): gated like any workload"
    );
}

#[test]
fn without_its_local_queue_the_unsuspended_job_is_gated_and_denied_over_the_budget() {
    let mut calls = vec![local_queue(MISSING)];
    calls.extend(team_calls());
    let v = queued(&unsuspend(4, "8"), calls);
    denies_starting(&v, OVER_BUDGET);
    assert_eq!(
        v.audit_annotations["queue"],
        "Job ml/llm carries kueue.x-k8s.io/queue-name=team-a, but LocalQueue ml/team-a does not exist: gated like any workload"
    );
    assert!(v.warnings.is_empty(), "{v:?}");
}

#[test]
fn with_its_local_queue_the_unsuspended_job_is_left_to_the_queue() {
    let v = queued(&unsuspend(4, "8"), vec![local_queue(FOUND)]);
    allows_recording(
        &v,
        "queue",
        "Job ml/llm carries kueue.x-k8s.io/queue-name=team-a: LocalQueue ml/team-a exists and Kueue holds the Job (suspended), so its queue admits it, not the capacity gate (gateQueued: false)",
    );
}

#[test]
fn a_job_created_running_is_gated_without_reading_the_queue() {
    let v = queued(&create(job(4, "8", false)), team_calls());
    assert!(!v.allowed, "{v:?}");
    assert_eq!(
        v.audit_annotations["queue"],
        "Job ml/llm carries kueue.x-k8s.io/queue-name=team-a, but it was not suspended, as Kueue creates the workloads it queues: gated like any workload"
    );
}

#[test]
fn a_suspended_job_is_not_charged_and_makes_no_call() {
    let v = queued(&create(job(4, "8", true)), vec![]);
    assert!(v.allowed, "{v:?}");
    assert!(v.audit_annotations.contains_key("suspend"), "{v:?}");
}

#[test]
fn without_the_grant_it_is_gated_with_a_warning_naming_it() {
    let mut calls = vec![local_queue(Err(NOT_GRANTED))];
    calls.extend(team_calls());
    let v = queued(&unsuspend(1, "8"), calls);
    assert!(v.allowed, "{v:?}");
    assert_eq!(v.warnings.len(), 1, "{v:?}");
    assert_eq!(
        v.warnings[0],
        "Job ml/llm carries kueue.x-k8s.io/queue-name=team-a, but the capacity gate could not check that Kueue owns it: cannot get kueue.x-k8s.io/v1beta1/LocalQueue ml/team-a: not granted to this policy: add {apiVersion: kueue.x-k8s.io/v1beta1, kind: LocalQueue} to the ClusterAdmissionPolicy's contextAwareResources; until then it is gated like any workload"
    );
    assert_eq!(v.audit_annotations["host-error"], NOT_GRANTED);
    assert!(v.audit_annotations["team"].contains("fits"), "{v:?}");
}

#[test]
fn an_unreachable_api_server_fails_closed() {
    let calls = vec![local_queue(Err(
        "error trying to connect: Connection refused",
    ))];
    let v = queued(&unsuspend(1, "8"), calls);
    denies_starting(
        &v,
        "Job ml/llm: its LocalQueue: cannot get kueue.x-k8s.io/v1beta1/LocalQueue ml/team-a",
    );
}

fn gated_pod(gate: bool) -> AdmissionRequest {
    let mut p = labelled(pod(None, "8", None));
    if gate {
        p["spec"]["schedulingGates"] = json!([{"name": "kueue.x-k8s.io/admission"}]);
    }
    create(p)
}

#[rstest]
#[case::gated_pod_left_to_the_queue(true, true)]
#[case::ungated_pod_gated(false, false)]
fn pods_count_as_held_by_kueues_scheduling_gate(#[case] gate: bool, #[case] left: bool) {
    let s = budget_of_16(json!({"queueManagedKinds": [{"group": "", "kind": "Pod"}]}));
    let calls = if left {
        vec![local_queue(FOUND)]
    } else {
        team_calls()
    };
    let v = run(&gated_pod(gate), &s, &Script::new(calls));
    assert!(v.allowed, "{v:?}");
    assert_eq!(
        v.audit_annotations["queue"].contains("so its queue admits it"),
        left,
        "{v:?}"
    );
}

#[test]
fn gate_queued_gates_every_labelled_workload_without_reading_the_queue() {
    let s = budget_of_16(json!({"gateQueued": true}));
    let v = run(&unsuspend(4, "8"), &s, &Script::new(team_calls()));
    denies_starting(&v, OVER_BUDGET);
    assert!(!v.audit_annotations.contains_key("queue"), "{v:?}");
}

#[test]
fn queue_managed_kinds_must_be_pods_or_suspendable() {
    let s: Settings = serde_json::from_value(json!({
        "pools": [{"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}}}],
        "queueManagedKinds": [{"group": "batch", "kind": "Job"}, {"group": "apps", "kind": "Deployment"}]
    }))
    .unwrap();
    assert_eq!(
        s.validate().unwrap_err().to_string(),
        "queueManagedKinds[1]: apps/Deployment is neither a Pod nor a suspendable kind (Job, JobSet, RayJob, PyTorchJob, or one of suspendableKinds): the gate could not tell whether Kueue holds it"
    );
    let tf: Settings = serde_json::from_value(json!({
        "pools": [{"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}}}],
        "suspendableKinds": [{"group": "kubeflow.org", "kind": "TFJob", "path": "spec.runPolicy.suspend"}],
        "queueManagedKinds": [{"group": "kubeflow.org", "kind": "TFJob"}, {"group": "", "kind": "Pod"}]
    }))
    .unwrap();
    tf.validate().unwrap();
}
