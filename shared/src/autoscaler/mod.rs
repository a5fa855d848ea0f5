//! gpu-autoscaler-policy: bound what an autoscaler of a GPU workload can do, before it
//! does it.
//!
//! The capacity gate checks each scale-up when it happens; this policy checks the
//! autoscaler object itself, which decides how far and on what signal a workload will
//! scale: `autoscaling` HorizontalPodAutoscalers and KEDA ScaledObjects and ScaledJobs
//! ([`object`]). For one of them it reads the scale target with `get_resource` and field
//! masks (a ScaledJob carries its Job inline) and counts the GPUs of one replica
//! ([`target`]). A target without GPUs is accepted with no further call. For a GPU target:
//!
//! - scaling on cpu or memory only is denied for an HPA (`resourceMetricsOnly`) and
//!   warned about for KEDA (`resourceTriggersOnly`): they do not follow GPU inference load;
//! - `max replicas x GPUs per replica` must fit under what each targeted pool can ever
//!   hold ([`ceiling`]: the larger of what it offers now, its declared `capacity` or its
//!   Nodes' allocatable GPUs, and its ceiling, `maxAllocatable`, a Karpenter NodePool or
//!   a cluster-autoscaler node group, as the capacity gate reads them from the same
//!   `pools` block) and under the namespace's maximum; the message says the largest
//!   value that fits.
//!
//! Its settings are checked once into the form the rules take ([`settings::Checked`]: each
//! pool's declared GPUs and settings ceiling as counts, its node selector as a query).
//!
//! It fails closed: a target or pool that cannot be read denies, naming the permission
//! to grant, unless `unreadableCluster: warn` is set (`failOpen: true` in the old spelling).

pub mod ceiling;
pub mod object;
pub mod policy;
pub mod settings;
pub mod target;

pub use object::{Autoscaler, AutoscalerKind};
pub use settings::{Action, Checked, Settings};

use crate::admission::{AdmissionRequest, Verdict};
use crate::cluster::{Cluster, FailureClass, HOST_ERROR_MAX, HostError, HostFailure, call};
use crate::gpu::gpus_text;
use crate::gpu::scale;
use object::{MaxFrom, Signal};
use serde_json::Value;
use target::ReplicaGpus;

/// Audit annotation keys (Kubernetes prefixes them with the webhook's name). Those it
/// shares with the capacity gate mean the same here: GPU templates that target no
/// configured pool (`no-pool`), why the autoscaler was not checked (`exempt`), the host's
/// error text when the target or a pool could not be read (`host-error`).
pub mod audit {
    pub use crate::capacity::audit::{EXEMPT, HOST_ERROR, NO_POOL};
    /// The target, its GPUs per replica and the most replicas.
    pub const TARGET: &str = "target";
    /// What the autoscaler scales on.
    pub const SIGNALS: &str = "signals";
    /// Per pool and for the namespace: the bound and how many replicas fit.
    pub const CEILING: &str = "ceiling";
    /// Why the target's GPUs are not counted (a kind the policy cannot read).
    pub const NOT_CHECKED: &str = "not-checked";
}

/// Whether the policy judges `request`: a CREATE or UPDATE of an autoscaler object
/// itself (not of a subresource).
pub fn judges(request: &AdmissionRequest) -> bool {
    request.creates_or_updates()
        && request.sub_resource.is_empty()
        && AutoscalerKind::of(&request.object).is_some()
}

/// The rules for an autoscaler the policy judges, outside its exempt namespaces, reading
/// the target and the pools through `cluster`.
pub fn decide(a: crate::policy::Admission<'_, Checked>) -> Verdict {
    let (request, settings, cluster) = (a.request, a.settings, a.cluster);
    let Some(kind) = AutoscalerKind::of(&request.object) else {
        return Verdict::accept();
    };
    // Metadata-only updates (labels, KEDA's finalizer, its removal on delete) change
    // nothing the policy checks, and must not be refused when the cluster has changed.
    if request.is_update()
        && request.old_object.get("spec").is_some()
        && request.object.get("spec") == request.old_object.get("spec")
    {
        return Verdict::accept();
    }
    let mut autoscaler = match object::read(&request.object, kind) {
        Ok(a) => a,
        Err(e) => return crate::policy::unreadable(request, e),
    };
    if !request.namespace.is_empty() {
        autoscaler.namespace = request.namespace.clone();
    }
    if autoscaler.name.is_empty() {
        autoscaler.name = request.name.clone();
    }
    check(&autoscaler, settings, cluster)
}

/// What was read about the target.
enum TargetRead {
    Gpus { text: String, gpus: ReplicaGpus },
    Done(Verdict),
    Failed(HostFailure),
}

fn read_target(a: &Autoscaler, settings: &Settings, cluster: &dyn Cluster) -> TargetRead {
    let display = a.display();
    if let Some(job) = &a.inline_job {
        return match target::replica_gpus(job, settings, &a.namespace, cluster) {
            Ok(gpus) if !gpus.uncountable.is_empty() => uncountable(&display, "its Job", &gpus),
            Ok(gpus) => TargetRead::Gpus {
                text: "its Job".into(),
                gpus,
            },
            Err(e) => TargetRead::Done(
                Verdict::reject(format!("{display}: spec.jobTargetRef: {e}")).with_code(400),
            ),
        };
    }
    let Some(target) = &a.target else {
        return TargetRead::Done(Verdict::accept());
    };
    let text = format!("{} {}", target.kind, target.name);
    let Some(query) = target::query(target, &a.namespace, settings) else {
        let note = format!(
            "the GPUs of {text} ({}) are not counted: {} is not a Deployment, StatefulSet, ReplicaSet or ReplicationController, nor a kind described in customKinds; describe it there to check this autoscaler",
            target.api_version, target.kind
        );
        return TargetRead::Done(
            Verdict::accept()
                .with_warning(format!("{display}: {note}"))
                .with_audit(audit::NOT_CHECKED, note),
        );
    };
    let bytes = match call(cluster, &query) {
        Ok(bytes) => bytes,
        Err(failure) => return TargetRead::Failed(failure),
    };
    let unreadable = |e: String| {
        TargetRead::Failed(HostFailure {
            request: Box::new(query.clone()),
            error: HostError::Unreadable(e),
        })
    };
    let object: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => return unreadable(e.to_string()),
    };
    let object = match target::as_one_replica(object, &target::api_version_of(target), &target.kind)
    {
        Ok(o) => o,
        Err(e) => return unreadable(e),
    };
    match target::replica_gpus(&object, settings, &a.namespace, cluster) {
        Ok(gpus) if !gpus.uncountable.is_empty() => uncountable(&display, &text, &gpus),
        Ok(gpus) => TargetRead::Gpus { text, gpus },
        Err(e) => unreadable(e),
    }
}

/// The denial for a target whose GPUs cannot be counted (fail closed whatever
/// `unreadableCluster` says, as the capacity gate does: the target was read, the policy
/// lacks what it needs to count its GPUs).
fn uncountable(display: &str, target: &str, gpus: &ReplicaGpus) -> TargetRead {
    TargetRead::Done(Verdict::reject(format!(
        "{display}: the GPUs of {target} cannot be counted, so this autoscaler cannot be checked: {}",
        gpus.uncountable.join("; ")
    )))
}

fn check(a: &Autoscaler, settings: &Checked, cluster: &dyn Cluster) -> Verdict {
    let display = a.display();
    let (target_text, replica) = match read_target(a, settings, cluster) {
        TargetRead::Gpus { text, gpus } => (text, gpus),
        TargetRead::Done(verdict) => return verdict,
        TargetRead::Failed(failure) => {
            return host_failure(a, settings, "", &failure, Outcome::default());
        }
    };
    let unit = a.kind.unit();
    let target_audit = match &a.target {
        Some(t) => format!("{} {}/{}", t.kind, a.namespace, t.name),
        None => format!("the Job of {display}"),
    };
    if !replica.uses_gpu() {
        return Verdict::accept().with_audit(audit::TARGET, format!("{target_audit}: no GPU"));
    }
    let mut out = Outcome::default();
    out.audit.push((
        audit::TARGET,
        format!(
            "{target_audit}: {} per {unit}, {}",
            gpus_text(&replica.total),
            a.max_text()
        ),
    ));
    out.audit.push((audit::SIGNALS, signals_text(a)));
    signal_check(a, settings, &target_text, &replica, &mut out);

    let mut largest = u64::MAX;
    let mut violations = Vec::new();
    let mut hints = Vec::new();
    let mut ceilings = Vec::new();
    if let Some((max, source)) = settings.namespace_max(&a.namespace) {
        let per = replica.count();
        let fits = max / per.max(1);
        ceilings.push(format!(
            "namespace {}: {max} GPUs ({source}), {fits} fit",
            a.namespace
        ));
        if a.max_replicas > fits {
            largest = largest.min(fits);
            violations.push(format!(
                "{} x {per} GPUs per {unit} = {} GPUs, more than the {max} GPUs one autoscaler may scale to in namespace {} ({source} in the policy settings)",
                a.max_text(),
                a.max_replicas.saturating_mul(per),
                a.namespace
            ));
        }
    }
    let names = settings.gpu_resources();
    for (index, per_pool) in &replica.per_pool {
        let Some(pool) = settings.pool(*index) else {
            continue;
        };
        let bound = match ceiling::read(cluster, pool, &names) {
            Ok(c) => c,
            Err(failure) => {
                if !ceilings.is_empty() {
                    out.audit.push((audit::CEILING, ceilings.join("; ")));
                }
                out.denials
                    .extend(violation_text(a, &violations, largest, &hints));
                let context = format!("pool {}: ", pool.name);
                return host_failure(a, settings, &context, &failure, out);
            }
        };
        let Some((fits, resource)) = ceiling::fit(per_pool, &bound.gpus()) else {
            continue;
        };
        ceilings.push(format!("{}: {}, {fits} fit", pool.name, bound.audit()));
        if a.max_replicas > fits {
            largest = largest.min(fits);
            violations.push(format!(
                "{} x {} per {unit} = {}, more than pool {} can ever hold ({})",
                a.max_text(),
                gpus_text(per_pool),
                gpus_text(&scale(per_pool, a.max_replicas)),
                pool.name,
                bound.describe(&resource)
            ));
            if bound.from_nodes(&resource) {
                hints.push(format!(
                    "If pool {} autoscales, give its ceiling in the policy settings (pools[{index}].maxAllocatable, karpenterNodePool or clusterAutoscaler).",
                    pool.name
                ));
            }
        }
    }
    if !ceilings.is_empty() {
        out.audit.push((audit::CEILING, ceilings.join("; ")));
    }
    if !replica.no_pool.is_empty() && !settings.pools.is_empty() {
        out.audit.push((
            audit::NO_POOL,
            format!(
                "{}: no configured pool is named by the pool label or selected by the node selector; pool ceiling not checked",
                replica.no_pool.join(", ")
            ),
        ));
    }
    out.denials
        .extend(violation_text(a, &violations, largest, &hints));
    out.verdict(&display)
}

/// The bounds `max replicas` goes over, the largest value that fits, and the hints.
fn violation_text(
    a: &Autoscaler,
    violations: &[String],
    largest: u64,
    hints: &[String],
) -> Option<String> {
    if violations.is_empty() {
        return None;
    }
    let mut text = format!("{}. {}", violations.join("; "), fits_advice(a, largest));
    for hint in hints {
        text.push(' ');
        text.push_str(hint);
    }
    Some(text)
}

/// What to set, once the largest fitting value is known.
fn fits_advice(a: &Autoscaler, largest: u64) -> String {
    let unit = a.kind.unit();
    let field = a.kind.max_field();
    let set = match a.max_from {
        MaxFrom::Fallback => format!("{field} and fallback.replicas"),
        MaxFrom::Field | MaxFrom::KedaDefault => field.to_string(),
    };
    if largest == 0 {
        format!(
            "Not one {unit} fits: ask for fewer GPUs per {unit}, or target another pool or namespace."
        )
    } else if largest < a.min_replicas {
        format!(
            "The largest {field} that fits is {largest}, below {} {}: set both to {largest} or less.",
            a.kind.min_field(),
            a.min_replicas
        )
    } else {
        format!("The largest {field} that fits is {largest}: set {set} to {largest} or less.")
    }
}

/// `cpu`, `External vllm:num_requests_waiting, cpu`, for the audit annotation.
fn signals_text(a: &Autoscaler) -> String {
    if a.default_metrics {
        return "cpu (no spec.metrics: the default, 80% average CPU utilization)".into();
    }
    a.signals
        .iter()
        .map(|s| match s {
            Signal::PodResource(r) => r.clone(),
            Signal::Load(d) => d.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Scaling on the pods' cpu or memory only: deny, warn or allow.
fn signal_check(
    a: &Autoscaler,
    settings: &Settings,
    target_text: &str,
    replica: &ReplicaGpus,
    out: &mut Outcome,
) {
    if !a.resource_only() {
        return;
    }
    let keda = a.kind.is_keda() || a.keda_owner.is_some();
    let action = if keda {
        settings.resource_triggers_only
    } else {
        settings.resource_metrics_only
    };
    let used = a.resources_used();
    let does_not_follow = match used.as_str() {
        "cpu" => "CPU utilization does not follow GPU inference load",
        "memory" => "memory use does not follow GPU inference load",
        _ => "CPU utilization and memory use do not follow GPU inference load",
    };
    let scales = format!(
        "it scales {target_text} ({} per {}) on {used}",
        gpus_text(&replica.total),
        a.kind.unit()
    );
    let examples = "vllm:num_requests_waiting or DCGM_FI_DEV_GPU_UTIL";
    let sentence = if a.kind.is_keda() {
        format!(
            "{scales} triggers only, and {does_not_follow}. Add a trigger on requests per second, queue depth or a GPU metric (e.g. a prometheus trigger on {examples})."
        )
    } else if let Some(owner) = &a.keda_owner {
        format!(
            "{scales} only (it is made by ScaledObject {owner} from its triggers), and {does_not_follow}. Add a trigger on requests per second, queue depth or a GPU metric to ScaledObject {owner} (e.g. a prometheus trigger on {examples})."
        )
    } else {
        let default = if a.default_metrics {
            " (spec.metrics is empty: the default is 80% average CPU utilization)"
        } else {
            ""
        };
        format!(
            "{scales} only{default}, and {does_not_follow}. Scale on requests per second, queue depth or a GPU metric with a Pods or External metric (e.g. {examples} through a metrics adapter), or with a KEDA ScaledObject and a prometheus trigger."
        )
    };
    match action {
        Action::Deny => out.denials.push(sentence),
        Action::Warn => out.warnings.push(sentence),
        Action::Allow => {}
    }
}

/// Findings collected on the way to a verdict.
#[derive(Default)]
struct Outcome {
    denials: Vec<String>,
    warnings: Vec<String>,
    audit: Vec<(&'static str, String)>,
}

impl Outcome {
    fn verdict(self, display: &str) -> Verdict {
        let mut verdict = if self.denials.is_empty() {
            Verdict::accept()
        } else {
            Verdict::reject(format!("{display}: {}", self.denials.join(" ")))
        };
        for warning in self.warnings {
            verdict = verdict.with_warning(format!("{display}: {warning}"));
        }
        for (key, value) in self.audit {
            verdict = verdict.with_audit(key, value);
        }
        verdict
    }
}

/// The target or a pool could not be read: deny (fail closed) or accept with a warning.
fn host_failure(
    a: &Autoscaler,
    settings: &Settings,
    context: &str,
    failure: &HostFailure,
    mut out: Outcome,
) -> Verdict {
    // An empty context is the target's read; a pool's failures say so.
    let explanation = if context.is_empty() {
        explain_target(failure)
    } else {
        failure.explanation()
    };
    if settings.on_unreadable_cluster() == Action::Warn {
        out.warnings.push(format!(
            "GPU limits were not checked: {context}{explanation} (accepted because unreadableCluster is warn)"
        ));
    } else {
        out.denials.push(format!(
            "{context}{explanation}. The GPU autoscaler policy denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation {}.",
            audit::HOST_ERROR
        ));
    }
    out.audit
        .push((audit::HOST_ERROR, failure.raw(HOST_ERROR_MAX)));
    out.verdict(&a.display())
}

/// The explanation every policy gives for the failure's class ([`HostFailure::explanation`]),
/// or, for a target that does not exist, what to do about that.
fn explain_target(failure: &HostFailure) -> String {
    if let crate::cluster::ClusterRequest::Get(get) = failure.request.as_ref()
        && failure.class() == FailureClass::NotFound
    {
        return format!(
            "its target {} {}/{} was not found: create the target before its autoscaler, or correct spec.scaleTargetRef",
            get.kind,
            get.namespace.as_deref().unwrap_or(""),
            get.name
        );
    }
    failure.explanation()
}

#[cfg(test)]
mod tests;
