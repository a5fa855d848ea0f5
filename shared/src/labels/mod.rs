//! The rules of gpu-labels-policy: GPU workloads must say what they are, ask for GPUs
//! the way Kubernetes allocates them, and leave GPU nodes to GPU work.
//!
//! The policy ([`policy::Labels`]) decides one admission request:
//!
//! 1. Operations other than CREATE and UPDATE are accepted.
//! 2. A namespace in `exemptNamespaces` is accepted with the audit annotation
//!    [`crate::policy::AUDIT_EXEMPT`] (this opening is every policy's: [`crate::policy::Policy`]).
//! 3. The object's pod templates are read ([`Workload::from_object`]); an object whose
//!    templates cannot be read (malformed, or beyond [`crate::limits`]) is denied with
//!    code 400 (fail closed), GPUs or not.
//! 4. Every template that uses a GPU (holds one, or names a GPU resource with an invalid
//!    quantity) is checked for the required labels ([`required`]) and for how it asks
//!    for GPUs ([`hygiene`]), and, where `workloadRules` are configured, for the serving
//!    and training hygiene of its workload type ([`lifecycle`]); where configured, for its
//!    namespace's right to GPUs (`gpuAccessLabel`) and the GPU sharing models it may use
//!    (`gpuSharing`), read from its Namespace ([`tenancy`]); every template that uses no
//!    GPU is checked against GPU nodes ([`gpu_nodes`]).
//! 5. Problems of a rule an exception covers (`exceptions`, [`excuses`]) are dropped,
//!    with the audit annotations `exception` and `excused` and, in an exception's last
//!    week, a warning; a problem whose only exception has expired stays, and the denial
//!    says which exception expired and when.
//! 6. Any problem left denies the request with one message that lists them (the first
//!    [`MAX_LISTED`], then a count: [`problems::rejection_message`]) — except an UPDATE that changes neither the pod
//!    templates nor any label: that is accepted with a warning and the audit annotation
//!    [`AUDIT_UNCHANGED`], so controllers can still scale, annotate and remove finalizers
//!    from objects that predate the policy. Any change to a template or a label (or to the
//!    rollout strategy or Job deadline a configured `workloadRules` rule reads) is judged
//!    in full against the new object.

pub mod claims;
pub mod devices;
pub mod excuses;
pub mod gpu_nodes;
pub mod hygiene;
pub mod lifecycle;
pub mod policy;
pub mod problems;
pub mod required;
pub mod settings;
pub mod tenancy;

pub use problems::{Expected, Finding, Problem, Subject};
pub use settings::{GpuTaint, RULE_NAMES, RequiredLabel, Settings};

use crate::admission::{AdmissionRequest, Verdict};
use crate::dra::{self, ClaimBook};
use crate::gpu::template_gpus;
use crate::limits::MAX_LISTED;
use crate::workload::At;
use crate::workload::Workload;
use serde_json::Value;
use std::collections::BTreeSet;

/// Audit annotation set when an UPDATE of a non-compliant object is let through
/// because it changes no pod template and no label.
pub const AUDIT_UNCHANGED: &str = "unchanged-noncompliant-object";

/// Audit annotation holding the host's own text when the workload's Namespace could not
/// be read ([`tenancy`]).
pub const AUDIT_HOST_ERROR: &str = crate::policy::AUDIT_HOST_ERROR;

/// Identities under which kube-controller-manager's DaemonSet controller creates pods
/// (with and without `--use-service-account-credentials`).
pub const DAEMON_SET_CONTROLLER_USERS: [&str; 2] = [
    "system:serviceaccount:kube-system:daemon-set-controller",
    "system:kube-controller-manager",
];

/// The rules (see the module documentation) for a request the policy judges, outside its
/// exempt namespaces, at the time `clock` tells (exceptions end, [`excuses`]). `cluster`
/// answers the `get_resource` calls that read the workload's DRA claims (none without
/// claims).
pub fn decide(a: crate::policy::Admission<'_, Settings>) -> Verdict {
    let (request, settings, cluster, clock) = (a.request, a.settings, a.cluster, a.clock);
    if claims::is_claim_object(request) {
        // Its one rule that denies without a code: maxGpusPerPod.
        return crate::exceptions::excuse(
            claims::check(request, settings),
            settings,
            &settings::RULE_NAMES,
            "gpuRequests",
            request,
            clock,
        );
    }
    let object = &request.object;
    let workload = match Workload::from_object(object, &settings.custom_kinds) {
        Ok(w) => w,
        Err(e) => return crate::policy::unreadable(request, e),
    };

    let claims = dra::resolve(&workload, &request.namespace, &settings.dra, cluster);
    let namespace = tenancy::Namespace::new(cluster, crate::policy::request_namespace(request));
    let all = findings(&workload, request, settings, &claims, &namespace);
    let now = if settings.exceptions.is_empty() || all.is_empty() {
        0
    } else {
        clock.now()
    };
    let excusal = excuses::sort(all, &workload, &request.namespace, settings, now);
    let findings = &excusal.kept;
    let several = workload.templates.len() > 1;
    // envFrom on GPU nodes: a warning, on acceptance and denial alike; then the warnings
    // of exceptions that end soon.
    let mut warnings =
        if settings.allow_daemon_sets_on_gpu_nodes && is_node_agent(&workload, request) {
            Vec::new()
        } else {
            let names = settings.gpu_resources();
            devices::env_from_warnings(&workload, object, settings, |t| {
                template_gpus(t, &names, &claims).uses_gpu()
            })
        };
    warnings.extend(excusal.warnings.iter().cloned());
    let host_error = namespace
        .failure()
        .map(|f| f.raw(crate::cluster::HOST_ERROR_MAX));
    let finish = |mut verdict: Verdict| {
        verdict.warnings.extend(warnings.iter().cloned());
        if let Some(raw) = &host_error {
            verdict = verdict.with_audit(AUDIT_HOST_ERROR, raw.clone());
        }
        if !excusal.excused.is_empty() {
            verdict = verdict
                .with_audit(crate::exceptions::AUDIT_KEY, excusal.audits.join("; "))
                .with_audit(
                    crate::exceptions::AUDIT_EXCUSED,
                    problems::rejection_message(
                        &object_name(&workload.kind, object),
                        &excusal.excused,
                        several,
                    ),
                );
        }
        verdict
    };
    if findings.is_empty() {
        return finish(Verdict::accept());
    }
    let message =
        problems::rejection_message(&object_name(&workload.kind, object), findings, several)
            + &excusal.expired_suffix();
    if request.is_update() && judged_parts_unchanged(request, &workload, settings) {
        // The API server truncates each warning at 256 characters: one short lead, then
        // one warning per problem (at most MAX_LISTED, then a count).
        let mut verdict = Verdict::accept()
            .with_warning(format!(
                "{} breaks the GPU admission rules ({}); this update is allowed because it changes no pod template and no label, but the next change to them must fix:",
                object_name(&workload.kind, object),
                problems::count_problems(findings.len())
            ))
            .with_audit(AUDIT_UNCHANGED, message);
        for (i, f) in findings.iter().take(MAX_LISTED).enumerate() {
            verdict = verdict.with_warning(format!("{}) {}", i + 1, f.problem));
        }
        if let Some(more) = problems::more_problems(findings.len()) {
            verdict = verdict.with_warning(more);
        }
        return finish(verdict);
    }
    finish(Verdict::reject(message))
}

/// Every problem of `workload`, in template order: the namespace's right to GPUs
/// (`gpuAccessLabel`, once, on the first GPU template), labels, GPU requests and sharing
/// models ([`tenancy`]) for GPU templates; GPU-node use for the others; then device access
/// ([`devices`]) for every template (node agents exempt). `namespace` is read only when a
/// rule needs it.
pub fn findings(
    workload: &Workload,
    request: &AdmissionRequest,
    settings: &Settings,
    claims: &ClaimBook,
    namespace: &tenancy::Namespace,
) -> Vec<Finding> {
    let access = tenancy::access_label(&settings.gpu_access_label);
    let mut access_checked = false;
    let names = settings.gpu_resources();
    let node_agent = settings.allow_daemon_sets_on_gpu_nodes && is_node_agent(workload, request);
    let node_rule = settings.deny_non_gpu_pods_on_gpu_nodes && !node_agent;
    let subject = if workload.is_pod() {
        Subject::Pod
    } else {
        Subject::Template
    };
    // Templates sharing their metadata (KServe predictor and workers) are labelled once.
    let mut labels_checked: BTreeSet<&str> = BTreeSet::new();
    let mut out = Vec::new();
    for template in &workload.templates {
        let gpus = template_gpus(template, &names, claims);
        let mut problems = Vec::new();
        if gpus.uses_gpu() {
            if let Some(label) = access.filter(|_| !access_checked) {
                access_checked = true;
                problems.extend(tenancy::check_access(label, namespace));
            }
            if labels_checked.insert(template.metadata_pointer.as_str()) {
                problems.extend(required::check(
                    template,
                    workload,
                    &settings.required_labels,
                ));
            }
            problems.extend(hygiene::check(&template.spec, &gpus, settings));
            problems.extend(tenancy::check_sharing(
                &settings.gpu_sharing,
                template,
                &gpus,
                namespace,
            ));
            problems.extend(lifecycle::check(
                template,
                workload,
                &request.object,
                &gpus,
                settings,
            ));
        } else if node_rule {
            problems.extend(gpu_nodes::check(&template.spec, subject, settings));
        }
        if !node_agent {
            problems.extend(devices::check(
                template,
                subject,
                gpus.uses_gpu(),
                request,
                workload,
                settings,
            ));
        }
        out.extend(problems.into_iter().map(|problem| Finding {
            location: template.location.clone(),
            problem,
        }));
    }
    out
}

/// A DaemonSet, or a Pod its controller creates: node agents that must run on every
/// node, GPU nodes included. A Pod qualifies only when its controller owner is an
/// apps/v1 DaemonSet *and* the request comes from the DaemonSet controller, so a user
/// cannot borrow the exception by writing an ownerReference.
fn is_node_agent(workload: &Workload, request: &AdmissionRequest) -> bool {
    if workload.group == "apps" && workload.kind == "DaemonSet" {
        return true;
    }
    if !workload.is_pod() {
        return false;
    }
    let owned_by_daemon_set = request
        .object
        .at("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter().any(|r| {
                r.get("controller").and_then(Value::as_bool) == Some(true)
                    && r.get("kind").and_then(Value::as_str) == Some("DaemonSet")
                    && r.get("apiVersion").and_then(Value::as_str) == Some("apps/v1")
            })
        });
    owned_by_daemon_set
        && DAEMON_SET_CONTROLLER_USERS.contains(&request.user_info.username.as_str())
}

/// True when the old and new object have the same pod templates (every field of every
/// PodSpec) and the same labels (object and templates): the verdict on the new object is
/// then the verdict the old one already had.
fn judged_parts_unchanged(request: &AdmissionRequest, new: &Workload, settings: &Settings) -> bool {
    let Ok(old) = Workload::from_object(&request.old_object, &settings.custom_kinds) else {
        return false;
    };
    old.group == new.group
        && old.kind == new.kind
        && old.meta.labels == new.meta.labels
        && old.templates.len() == new.templates.len()
        && old.templates.iter().zip(&new.templates).all(|(o, n)| {
            o.spec_pointer == n.spec_pointer
                && o.metadata_pointer == n.metadata_pointer
                && o.meta.labels == n.meta.labels
                && request.old_object.at(&o.spec_pointer) == request.object.at(&n.spec_pointer)
        })
        && settings
            .workload_rules
            .judged_pointers(new)
            .iter()
            .all(|p| request.old_object.at(p) == request.object.at(p))
}

fn object_name(kind: &str, object: &Value) -> String {
    let text = |p: &str| object.at(p).and_then(Value::as_str).unwrap_or("");
    problems::describe_object(kind, text("/metadata/name"), text("/metadata/generateName"))
}

#[cfg(test)]
mod tests;
