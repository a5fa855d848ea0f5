//! GPU resource names and the GPU demand of a pod.
//!
//! Kubernetes schedules a pod on the *effective* request of its containers:
//! `max(sum of app containers and sidecars, max over init containers of (that init
//! container + the sidecars started before it))`. The same rule decides how many GPUs a
//! pod holds, so GPUs hidden in an init container are counted. Ephemeral containers are
//! added to the app sum (the API server refuses resources on them, but a policy should
//! not rely on that), and pod-level resources count when they are larger.
//!
//! For extended resources such as GPUs, a request must equal its limit and a request
//! alone (no limit) is a common way to slip past checks that only read limits: both are
//! reported as [`GpuProblem`]s and the larger of the two values is what is counted.

use crate::dra::{ClaimBook, pod_claim_ref};
use crate::fractional::{FractionalSettings, KAI_DEVICE_RESOURCE, Scheduler, Share, ShareProblem};
use crate::podspec::{Container, ObjectMeta, PodSpec, ResourceList};
use crate::quantity::{Quantity, QuantityError};
use crate::workload::PodTemplate;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// GPU resource names known without configuration.
pub const BUILTIN_GPU_RESOURCES: &[&str] = &[
    "nvidia.com/gpu",
    "nvidia.com/gpu.shared",
    "amd.com/gpu",
    "gpu.intel.com/i915",
    "gpu.intel.com/xe",
];

/// Every NVIDIA MIG resource (`nvidia.com/mig-3g.40gb`, `...gb.shared`) starts with this.
pub const MIG_PREFIX: &str = "nvidia.com/mig-";

/// Which resource names are GPUs: the built-in ones, MIG profiles, and names from settings
/// (exact, or a prefix ending in `*`), minus the sizing resources of fractional-GPU
/// schedulers (HAMi's `nvidia.com/gpumem` is MiB, not GPUs, even under `nvidia.com/*`);
/// and which fractional-GPU pods count as GPU pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuResources<'s> {
    /// `extraGpuResources`: exact names, or prefixes ending in `*` ([`crate::settings::wildcard`]).
    extra: &'s [String],
    fractional: &'s FractionalSettings,
}

impl Default for GpuResources<'_> {
    /// The built-in names, with the default fractional-GPU schedulers.
    fn default() -> Self {
        GpuResources::new(&[])
    }
}

impl<'s> GpuResources<'s> {
    /// What a policy's settings count as GPUs: the built-in names plus `extra` (each exact
    /// or ending in `*`), with the `fractional` schedulers. A view of the settings: building
    /// one copies nothing, so the policies build it on every request.
    pub fn of(extra: &'s [String], fractional: &'s FractionalSettings) -> GpuResources<'s> {
        GpuResources { extra, fractional }
    }

    /// Built-in names plus `extra`, with the default fractional-GPU schedulers.
    pub fn new(extra: &'s [String]) -> GpuResources<'s> {
        static DEFAULT_FRACTIONAL: std::sync::OnceLock<FractionalSettings> =
            std::sync::OnceLock::new();
        GpuResources::of(
            extra,
            DEFAULT_FRACTIONAL.get_or_init(FractionalSettings::default),
        )
    }

    pub fn fractional(&self) -> &'s FractionalSettings {
        self.fractional
    }

    /// True when `name` is a GPU resource.
    pub fn is_gpu(&self, name: &str) -> bool {
        if self.fractional.is_share_resource(name) {
            return false;
        }
        BUILTIN_GPU_RESOURCES.contains(&name)
            || name.starts_with(MIG_PREFIX)
            || self
                .extra
                .iter()
                .any(|p| crate::settings::wildcard::matches(p, name))
    }
}

/// A MIG profile read from its resource name: `nvidia.com/mig-<slices>g.<memory>gb`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigProfile {
    /// Compute slices (the `<g>` in `<g>g`).
    pub slices: u32,
    /// Nominal memory in GB (the `<N>` in `<N>gb`); NVML reports somewhat less.
    pub memory_gb: u32,
}

impl MigProfile {
    /// Parses `nvidia.com/mig-3g.40gb` (optionally followed by `.shared` under time-slicing).
    pub fn from_resource_name(name: &str) -> Option<MigProfile> {
        MigProfile::from_profile(name.strip_prefix(MIG_PREFIX)?)
    }

    /// [`MigProfile::from_resource_name`] of a resource name without its prefix (`3g.40gb`).
    pub fn from_profile(profile: &str) -> Option<MigProfile> {
        let profile = profile.strip_suffix(".shared").unwrap_or(profile);
        let (slices, memory) = profile.split_once("g.")?;
        let memory = memory.strip_suffix("gb")?;
        let number = |s: &str| -> Option<u32> {
            if s.is_empty() || s.len() > 4 || !s.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            s.parse().ok()
        };
        Some(MigProfile {
            slices: number(slices)?,
            memory_gb: number(memory)?,
        })
    }
}

/// The role a container plays in its pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerRole {
    App,
    Init,
    /// A restartable init container (`restartPolicy: Always`).
    Sidecar,
    Ephemeral,
}

impl fmt::Display for ContainerRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ContainerRole::App => "container",
            ContainerRole::Init => "init container",
            ContainerRole::Sidecar => "sidecar container",
            ContainerRole::Ephemeral => "ephemeral container",
        })
    }
}

/// GPUs per resource name.
pub type GpuCounts = BTreeMap<String, u64>;

/// The GPUs one container holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerGpus {
    pub name: String,
    pub role: ContainerRole,
    /// Per GPU resource: the larger of request and limit (0 entries omitted).
    pub gpus: GpuCounts,
    /// True when the container requests or limits any non-GPU resource named `cpu`.
    pub has_cpu_request: bool,
    pub has_memory_request: bool,
}

impl ContainerGpus {
    pub fn total(&self) -> u64 {
        self.gpus.values().fold(0u64, |a, b| a.saturating_add(*b))
    }
}

/// Something wrong with how a GPU is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuProblem {
    /// A GPU in `requests` with no matching limit.
    RequestWithoutLimit {
        container: String,
        resource: String,
        request: String,
    },
    /// A GPU request that differs from its limit.
    RequestNotEqualLimit {
        container: String,
        resource: String,
        request: String,
        limit: String,
    },
    /// A GPU quantity that is not a non-negative whole number.
    Invalid {
        container: String,
        resource: String,
        error: QuantityError,
    },
    /// A Dynamic Resource Allocation claim whose GPUs cannot be counted.
    Claim {
        /// `spec.resourceClaims` entry name.
        entry: String,
        /// `ResourceClaimTemplate four-gpus`.
        claim: String,
        reason: String,
    },
    /// A fractional-GPU request that cannot be read.
    Share(ShareProblem),
}

impl fmt::Display for GpuProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuProblem::RequestWithoutLimit {
                container,
                resource,
                request,
            } => write!(
                f,
                "container '{container}' requests {resource}: {request} without a limit; set resources.limits.{resource}: {request}"
            ),
            GpuProblem::RequestNotEqualLimit {
                container,
                resource,
                request,
                limit,
            } => write!(
                f,
                "container '{container}' requests {resource}: {request} but limits it to {limit}; GPU requests must equal limits"
            ),
            GpuProblem::Invalid {
                container,
                resource,
                error,
            } => write!(f, "container '{container}' asks for {resource}: {error}"),
            GpuProblem::Claim {
                entry,
                claim,
                reason,
            } => write!(f, "resource claim '{entry}' ({claim}) {reason}"),
            GpuProblem::Share(p) => write!(f, "fractional GPU request: {p}"),
        }
    }
}

/// The GPU demand of one pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodGpus {
    /// Every container that touches a GPU resource, in pod order (app, init, ephemeral).
    pub containers: Vec<ContainerGpus>,
    /// GPUs in pod-level `spec.resources`.
    pub pod_level: GpuCounts,
    /// What the pod holds per resource name, by Kubernetes' effective-request rule.
    pub effective: GpuCounts,
    /// Devices of Dynamic Resource Allocation claims, per GPU resource.
    pub claims: GpuCounts,
    /// GPU products the claims' device selectors name.
    pub claim_products: BTreeSet<String>,
    /// The share of a fractional-GPU scheduler the pod asks for.
    pub share: Option<Share>,
    /// Request/limit mistakes, invalid quantities, unreadable claims and shares.
    pub problems: Vec<GpuProblem>,
}

impl PodGpus {
    /// Total GPUs of all kinds the pod holds.
    pub fn total(&self) -> u64 {
        self.effective
            .values()
            .fold(0u64, |a, b| a.saturating_add(*b))
    }

    /// True when the pod holds a GPU or mentions a GPU resource in a way that is invalid.
    pub fn uses_gpu(&self) -> bool {
        self.total() > 0 || !self.problems.is_empty()
    }

    /// Quantities that could not be read as whole GPU counts.
    pub fn invalid_quantities(&self) -> impl Iterator<Item = &GpuProblem> {
        self.problems
            .iter()
            .filter(|p| matches!(p, GpuProblem::Invalid { .. }))
    }
}

/// The GPUs a pod template reaches, every way the policies know: its containers' and
/// pod-level resources ([`pod_gpus`]), the devices of its DRA claims (resolved in
/// `claims`: see [`crate::dra`]) and a fractional-GPU share ([`crate::fractional`], which
/// counts as the devices it shares: KAI's pods request no GPU resource). This is what
/// every admission rule counts; [`pod_gpus`] alone is for pods already running.
pub fn template_gpus(template: &PodTemplate, names: &GpuResources, claims: &ClaimBook) -> PodGpus {
    spec_gpus(&template.spec, &template.meta, names, claims)
}

/// [`template_gpus`] of a pod spec and its metadata.
pub fn spec_gpus(
    spec: &PodSpec,
    meta: &ObjectMeta,
    names: &GpuResources,
    claims: &ClaimBook,
) -> PodGpus {
    let mut pod = pod_gpus(spec, names);
    for entry in &spec.resource_claims {
        let Some(claim) = pod_claim_ref(entry) else {
            continue;
        };
        match claims.get(&claim) {
            Some(Ok(gpus)) => {
                add_into(&mut pod.claims, &gpus.gpus);
                pod.claim_products.extend(gpus.products.iter().cloned());
            }
            Some(Err(reason)) => pod.problems.push(GpuProblem::Claim {
                entry: entry.name.clone(),
                claim: claim.to_string(),
                reason: reason.clone(),
            }),
            None => pod.problems.push(GpuProblem::Claim {
                entry: entry.name.clone(),
                claim: claim.to_string(),
                reason: "was not read, so the GPUs it allocates cannot be counted".into(),
            }),
        }
    }
    add_into(&mut pod.effective, &pod.claims);
    match crate::fractional::share(meta, spec, names.fractional) {
        Ok(Some(share)) => {
            if share.scheduler == Scheduler::Kai {
                let held = pod.effective.entry(KAI_DEVICE_RESOURCE.into()).or_insert(0);
                *held = (*held).max(share.devices);
            }
            pod.share = Some(share);
        }
        Ok(None) => {}
        Err(problem) => pod.problems.push(GpuProblem::Share(problem)),
    }
    pod.effective.retain(|_, n| *n > 0);
    pod
}

/// How many of each GPU resource a pod holds through its containers' and pod-level
/// resources, with the problems found on the way.
pub fn pod_gpus(spec: &PodSpec, names: &GpuResources) -> PodGpus {
    let mut result = PodGpus::default();

    let mut app_sum = GpuCounts::new();
    let mut sidecars_so_far = GpuCounts::new();
    let mut init_peak = GpuCounts::new();

    let seen = |container: &Container, role: ContainerRole, result: &mut PodGpus| {
        let gpus = container_gpus(container, role, names, &mut result.problems);
        if !gpus.gpus.is_empty() {
            result.containers.push(gpus.clone());
        }
        gpus
    };

    for c in &spec.containers {
        add_into(&mut app_sum, &seen(c, ContainerRole::App, &mut result).gpus);
    }
    for c in &spec.init_containers {
        if c.restart_policy.as_deref() == Some("Always") {
            let g = seen(c, ContainerRole::Sidecar, &mut result);
            add_into(&mut app_sum, &g.gpus);
            add_into(&mut sidecars_so_far, &g.gpus);
        } else {
            let g = seen(c, ContainerRole::Init, &mut result);
            let mut running = sidecars_so_far.clone();
            add_into(&mut running, &g.gpus);
            max_into(&mut init_peak, &running);
        }
    }
    for c in &spec.ephemeral_containers {
        add_into(
            &mut app_sum,
            &seen(c, ContainerRole::Ephemeral, &mut result).gpus,
        );
    }

    if let Some(resources) = &spec.resources {
        let pod = Container {
            name: "(pod-level resources)".to_string(),
            resources: resources.clone(),
            ..Container::default()
        };
        result.pod_level =
            container_gpus(&pod, ContainerRole::App, names, &mut result.problems).gpus;
    }

    let mut effective = app_sum;
    max_into(&mut effective, &init_peak);
    max_into(&mut effective, &result.pod_level);
    effective.retain(|_, n| *n > 0);
    result.effective = effective;
    result
}

/// GPUs of one container: for every GPU resource in limits or requests, the larger value.
fn container_gpus(
    container: &Container,
    role: ContainerRole,
    names: &GpuResources,
    problems: &mut Vec<GpuProblem>,
) -> ContainerGpus {
    let limits = &container.resources.limits;
    let requests = &container.resources.requests;
    let mut gpus = GpuCounts::new();
    let gpu_names = limits
        .keys()
        .chain(requests.keys().filter(|k| !limits.contains_key(*k)))
        .filter(|k| names.is_gpu(k));
    for resource in gpu_names {
        let before = problems.len();
        let limit = count(&container.name, resource, limits, problems);
        let request = count(&container.name, resource, requests, problems);
        // The same invalid text as limit and as request is one problem. Only these two can
        // repeat each other: checking against every earlier problem was quadratic.
        if problems.len() == before + 2 && problems[before] == problems[before + 1] {
            problems.pop();
        }
        match (limits.get(resource), requests.get(resource)) {
            (None, Some(req)) => problems.push(GpuProblem::RequestWithoutLimit {
                container: container.name.clone(),
                resource: resource.clone(),
                request: req.0.clone(),
            }),
            (Some(lim), Some(req)) if !same_quantity(&lim.0, &req.0) => {
                problems.push(GpuProblem::RequestNotEqualLimit {
                    container: container.name.clone(),
                    resource: resource.clone(),
                    request: req.0.clone(),
                    limit: lim.0.clone(),
                })
            }
            _ => {}
        }
        let n = limit.max(request);
        if n > 0 {
            gpus.insert(resource.clone(), n);
        }
    }
    ContainerGpus {
        name: container.name.clone(),
        role,
        gpus,
        has_cpu_request: has_request(container, "cpu"),
        has_memory_request: has_request(container, "memory"),
    }
}

/// A resource is requested when `requests` has it, or when only `limits` has it (the API
/// server then defaults the request to the limit).
fn has_request(container: &Container, resource: &str) -> bool {
    container.resources.requests.contains_key(resource)
        || container.resources.limits.contains_key(resource)
}

/// The GPU count in `list[resource]`, 0 when absent. Invalid values are reported and
/// counted conservatively: a fraction rounds up, anything unreadable counts as 0 (and the
/// reported problem makes every policy deny).
fn count(
    container: &str,
    resource: &str,
    list: &ResourceList,
    problems: &mut Vec<GpuProblem>,
) -> u64 {
    let Some(text) = list.get(resource) else {
        return 0;
    };
    match Quantity::parse_count(&text.0) {
        Ok(n) => n,
        Err(error) => {
            let rounded = match (&error, Quantity::parse(&text.0)) {
                (QuantityError::NotWhole(_), Ok(q)) => q.units_ceil(),
                _ => 0,
            };
            problems.push(GpuProblem::Invalid {
                container: container.to_string(),
                resource: resource.to_string(),
                error,
            });
            rounded
        }
    }
}

fn same_quantity(a: &str, b: &str) -> bool {
    match (Quantity::parse(a), Quantity::parse(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The GPU demand of every pod template of a workload.
#[derive(Debug, Clone, Default)]
pub struct WorkloadGpus {
    /// One entry per template of the workload, in the same order.
    pub per_template: Vec<PodGpus>,
    /// Sum over templates of (pods x effective GPUs per pod).
    pub total: GpuCounts,
}

impl WorkloadGpus {
    /// True when any template holds a GPU or asks for one invalidly.
    pub fn uses_gpu(&self) -> bool {
        self.per_template.iter().any(PodGpus::uses_gpu)
    }

    /// Total GPUs of all kinds the workload stands for.
    pub fn total_gpus(&self) -> u64 {
        self.total.values().fold(0u64, |a, b| a.saturating_add(*b))
    }
}

/// GPU demand of each template of `workload`, and the total over its pods.
pub fn workload_gpus(
    workload: &crate::workload::Workload,
    names: &GpuResources,
    claims: &ClaimBook,
) -> WorkloadGpus {
    let mut result = WorkloadGpus::default();
    for t in &workload.templates {
        let pod = template_gpus(t, names, claims);
        add_into(&mut result.total, &scale(&pod.effective, t.pods));
        result.per_template.push(pod);
    }
    result.total.retain(|_, n| *n > 0);
    result
}

/// `into[k] += from[k]` for every k.
pub fn add_into(into: &mut GpuCounts, from: &GpuCounts) {
    for (k, v) in from {
        let e = into.entry(k.clone()).or_insert(0);
        *e = e.saturating_add(*v);
    }
}

/// `into[k] += from[k] * times` for every k, cloning a key only when `into` lacks it.
pub fn add_scaled(into: &mut GpuCounts, from: &GpuCounts, times: u64) {
    for (k, v) in from {
        let n = v.saturating_mul(times);
        match into.get_mut(k) {
            Some(e) => *e = e.saturating_add(n),
            None => {
                into.insert(k.clone(), n);
            }
        }
    }
}

/// `into[k] = max(into[k], from[k])` for every k.
fn max_into(into: &mut GpuCounts, from: &GpuCounts) {
    for (k, v) in from {
        let e = into.entry(k.clone()).or_insert(0);
        *e = (*e).max(*v);
    }
}

/// `counts[k] * factor` for every k (saturating).
pub fn scale(counts: &GpuCounts, factor: u64) -> GpuCounts {
    counts
        .iter()
        .map(|(k, v)| (k.clone(), v.saturating_mul(factor)))
        .collect()
}

/// `2 nvidia.com/gpu`, `2 nvidia.com/gpu + 1 nvidia.com/mig-1g.10gb`: GPUs of one pod (or
/// one replica, or a sum), for messages.
pub fn gpus_text(counts: &GpuCounts) -> String {
    counts
        .iter()
        .map(|(resource, n)| format!("{n} {resource}"))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// `a: 2, b: 1` — for messages.
pub fn describe(counts: &GpuCounts) -> String {
    counts
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{Value, json};

    fn spec(v: Value) -> PodSpec {
        serde_json::from_value(v).unwrap()
    }

    fn gpus(v: Value) -> PodGpus {
        pod_gpus(&spec(v), &GpuResources::default())
    }

    fn limits(name: &str, resource: &str, n: &str) -> Value {
        json!({"name": name, "resources": {"limits": {resource: n}}})
    }

    #[rstest]
    #[case::nvidia("nvidia.com/gpu")]
    #[case::nvidia_shared("nvidia.com/gpu.shared")]
    #[case::mig_small("nvidia.com/mig-1g.5gb")]
    #[case::mig_large("nvidia.com/mig-7g.80gb")]
    #[case::mig_shared("nvidia.com/mig-3g.40gb.shared")]
    #[case::amd("amd.com/gpu")]
    #[case::intel_i915("gpu.intel.com/i915")]
    #[case::intel_xe("gpu.intel.com/xe")]
    fn every_builtin_gpu_resource_is_counted(#[case] resource: &str) {
        let p = gpus(json!({"containers": [limits("c", resource, "2")]}));
        assert_eq!(p.effective, GpuCounts::from([(resource.to_string(), 2)]));
        assert_eq!(p.total(), 2);
        assert!(p.problems.is_empty());
    }

    #[rstest]
    #[case::cpu("cpu")]
    #[case::memory("memory")]
    #[case::intel_monitoring("gpu.intel.com/i915_monitoring")]
    #[case::lookalike("nvidia.com/gpus")]
    #[case::hugepages("hugepages-2Mi")]
    fn other_resources_are_not_gpus(#[case] resource: &str) {
        let p = gpus(json!({"containers": [limits("c", resource, "2")]}));
        assert_eq!(p.total(), 0);
        assert!(!p.uses_gpu());
    }

    #[test]
    fn extra_names_from_settings_exact_and_prefix() {
        let extra = ["example.com/tpu".to_string(), "amd.com/cpx_*".to_string()];
        let names = GpuResources::new(&extra);
        assert!(names.is_gpu("example.com/tpu"));
        assert!(names.is_gpu("amd.com/cpx_nps4"));
        assert!(!names.is_gpu("example.com/tpu2"));
        let p = pod_gpus(
            &spec(json!({"containers": [limits("c", "amd.com/cpx_nps4", "4")]})),
            &names,
        );
        assert_eq!(p.total(), 4);
    }

    #[test]
    fn app_containers_add_up() {
        let p = gpus(json!({"containers": [
            limits("a", "nvidia.com/gpu", "2"),
            limits("b", "nvidia.com/gpu", "1"),
            limits("c", "amd.com/gpu", "1"),
            {"name": "cpu-only", "resources": {"limits": {"cpu": "1"}}}
        ]}));
        assert_eq!(p.effective["nvidia.com/gpu"], 3);
        assert_eq!(p.effective["amd.com/gpu"], 1);
        assert_eq!(p.total(), 4);
        assert_eq!(p.containers.len(), 3, "only GPU containers are listed");
    }

    #[test]
    fn init_container_alone_is_a_gpu_pod() {
        let p = gpus(json!({
            "containers": [{"name": "app"}],
            "initContainers": [limits("sneaky", "nvidia.com/gpu", "4")]
        }));
        assert_eq!(p.total(), 4);
    }

    #[test]
    fn sidecars_add_to_apps_and_to_later_init_containers() {
        // effective = max(app 2 + sidecar 1, init-before-sidecar 2, sidecar 1 + init-after 3) = 4
        let p = gpus(json!({
            "containers": [limits("app", "nvidia.com/gpu", "2")],
            "initContainers": [
                limits("init-first", "nvidia.com/gpu", "2"),
                {"name": "side", "restartPolicy": "Always", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
                limits("init-after", "nvidia.com/gpu", "3")
            ]
        }));
        assert_eq!(p.effective["nvidia.com/gpu"], 4);
        assert_eq!(p.containers[2].role, ContainerRole::Sidecar);
    }

    /// One app container and a GPU container of another kind: the second's role, and the
    /// pod's demand.
    #[rstest]
    #[case::init_container_larger_than_apps_sets_the_demand(
        "initContainers",
        limits("warmup", "nvidia.com/gpu", "8"),
        ContainerRole::Init,
        8
    )]
    #[case::ephemeral_containers_are_counted(
        "ephemeralContainers",
        limits("debug", "nvidia.com/gpu", "1"),
        ContainerRole::Ephemeral,
        2
    )]
    fn beside_the_app(
        #[case] list: &str,
        #[case] container: Value,
        #[case] role: ContainerRole,
        #[case] effective: u64,
    ) {
        let p = gpus(json!({
            "containers": [limits("app", "nvidia.com/gpu", "1")],
            list: [container]
        }));
        assert_eq!(p.effective["nvidia.com/gpu"], effective);
        assert_eq!(p.containers[1].role, role);
    }

    #[test]
    fn pod_level_resources_count_when_larger() {
        let p = gpus(json!({
            "containers": [limits("app", "nvidia.com/gpu", "1")],
            "resources": {"limits": {"nvidia.com/gpu": "4"}}
        }));
        assert_eq!(p.pod_level["nvidia.com/gpu"], 4);
        assert_eq!(p.effective["nvidia.com/gpu"], 4);
        let q = gpus(json!({
            "containers": [{"name": "app"}],
            "resources": {"requests": {"amd.com/gpu": "2"}}
        }));
        assert_eq!(q.total(), 2);
    }

    #[test]
    fn request_without_limit_is_counted_and_reported() {
        let p = gpus(json!({"containers": [
            {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "2"}}}
        ]}));
        assert_eq!(p.total(), 2);
        assert_eq!(
            p.problems,
            vec![GpuProblem::RequestWithoutLimit {
                container: "c".into(),
                resource: "nvidia.com/gpu".into(),
                request: "2".into()
            }]
        );
        assert!(
            p.problems[0]
                .to_string()
                .contains("set resources.limits.nvidia.com/gpu: 2")
        );
    }

    #[test]
    fn request_above_limit_counts_the_larger_and_is_reported() {
        let p = gpus(json!({"containers": [
            {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "4"}}}
        ]}));
        assert_eq!(p.total(), 4);
        assert!(matches!(
            p.problems[0],
            GpuProblem::RequestNotEqualLimit { .. }
        ));
    }

    #[test]
    fn equal_request_and_limit_in_different_notation_is_fine() {
        let p = gpus(json!({"containers": [
            {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1000m"}}}
        ]}));
        assert!(p.problems.is_empty(), "{:?}", p.problems);
        assert_eq!(p.total(), 1);
    }

    #[rstest]
    #[case::fraction("0.5", 1)]
    #[case::milli("1500m", 2)]
    #[case::negative("-1", 0)]
    #[case::garbage("lots", 0)]
    fn invalid_counts_are_reported_and_counted_conservatively(
        #[case] n: &str,
        #[case] counted: u64,
    ) {
        let p = gpus(json!({"containers": [limits("c", "nvidia.com/gpu", n)]}));
        assert_eq!(p.total(), counted);
        assert_eq!(p.invalid_quantities().count(), 1, "{:?}", p.problems);
        assert!(p.uses_gpu(), "an invalid GPU quantity is still a GPU pod");
    }

    #[test]
    fn zero_gpus_is_not_a_gpu_pod() {
        let p = gpus(json!({"containers": [limits("c", "nvidia.com/gpu", "0")]}));
        assert!(!p.uses_gpu());
        assert!(p.effective.is_empty());
    }

    #[test]
    fn cpu_and_memory_requests_are_noted() {
        let p = gpus(json!({"containers": [
            {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1"}}}
        ]}));
        assert!(p.containers[0].has_cpu_request);
        assert!(p.containers[0].has_memory_request);
    }

    #[test]
    fn demand_does_not_depend_on_container_order() {
        let a = limits("a", "nvidia.com/gpu", "2");
        let b = limits("b", "amd.com/gpu", "1");
        let c = limits("c", "nvidia.com/mig-1g.10gb", "3");
        let one = gpus(json!({"containers": [a.clone(), b.clone(), c.clone()]}));
        let two = gpus(json!({"containers": [c, a, b]}));
        assert_eq!(one.effective, two.effective);
    }

    #[rstest]
    #[case("nvidia.com/mig-1g.5gb", Some((1, 5)))]
    #[case("nvidia.com/mig-3g.40gb", Some((3, 40)))]
    #[case("nvidia.com/mig-7g.141gb", Some((7, 141)))]
    #[case("nvidia.com/mig-2g.20gb.shared", Some((2, 20)))]
    #[case("nvidia.com/mig-g.5gb", None)]
    #[case("nvidia.com/mig-1g.gb", None)]
    #[case("nvidia.com/mig-1g.5", None)]
    #[case("nvidia.com/gpu", None)]
    #[case("nvidia.com/mig-99999g.5gb", None)]
    fn mig_profiles_from_names(#[case] name: &str, #[case] expected: Option<(u32, u32)>) {
        assert_eq!(
            MigProfile::from_resource_name(name).map(|p| (p.slices, p.memory_gb)),
            expected
        );
    }

    #[test]
    fn workload_total_is_pods_times_effective() {
        let object = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {},
            "spec": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "h"}]}}},
                     "workerGroupSpecs": [{"replicas": 3, "template": {"spec": {"containers": [limits("w", "nvidia.com/gpu", "2")]}}}]}});
        let w = crate::workload::Workload::from_object(&object, &crate::workload::presets::all())
            .unwrap();
        let g = workload_gpus(&w, &GpuResources::default(), &ClaimBook::default());
        assert_eq!(g.per_template.len(), 2);
        assert!(!g.per_template[0].uses_gpu());
        assert_eq!(
            g.total,
            GpuCounts::from([("nvidia.com/gpu".to_string(), 6)])
        );
        assert_eq!(g.total_gpus(), 6);
        assert!(g.uses_gpu());
    }

    #[test]
    fn helpers_scale_and_describe() {
        let c = GpuCounts::from([("a".to_string(), 2), ("b".to_string(), 1)]);
        assert_eq!(describe(&scale(&c, 3)), "a: 6, b: 3");
    }

    /// HAMi's sizing resources are MiB and percent, never GPUs, even under a wildcard that
    /// matches them (`extraGpuResources: ["nvidia.com/*"]`): the pod holds its one vGPU,
    /// and the share says how much of a device that is.
    #[test]
    fn hami_memory_is_never_counted_as_gpus() {
        let extra = ["nvidia.com/*".to_string()];
        let names = GpuResources::new(&extra);
        let pod = spec(
            json!({"containers": [{"name": "vllm", "resources": {"limits": {
            "nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000",
            "nvidia.com/gpumem-percentage": "50", "nvidia.com/gpucores": "30"}}}]}),
        );
        let counted = pod_gpus(&pod, &names);
        assert_eq!(
            counted.effective,
            GpuCounts::from([("nvidia.com/gpu".to_string(), 1)])
        );
        assert!(counted.problems.is_empty(), "{:?}", counted.problems);
        let with_share = spec_gpus(&pod, &ObjectMeta::default(), &names, &ClaimBook::default());
        assert_eq!(with_share.effective, counted.effective);
        assert_eq!(
            with_share.share.map(|s| s.to_string()).as_deref(),
            Some("3000 MiB of one GPU through HAMi")
        );
        // A wildcard still counts the other names under it.
        assert!(names.is_gpu("nvidia.com/gpu.shared") && names.is_gpu("nvidia.com/future-gpu"));
        for share in [
            "nvidia.com/gpumem",
            "nvidia.com/gpumem-percentage",
            "nvidia.com/gpucores",
        ] {
            assert!(!names.is_gpu(share), "{share}");
        }
        // With HAMi recognition off, the wildcard is taken at its word (the settings' choice).
        let mut off = FractionalSettings::default();
        off.hami.enabled = false;
        assert!(GpuResources::of(&extra, &off).is_gpu("nvidia.com/gpumem"));
    }
}
