//! gpu-vram-fit-policy: the model a workload serves must fit in the GPU memory it asks for.
//!
//! For every serving unit of the admitted object (a pod, or the pods that hold one copy of
//! a model together, see [`units`]):
//!
//! 1. its GPUs ([`crate::gpu::pod_gpus`], with KServe's model container counted);
//! 2. what its GPU containers run ([`server`]): the model, context length, concurrency,
//!    dtypes, usable memory and parallel sizes their arguments give; the tensor x pipeline
//!    parallel size must be the unit's GPU count;
//! 3. an optional cap on the GPU memory it asks for, by a label value
//!    (`requestedMemoryCaps`);
//! 4. the model it serves, in this order: the server arguments, KServe `storageUri`, the
//!    server image's labels ([`image`], `imageLabels`), the pod-template label
//!    `modelLabelKey`, the annotation `modelAnnotationKey`, and a registered
//!    `--served-model-name`; a label naming another model than the arguments or the image
//!    follows `modelMismatch`;
//! 5. the model's entry in the registry (settings `models`, and the `modelRegistry`
//!    ConfigMap read with `get_resource`, see [`catalog::registry`]), with what the
//!    arguments change applied;
//! 6. an optional cap on model memory by a label value (`modelMemoryCaps`);
//! 7. the memory per GPU ([`memory`]);
//! 8. the estimate with the unit's tensor-parallel size ([`catalog::model`]) against
//!    `GPUs x memory x usable percent`; a rejection says what it needs, what it gets and
//!    how to fix it ([`advice`]); a fit in half the GPU memory or less follows
//!    `overprovision`.
//!
//! Cases it cannot judge follow `noModel`, `unknownModel` and `unknownGpu` (deny, warn or
//! allow). Accepted requests carry audit annotations with the numbers. An UPDATE that
//! changes none of the inputs (GPUs, products, pools, model, server arguments, images, cap
//! labels) is accepted as is, so objects admitted earlier can still be relabelled, scaled
//! or finalized.

pub mod advice;
pub mod catalog;
pub mod cuda;
pub mod image;
pub mod memory;
pub mod numbers;
pub mod policy;
pub mod server;
pub mod settings;
pub mod units;

pub use settings::{Action, Checked, Config, Settings};

use crate::admission::Verdict;
use crate::cluster::HOST_ERROR_MAX;
use crate::dra::{self, ClaimBook};
use crate::gpu::{ContainerRole, GpuCounts, spec_gpus};
use crate::inventory::{self, Demand, Inventory, Refusal, Version};
use crate::scheduling::required_label_values;
use crate::workload::Workload;
use catalog::registry::Registry;
use image::Images;
use judge::{Judge, Judged};
use memory::{Lookup, Slice, pod_slices};
use server::ServerArgs;
use units::{Unit, UnitKind};

mod judge;

/// Audit annotation keys (Kubernetes prefixes them with the webhook's name).
pub const AUDIT_FIT: &str = "vram-fit";
pub const AUDIT_MODEL: &str = "vram-model";
pub const AUDIT_MODEL_SOURCE: &str = "vram-model-source";
pub const AUDIT_SERVER_ARGS: &str = "vram-server-args";
pub const AUDIT_NEED_MIB: &str = "vram-need-mib";
pub const AUDIT_AVAILABLE_MIB: &str = "vram-available-mib";
/// The host's error text when the nodes cannot be read (`nodeInventory`).
pub const AUDIT_HOST_ERROR: &str = crate::policy::AUDIT_HOST_ERROR;

/// The rules for a request the policy judges, outside its exempt namespaces. Host calls:
/// the registry ConfigMap at most once, and only when a GPU unit names a model and
/// `modelRegistry` is set; with `imageLabels`, the config of each distinct image of the
/// judged units' GPU containers at most once.
pub fn decide(a: crate::policy::Admission<'_, Checked>) -> Verdict {
    let (request, settings, cluster) = (a.request, a.settings, a.cluster);
    let config = &settings.config;
    let workload =
        Workload::from_object(&request.object, &settings.custom_kinds).map_err(|e| e.to_string());
    let claims = match &workload {
        Ok(w) => dra::resolve(w, &request.namespace, &settings.dra, cluster),
        Err(_) => ClaimBook::default(),
    };
    let planned = workload
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|w| plan_workload(w, &request.object, settings, config, &claims, None));
    let mut new = match planned {
        Ok(p) => p,
        // The object's pod templates cannot be read: a malformed (or oversized) request.
        Err(e) => return crate::policy::unreadable(request, e),
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
        && let Ok(old) = plan_object(&request.old_object, settings, config, &claims)
        && old.plans == new.plans
    {
        return Verdict::accept().with_audit(
            AUDIT_FIT,
            "not checked again: this update changes none of its GPUs, GPU products, pools or model",
        );
    }

    // The GPU nodes (`nodeInventory`): read once, and the plans made again with the
    // memory they report.
    let inventory = if settings.node_inventory.enabled && new.plans.iter().any(Plan::uses_gpu) {
        let product = narrow_to(&new.plans, config);
        match inventory::read_for(
            cluster,
            &settings.node_inventory,
            &settings.gpu_resources(),
            product.map(|p| (settings.product_label_key.as_str(), p)),
        ) {
            Ok(i) => Some(i),
            Err(f) => {
                return Verdict::reject(format!(
                    "{}. gpu-vram-fit-policy denies what it cannot check (nodeInventory.enabled); the host's error is in the audit annotation {AUDIT_HOST_ERROR}.",
                    f.explanation()
                ))
                .with_audit(AUDIT_HOST_ERROR, f.raw(HOST_ERROR_MAX));
            }
        }
    } else {
        None
    };
    if let (Some(inv), Ok(w)) = (&inventory, &workload) {
        match plan_workload(w, &request.object, settings, config, &claims, Some(inv)) {
            Ok(p) => new = p,
            Err(e) => return crate::policy::unreadable(request, e),
        }
    }

    let registry = Registry::new(&settings.models, settings.registry(), cluster);
    let images = Images::new(&settings.image_labels, cluster);
    let judge = Judge {
        settings,
        config,
        registry: &registry,
        images: settings.image_labels.enabled.then_some(&images),
    };
    let gpu_units = new.plans.iter().filter(|p| p.uses_gpu()).count();
    let mut rejections: Vec<String> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    let mut audits: Vec<String> = Vec::new();
    let mut tightest: Option<Tightest> = None;
    for plan in new.plans.iter().filter(|p| p.uses_gpu()) {
        let prefix = if gpu_units > 1 {
            format!("{}: ", plan.location)
        } else {
            String::new()
        };
        if let Some(inv) = &inventory {
            let from_images =
                image_versions(plan, settings.image_labels.enabled.then_some(&images));
            let mut denied = false;
            let cuda = cuda_from_env(settings).then_some(&images);
            for (action, text) in offered(
                inv,
                plan,
                settings,
                config,
                &from_images,
                cuda,
                &mut warnings,
            ) {
                let text = format!("{prefix}{text}");
                match action {
                    Action::Deny => {
                        rejections.push(text);
                        denied = true;
                    }
                    Action::Warn => warnings.push(format!(
                        "{text}: accepted without checking the nodes, as a node pool that scales from zero may create them (nodeInventory.noMatchingNodes: warn)"
                    )),
                    Action::Allow => audits.push(format!(
                        "{text}: not checked against the nodes (nodeInventory.noMatchingNodes: allow)"
                    )),
                }
            }
            if denied {
                continue;
            }
        }
        let outcome = judge.unit(plan);
        warnings.extend(outcome.warnings.iter().map(|w| format!("{prefix}{w}")));
        match outcome.result {
            Judged::Reject(m) => rejections.push(format!("{prefix}{m}")),
            Judged::NotChecked(m) => audits.push(format!("{prefix}not checked: {m}")),
            Judged::Fits(fit) => {
                audits.push(format!("{prefix}{}", fit.summary));
                let tighter = tightest.as_ref().is_none_or(|t| {
                    u128::from(fit.need) * u128::from(t.available)
                        > u128::from(t.need) * u128::from(fit.available)
                });
                if tighter {
                    tightest = Some(Tightest {
                        model: fit.model,
                        source: fit.source,
                        server_args: fit.server_args,
                        need: fit.need,
                        available: fit.available,
                    });
                }
            }
        }
    }
    let mut verdict = if rejections.is_empty() {
        let mut v = Verdict::accept();
        if !audits.is_empty() {
            v = v.with_audit(AUDIT_FIT, audits.join("; "));
        }
        if let Some(t) = tightest {
            v = v
                .with_audit(AUDIT_MODEL, t.model)
                .with_audit(AUDIT_MODEL_SOURCE, t.source)
                .with_audit(AUDIT_NEED_MIB, t.need.to_string())
                .with_audit(AUDIT_AVAILABLE_MIB, t.available.to_string());
            if let Some(args) = t.server_args {
                v = v.with_audit(AUDIT_SERVER_ARGS, args);
            }
        }
        v
    } else {
        Verdict::reject(rejections.join(" | "))
    };
    for w in warnings {
        verdict = verdict.with_warning(w);
    }
    if let Some(names) = inventory.as_ref().and_then(|i| i.plugin_down_names(5)) {
        verdict = verdict.with_warning(format!(
            "GPU nodes with GPU labels but no allocatable GPU (is their device plugin down?), not counted: {names}"
        ));
    }
    verdict
}

/// What no node offers of what each of a unit's pods selects, with what
/// [`no_matching_nodes`] makes of it, and the pod's location when the unit has several.
/// `from_images`: the least driver and CUDA versions the unit's images ask for, added to
/// what each pod template asks for (the higher counts). `cuda` (with
/// `imageLabels.cudaRequirementFromEnv`): the images whose environment's CUDA requirement
/// ([`cuda`]) the nodes that offer the pod's GPUs must meet; a requirement that cannot be
/// read is a warning.
fn offered(
    inventory: &Inventory,
    plan: &Plan,
    settings: &Settings,
    config: &Config,
    from_images: &MinVersions,
    cuda: Option<&Images<'_>>,
    warnings: &mut Vec<String>,
) -> Vec<(Action, String)> {
    let mut out = Vec::new();
    for m in plan.gpu_members() {
        let at = |text: String| {
            if plan.members.len() > 1 {
                format!("{}: {text}", m.location)
            } else {
                text
            }
        };
        let mut demand = match &m.demand {
            Ok(demand) => demand.clone(),
            Err(e) => {
                out.push((Action::Deny, at(e.clone())));
                continue;
            }
        };
        for (wanted, image) in [&mut demand.min_driver, &mut demand.min_cuda]
            .into_iter()
            .zip(from_images)
        {
            *wanted = higher(wanted.take(), image.clone());
        }
        let nodes = match inventory::offering(inventory, &demand, &settings.product_label_key) {
            Ok(nodes) => nodes,
            Err(refusal) => {
                let action = no_matching_nodes(&refusal, &demand, settings, config);
                out.push((action, at(refusal.message().to_string())));
                continue;
            }
        };
        let Some(images) = cuda else {
            continue;
        };
        for container in &m.containers {
            match cuda::check(images, container, &nodes) {
                Ok(None) => {}
                Ok(Some(denial)) => out.push((Action::Deny, at(denial))),
                Err(warning) => warnings.push(at(warning)),
            }
        }
    }
    out
}

/// Whether the CUDA requirement of the GPU containers' environments is checked against the
/// nodes: `imageLabels` and `nodeInventory` on, and `imageLabels.cudaRequirementFromEnv`.
fn cuda_from_env(settings: &Settings) -> bool {
    settings.image_labels.enabled
        && settings.image_labels.cuda_requirement_from_env
        && settings.node_inventory.enabled
}

/// The least driver and CUDA versions, each with where it was asked for.
type MinVersions = [Option<(Version, String)>; 2];

fn higher(a: Option<(Version, String)>, b: Option<(Version, String)>) -> Option<(Version, String)> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b.0 > a.0 { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// The least driver and CUDA versions the labels of a unit's GPU container images ask for
/// (`imageLabels`; the highest of each). An image whose config cannot be read adds none:
/// the model step says why ([`judge`]).
fn image_versions(plan: &Plan, images: Option<&Images<'_>>) -> MinVersions {
    let mut out: MinVersions = [None, None];
    let Some(images) = images else {
        return out;
    };
    for image in &plan.images {
        if let Ok(info) = images.info(image) {
            for (slot, v) in out.iter_mut().zip(info.min_versions) {
                *slot = higher(slot.take(), v);
            }
        }
    }
    out
}

/// What `nodeInventory.noMatchingNodes` makes of `refusal`: a denial for what the nodes
/// that exist do not offer, and for products that no node carries and the catalog does
/// not know (a typo: nothing could create them); the setting otherwise.
fn no_matching_nodes(
    refusal: &Refusal,
    demand: &Demand,
    settings: &Settings,
    config: &Config,
) -> Action {
    if let Refusal::Denied(_) = refusal {
        return Action::Deny;
    }
    let unknown_only = demand.products.as_ref().is_some_and(|products| {
        !products.is_empty() && !products.iter().any(|p| config.catalog.product(p).is_some())
    });
    if unknown_only {
        Action::Deny
    } else {
        settings.node_inventory.no_matching_nodes
    }
}

/// The one GPU product every GPU pod of the decision selects (a single value of
/// `productLabelKey`), when it is one the policy knows (the catalog's or `gpuProducts`'
/// names, their `-SHARED` forms; `poolProducts` name only those): the Nodes read are
/// narrowed to it.
/// Each distinct narrowed query is a watch policy-server keeps, so the products narrowed to
/// are a fixed set, never what a request makes up.
fn narrow_to<'p>(plans: &'p [Plan], config: &Config) -> Option<&'p str> {
    let mut product: Option<&str> = None;
    for m in plans.iter().flat_map(Plan::gpu_members) {
        let Ok(demand) = &m.demand else {
            return None;
        };
        let products = demand.products.as_ref().filter(|p| p.len() == 1)?;
        let one = products.iter().next()?.as_str();
        if product.is_some_and(|p| p != one) {
            return None;
        }
        product = Some(one);
    }
    product.filter(|p| config.catalog.is_listed(p))
}

/// The unit with the least room, for the audit annotations.
struct Tightest {
    model: String,
    source: String,
    server_args: Option<String>,
    need: u64,
    available: u64,
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
    /// KServe's `storageUri`, with where it is.
    uri: Option<(String, String)>,
    /// The model named by pod-template labels or annotations.
    declared: ModelRef,
    /// What the unit's GPU containers run, or why it cannot be read.
    server: Result<ServerArgs, String>,
    /// Distinct images of the GPU containers, in container order.
    images: Vec<String>,
    cap_values: Vec<String>,
    requested_cap_values: Vec<String>,
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
    /// What the pod selects of the nodes (`nodeInventory`; default when off), or why its
    /// version labels cannot be read.
    demand: Result<Demand, String>,
    /// The GPU containers' images and CUDA variables (only with [`cuda_from_env`]).
    containers: Vec<cuda::ContainerEnv>,
}

/// The model a unit's labels or annotations name.
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

    /// Pods with GPUs.
    fn gpu_pods(&self) -> u64 {
        self.gpu_members()
            .fold(0u64, |a, m| a.saturating_add(m.pods))
    }

    /// GPU devices one model server can shard over in the whole unit: whole GPUs count one
    /// each; a pod's MIG devices (a CUDA process sees one) and the replicas of a
    /// time-sliced GPU count as one device.
    fn devices(&self) -> u64 {
        self.gpu_members().fold(0u64, |total, m| {
            let per_pod = m.gpus.iter().fold(0u64, |a, (resource, n)| {
                let one = resource.starts_with(crate::gpu::MIG_PREFIX)
                    || matches!(&m.memory, Ok(slices)
                        if slices.iter().any(|s| &s.resource == resource && s.device.shared));
                a.saturating_add(if one { (*n).min(1) } else { *n })
            });
            total.saturating_add(m.pods.saturating_mul(per_pod))
        })
    }
}

fn plan_object(
    object: &serde_json::Value,
    settings: &Settings,
    config: &Config,
    claims: &ClaimBook,
) -> Result<ObjectPlan, String> {
    let workload =
        Workload::from_object(object, &settings.custom_kinds).map_err(|e| e.to_string())?;
    plan_workload(&workload, object, settings, config, claims, None)
}

/// The plan of `workload`, read from `object`; with the memory `inventory` reports.
fn plan_workload(
    workload: &Workload,
    object: &serde_json::Value,
    settings: &Settings,
    config: &Config,
    claims: &ClaimBook,
    inventory: Option<&Inventory>,
) -> Result<ObjectPlan, String> {
    let builtin_group = matches!(workload.group.as_str(), "" | "apps" | "batch");
    let unconfigured = (workload.templates.is_empty() && !builtin_group)
        .then(|| format!("{}/{}", workload.group, workload.kind));
    let units = units::units(workload, object, &settings.custom_kinds)?;
    let lookup = Lookup {
        catalog: &config.catalog,
        inventory,
        product_label_key: &settings.product_label_key,
        pool_label_key: &settings.pool_label_key,
        pool_products: &settings.pool_products,
    };
    let plans = units
        .iter()
        .map(|u| plan_unit(u, settings, config, &lookup, claims))
        .collect();
    Ok(ObjectPlan {
        plans,
        unconfigured,
    })
}

fn plan_unit(
    unit: &Unit<'_>,
    settings: &Settings,
    config: &Config,
    lookup: &Lookup<'_>,
    claims: &ClaimBook,
) -> Plan {
    let several = unit.members.len() > 1;
    let mut servers: Vec<ServerArgs> = Vec::new();
    let mut server_error: Option<String> = None;
    let mut images: Vec<String> = Vec::new();
    let members =
        unit.members
            .iter()
            .map(|m| {
                let pod = spec_gpus(&m.spec, &m.template.meta, &settings.gpu_resources(), claims);
                let mut containers = Vec::new();
                let memory = if pod.effective.is_empty() {
                    Ok(Vec::new())
                } else {
                    let view = memory::PodGpuView {
                        spec: &m.spec,
                        claim_products: &pod.claim_products,
                        share: pod.share.as_ref(),
                    };
                    pod_slices(lookup, view, &m.template.meta.labels, &pod.effective)
                };
                // The model servers are the app containers holding GPUs (all app containers
                // when the GPUs are pod-level resources).
                if m.pods > 0 && !pod.effective.is_empty() {
                    let gpu_names: Vec<&str> = pod
                        .containers
                        .iter()
                        .filter(|c| c.role == ContainerRole::App && c.total() > 0)
                        .map(|c| c.name.as_str())
                        .collect();
                    for c in
                        m.spec.containers.iter().filter(|c| {
                            gpu_names.is_empty() || gpu_names.contains(&c.name.as_str())
                        })
                    {
                        let who = if several {
                            format!("container {} in {}", c.name, m.template.location)
                        } else {
                            format!("container {}", c.name)
                        };
                        match ServerArgs::read(c, &who) {
                            Ok(args) => servers.push(args),
                            Err(e) => {
                                server_error.get_or_insert(e);
                            }
                        }
                        if let Some(image) = c.image.as_deref().map(str::trim)
                            && !image.is_empty()
                            && !images.iter().any(|i| i == image)
                        {
                            images.push(image.to_string());
                        }
                        if cuda_from_env(settings)
                            && let Some(env) =
                                cuda::ContainerEnv::of(c, format!("container {}", c.name))
                        {
                            containers.push(env);
                        }
                    }
                }
                let inventory = &settings.node_inventory;
                let demand = if inventory.enabled && !pod.effective.is_empty() {
                    let meta = &m.template.meta;
                    inventory
                        .min_versions(&meta.labels, &meta.annotations, &m.template.location)
                        .map(|[min_driver, min_cuda]| Demand {
                            products: required_label_values(&m.spec, &settings.product_label_key),
                            gpus: pod.effective.clone(),
                            min_driver,
                            min_cuda,
                        })
                } else {
                    Ok(Demand::default())
                };
                MemberPlan {
                    location: m.template.location.clone(),
                    pods: m.pods,
                    problems: pod.problems.iter().map(ToString::to_string).collect(),
                    gpus: pod.effective,
                    memory,
                    demand,
                    containers,
                }
            })
            .collect();
    let server = match server_error {
        Some(e) => Err(e),
        None => ServerArgs::merge(servers),
    };

    let uri = unit.members.iter().find_map(|m| m.storage_uri.clone());
    let mut refs: Vec<(String, String)> = Vec::new();
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
    let declared = match refs.len() {
        0 => ModelRef::None,
        1 => {
            let (reference, source) = refs.remove(0);
            ModelRef::One { reference, source }
        }
        _ => ModelRef::Conflict(refs),
    };

    let label_values = |key: &str| {
        let mut values: Vec<String> = unit
            .members
            .iter()
            .filter_map(|m| m.template.meta.labels.get(key).cloned())
            .collect();
        values.sort();
        values.dedup();
        values
    };
    let cap_values = match &config.caps {
        Some((key, _)) => label_values(key),
        None => Vec::new(),
    };
    let requested_cap_values = match &config.requested_caps {
        Some(c) => label_values(&c.label_key),
        None => Vec::new(),
    };

    Plan {
        location: unit.location(),
        kind: unit.kind.clone(),
        composition: unit.composition(),
        members,
        uri,
        declared,
        server,
        images,
        cap_values,
        requested_cap_values,
    }
}

fn plan_pods(plan: &Plan) -> u64 {
    plan.members
        .iter()
        .fold(0u64, |a, m| a.saturating_add(m.pods))
}

#[cfg(test)]
mod tests;
