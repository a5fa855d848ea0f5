//! What proves that a queue (Kueue) owns a workload, so that the gate leaves it to the
//! queue. The queue label (`queueLabelKey`, `kueue.x-k8s.io/queue-name`) alone proves
//! nothing: anyone can write it, on any kind, in a cluster with or without Kueue. The gate
//! leaves a workload to its queue only when all three hold:
//!
//! 1. **the kind is one Kueue manages** (`queueManagedKinds`: by default Job, JobSet,
//!    RayJob and PyTorchJob, the suspendable kinds of Kueue's default integrations; add
//!    `{group: "", kind: Pod}` where Kueue's pod integration is on);
//! 2. **the object is held the way Kueue holds it**: a suspendable kind is suspended in
//!    the old object of the UPDATE being judged (Kueue's webhook creates queued workloads
//!    suspended, and its controller unsuspends them when their ClusterQueue admits them;
//!    a suspended CREATE is not charged anyway), a Pod carries (or carried) Kueue's
//!    scheduling gate `kueue.x-k8s.io/admission`;
//! 3. **the LocalQueue the label names exists in the namespace**: one `get_resource` of
//!    `kueue.x-k8s.io/v1beta1` LocalQueue, made only when 1 and 2 hold.
//!
//! A workload the queue owns is accepted with the `queue` audit annotation: its
//! ClusterQueue's quota, not the pool threshold, the namespace's ResourceQuotas or the
//! team budget, decides when it runs (the README says why). Any other labelled workload is
//! gated like an unlabelled one, the `queue` annotation saying which proof failed. The
//! LocalQueue read is newer than the gate: when the grant is missing the workload is gated
//! with a warning naming it ([`super::upgrade`]'s rule 4: the label is the user's, so a
//! missing grant cannot excuse it); any other failure fails closed.

use super::demand::is_suspended;
use super::settings::Settings;
use super::upgrade::is_missing_grant;
use crate::admission::AdmissionRequest;
use crate::cluster::{
    Cluster, ClusterRequest, FailureClass, GetResource, HOST_ERROR_MAX, HostFailure, call,
};
use crate::workload::Workload;
use serde_json::Value;

/// Kueue's API the LocalQueue is read in.
pub const LOCAL_QUEUE_API_VERSION: &str = "kueue.x-k8s.io/v1beta1";
/// The scheduling gate Kueue's pod integration puts on the pods it queues.
pub const KUEUE_ADMISSION_GATE: &str = "kueue.x-k8s.io/admission";

pub use super::settings::{ManagedKind, default_managed_kinds};

/// What the queue label of a workload holding GPUs comes to.
#[derive(Debug)]
pub enum Judged {
    /// No queue label (or `gateQueued: true`, or `queueLabelKey: ""`).
    NotQueued,
    /// The queue owns the workload: accept it, with this `queue` audit note.
    Owned(String),
    /// The label is there but ownership is not proven: gate it like any workload, with
    /// this `queue` audit note, and a warning and the host's text when a grant is missing.
    NotOwned {
        note: String,
        warning: Option<String>,
        host_error: Option<String>,
    },
    /// The LocalQueue could not be read for another reason than a missing grant or its
    /// absence: fail closed.
    Failed(HostFailure),
}

/// The LocalQueue `namespace/name`, masked to its name: only its existence is read.
pub fn local_queue_query(namespace: &str, name: &str) -> ClusterRequest {
    ClusterRequest::Get(GetResource {
        api_version: LOCAL_QUEUE_API_VERSION.into(),
        kind: "LocalQueue".into(),
        name: name.to_string(),
        namespace: Some(namespace.to_string()),
        disable_cache: false,
        field_masks: Some(["metadata.name".to_string()].into_iter().collect()),
    })
}

/// Judges the queue label of `workload` (which holds GPUs) in `request`; `what` names it
/// (`Job ml/train`).
pub fn judge(
    request: &AdmissionRequest,
    workload: &Workload,
    settings: &Settings,
    cluster: &dyn Cluster,
    what: &str,
) -> Judged {
    let key = settings.queue_label_key.as_str();
    if settings.gate_queued || key.is_empty() {
        return Judged::NotQueued;
    }
    let Some(queue) = workload.meta.labels.get(key) else {
        return Judged::NotQueued;
    };
    let carries = format!("{what} carries {key}={queue}");
    let not_owned = |why: String| Judged::NotOwned {
        note: format!("{carries}, but {why}: gated like any workload"),
        warning: None,
        host_error: None,
    };
    let managed = settings
        .queue_managed_kinds
        .iter()
        .any(|k| k.group == workload.group && k.kind == workload.kind);
    if !managed {
        return not_owned(format!(
            "Kueue does not manage {} here (queueManagedKinds)",
            workload.kind
        ));
    }
    let held = if workload.is_pod() {
        has_admission_gate(&request.object) || has_admission_gate(&request.old_object)
    } else {
        request.is_update()
            && is_suspended(
                &workload.group,
                &workload.kind,
                &request.old_object,
                settings,
            )
    };
    if !held {
        let how = if workload.is_pod() {
            format!(
                "it has no scheduling gate {KUEUE_ADMISSION_GATE}, which Kueue puts on the pods it queues"
            )
        } else {
            "it was not suspended, as Kueue creates the workloads it queues".to_string()
        };
        return not_owned(how);
    }
    let namespace = request.namespace.as_str();
    match call(cluster, &local_queue_query(namespace, queue)) {
        Ok(_) => Judged::Owned(format!(
            "{carries}: LocalQueue {namespace}/{queue} exists and Kueue holds the {} ({}), so its queue admits it, not the capacity gate (gateQueued: false)",
            workload.kind,
            if workload.is_pod() {
                "scheduling gate"
            } else {
                "suspended"
            },
        )),
        Err(failure) if failure.class() == FailureClass::NotFound => {
            not_owned(format!("LocalQueue {namespace}/{queue} does not exist"))
        }
        Err(failure) if is_missing_grant(&failure) => Judged::NotOwned {
            note: format!(
                "{carries}, but LocalQueue {namespace}/{queue} could not be read: gated like any workload"
            ),
            warning: Some(format!(
                "{carries}, but the capacity gate could not check that Kueue owns it: {}; until then it is gated like any workload",
                failure.explanation()
            )),
            host_error: Some(failure.raw(HOST_ERROR_MAX)),
        },
        Err(failure) => Judged::Failed(failure),
    }
}

/// True when the Pod `object` carries Kueue's scheduling gate.
fn has_admission_gate(object: &Value) -> bool {
    object
        .pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|gates| {
            gates
                .iter()
                .any(|g| g.get("name").and_then(Value::as_str) == Some(KUEUE_ADMISSION_GATE))
        })
}

/// Checks `queueManagedKinds`: each kind is a Pod or suspendable (built in, or in
/// `suspendableKinds`), since the proof reads its suspend field.
pub fn validate(settings: &Settings) -> Result<(), crate::settings::FieldError> {
    for (i, k) in settings.queue_managed_kinds.iter().enumerate() {
        let pod = k.group.is_empty() && k.kind == "Pod";
        if !pod && super::demand::suspend_path(&k.group, &k.kind, settings).is_none() {
            return Err(crate::settings::FieldError::new(
                format!("queueManagedKinds[{i}]"),
                format!(
                    "{}/{} is neither a Pod nor a suspendable kind (Job, JobSet, RayJob, PyTorchJob, or one of suspendableKinds): the gate could not tell whether Kueue holds it",
                    if k.group.is_empty() { "core" } else { &k.group },
                    k.kind
                ),
            ));
        }
    }
    Ok(())
}
