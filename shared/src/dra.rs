//! GPUs through Dynamic Resource Allocation (`resource.k8s.io`, GA in Kubernetes 1.34).
//!
//! A pod reaches DRA devices through `spec.resourceClaims`: each entry names a
//! ResourceClaimTemplate (the resource claim controller creates one claim per pod from it)
//! or a ResourceClaim (shared by name). The claim's `spec.devices.requests[]` say which
//! device class and how many devices: `exactly: {deviceClassName, allocationMode, count}`
//! (v1; v1beta1 had the same fields directly on the request), or `firstAvailable: [...]`,
//! alternatives of which the scheduler takes the first it can satisfy.
//!
//! The count is not in the pod: every policy resolves the claims of the workload it
//! judges with one context-aware `get_resource` per distinct claim or template
//! ([`resolve`], field masks on the device requests only) and counts what they ask for in
//! device classes mapped to GPU resources ([`DraSettings`]: NVIDIA's and AMD's and
//! Intel's DRA driver classes are built in). Those devices join the pod's GPU demand in
//! [`crate::gpu::template_gpus`], so the labels, routing, VRAM fit and capacity rules see
//! them as they see `nvidia.com/gpu`.
//!
//! Fail closed: a claim that cannot be read (not found, not granted, malformed), a GPU
//! request with `allocationMode: All` (every matching device on a node, a number nobody
//! can check) and a claim beyond the limits below make the template a GPU template with a
//! problem, which every policy denies with the reason. A request in a class that is not
//! mapped is not a GPU (a documented pass: NICs, FPGAs, storage).
//!
//! A ResourceClaim named by several pods is shared by them; it is counted for each pod,
//! which overstates what the pods hold together (the safe direction for every rule). What
//! allocated claims of running pods hold (each claim once) is the capacity gate's
//! `countDraClaims` ([`crate::capacity::claims`]), with the same class rule
//! ([`request_resource`]).

use crate::cluster::{Cluster, ClusterRequest, FailureClass, GetResource, call};
use crate::gpu::GpuCounts;
use crate::podspec::null_as_default;
use crate::settings::FieldError;
use crate::workload::Workload;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The DRA API the policies read claims from.
pub const DEFAULT_API_VERSION: &str = "resource.k8s.io/v1";
/// Kubernetes' own limit on the requests of one claim (`DeviceRequestsMaxSize`).
pub const MAX_REQUESTS_PER_CLAIM: usize = 32;
/// Kubernetes' own limit on the alternatives of one request (`FirstAvailableDeviceRequestMaxSize`).
pub const MAX_ALTERNATIVES: usize = 8;
/// The most distinct claims and templates one object may name (each is one host call).
pub const MAX_CLAIMS_PER_OBJECT: usize = 32;
/// The most devices one request may ask for: more is a mistake, not a workload.
pub const MAX_DEVICES_PER_REQUEST: u64 = 1024;

/// Device classes built in: the DRA drivers of NVIDIA (`gpu.nvidia.com`, `mig.nvidia.com`),
/// AMD (`gpu.amd.com`) and Intel (`gpu.intel.com`), each mapped to the extended resource
/// the device plugin of the same vendor advertises. A `mig.nvidia.com` request whose
/// selector names a profile (`device.attributes['gpu.nvidia.com'].profile == '3g.40gb'`)
/// counts as that MIG resource (`nvidia.com/mig-3g.40gb`).
pub const BUILTIN_DEVICE_CLASSES: &[(&str, &str)] = &[
    ("gpu.nvidia.com", "nvidia.com/gpu"),
    ("mig.nvidia.com", "nvidia.com/mig"),
    ("gpu.amd.com", "amd.com/gpu"),
    ("gpu.intel.com", "gpu.intel.com/i915"),
];

/// The DRA settings every policy shares (`dra` in each policy's settings).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct DraSettings {
    /// Device class name -> the GPU resource its devices count as, added to (and
    /// overriding) the built-in classes.
    pub gpu_device_classes: BTreeMap<String, String>,
    /// The `resource.k8s.io` version claims are read in.
    pub api_version: String,
}

impl Default for DraSettings {
    fn default() -> Self {
        DraSettings {
            gpu_device_classes: BTreeMap::new(),
            api_version: DEFAULT_API_VERSION.into(),
        }
    }
}

impl DraSettings {
    /// The GPU resource a device class counts as, if it is a GPU class.
    pub fn gpu_resource(&self, class: &str) -> Option<&str> {
        self.gpu_device_classes
            .get(class)
            .map(String::as_str)
            .or_else(|| {
                BUILTIN_DEVICE_CLASSES
                    .iter()
                    .find(|(c, _)| *c == class)
                    .map(|(_, r)| *r)
            })
            .filter(|r| !r.is_empty())
    }

    /// Field errors, naming the field under `prefix` (e.g. `dra`).
    pub fn validate(&self, prefix: &str) -> Result<(), FieldError> {
        if !matches!(
            self.api_version.as_str(),
            "resource.k8s.io/v1" | "resource.k8s.io/v1beta2" | "resource.k8s.io/v1beta1"
        ) {
            return Err(FieldError::new(
                format!("{prefix}.apiVersion"),
                format!(
                    "'{}' is not a DRA API version (resource.k8s.io/v1, v1beta2 or v1beta1)",
                    self.api_version
                ),
            ));
        }
        for (class, resource) in &self.gpu_device_classes {
            if class.trim().is_empty() || class.contains(char::is_whitespace) {
                return Err(FieldError::new(
                    format!("{prefix}.gpuDeviceClasses"),
                    format!("'{class}' is not a device class name"),
                ));
            }
            if resource.contains(char::is_whitespace) {
                return Err(FieldError::new(
                    format!("{prefix}.gpuDeviceClasses.{class}"),
                    format!(
                        "'{resource}' is not a resource name (give the GPU resource its devices count as, e.g. nvidia.com/gpu, or \"\" to count the class as no GPU)"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Where a pod's claim entry points.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum ClaimRef {
    Template(String),
    Claim(String),
}

impl ClaimRef {
    pub fn kind(&self) -> &'static str {
        match self {
            ClaimRef::Template(_) => "ResourceClaimTemplate",
            ClaimRef::Claim(_) => "ResourceClaim",
        }
    }

    pub fn name(&self) -> &str {
        match self {
            ClaimRef::Template(n) | ClaimRef::Claim(n) => n,
        }
    }

    /// The fields of the object that hold its device requests (the field mask).
    fn devices_path(&self) -> &'static str {
        match self {
            ClaimRef::Template(_) => "spec.spec.devices",
            ClaimRef::Claim(_) => "spec.devices",
        }
    }
}

impl fmt::Display for ClaimRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind(), self.name())
    }
}

/// The GPUs one claim asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimGpus {
    /// Devices per GPU resource.
    pub gpus: GpuCounts,
    /// GPU products the requests' selectors name (`productName == '...'`), for VRAM fit.
    pub products: BTreeSet<String>,
}

/// The claims of a workload, resolved.
#[derive(Debug, Clone, Default)]
pub struct ClaimBook {
    entries: BTreeMap<ClaimRef, Result<ClaimGpus, String>>,
}

impl ClaimBook {
    /// What `claim` asks for; `None` when it was never resolved (every caller counts that
    /// as a problem: see [`crate::gpu::template_gpus`]).
    pub fn get(&self, claim: &ClaimRef) -> Option<&Result<ClaimGpus, String>> {
        self.entries.get(claim)
    }

    pub fn insert(&mut self, claim: ClaimRef, gpus: Result<ClaimGpus, String>) {
        self.entries.insert(claim, gpus);
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Every claim and template the pod templates of `workload` name, in order, each once.
pub fn claim_refs(workload: &Workload) -> Vec<ClaimRef> {
    let mut out: Vec<ClaimRef> = Vec::new();
    for t in &workload.templates {
        for c in &t.spec.resource_claims {
            if let Some(r) = pod_claim_ref(c)
                && !out.contains(&r)
            {
                out.push(r);
            }
        }
    }
    out
}

/// The claim or template a pod's `resourceClaims` entry names.
pub fn pod_claim_ref(entry: &crate::podspec::PodResourceClaim) -> Option<ClaimRef> {
    entry
        .template_name()
        .map(|n| ClaimRef::Template(n.to_string()))
        .or_else(|| entry.claim_name().map(|n| ClaimRef::Claim(n.to_string())))
}

/// Reads every claim and template `workload` names in `namespace` through `cluster`.
/// Makes no host call for a workload without claims.
pub fn resolve(
    workload: &Workload,
    namespace: &str,
    settings: &DraSettings,
    cluster: &dyn Cluster,
) -> ClaimBook {
    let mut book = ClaimBook::default();
    let refs = claim_refs(workload);
    let too_many = refs.len() > MAX_CLAIMS_PER_OBJECT;
    for (i, r) in refs.into_iter().enumerate() {
        let gpus = if too_many && i >= MAX_CLAIMS_PER_OBJECT {
            Err(format!(
                "the object names more than {MAX_CLAIMS_PER_OBJECT} resource claims and templates; the policies read at most {MAX_CLAIMS_PER_OBJECT}"
            ))
        } else {
            fetch(&r, namespace, settings, cluster)
        };
        book.insert(r, gpus);
    }
    book
}

/// How much of the host's own text a message quotes when its failure has no known class.
const RAW_HOST_TEXT_MAX: usize = 200;

/// The `get_resource` call that reads claim `r` in `namespace`: only its device requests.
pub fn claim_query(r: &ClaimRef, namespace: &str, settings: &DraSettings) -> ClusterRequest {
    ClusterRequest::Get(GetResource {
        api_version: settings.api_version.clone(),
        kind: r.kind().into(),
        name: r.name().into(),
        namespace: Some(namespace.into()),
        disable_cache: false,
        field_masks: Some(BTreeSet::from([r.devices_path().to_string()])),
    })
}

fn fetch(
    r: &ClaimRef,
    namespace: &str,
    settings: &DraSettings,
    cluster: &dyn Cluster,
) -> Result<ClaimGpus, String> {
    let bytes =
        call(cluster, &claim_query(r, namespace, settings)).map_err(|failure| {
            match failure.class() {
                FailureClass::NotFound => {
                    "cannot be read (not found); create it before the workload".to_string()
                }
                FailureClass::Other => format!(
                    "cannot be read ({}; the host said: {})",
                    failure.reason(),
                    failure.raw(RAW_HOST_TEXT_MAX)
                ),
                _ => format!("cannot be read ({})", failure.reason()),
            }
        })?;
    let object: ClaimObject = serde_json::from_slice(&bytes)
        .map_err(|e| format!("is not a readable {}: {e}", r.kind()))?;
    let devices = match r {
        ClaimRef::Template(_) => object.spec.spec.devices,
        ClaimRef::Claim(_) => object.spec.devices,
    };
    count(&devices, settings)
}

/// `spec` of a ResourceClaim (`devices`) or of a ResourceClaimTemplate (`spec.devices`):
/// one type reads both.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct ClaimObject {
    #[serde(deserialize_with = "null_as_default")]
    spec: ClaimObjectSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct ClaimObjectSpec {
    #[serde(deserialize_with = "null_as_default")]
    devices: DeviceClaim,
    #[serde(deserialize_with = "null_as_default")]
    spec: Box<ClaimObjectSpecInner>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct ClaimObjectSpecInner {
    #[serde(deserialize_with = "null_as_default")]
    devices: DeviceClaim,
}

/// `spec.devices` of a claim.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct DeviceClaim {
    #[serde(deserialize_with = "null_as_default")]
    pub requests: Vec<DeviceRequest>,
}

/// One device request: `exactly` (v1), the same fields inline (v1beta1), or alternatives.
/// (Written out rather than `#[serde(flatten)]`, which buffers every field and costs the
/// modules tens of KiB.)
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DeviceRequest {
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
    pub exactly: Option<ExactRequest>,
    pub device_class_name: Option<String>,
    pub allocation_mode: Option<String>,
    pub count: Option<i64>,
    #[serde(deserialize_with = "null_as_default")]
    pub selectors: Vec<Selector>,
    #[serde(deserialize_with = "null_as_default")]
    pub first_available: Vec<ExactRequest>,
}

impl DeviceRequest {
    /// The request's own device class and count: `exactly`, or the v1beta1 fields.
    pub fn exact(&self) -> ExactRequest {
        self.exactly.clone().unwrap_or_else(|| ExactRequest {
            name: String::new(),
            device_class_name: self.device_class_name.clone(),
            allocation_mode: self.allocation_mode.clone(),
            count: self.count,
            selectors: self.selectors.clone(),
        })
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExactRequest {
    /// The name of a `firstAvailable` alternative (an allocation result names it
    /// `<request>/<alternative>`); empty for `exactly`.
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
    pub device_class_name: Option<String>,
    pub allocation_mode: Option<String>,
    pub count: Option<i64>,
    #[serde(deserialize_with = "null_as_default")]
    pub selectors: Vec<Selector>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Selector {
    pub cel: Option<CelSelector>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct CelSelector {
    #[serde(deserialize_with = "null_as_default")]
    pub expression: String,
}

/// Reads `spec.devices` of a ResourceClaim, or `spec.spec.devices` of a
/// ResourceClaimTemplate, from an admitted object (the policies judge those objects
/// too: that is where the count lives).
pub fn claim_object_gpus(
    object: &serde_json::Value,
    settings: &DraSettings,
) -> Result<ClaimGpus, String> {
    let kind = object
        .get("kind")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("");
    let parsed: ClaimObject = serde_json::from_value(object.clone())
        .map_err(|e| format!("its device requests cannot be read: {e}"))?;
    let devices = if kind == "ResourceClaimTemplate" {
        parsed.spec.spec.devices
    } else {
        parsed.spec.devices
    };
    count(&devices, settings)
}

/// The GPUs a claim's device requests ask for.
pub fn count(devices: &DeviceClaim, settings: &DraSettings) -> Result<ClaimGpus, String> {
    if devices.requests.len() > MAX_REQUESTS_PER_CLAIM {
        return Err(format!(
            "has {} device requests; Kubernetes allows at most {MAX_REQUESTS_PER_CLAIM}",
            devices.requests.len()
        ));
    }
    let mut out = ClaimGpus::default();
    for request in &devices.requests {
        let name = if request.name.is_empty() {
            "(unnamed)"
        } else {
            request.name.as_str()
        };
        let exact = request.exact();
        if !request.first_available.is_empty() {
            if request.first_available.len() > MAX_ALTERNATIVES {
                return Err(format!(
                    "request {name} has {} firstAvailable alternatives; Kubernetes allows at most {MAX_ALTERNATIVES}",
                    request.first_available.len()
                ));
            }
            // The scheduler takes one alternative: the most of each GPU resource any
            // alternative asks for is what the request may hold.
            let mut most = GpuCounts::new();
            for (i, alt) in request.first_available.iter().enumerate() {
                let one = request_gpus(
                    alt,
                    &format!("{name}.firstAvailable[{i}]"),
                    settings,
                    &mut out.products,
                )?;
                for (r, n) in one {
                    let e = most.entry(r).or_insert(0);
                    *e = (*e).max(n);
                }
            }
            crate::gpu::add_into(&mut out.gpus, &most);
        } else {
            let one = request_gpus(&exact, name, settings, &mut out.products)?;
            crate::gpu::add_into(&mut out.gpus, &one);
        }
    }
    Ok(out)
}

fn request_gpus(
    r: &ExactRequest,
    name: &str,
    settings: &DraSettings,
    products: &mut BTreeSet<String>,
) -> Result<GpuCounts, String> {
    let mut out = GpuCounts::new();
    let Some(class) = r.device_class_name.as_deref().filter(|c| !c.is_empty()) else {
        return Ok(out);
    };
    let Some(resource) = request_resource(r, settings) else {
        return Ok(out);
    };
    match r.allocation_mode.as_deref().unwrap_or("ExactCount") {
        "ExactCount" | "" => {}
        "All" => {
            return Err(format!(
                "request {name} asks for every {class} device on a node (allocationMode: All); the policies cannot count that: ask for an exact count (allocationMode: ExactCount, count: N)"
            ));
        }
        other => {
            return Err(format!(
                "request {name} has allocationMode '{other}'; use ExactCount with a count"
            ));
        }
    }
    let n = r.count.unwrap_or(1);
    if n < 1 || n as u64 > MAX_DEVICES_PER_REQUEST {
        return Err(format!(
            "request {name} asks for {n} {class} devices; give a count from 1 to {MAX_DEVICES_PER_REQUEST}"
        ));
    }
    for s in &r.selectors {
        if let Some(p) = s
            .cel
            .as_ref()
            .and_then(|cel| attribute_equals(&cel.expression, "productName"))
        {
            products.insert(p);
        }
    }
    out.insert(resource, n as u64);
    Ok(out)
}

/// The GPU resource one device of request `r` counts as: its device class's
/// ([`DraSettings::gpu_resource`]), a `mig.nvidia.com` device as the MIG profile its
/// selector names (`nvidia.com/mig-3g.40gb`); `None` when its class is not a GPU class.
/// Both what a claim asks for ([`count`]) and what an allocated claim holds
/// ([`crate::capacity::claims`]) are counted by it.
pub fn request_resource(r: &ExactRequest, settings: &DraSettings) -> Option<String> {
    let class = r.device_class_name.as_deref().filter(|c| !c.is_empty())?;
    let mut resource = settings.gpu_resource(class)?.to_string();
    if resource == "nvidia.com/mig" {
        for s in &r.selectors {
            if let Some(profile) = s
                .cel
                .as_ref()
                .and_then(|cel| attribute_equals(&cel.expression, "profile"))
            {
                resource = format!("{}{profile}", crate::gpu::MIG_PREFIX);
            }
        }
    }
    Some(resource)
}

/// The value in `device.attributes['<driver>'].<attribute> == '<value>'` (either quote,
/// either side), the common form of NVIDIA's selectors. Anything more complex reads as
/// no value: the count stands, only the product or profile is not known.
fn attribute_equals(expression: &str, attribute: &str) -> Option<String> {
    let at = expression.find(&format!(".{attribute}"))?;
    let rest = expression[at + attribute.len() + 1..].trim_start();
    let rest = rest.strip_prefix("==")?.trim_start();
    let quote = rest.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let value = &rest[1..];
    let end = value.find(quote)?;
    let value = &value[..end];
    (!value.is_empty()).then(|| value.to_string())
}

#[cfg(test)]
mod tests;
