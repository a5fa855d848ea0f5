//! gpu-vram-fit-policy: the model a workload serves must fit in the GPU memory it asks for.
//!
//! For every serving unit of the admitted object (a pod, or the pods that hold one copy of
//! a model together, see [`units`]):
//!
//! 1. its GPUs ([`crate::gpu::pod_gpus`], with KServe's model container counted);
//! 2. the model it names: KServe `storageUri`, else the pod-template label
//!    `modelLabelKey`, else the annotation `modelAnnotationKey`;
//! 3. the model's entry in the registry (settings `models`, and the `modelRegistry`
//!    ConfigMap read with `get_resource`, see [`catalog::registry`]);
//! 4. an optional cap on model memory by a label value (`modelMemoryCaps`);
//! 5. the memory per GPU ([`memory`]);
//! 6. the estimate with the unit's tensor-parallel size ([`catalog::model`]) against
//!    `GPUs x memory x usableMemoryPercent`; a rejection says what it needs, what it gets and
//!    how to fix it ([`advice`]).
//!
//! Cases it cannot judge follow `noModel`, `unknownModel` and `unknownGpu` (deny, warn or
//! allow). Accepted requests carry audit annotations with the numbers. An UPDATE that
//! changes none of the inputs (GPUs, products, pools, model, cap label) is accepted as is,
//! so objects admitted earlier can still be relabelled, scaled or finalized.

pub mod advice;
pub mod catalog;
pub mod memory;
pub mod numbers;
pub mod settings;
pub mod units;

pub use settings::{Action, Config, Settings};

use crate::admission::{AdmissionRequest, Verdict};
use crate::cluster::Cluster;
use crate::gpu::{GpuCounts, MIG_PREFIX, pod_gpus};
use crate::workload::Workload;
use catalog::registry::{FoundModel, Registry};
use memory::{Lookup, Slice, describe, pod_slices, usable_text};
use numbers::{Round, gib};
use units::{Unit, UnitKind};

/// Audit annotation keys (Kubernetes prefixes them with the webhook's name).
pub const AUDIT_FIT: &str = "vram-fit";
pub const AUDIT_MODEL: &str = "vram-model";
pub const AUDIT_NEED_MIB: &str = "vram-need-mib";
pub const AUDIT_AVAILABLE_MIB: &str = "vram-available-mib";

/// Decides one admission request. Makes at most one host call (the registry ConfigMap),
/// and none unless a GPU unit names a model and `modelRegistry` is set.
pub fn evaluate(request: &AdmissionRequest, settings: &Settings, cluster: &dyn Cluster) -> Verdict {
    if !request.creates_or_updates() {
        return Verdict::accept();
    }
    if settings.exempt_namespaces.contains(&request.namespace) {
        return Verdict::accept().with_audit(
            AUDIT_FIT,
            format!("not checked: namespace {} is exempt", request.namespace),
        );
    }
    let config = match settings.check() {
        Ok(c) => c,
        Err(e) => {
            return Verdict::reject(format!("gpu-vram-fit-policy has invalid settings: {e}"));
        }
    };
    let new = match plan_object(&request.object, settings, &config) {
        Ok(p) => p,
        // The object's pod templates cannot be read: a malformed (or oversized) request.
        Err(e) => return Verdict::reject(e).with_code(400),
    };
    if new.plans.is_empty() {
        return match new.unconfigured {
            Some(kind) => Verdict::accept().with_audit(
                AUDIT_FIT,
                format!(
                    "not checked: {kind} is not in customKinds, so its pod templates are unknown"
                ),
            ),
            None => Verdict::accept(),
        };
    }
    if request.is_update()
        && let Ok(old) = plan_object(&request.old_object, settings, &config)
        && old.plans == new.plans
    {
        return Verdict::accept().with_audit(
            AUDIT_FIT,
            "not checked again: this update changes none of its GPUs, GPU products, pools or model",
        );
    }

    let registry = Registry::new(&settings.models, settings.registry(), cluster);
    let judge = Judge {
        settings,
        config: &config,
        registry: &registry,
    };
    let gpu_units = new.plans.iter().filter(|p| p.uses_gpu()).count();
    let mut rejections: Vec<String> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    let mut audits: Vec<String> = Vec::new();
    let mut tightest: Option<(String, u64, u64)> = None;
    for plan in new.plans.iter().filter(|p| p.uses_gpu()) {
        let prefix = if gpu_units > 1 {
            format!("{}: ", plan.location)
        } else {
            String::new()
        };
        let outcome = judge.unit(plan);
        warnings.extend(outcome.warnings.iter().map(|w| format!("{prefix}{w}")));
        match outcome.result {
            Judged::Reject(m) => rejections.push(format!("{prefix}{m}")),
            Judged::NotChecked(m) => audits.push(format!("{prefix}not checked: {m}")),
            Judged::Fits {
                model,
                need,
                available,
                summary,
            } => {
                audits.push(format!("{prefix}{summary}"));
                let tighter = tightest.as_ref().is_none_or(|(_, n, a)| {
                    u128::from(need) * u128::from(*a) > u128::from(*n) * u128::from(available)
                });
                if tighter {
                    tightest = Some((model, need, available));
                }
            }
        }
    }
    let mut verdict = if rejections.is_empty() {
        let mut v = Verdict::accept();
        if !audits.is_empty() {
            v = v.with_audit(AUDIT_FIT, audits.join("; "));
        }
        if let Some((model, need, available)) = tightest {
            v = v
                .with_audit(AUDIT_MODEL, model)
                .with_audit(AUDIT_NEED_MIB, need.to_string())
                .with_audit(AUDIT_AVAILABLE_MIB, available.to_string());
        }
        v
    } else {
        Verdict::reject(rejections.join(" | "))
    };
    for w in warnings {
        verdict = verdict.with_warning(w);
    }
    verdict
}

/// What the rule reads from one object, per unit: compared between an UPDATE's old and new
/// object, and judged.
struct ObjectPlan {
    plans: Vec<Plan>,
    /// `group/Kind` of a custom resource the settings do not describe.
    unconfigured: Option<String>,
}

/// The inputs of one unit's judgement.
#[derive(Debug, Clone, PartialEq)]
struct Plan {
    location: String,
    kind: UnitKind,
    composition: String,
    members: Vec<MemberPlan>,
    model: ModelRef,
    cap_values: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
struct MemberPlan {
    location: String,
    pods: u64,
    /// Effective GPUs per pod.
    gpus: GpuCounts,
    problems: Vec<String>,
    /// The memory of those GPUs, or why it is unknown (only for pods with GPUs).
    memory: Result<Vec<Slice>, String>,
}

/// The model a unit names.
#[derive(Debug, Clone, PartialEq)]
enum ModelRef {
    None,
    One { reference: String, source: String },
    Conflict(Vec<(String, String)>),
}

impl Plan {
    fn uses_gpu(&self) -> bool {
        self.members
            .iter()
            .any(|m| m.pods > 0 && (!m.gpus.is_empty() || !m.problems.is_empty()))
    }

    fn gpu_members(&self) -> impl Iterator<Item = &MemberPlan> {
        self.members
            .iter()
            .filter(|m| m.pods > 0 && !m.gpus.is_empty())
    }
}

fn plan_object(
    object: &serde_json::Value,
    settings: &Settings,
    config: &Config,
) -> Result<ObjectPlan, String> {
    let workload = Workload::from_object(object, &settings.custom_kinds).map_err(|e| {
        let kind = object
            .get("kind")
            .and_then(|k| k.as_str())
            .unwrap_or("object");
        format!("cannot read the pod templates of this {kind}: {e}")
    })?;
    let builtin_group = matches!(workload.group.as_str(), "" | "apps" | "batch");
    let unconfigured = (workload.templates.is_empty() && !builtin_group)
        .then(|| format!("{}/{}", workload.group, workload.kind));
    let units = units::units(&workload, object, &settings.custom_kinds)?;
    let lookup = Lookup {
        catalog: &config.catalog,
        product_label_key: &settings.product_label_key,
        pool_label_key: &settings.pool_label_key,
        pool_products: &settings.pool_products,
    };
    let plans = units
        .iter()
        .map(|u| plan_unit(u, settings, config, &lookup))
        .collect();
    Ok(ObjectPlan {
        plans,
        unconfigured,
    })
}

fn plan_unit(unit: &Unit<'_>, settings: &Settings, config: &Config, lookup: &Lookup<'_>) -> Plan {
    let members = unit
        .members
        .iter()
        .map(|m| {
            let pod = pod_gpus(&m.spec, &config.gpu_resources);
            let memory = if pod.effective.is_empty() {
                Ok(Vec::new())
            } else {
                pod_slices(lookup, &m.spec, &m.template.meta.labels, &pod.effective)
            };
            MemberPlan {
                location: m.template.location.clone(),
                pods: m.pods,
                problems: pod.problems.iter().map(ToString::to_string).collect(),
                gpus: pod.effective,
                memory,
            }
        })
        .collect();

    let mut refs: Vec<(String, String)> = Vec::new();
    if let Some((uri, at)) = unit.members.iter().find_map(|m| m.storage_uri.clone()) {
        refs.push((uri, at));
    } else {
        for m in &unit.members {
            let meta = &m.template.meta;
            let found = [
                (&settings.model_label_key, &meta.labels, "label"),
                (
                    &settings.model_annotation_key,
                    &meta.annotations,
                    "annotation",
                ),
            ]
            .into_iter()
            .filter(|(key, _, _)| !key.is_empty())
            .find_map(|(key, map, what)| {
                map.get(key.as_str())
                    .map(|v| v.trim())
                    .filter(|v| !v.is_empty())
                    .map(|v| {
                        (
                            v.to_string(),
                            format!("{what} {key} on {}", m.template.location),
                        )
                    })
            });
            if let Some(found) = found
                && !refs.iter().any(|(r, _)| *r == found.0)
            {
                refs.push(found);
            }
        }
    }
    let model = match refs.len() {
        0 => ModelRef::None,
        1 => {
            let (reference, source) = refs.remove(0);
            ModelRef::One { reference, source }
        }
        _ => ModelRef::Conflict(refs),
    };

    let cap_values = match &config.caps {
        Some((key, _)) => {
            let mut values: Vec<String> = unit
                .members
                .iter()
                .filter_map(|m| m.template.meta.labels.get(key).cloned())
                .collect();
            values.sort();
            values.dedup();
            values
        }
        None => Vec::new(),
    };

    Plan {
        location: unit.location(),
        kind: unit.kind.clone(),
        composition: unit.composition(),
        members,
        model,
        cap_values,
    }
}

enum Judged {
    Reject(String),
    NotChecked(String),
    Fits {
        model: String,
        need: u64,
        available: u64,
        summary: String,
    },
}

struct Outcome {
    result: Judged,
    warnings: Vec<String>,
}

impl Outcome {
    fn of(result: Judged) -> Outcome {
        Outcome {
            result,
            warnings: Vec::new(),
        }
    }
}

struct Judge<'a> {
    settings: &'a Settings,
    config: &'a Config,
    registry: &'a Registry<'a>,
}

impl Judge<'_> {
    /// Applies `action` to a case the rule cannot judge; `deny` is the rejection text,
    /// `short` what warnings and audit annotations say.
    fn cannot_judge(&self, action: &Action, field: &str, deny: String, short: String) -> Outcome {
        match action {
            Action::Warn => Outcome {
                result: Judged::NotChecked(short.clone()),
                warnings: vec![format!("GPU memory not checked: {short} ({field}: warn)")],
            },
            Action::Allow => Outcome::of(Judged::NotChecked(short)),
            Action::Deny | Action::Invalid(_) => Outcome::of(Judged::Reject(deny)),
        }
    }

    fn unit(&self, plan: &Plan) -> Outcome {
        let problems: Vec<String> = plan
            .members
            .iter()
            .flat_map(|m| m.problems.iter().cloned())
            .collect();
        if !problems.is_empty() {
            return Outcome::of(Judged::Reject(format!(
                "the GPU request cannot be counted: {}",
                problems.join("; ")
            )));
        }

        let (reference, source) = match &plan.model {
            ModelRef::None => {
                let mut how = Vec::new();
                if !self.settings.model_label_key.is_empty() {
                    how.push(format!(
                        "the pod-template label {}: <model>",
                        self.settings.model_label_key
                    ));
                }
                if !self.settings.model_annotation_key.is_empty() {
                    how.push(format!(
                        "the annotation {} (for ids with '/', like meta-llama/Llama-3.1-8B-Instruct)",
                        self.settings.model_annotation_key
                    ));
                }
                return self.cannot_judge(
                    &self.settings.no_model,
                    "noModel",
                    format!(
                        "this GPU workload names no model, so its GPU memory cannot be checked: add {}",
                        if how.is_empty() {
                            "a KServe storageUri".to_string()
                        } else {
                            how.join(" or ")
                        }
                    ),
                    "the workload names no model".into(),
                );
            }
            ModelRef::Conflict(refs) => {
                let list = refs
                    .iter()
                    .map(|(r, s)| format!("'{r}' ({s})"))
                    .collect::<Vec<_>>()
                    .join(", ");
                return Outcome::of(Judged::Reject(format!(
                    "{} names several models ({list}); the pods of one serving unit serve one model: name the same model on every template",
                    plan.location
                )));
            }
            ModelRef::One { reference, source } => (reference, source),
        };

        let found: FoundModel = match self.registry.lookup(reference) {
            Err(e) => return Outcome::of(Judged::Reject(e)),
            Ok(Some(f)) => f,
            Ok(None) => {
                let registries = match self.settings.registry() {
                    Some(r) => format!(
                        "the policy's models setting or the ConfigMap {}/{}",
                        r.namespace, r.name
                    ),
                    None => "the policy's models setting".into(),
                };
                return self.cannot_judge(
                    &self.settings.unknown_model,
                    "unknownModel",
                    format!(
                        "model '{reference}' ({source}) is not in the model registry, so its GPU memory cannot be checked: name a registered model, or ask the cluster admins to add it to {registries} (vramGiB, or parametersBillions, dtype, layers, kvHeads, headDim, contextLength)"
                    ),
                    format!("model '{reference}' is not in the model registry"),
                );
            }
        };
        let model = &found.model;

        // The tensor-parallel size: the most whole GPUs one pod of the unit holds.
        // Time-sliced replicas share one GPU: one device, as for their memory.
        let tp = plan
            .gpu_members()
            .flat_map(|m| {
                m.gpus
                    .iter()
                    .filter(|(r, _)| !r.starts_with(MIG_PREFIX))
                    .map(|(r, n)| match &m.memory {
                        Ok(slices)
                            if slices.iter().any(|s| &s.resource == r && s.device.shared) =>
                        {
                            (*n).min(1)
                        }
                        _ => *n,
                    })
            })
            .max()
            .unwrap_or(1)
            .max(1);
        let estimate = model.estimate(tp);
        let need = estimate.total_mib;
        let needs_text = format!(
            "model {} needs {} GPU memory ({})",
            found.id,
            estimate.total_text(),
            estimate.breakdown()
        );

        if let Some((key, caps)) = &self.config.caps
            && let Some((value, cap)) = plan
                .cap_values
                .iter()
                .filter_map(|v| caps.get(v).map(|c| (v, *c)))
                .min_by_key(|(_, c)| *c)
            && need > cap
        {
            return Outcome::of(Judged::Reject(format!(
                "{needs_text}, more than the {} allowed for {key}={value} workloads: serve a smaller or quantized model, lower its contextLength or concurrency, or use another {key}",
                gib(cap, Round::Down)
            )));
        }

        let mut parts: Vec<(u64, &Slice)> = Vec::new();
        for m in plan.gpu_members() {
            match &m.memory {
                Ok(slices) => parts.extend(slices.iter().map(|s| (m.pods, s))),
                Err(reason) => {
                    return self.cannot_judge(
                        &self.settings.unknown_gpu,
                        "unknownGpu",
                        format!("cannot check that model {} fits: {reason}", found.id),
                        format!("the GPU type of {} is unknown", m.location),
                    );
                }
            }
        }
        let available = parts.iter().fold(0u64, |a, (pods, s)| {
            a.saturating_add(pods.saturating_mul(s.usable_mib(self.config.usable_percent)))
        });
        let who = match &plan.kind {
            UnitKind::Pod => "the pod".to_string(),
            UnitKind::Group { name } => {
                format!("{name} of {} pods ({})", plan_pods(plan), plan.composition)
            }
        };
        let asks = format!(
            "{who} asks for {} = {}",
            describe(&parts),
            usable_text(available, self.config.usable_percent)
        );

        let mut warnings = Vec::new();
        if let Some(heads) = model.attention_heads
            && tp > 1
            && !model.tp_ok(tp)
        {
            let sizes: Vec<String> = (1..=self.config.max_gpus_per_pod)
                .filter(|n| model.tp_ok(*n))
                .map(|n| n.to_string())
                .collect();
            warnings.push(format!(
                "{tp} GPUs per pod: tensor parallel size {tp} does not divide the {heads} attention heads of {}; vLLM refuses it (use {})",
                found.id,
                sizes.join(", ")
            ));
        }

        if need <= available {
            return Outcome {
                result: Judged::Fits {
                    summary: format!("model {} needs {}; {asks}", found.id, estimate.total_text()),
                    model: found.id.clone(),
                    need,
                    available,
                },
                warnings,
            };
        }
        let gpu_pods = plan
            .gpu_members()
            .fold(0u64, |a, m| a.saturating_add(m.pods));
        let current = parts
            .iter()
            .map(|(_, s)| *s)
            .find(|s| s.device.mig.is_none())
            .or_else(|| parts.first().map(|(_, s)| *s));
        let advice = advice::advise(
            model,
            &advice::Shape {
                gpu_pods,
                current,
                group: gpu_pods > 1,
            },
            self.config,
            &self.settings.product_label_key,
            &self.settings.pool_label_key,
        );
        Outcome {
            result: Judged::Reject(format!("{needs_text}; {asks}. {advice}")),
            warnings,
        }
    }
}

fn plan_pods(plan: &Plan) -> u64 {
    plan.members
        .iter()
        .fold(0u64, |a, m| a.saturating_add(m.pods))
}

#[cfg(test)]
mod tests;
