//! Fractional GPUs: pods that share a GPU through a GPU-sharing scheduler instead of
//! holding whole devices through the device plugin.
//!
//! - **KAI Scheduler** (NVIDIA): a pod with `schedulerName: kai-scheduler` asks for a share
//!   of a GPU with the pod annotation `gpu-fraction` (`"0.5"`: half of one device's memory)
//!   or `gpu-memory` (MiB of one device), and `gpu-fraction-num-devices` for a share on
//!   several devices. It requests no GPU resource: KAI binds it next to a reservation pod
//!   that holds the whole device, and KAI's own admission webhook gives it the device
//!   (`NVIDIA_VISIBLE_DEVICES` from KAI's ConfigMap, `runtimeClassName: nvidia`).
//! - **HAMi**: `nvidia.com/gpu` counts virtual GPUs (slots on a device, which HAMi also
//!   advertises as the node's allocatable), and `nvidia.com/gpumem` (MiB),
//!   `nvidia.com/gpumem-percentage` and `nvidia.com/gpucores` (percent) size each slot. The
//!   last three are never GPU counts ([`FractionalSettings::is_share_resource`]).
//!
//! [`share`] recognizes a pod of a configured scheduler and reads what it asks for; a
//! recognized pod is a GPU pod for every policy ([`crate::gpu::pod_gpus`] counts
//! [`Share::devices`] whole devices for it, the conservative count), its memory is what
//! VRAM fit checks and the capacity gate charges the devices it shares, rounded up over
//! all the pods of a workload ([`Share::charge`]).

use crate::podspec::{ObjectMeta, PodSpec};
use crate::quantity::Quantity;
use crate::settings::FieldError;
use serde::{Deserialize, Serialize};
use std::fmt;

/// KAI Scheduler's annotation for a share of each device's memory (`0 < f <= 1`).
pub const KAI_FRACTION_ANNOTATION: &str = "gpu-fraction";
/// KAI Scheduler's annotation for MiB of each device's memory.
pub const KAI_MEMORY_ANNOTATION: &str = "gpu-memory";
/// KAI Scheduler's annotation for how many devices a fractional pod shares (default 1).
pub const KAI_DEVICES_ANNOTATION: &str = "gpu-fraction-num-devices";
/// The resource KAI's fractional pods are charged in (the devices they share).
pub const KAI_DEVICE_RESOURCE: &str = "nvidia.com/gpu";
/// The most devices one fractional pod may share: more is a typo, not a workload.
pub const MAX_SHARED_DEVICES: u64 = 64;

/// Which GPU-sharing schedulers the policies recognize. Both are on by default: a pod
/// only matches when it carries the scheduler's own fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct FractionalSettings {
    pub kai: KaiSettings,
    pub hami: HamiSettings,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct KaiSettings {
    pub enabled: bool,
    /// `schedulerName`s under which KAI runs.
    pub scheduler_names: Vec<String>,
}

impl Default for KaiSettings {
    fn default() -> Self {
        KaiSettings {
            enabled: true,
            scheduler_names: vec!["kai-scheduler".into()],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct HamiSettings {
    pub enabled: bool,
    /// MiB of device memory per virtual GPU.
    pub memory_resource: String,
    /// Percent of device memory per virtual GPU.
    pub memory_percentage_resource: String,
    /// Percent of device compute per virtual GPU.
    pub cores_resource: String,
}

impl Default for HamiSettings {
    fn default() -> Self {
        HamiSettings {
            enabled: true,
            memory_resource: "nvidia.com/gpumem".into(),
            memory_percentage_resource: "nvidia.com/gpumem-percentage".into(),
            cores_resource: "nvidia.com/gpucores".into(),
        }
    }
}

impl FractionalSettings {
    /// True for a HAMi sizing resource (memory or cores): never a GPU count, even when
    /// `extraGpuResources` has a wildcard that matches it.
    pub fn is_share_resource(&self, name: &str) -> bool {
        self.hami.enabled
            && (name == self.hami.memory_resource
                || name == self.hami.memory_percentage_resource
                || name == self.hami.cores_resource)
    }

    /// Field errors, each naming its field under `prefix` (e.g. `fractionalGpus`).
    pub fn validate(&self, prefix: &str) -> Result<(), FieldError> {
        if self.kai.enabled && self.kai.scheduler_names.iter().any(|n| n.trim().is_empty()) {
            return Err(FieldError::new(
                format!("{prefix}.kai.schedulerNames"),
                "a scheduler name must not be empty",
            ));
        }
        if self.kai.enabled && self.kai.scheduler_names.is_empty() {
            return Err(FieldError::new(
                format!("{prefix}.kai.schedulerNames"),
                format!("give at least one schedulerName, or set {prefix}.kai.enabled: false"),
            ));
        }
        if self.hami.enabled {
            for (field, value) in [
                ("memoryResource", &self.hami.memory_resource),
                (
                    "memoryPercentageResource",
                    &self.hami.memory_percentage_resource,
                ),
                ("coresResource", &self.hami.cores_resource),
            ] {
                if value.trim().is_empty() || value.contains(char::is_whitespace) {
                    return Err(FieldError::new(
                        format!("{prefix}.hami.{field}"),
                        format!("'{value}' is not a resource name"),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// How much of a device a fractional pod asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Portion {
    /// Thousandths of each device (`gpu-fraction: 0.5` is 500).
    Milli(u64),
    /// MiB of each device's memory.
    MemoryMib(u64),
}

/// Which scheduler shares the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheduler {
    Kai,
    Hami,
}

impl fmt::Display for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scheduler::Kai => "KAI Scheduler",
            Scheduler::Hami => "HAMi",
        })
    }
}

/// What a recognized fractional pod asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Share {
    pub scheduler: Scheduler,
    /// Devices the pod shares (KAI's `gpu-fraction-num-devices`; HAMi's vGPU count).
    pub devices: u64,
    pub portion: Portion,
}

impl Share {
    /// The whole devices `pods` such pods take, charged as the capacity gate counts them:
    /// a share in thousandths is summed over the pods and rounded up
    /// (`ceil(pods x devices x milli / 1000)`: 3 pods of 0.5 take 2 devices); a share
    /// given in MiB is charged one device per pod and device (its size as a fraction of
    /// the device is not known before the pod lands on a node).
    pub fn charge(&self, pods: u64) -> u64 {
        let devices = pods.saturating_mul(self.devices);
        match self.portion {
            Portion::Milli(m) => devices.saturating_mul(m).div_ceil(1000),
            Portion::MemoryMib(_) => devices,
        }
    }
}

impl fmt::Display for Share {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.portion {
            Portion::Milli(m) if m % 1000 == 0 => write!(f, "{}", m / 1000)?,
            Portion::Milli(m) => {
                let decimals = format!("{:03}", m % 1000);
                write!(f, "{}.{}", m / 1000, decimals.trim_end_matches('0'))?
            }
            Portion::MemoryMib(mib) => write!(f, "{mib} MiB")?,
        }
        if self.devices == 1 {
            write!(f, " of one GPU through {}", self.scheduler)
        } else {
            write!(
                f,
                " of each of {} GPUs through {}",
                self.devices, self.scheduler
            )
        }
    }
}

/// A fractional request that cannot be read: every policy denies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareProblem {
    pub field: String,
    pub value: String,
    pub reason: String,
}

impl fmt::Display for ShareProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} '{}' {}", self.field, self.value, self.reason)
    }
}

/// The share a pod (template) asks of a configured GPU-sharing scheduler; `Ok(None)` for
/// a pod that is not fractional.
pub fn share(
    meta: &ObjectMeta,
    spec: &PodSpec,
    settings: &FractionalSettings,
) -> Result<Option<Share>, ShareProblem> {
    if let Some(share) = kai_share(meta, spec, settings)? {
        return Ok(Some(share));
    }
    hami_share(spec, settings)
}

fn kai_share(
    meta: &ObjectMeta,
    spec: &PodSpec,
    settings: &FractionalSettings,
) -> Result<Option<Share>, ShareProblem> {
    if !settings.kai.enabled {
        return Ok(None);
    }
    let scheduled_by_kai = spec
        .scheduler_name
        .as_deref()
        .is_some_and(|s| settings.kai.scheduler_names.iter().any(|n| n == s));
    let fraction = meta.annotations.get(KAI_FRACTION_ANNOTATION);
    let memory = meta.annotations.get(KAI_MEMORY_ANNOTATION);
    if !scheduled_by_kai || (fraction.is_none() && memory.is_none()) {
        return Ok(None);
    }
    let problem = |field: &str, value: &str, reason: &str| ShareProblem {
        field: format!("annotation {field}"),
        value: value.to_string(),
        reason: reason.to_string(),
    };
    let portion = match (fraction, memory) {
        (Some(_), Some(_)) => {
            return Err(problem(
                KAI_FRACTION_ANNOTATION,
                fraction.map(String::as_str).unwrap_or(""),
                "is set together with gpu-memory: KAI takes one of them; keep one",
            ));
        }
        (Some(f), None) => Portion::Milli(milli_fraction(f).ok_or_else(|| {
            problem(
                KAI_FRACTION_ANNOTATION,
                f,
                "is not a fraction of a GPU between 0 and 1 (e.g. \"0.5\")",
            )
        })?),
        (None, Some(m)) => Portion::MemoryMib(positive_count(m, u64::MAX).ok_or_else(|| {
            problem(
                KAI_MEMORY_ANNOTATION,
                m,
                "is not a positive number of MiB (e.g. \"2000\")",
            )
        })?),
        (None, None) => return Ok(None),
    };
    let devices = match meta.annotations.get(KAI_DEVICES_ANNOTATION) {
        None => 1,
        Some(n) => positive_count(n, MAX_SHARED_DEVICES).ok_or_else(|| {
            problem(
                KAI_DEVICES_ANNOTATION,
                n,
                &format!("is not a number of GPUs from 1 to {MAX_SHARED_DEVICES}"),
            )
        })?,
    };
    Ok(Some(Share {
        scheduler: Scheduler::Kai,
        devices,
        portion,
    }))
}

/// HAMi: a container that sizes its virtual GPUs. The vGPU count itself is the ordinary
/// `nvidia.com/gpu` resource, counted by [`crate::gpu::pod_gpus`]; this reads the size of
/// the largest slot (memory first, then memory percentage, then cores).
fn hami_share(
    spec: &PodSpec,
    settings: &FractionalSettings,
) -> Result<Option<Share>, ShareProblem> {
    if !settings.hami.enabled {
        return Ok(None);
    }
    let hami = &settings.hami;
    // How a slot is sized, in the order read: the resource, how its value reads, and what
    // a value that does not read is not.
    let percent_of_100 = "is not a percentage from 1 to 100";
    let sizes: [(&str, SizeReader, &str); 3] = [
        (
            &hami.memory_resource,
            |mib| positive_count(mib, u64::MAX).map(Portion::MemoryMib),
            "is not a positive number of MiB",
        ),
        (
            &hami.memory_percentage_resource,
            |pct| percent(pct).map(Portion::Milli),
            percent_of_100,
        ),
        (
            &hami.cores_resource,
            |pct| percent(pct).map(Portion::Milli),
            percent_of_100,
        ),
    ];
    let mut found: Option<Share> = None;
    for c in spec
        .containers
        .iter()
        .chain(&spec.init_containers)
        .chain(&spec.ephemeral_containers)
    {
        let get = |name: &str| {
            c.resources
                .limits
                .get(name)
                .or_else(|| c.resources.requests.get(name))
                .map(|q| q.0.clone())
        };
        let problem = |resource: &str, value: &str, reason: &str| ShareProblem {
            field: format!("container '{}' resource {resource}", c.name),
            value: value.to_string(),
            reason: reason.to_string(),
        };
        let Some((resource, value, read, wrong)) = sizes
            .iter()
            .find_map(|&(resource, read, wrong)| get(resource).map(|v| (resource, v, read, wrong)))
        else {
            continue;
        };
        let portion = read(&value).ok_or_else(|| problem(resource, &value, wrong))?;
        let vgpus = get(KAI_DEVICE_RESOURCE)
            .and_then(|n| Quantity::parse_count(&n).ok())
            .unwrap_or(1)
            .max(1);
        let share = Share {
            scheduler: Scheduler::Hami,
            devices: vgpus,
            portion,
        };
        if found.as_ref().is_none_or(|f| bigger(&share, f)) {
            found = Some(share);
        }
    }
    Ok(found)
}

/// How a HAMi resource's value reads as a slot's size.
type SizeReader = fn(&str) -> Option<Portion>;

fn bigger(a: &Share, b: &Share) -> bool {
    match (a.portion, b.portion) {
        (Portion::Milli(x), Portion::Milli(y)) | (Portion::MemoryMib(x), Portion::MemoryMib(y)) => {
            x > y
        }
        (Portion::MemoryMib(_), Portion::Milli(_)) => true,
        (Portion::Milli(_), Portion::MemoryMib(_)) => false,
    }
}

/// `"0.5"` -> 500; 0 < f <= 1, at most three decimals count (more round up).
fn milli_fraction(text: &str) -> Option<u64> {
    let milli = Quantity::parse(text.trim()).ok()?.milli_ceil();
    (1..=1000).contains(&milli).then_some(milli as u64)
}

/// `"30"` -> 300 thousandths.
fn percent(text: &str) -> Option<u64> {
    let n = Quantity::parse_count(text.trim()).ok()?;
    (1..=100).contains(&n).then_some(n * 10)
}

fn positive_count(text: &str, max: u64) -> Option<u64> {
    let n = Quantity::parse_count(text.trim()).ok()?;
    (1..=max).contains(&n).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fails_starting;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> (ObjectMeta, PodSpec) {
        let meta = serde_json::from_value(v["metadata"].clone()).unwrap_or_default();
        let spec = serde_json::from_value(v["spec"].clone()).unwrap();
        (meta, spec)
    }

    fn kai(annotations: serde_json::Value) -> Result<Option<Share>, ShareProblem> {
        let (m, s) = pod(json!({
            "metadata": {"annotations": annotations},
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c"}]}
        }));
        share(&m, &s, &FractionalSettings::default())
    }

    #[test]
    fn kai_fraction_and_memory_are_read() {
        let half = kai(json!({"gpu-fraction": "0.5"})).unwrap().unwrap();
        assert_eq!(half.portion, Portion::Milli(500));
        assert_eq!(half.devices, 1);
        assert_eq!(half.to_string(), "0.5 of one GPU through KAI Scheduler");
        let mem = kai(json!({"gpu-memory": "2000", "gpu-fraction-num-devices": "2"}))
            .unwrap()
            .unwrap();
        assert_eq!(mem.portion, Portion::MemoryMib(2000));
        assert_eq!(mem.devices, 2);
        assert_eq!(
            mem.to_string(),
            "2000 MiB of each of 2 GPUs through KAI Scheduler"
        );
    }

    #[test]
    fn kai_needs_its_scheduler_and_an_annotation() {
        assert_eq!(kai(json!({})).unwrap(), None);
        let (m, s) = pod(json!({
            "metadata": {"annotations": {"gpu-fraction": "0.5"}},
            "spec": {"containers": [{"name": "c"}]}
        }));
        assert_eq!(share(&m, &s, &FractionalSettings::default()).unwrap(), None);
        let mut off = FractionalSettings::default();
        off.kai.enabled = false;
        let (m, s) = pod(json!({
            "metadata": {"annotations": {"gpu-fraction": "0.5"}},
            "spec": {"schedulerName": "kai-scheduler"}
        }));
        assert_eq!(share(&m, &s, &off).unwrap(), None);
    }

    #[test]
    fn bad_kai_annotations_are_problems() {
        for bad in [
            json!({"gpu-fraction": "0"}),
            json!({"gpu-fraction": "1.5"}),
            json!({"gpu-fraction": "half"}),
            json!({"gpu-fraction": "-0.5"}),
            json!({"gpu-memory": "0"}),
            json!({"gpu-memory": "lots"}),
            json!({"gpu-fraction": "0.5", "gpu-memory": "100"}),
            json!({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0"}),
            json!({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "1000"}),
        ] {
            let err = kai(bad.clone()).unwrap_err();
            assert!(err.to_string().contains("annotation gpu-"), "{bad}: {err}");
        }
    }

    #[test]
    fn hami_reads_the_largest_slot() {
        let (m, s) = pod(json!({"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}}},
            {"name": "b", "resources": {"limits": {"nvidia.com/gpu": 2, "nvidia.com/gpucores": 30}}}
        ]}}));
        let s = share(&m, &s, &FractionalSettings::default())
            .unwrap()
            .unwrap();
        assert_eq!(s.scheduler, Scheduler::Hami);
        assert_eq!(s.portion, Portion::MemoryMib(3000));
        let (m, sp) = pod(json!({"spec": {"containers": [
            {"name": "b", "resources": {"limits": {"nvidia.com/gpu": 2, "nvidia.com/gpumem-percentage": 25}}}
        ]}}));
        let s = share(&m, &sp, &FractionalSettings::default())
            .unwrap()
            .unwrap();
        assert_eq!((s.devices, s.portion), (2, Portion::Milli(250)));
        let (m, sp) = pod(json!({"spec": {"containers": [
            {"name": "b", "resources": {"limits": {"nvidia.com/gpucores": 250}}}
        ]}}));
        assert!(share(&m, &sp, &FractionalSettings::default()).is_err());
    }

    #[test]
    fn share_resources_are_never_gpu_counts() {
        let f = FractionalSettings::default();
        assert!(f.is_share_resource("nvidia.com/gpumem"));
        assert!(f.is_share_resource("nvidia.com/gpucores"));
        assert!(!f.is_share_resource("nvidia.com/gpu"));
    }

    #[test]
    fn charge_rounds_the_sum_up() {
        let half = Share {
            scheduler: Scheduler::Kai,
            devices: 1,
            portion: Portion::Milli(500),
        };
        assert_eq!(half.charge(1), 1);
        assert_eq!(half.charge(3), 2);
        assert_eq!(half.charge(4), 2);
        let mib = Share {
            scheduler: Scheduler::Kai,
            devices: 2,
            portion: Portion::MemoryMib(100),
        };
        assert_eq!(mib.charge(3), 6);
        assert_eq!(half.charge(u64::MAX), u64::MAX / 1000 + 1);
    }

    #[test]
    fn settings_are_validated_by_field() {
        let mut s = FractionalSettings::default();
        assert!(s.validate("fractionalGpus").is_ok());
        s.kai.scheduler_names = vec![];
        fails_starting(
            s.validate("fractionalGpus"),
            "fractionalGpus.kai.schedulerNames",
        );
        let mut s = FractionalSettings::default();
        s.hami.cores_resource = " ".into();
        fails_starting(
            s.validate("fractionalGpus"),
            "fractionalGpus.hami.coresResource",
        );
    }
}
