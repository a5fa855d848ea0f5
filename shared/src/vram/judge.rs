//! One serving unit, judged: the steps of [`super`] in order, each one a verdict or the
//! inputs of the next.

use super::advice::{self, count_for};
use super::catalog::model::{Model, Need};
use super::catalog::registry::{FoundModel, Registry};
use super::image::Images;
use super::memory::{Slice, describe, usable_per_device, usable_text};
use super::numbers::{Round, gib};
use super::server::{self, ModelArg, ServerArgs};
use super::settings::{Action, Config, Settings, Target};
use super::units::UnitKind;
use super::{ModelRef, Plan, plan_pods};
use crate::gpu::MIG_PREFIX;

pub(super) enum Judged {
    Reject(String),
    NotChecked(String),
    Fits(Fit),
}

/// A unit whose model fits, with the numbers for the audit annotations.
pub(super) struct Fit {
    pub model: String,
    /// Where the model's name came from.
    pub source: String,
    /// What the server arguments changed, and what they gave that was not counted.
    pub server_args: Option<String>,
    pub need: u64,
    pub available: u64,
    pub summary: String,
}

pub(super) struct Outcome {
    pub result: Judged,
    pub warnings: Vec<String>,
}

impl Outcome {
    fn of(result: Judged) -> Outcome {
        Outcome {
            result,
            warnings: Vec::new(),
        }
    }

    fn reject(message: String) -> Outcome {
        Outcome::of(Judged::Reject(message))
    }

    /// This outcome, after the warnings of the steps before it.
    fn after(mut self, mut warnings: Vec<String>) -> Outcome {
        warnings.append(&mut self.warnings);
        self.warnings = warnings;
        self
    }
}

pub(super) struct Judge<'a> {
    pub settings: &'a Settings,
    pub config: &'a Config,
    pub registry: &'a Registry<'a>,
    /// Set when `imageLabels` is enabled.
    pub images: Option<&'a Images<'a>>,
}

/// The model a unit serves, found.
struct Resolved {
    found: FoundModel,
    /// `argument --model of container vllm on spec.template.spec`.
    source: String,
    /// Replaces the estimate's breakdown when the need comes from an image label.
    need_from: Option<String>,
}

/// A model name and where it was found.
type Named = (String, String);

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
            Action::Deny => Outcome::reject(deny),
        }
    }

    /// `the pod`, `the LeaderWorkerSet group of 4 pods (1 leader + 3 workers)`.
    fn who(plan: &Plan) -> String {
        match &plan.kind {
            UnitKind::Pod => "the pod".to_string(),
            UnitKind::Group { name } => {
                format!("{name} of {} pods ({})", plan_pods(plan), plan.composition)
            }
        }
    }

    pub(super) fn unit(&self, plan: &Plan) -> Outcome {
        let problems: Vec<String> = plan
            .members
            .iter()
            .flat_map(|m| m.problems.iter().cloned())
            .collect();
        if !problems.is_empty() {
            return Outcome::reject(format!(
                "the GPU request cannot be counted: {}",
                problems.join("; ")
            ));
        }
        let server = match &plan.server {
            Ok(s) => s,
            Err(e) => {
                return Outcome::reject(format!("the server arguments cannot be read: {e}"));
            }
        };
        if let Some(n) = server.parallel_gpus() {
            let devices = plan.devices();
            if n != devices {
                return Outcome::reject(self.parallel_mismatch(plan, server, n, devices));
            }
        }

        let mut parts: Vec<(u64, &Slice)> = Vec::new();
        let mut unknown_gpu: Option<(&str, &str)> = None;
        for m in plan.gpu_members() {
            match &m.memory {
                Ok(slices) => parts.extend(slices.iter().map(|s| (m.pods, s))),
                Err(reason) => {
                    unknown_gpu.get_or_insert((reason, &m.location));
                }
            }
        }
        let parts = match unknown_gpu {
            None => Ok(parts),
            Some(e) => Err(e),
        };
        if let Some(capped) = self.requested_cap(plan, &parts) {
            return capped;
        }

        let mut warnings = Vec::new();
        let resolved = match self.resolve(plan, server, &mut warnings) {
            Ok(r) => r,
            Err(outcome) => return (*outcome).after(warnings),
        };
        self.fit(plan, server, &resolved, parts).after(warnings)
    }

    /// The tensor x pipeline parallel size is not the unit's GPU count.
    fn parallel_mismatch(&self, plan: &Plan, server: &ServerArgs, n: u64, devices: u64) -> String {
        let container = server
            .tensor_parallel
            .as_ref()
            .or(server.pipeline_parallel.as_ref())
            .map(|f| f.container.clone())
            .unwrap_or_default();
        let pods = plan.gpu_pods();
        let plural = |n: u64| if n == 1 { "" } else { "s" };
        let has = match &plan.kind {
            UnitKind::Pod => format!("the pod has {devices} GPU{}", plural(devices)),
            UnitKind::Group { name } => format!("{name} has {devices} GPUs over {pods} pods"),
        };
        let both = server.tensor_parallel.is_some() && server.pipeline_parallel.is_some();
        let total = if both {
            format!(" = {n} GPUs")
        } else {
            String::new()
        };
        let set = match &server.tensor_parallel {
            Some(tp) if !both => format!("{} {devices}", tp.flag),
            _ => format!("the parallel sizes so that they multiply to {devices}"),
        };
        // Whole GPUs can be requested to match; a MIG device or a time-sliced GPU is one
        // device however many are asked for.
        let whole = plan.gpu_members().all(|m| {
            m.gpus.keys().all(|r| {
                !r.starts_with(MIG_PREFIX)
                    && !matches!(&m.memory, Ok(s) if s.iter().any(|s| &s.resource == r && s.device.shared))
            })
        });
        let resource = plan
            .gpu_members()
            .flat_map(|m| m.gpus.keys())
            .next()
            .cloned()
            .unwrap_or_else(|| "nvidia.com/gpu".into());
        let request = if !whole {
            String::new()
        } else if pods == 1 {
            format!(", or request {resource}: {n}")
        } else if n.is_multiple_of(pods) {
            format!(", or request {resource}: {} per pod", n / pods)
        } else {
            String::new()
        };
        format!(
            "{container} runs {}{total}, but {has}: the server needs exactly as many GPUs as it shards the model over. Set {set}{request}.",
            server.parallel_text()
        )
    }

    /// `requestedMemoryCaps`: the GPU memory the unit asks for against its label's cap.
    fn requested_cap(
        &self,
        plan: &Plan,
        parts: &Result<Vec<(u64, &Slice)>, (&str, &str)>,
    ) -> Option<Outcome> {
        let caps = self.config.requested_caps.as_ref()?;
        let (value, cap) = plan
            .requested_cap_values
            .iter()
            .filter_map(|v| caps.max_mib.get(v).map(|c| (v, *c)))
            .min_by_key(|(_, c)| *c)?;
        let key = &caps.label_key;
        let suffix = if caps.message.is_empty() {
            String::new()
        } else {
            format!(" {}", caps.message)
        };
        let parts = match parts {
            Ok(p) => p,
            Err((reason, location)) => {
                return Some(self.cannot_judge(
                    &self.settings.unknown_gpu,
                    "unknownGpu",
                    format!("cannot check the GPU memory cap of {key}={value} workloads: {reason}"),
                    format!("the GPU type of {location} is unknown"),
                ));
            }
        };
        let asked = parts.iter().fold(0u64, |a, (pods, s)| {
            a.saturating_add(pods.saturating_mul(asked_mib(s)))
        });
        if asked <= cap {
            return None;
        }
        let pods = plan.gpu_pods();
        let per = if pods > 1 { " per pod" } else { "" };
        let fix = match parts.first() {
            Some((_, s))
                if parts.iter().all(|(_, o)| o.label == s.label)
                    && s.device.mig.is_none()
                    && !s.device.shared =>
            {
                let most = cap / pods.max(1).saturating_mul(s.device.mib).max(1);
                if most >= 1 {
                    format!(
                        ": request at most {}: {most}{per} of {}",
                        s.resource, s.label
                    )
                } else {
                    format!(
                        ": one {} already holds more; use a smaller GPU or a MIG slice",
                        s.label
                    )
                }
            }
            _ => String::new(),
        };
        Some(Outcome::reject(format!(
            "{} asks for {} = {} of GPU memory, more than the {} allowed for {key}={value} workloads{fix}.{suffix}",
            Self::who(plan),
            describe(parts),
            gib(asked, Round::Up),
            gib(cap, Round::Down)
        )))
    }

    /// The model the unit serves and its registry entry; `Err` is the outcome when there is
    /// none to judge (no model, an unknown one, a contradiction, an unreadable registry or
    /// image).
    fn resolve(
        &self,
        plan: &Plan,
        server: &ServerArgs,
        warnings: &mut Vec<String>,
    ) -> Result<Resolved, Box<Outcome>> {
        let single_location = (plan.members.len() == 1).then(|| plan.members[0].location.as_str());
        let on = |source: String| match single_location {
            Some(l) => format!("{source} on {l}"),
            None => source,
        };

        let mut image_model: Option<Named> = None;
        let mut image_vram: Option<(u64, String)> = None;
        if let Some(images) = self.images {
            let keys = images.settings();
            for image in &plan.images {
                match images.info(image) {
                    Ok(info) => {
                        if image_model.is_none()
                            && let Some(m) = info.model
                        {
                            image_model =
                                Some((m, format!("label {} of image {image}", keys.model_key)));
                        }
                        if image_vram.is_none()
                            && let Some(v) = info.vram_gib_thousandths
                        {
                            image_vram = Some((v, image.clone()));
                        }
                    }
                    Err(e) => match self.settings.unknown_model {
                        Action::Warn => warnings.push(format!("{e} (unknownModel: warn)")),
                        Action::Allow => {}
                        Action::Deny => {
                            return Err(Box::new(Outcome::reject(e)));
                        }
                    },
                }
            }
        }

        let run: Option<Named> = match &server.model {
            Some(f) => match &f.value {
                ModelArg::Id(id) => Some((id.clone(), on(f.source()))),
                ModelArg::Path(_) => None,
            },
            None => None,
        };
        let path = server.model.as_ref().and_then(|f| match &f.value {
            ModelArg::Path(p) => Some(format!("{} loads its model from {p}", f.container)),
            ModelArg::Id(_) => None,
        });
        let declared: Option<Named> = match &plan.declared {
            ModelRef::One { reference, source } => Some((reference.clone(), source.clone())),
            ModelRef::Conflict(refs) if plan.uri.is_none() => {
                let list = refs
                    .iter()
                    .map(|(r, s)| format!("'{r}' ({s})"))
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(Box::new(Outcome::reject(format!(
                    "{} names several models ({list}); the pods of one serving unit serve one model: name the same model on every template",
                    plan.location
                ))));
            }
            _ => None,
        };

        if let (Some(decl), Some(runs)) = (&declared, run.as_ref().or(image_model.as_ref()))
            && !self
                .same_model(&runs.0, &decl.0)
                .map_err(|e| Box::new(Outcome::reject(e)))?
        {
            let text = format!(
                "the {} names model '{}', but the {} names '{}'",
                decl.1, decl.0, runs.1, runs.0
            );
            match self.settings.model_mismatch {
                Action::Warn => warnings.push(format!(
                    "{text}: judged as '{}', what the server runs (modelMismatch: warn)",
                    runs.0
                )),
                Action::Allow => {}
                Action::Deny => {
                    return Err(Box::new(Outcome::reject(format!(
                        "{text}: label the workload with the model it serves, or serve the model it is labelled with (modelMismatch: deny)"
                    ))));
                }
            }
        }

        let vram_key = self
            .images
            .map(|i| i.settings().vram_gib_key.clone())
            .unwrap_or_default();
        // The need from the image's memory label, for a model named by `source`.
        let from_image = |gib_thousandths: u64, image: &str, id: String, source: String| Resolved {
            found: FoundModel {
                id,
                model: Model {
                    need: Need::Explicit { gib_thousandths },
                    attention_heads: None,
                },
                source: format!("image {image}"),
            },
            source,
            need_from: Some(format!("as given by label {vram_key} of image {image}")),
        };
        let mut candidates: Vec<Named> = [run, plan.uri.clone(), image_model, declared]
            .into_iter()
            .flatten()
            .collect();
        // The served name is a name the server answers to, not what it loads: it names the
        // model only when nothing else does and the registry knows it.
        if candidates.is_empty()
            && let Some(f) = &server.served_name
            && matches!(self.registry.lookup(&f.value), Ok(Some(_)))
        {
            candidates.push((f.value.clone(), on(f.source())));
        }
        let Some((reference, source)) = candidates.first().cloned() else {
            if let Some((t, image)) = &image_vram {
                return Ok(from_image(
                    *t,
                    image,
                    format!("of image {image}"),
                    format!("label {vram_key} of image {image}"),
                ));
            }
            return Err(Box::new(self.no_model(path)));
        };

        match self.registry.lookup(&reference) {
            Err(e) => Err(Box::new(Outcome::reject(e))),
            Ok(Some(found)) => Ok(Resolved {
                found,
                source,
                need_from: None,
            }),
            Ok(None) => {
                // A later source may name the same model by a registered name (a label
                // with the registry's short name for the id in the arguments).
                for (name, from) in candidates.iter().skip(1) {
                    if let Ok(Some(found)) = self.registry.lookup(name)
                        && self.same_model(name, &reference).unwrap_or(false)
                    {
                        return Ok(Resolved {
                            found,
                            source: format!("{from}; the {source} names it '{reference}'"),
                            need_from: None,
                        });
                    }
                }
                if let Some((t, image)) = &image_vram {
                    return Ok(from_image(*t, image, reference, source));
                }
                let registries = match self.settings.registry() {
                    Some(r) => format!(
                        "the policy's models setting or the ConfigMap {}/{}",
                        r.namespace, r.name
                    ),
                    None => "the policy's models setting".into(),
                };
                Err(Box::new(self.cannot_judge(
                    &self.settings.unknown_model,
                    "unknownModel",
                    format!(
                        "model '{reference}' ({source}) is not in the model registry, so its GPU memory cannot be checked: name a registered model, or ask the cluster admins to add it to {registries} (vramGiB, or parametersBillions, dtype, layers, kvHeads, headDim, contextLength)"
                    ),
                    format!("model '{reference}' is not in the model registry"),
                )))
            }
        }
    }

    /// The unit names no model (`noModel`).
    fn no_model(&self, path: Option<String>) -> Outcome {
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
        let (names, short) = match &path {
            Some(p) => (
                format!("names no model the policy can see ({p}, a path in the container)"),
                format!("the workload names no model ({p})"),
            ),
            None => (
                "names no model".to_string(),
                "the workload names no model".into(),
            ),
        };
        self.cannot_judge(
            &self.settings.no_model,
            "noModel",
            format!(
                "this GPU workload {names}, so its GPU memory cannot be checked: add {}",
                if how.is_empty() {
                    "a KServe storageUri or a --model argument".to_string()
                } else {
                    how.join(" or ")
                }
            ),
            short,
        )
    }

    /// Whether two names may be one model. Both registered: the same entry. One
    /// registered: the names after the last `/` (ignoring case, a KServe `hf://` prefix
    /// and a `:revision`) are equal, or one is the other followed by a suffix
    /// (`llama-3.1-8b`, `Llama-3.1-8B-Instruct`), since label values cannot hold the
    /// organisation and registries often key models by a short name. Neither registered:
    /// nothing tells them apart (and `unknownModel` decides).
    fn same_model(&self, a: &str, b: &str) -> Result<bool, String> {
        let (fa, fb) = (self.registry.lookup(a)?, self.registry.lookup(b)?);
        let (registered, other) = match (&fa, &fb) {
            (Some(x), Some(y)) => return Ok(x.id == y.id),
            (None, None) => return Ok(true),
            (Some(x), None) => (x, b),
            (None, Some(y)) => (y, a),
        };
        Ok(similar(&base(a), &base(b)) || similar(&base(&registered.id), &base(other)))
    }

    /// The estimate against the unit's memory: fits (perhaps over-provisioned) or not.
    fn fit(
        &self,
        plan: &Plan,
        server: &ServerArgs,
        resolved: &Resolved,
        parts: Result<Vec<(u64, &Slice)>, (&str, &str)>,
    ) -> Outcome {
        let found = &resolved.found;
        let applied = server::apply(&found.model, server);
        let model = &applied.model;

        // The tensor-parallel size: the server's, else the most whole GPUs one pod of the
        // unit holds. Time-sliced replicas share one GPU: one device, as for their memory.
        let tp = match &server.tensor_parallel {
            Some(f) => f.value,
            None => plan
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
                .max(1),
        };
        let estimate = model.estimate(tp);
        let need = estimate.total_mib;
        let clause = applied.clause();
        // What the model needs and why, for a denial only: an accepted request's answer
        // does not say it.
        let needs_text = || {
            let mut breakdown = resolved
                .need_from
                .clone()
                .unwrap_or_else(|| estimate.breakdown());
            if let Some(c) = &clause {
                breakdown.push_str(&format!("; {c}"));
            }
            format!(
                "model {} needs {} GPU memory ({breakdown})",
                found.id,
                estimate.total_text()
            )
        };

        if let Some((key, caps)) = &self.config.caps
            && let Some((value, cap)) = plan
                .cap_values
                .iter()
                .filter_map(|v| caps.get(v).map(|c| (v, *c)))
                .min_by_key(|(_, c)| *c)
            && need > cap
        {
            return Outcome::reject(format!(
                "{}, more than the {} allowed for {key}={value} workloads: serve a smaller or quantized model, lower its contextLength or concurrency, or use another {key}",
                needs_text(),
                gib(cap, Round::Down)
            ));
        }

        let parts = match parts {
            Ok(p) => p,
            Err((reason, location)) => {
                return self.cannot_judge(
                    &self.settings.unknown_gpu,
                    "unknownGpu",
                    format!("cannot check that model {} fits: {reason}", found.id),
                    format!("the GPU type of {location} is unknown"),
                );
            }
        };
        let usable = server
            .usable_percent
            .as_ref()
            .map_or(self.config.usable_percent, |f| f.value);
        let available = parts.iter().fold(0u64, |a, (pods, s)| {
            a.saturating_add(pods.saturating_mul(s.usable_mib(usable)))
        });
        let usable_flag = server
            .usable_percent
            .as_ref()
            .map(|f| format!(" ({} of {})", f.shown(), f.container))
            .unwrap_or_default();
        let asks = format!(
            "{} asks for {} = {}{usable_flag}",
            Self::who(plan),
            describe(&parts),
            usable_text(available, usable)
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

        if need > available {
            let gpu_pods = plan.gpu_pods();
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
                    usable,
                },
                self.config,
                &self.settings.product_label_key,
                &self.settings.pool_label_key,
            );
            return Outcome {
                result: Judged::Reject(format!("{}; {asks}. {advice}", needs_text())),
                warnings,
            };
        }

        if let Some(smaller) = self.smaller_request(model, &parts, usable, server) {
            let text = format!(
                "over-provisioned: model {} needs {}, and {asks}; {smaller}",
                found.id,
                estimate.total_text()
            );
            match self.settings.overprovision {
                Action::Warn => warnings.push(format!("{text} (overprovision: warn)")),
                Action::Allow => {}
                Action::Deny => {
                    return Outcome {
                        result: Judged::Reject(text),
                        warnings,
                    };
                }
            }
        }

        let mut notes: Vec<String> = Vec::new();
        if let Some(c) = &clause {
            notes.push(format!("counted: {c}"));
        }
        if let Some(f) = &server.usable_percent {
            notes.push(format!("usable memory: {} of {}", f.shown(), f.container));
        }
        if !applied.ignored.is_empty() {
            notes.push(format!("not counted: {}", applied.ignored.join(", ")));
        }
        let with_clause = clause.map(|c| format!(" ({c})")).unwrap_or_default();
        Outcome {
            result: Judged::Fits(Fit {
                summary: format!(
                    "model {} needs {}{with_clause}; {asks}",
                    found.id,
                    estimate.total_text()
                ),
                model: found.id.clone(),
                source: resolved.source.clone(),
                server_args: (!notes.is_empty()).then(|| notes.join("; ")),
                need,
                available,
            }),
            warnings,
        }
    }

    /// A request that holds the model in at most half the GPU memory asked for: fewer GPUs
    /// of the same product (the smallest count), else the product with less memory per GPU
    /// among the pools (or suggestions) that needs the least memory. Only for units on one
    /// whole-GPU product.
    fn smaller_request(
        &self,
        model: &Model,
        parts: &[(u64, &Slice)],
        usable: u64,
        server: &ServerArgs,
    ) -> Option<String> {
        let (_, first) = parts.first()?;
        if first.device.mig.is_some()
            || first.device.shared
            || first.share.is_some()
            || parts
                .iter()
                .any(|(_, s)| s.label != first.label || s.count != first.count)
        {
            return None;
        }
        let pods = parts.iter().fold(0u64, |a, (p, _)| a.saturating_add(*p));
        let per_pod = first.count;
        let asked = pods
            .saturating_mul(per_pod)
            .saturating_mul(first.device.mib);
        let max = self.config.max_gpus_per_pod;
        // (memory, GPUs per pod, target).
        let mut best: Option<(u64, u64, Option<&Target>)> = None;
        if per_pod >= 2
            && let Some(n) = count_for(model, pods, first.device.mib, usable, per_pod / 2, true)
        {
            best = Some((pods * n * first.device.mib, n, None));
        }
        if best.is_none() && first.resource == "nvidia.com/gpu" {
            for t in self
                .config
                .targets()
                .iter()
                .filter(|t| t.mib < first.device.mib)
            {
                let Some(n) = count_for(model, pods, t.mib, usable, max, true) else {
                    continue;
                };
                let memory = pods.saturating_mul(n).saturating_mul(t.mib);
                if memory.saturating_mul(2) <= asked
                    && best.as_ref().is_none_or(|(m, _, _)| memory < *m)
                {
                    best = Some((memory, n, Some(t)));
                }
            }
        }
        let (_, n, target) = best?;
        let per = if pods > 1 { " per pod" } else { "" };
        let resource = &first.resource;
        let (request, mib) = match target {
            None => (
                format!("{resource}: {n}{per} on {}", first.label),
                first.device.mib,
            ),
            Some(Target {
                pool: Some(pool),
                product,
                mib,
            }) => (
                format!(
                    "{resource}: {n}{per} in pool {pool} ({product}, pod label {})",
                    self.settings.pool_label_key
                ),
                *mib,
            ),
            Some(t) => (
                format!(
                    "{resource}: {n}{per} on {} (nodeSelector {})",
                    t.product, self.settings.product_label_key
                ),
                t.mib,
            ),
        };
        let tp_hint = match (&server.tensor_parallel, &server.pipeline_parallel) {
            (Some(tp), None) if pods == 1 => format!(" with {} {n}", tp.flag),
            _ => String::new(),
        };
        Some(format!(
            "{request}{tp_hint} holds it in half the GPU memory or less ({} usable): request that instead",
            gib(
                usable_per_device(pods.saturating_mul(n), mib, usable),
                Round::Down
            )
        ))
    }
}

/// A model name without organisation, `hf://`, `:revision` and case.
fn base(name: &str) -> String {
    let s = name
        .strip_prefix("hf://")
        .unwrap_or(name)
        .trim_end_matches('/');
    let s = s.rsplit('/').next().unwrap_or(s);
    s.split(':').next().unwrap_or(s).to_ascii_lowercase()
}

/// Equal names, or one of them and a suffix after `-`, `_` or `.`.
fn similar(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    !short.is_empty()
        && long
            .strip_prefix(short)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', '_', '.']))
}

/// MiB a GPU resource of one pod reserves: every MIG device, but the replicas of a
/// time-sliced GPU share one GPU's memory.
fn asked_mib(s: &Slice) -> u64 {
    if s.device.shared {
        s.device.mib
    } else {
        s.count.saturating_mul(s.device.mib)
    }
}
