//! Device access: the ways a container reaches GPUs without asking for them as a
//! resource, so that no policy counts, labels, routes, sizes or gates them. Checked on
//! every pod template, GPU or not (settings: `deviceAccess`, every rule on by default):
//!
//! 1. `deviceEnvVars`: a container (app, init, sidecar, ephemeral) that sets a
//!    device-runtime variable (`NVIDIA_VISIBLE_DEVICES`, `AMD_VISIBLE_DEVICES`,
//!    `HABANA_VISIBLE_DEVICES`) to anything but `void`, `none` or empty. The container
//!    runtime hands the listed devices to the container; the device plugin sets the
//!    variable itself for the GPUs it allocates, so a value written in the manifest is
//!    redundant at best and a way around the count at worst (a pod asking for 1 GPU with
//!    `NVIDIA_VISIBLE_DEVICES=all` sees all 8). A `valueFrom` value cannot be read at
//!    admission and is denied too, except exactly what a configured fractional-GPU
//!    scheduler's webhook writes ([`KaiWrites`]). `CUDA_VISIBLE_DEVICES` and
//!    `ROCR_VISIBLE_DEVICES` only narrow what a process uses among the devices it was given:
//!    they stay allowed.
//! 2. `deviceHostPaths`: a `hostPath` volume that is, is under, or contains a GPU device
//!    path (`/dev/nvidia*`, `/dev/dri`, `/dev/kfd`, `/dev/accel`; so `/dev` and `/` too),
//!    in every pod: a device path is GPU access by itself, and a pod that targets no GPU
//!    node still lands on GPU nodes without a taint. `privileged`: a privileged container
//!    in a pod that requests GPUs, tolerates a GPU taint or selects GPU nodes
//!    ([`super::gpu_nodes::targets`]); off GPU nodes privilege is Pod Security's concern.
//!    Both see every GPU of the node. GPU tooling runs in `privileged.allowNamespaces` or
//!    as `privileged.allowServiceAccounts`.
//! 3. `gpuRuntimeClasses`: a pod that requests no GPU with a GPU `runtimeClassName`
//!    (`nvidia`, `nvidia-cdi`, `nvidia-legacy`: the GPU Operator's RuntimeClasses).
//! 4. `warnOnEnvFrom`: `envFrom` in a pod that requests GPUs, tolerates a GPU taint or
//!    selects GPU nodes is allowed with a warning: the policy cannot read the ConfigMap or
//!    Secret, so a device variable set there is not checked.
//!
//! Node agents (DaemonSets and the pods their controller creates, under
//! `allowDaemonSetsOnGpuNodes`: the GPU Operator's own components are privileged and
//! mount `/dev`) are exempt from all four, and exempt namespaces skip everything.

use super::gpu_nodes::{describe_selector, describe_taint, targets};
use super::problems::{Problem, Subject};
use super::settings::Settings;
use crate::admission::AdmissionRequest;
use crate::fractional::{Scheduler, share};
use crate::gpu::ContainerRole;
use crate::limits::MAX_LISTED;
use crate::podspec::{Container, PodSpec};
use crate::settings::{FieldError, NamespaceList, is_dns_label, is_dns_subdomain};
use crate::workload::At;
use crate::workload::{PodTemplate, Workload, value_at};
use serde::de::Unexpected;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The device-runtime variables denied by default.
pub const DEFAULT_DEVICE_ENV_VARS: [&str; 3] = [
    "NVIDIA_VISIBLE_DEVICES",
    "AMD_VISIBLE_DEVICES",
    "HABANA_VISIBLE_DEVICES",
];
/// The values of a device variable that expose no device (NVIDIA Container Toolkit:
/// `void` and empty give no GPU, `none` no GPU but the driver's libraries).
pub const NO_DEVICE_VALUES: [&str; 3] = ["void", "none", ""];
/// Host paths of GPU devices: NVIDIA (`/dev/nvidia0`, `/dev/nvidiactl`, `/dev/nvidia-uvm`,
/// `/dev/nvidia-caps/...`), DRM render nodes (AMD, Intel: `/dev/dri`), AMD's compute
/// interface (`/dev/kfd`) and accelerators (Intel Gaudi, `/dev/accel`).
pub const DEFAULT_DEVICE_HOST_PATHS: [&str; 4] =
    ["/dev/nvidia", "/dev/dri", "/dev/kfd", "/dev/accel"];
/// The RuntimeClasses the NVIDIA GPU Operator creates: `nvidia` always, `nvidia-cdi` and
/// `nvidia-legacy` when CDI is enabled (the default since v25.10; GPU Operator docs, "CDI
/// Support"). The AMD GPU Operator creates none (its device plugin mounts `/dev/kfd` and
/// `/dev/dri` itself); a RuntimeClass for the AMD Container Toolkit's `amd` runtime can be
/// added.
pub const DEFAULT_GPU_RUNTIME_CLASSES: [&str; 3] = ["nvidia", "nvidia-cdi", "nvidia-legacy"];

/// KAI Scheduler's pod annotation naming the prefix of its GPU-sharing ConfigMaps.
pub const KAI_CONFIG_MAP_ANNOTATION: &str = "runai/shared-gpu-configmap";
/// KAI Scheduler's pod annotation naming the container that gets the shared GPU.
pub const KAI_FRACTION_CONTAINER_ANNOTATION: &str = "gpu-fraction-container-name";
/// The variable KAI Scheduler points at its ConfigMap.
pub const KAI_VISIBLE_DEVICES: &str = "NVIDIA_VISIBLE_DEVICES";
/// What KAI's generated ConfigMap prefix ends with.
const KAI_PREFIX_SUFFIX: &str = "-shared-gpu";
/// The characters of Kubernetes' random name suffixes (apimachinery `util/rand`), of
/// which KAI puts 7 in its prefix.
const K8S_RANDOM_ALPHABET: &str = "bcdfghjklmnpqrstvwxz2456789";
const KAI_RANDOM_CHARS: usize = 7;

/// The `deviceAccess` settings: every rule on by default. Read from JSON by
/// [`DeviceAccess::from_json`] (unknown fields refused, omitted ones defaulted), not by
/// derived `Deserialize` impls: one reader over a `Value` instead of a serde visitor per
/// block and per deserializer keeps 35 KB out of the module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceAccess {
    /// Device-runtime variables a container may only set to `void`, `none` or empty.
    pub device_env_vars: DeviceEnvVars,
    /// Privileged containers in GPU-node pods, and who may run them (the allow-list also
    /// covers `deviceHostPaths`).
    pub privileged: Privileged,
    /// `hostPath` volumes of GPU devices in GPU-node pods.
    pub device_host_paths: DeviceHostPaths,
    /// GPU RuntimeClasses on pods that request no GPU.
    pub gpu_runtime_classes: GpuRuntimeClasses,
    /// Warn about `envFrom` in GPU-node pods (its variables cannot be checked).
    pub warn_on_env_from: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceEnvVars {
    pub enabled: bool,
    /// Exact, case-sensitive variable names.
    pub names: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Privileged {
    pub enabled: bool,
    /// Namespaces whose pods may be privileged and mount device paths (GPU tooling):
    /// exact, or a prefix ending in `*`.
    pub allow_namespaces: NamespaceList,
    /// Service accounts (`namespace:name`) whose pods may be privileged and mount device
    /// paths.
    pub allow_service_accounts: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceHostPaths {
    pub enabled: bool,
    /// Device path prefixes; a hostPath that starts with one, or is a directory above
    /// one (`/dev`, `/`), is denied.
    pub paths: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuRuntimeClasses {
    pub enabled: bool,
    /// RuntimeClass names.
    pub names: Vec<String>,
}

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| v.to_string()).collect()
}

impl Default for DeviceAccess {
    /// Every rule on, with its default list.
    fn default() -> Self {
        DeviceAccess {
            device_env_vars: DeviceEnvVars {
                enabled: true,
                names: strings(&DEFAULT_DEVICE_ENV_VARS),
            },
            privileged: Privileged {
                enabled: true,
                allow_namespaces: NamespaceList::default(),
                allow_service_accounts: Vec::new(),
            },
            device_host_paths: DeviceHostPaths {
                enabled: true,
                paths: strings(&DEFAULT_DEVICE_HOST_PATHS),
            },
            gpu_runtime_classes: GpuRuntimeClasses {
                enabled: true,
                names: strings(&DEFAULT_GPU_RUNTIME_CLASSES),
            },
            warn_on_env_from: true,
        }
    }
}

impl<'de> Deserialize<'de> for DeviceAccess {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        DeviceAccess::from_json(&value).map_err(serde::de::Error::custom)
    }
}

/// `invalid type: string "yes", expected a boolean`, as serde words it.
fn invalid_type(field: &str, value: &Value, expected: &str) -> String {
    let unexpected = match value {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => Unexpected::Unsigned(u),
            (_, Some(i), _) => Unexpected::Signed(i),
            (_, _, f) => Unexpected::Float(f.unwrap_or(0.0)),
        },
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    };
    format!(
        "{}invalid type: {unexpected}, expected {expected}",
        at(field)
    )
}

/// `field: `, or nothing for the block itself (the settings reader names it from the
/// error's position, [`crate::settings::path_of`]).
fn at(field: &str) -> String {
    if field.is_empty() {
        String::new()
    } else {
        format!("{field}: ")
    }
}

/// The fields of a JSON object (`null` reads as none), refusing unknown ones.
fn fields<'v>(
    field: &str,
    value: &'v Value,
    known: &[&str],
) -> Result<Vec<(&'v str, &'v Value)>, String> {
    let map = match value {
        Value::Null => return Ok(Vec::new()),
        Value::Object(map) => map,
        other => return Err(invalid_type(field, other, "a map")),
    };
    let mut out = Vec::new();
    for (k, v) in map {
        if !known.contains(&k.as_str()) {
            let expected: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
            return Err(format!(
                "{}unknown field `{k}`, expected one of {}",
                at(field),
                expected.join(", ")
            ));
        }
        out.push((k.as_str(), v));
    }
    Ok(out)
}

fn boolean(field: &str, value: &Value) -> Result<bool, String> {
    value
        .as_bool()
        .ok_or_else(|| invalid_type(field, value, "a boolean"))
}

/// A list of strings (`null` reads as empty).
fn string_list(field: &str, value: &Value) -> Result<Vec<String>, String> {
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| invalid_type(&format!("{field}[{i}]"), v, "a string"))
            })
            .collect(),
        other => Err(invalid_type(field, other, "a sequence")),
    }
}

/// One `{enabled, <list>}` block.
fn rule_block(
    field: &str,
    value: &Value,
    list: &str,
    enabled: &mut bool,
    values: &mut Vec<String>,
) -> Result<(), String> {
    for (k, v) in fields(field, value, &["enabled", list])? {
        let at = format!("{field}.{k}");
        if k == "enabled" {
            *enabled = boolean(&at, v)?;
        } else {
            *values = string_list(&at, v)?;
        }
    }
    Ok(())
}

impl DeviceAccess {
    /// Reads the `deviceAccess` block: fields left out keep their defaults; unknown fields
    /// and wrong types are errors naming the field (`privileged.allowNamespaces[0]: ...`).
    pub fn from_json(value: &Value) -> Result<DeviceAccess, String> {
        let mut out = DeviceAccess::default();
        let known = [
            "deviceEnvVars",
            "privileged",
            "deviceHostPaths",
            "gpuRuntimeClasses",
            "warnOnEnvFrom",
        ];
        for (k, v) in fields("", value, &known)? {
            match k {
                "deviceEnvVars" => {
                    let e = &mut out.device_env_vars;
                    rule_block(k, v, "names", &mut e.enabled, &mut e.names)?
                }
                "deviceHostPaths" => {
                    let h = &mut out.device_host_paths;
                    rule_block(k, v, "paths", &mut h.enabled, &mut h.paths)?
                }
                "gpuRuntimeClasses" => {
                    let r = &mut out.gpu_runtime_classes;
                    rule_block(k, v, "names", &mut r.enabled, &mut r.names)?
                }
                "privileged" => {
                    let known = ["enabled", "allowNamespaces", "allowServiceAccounts"];
                    for (pk, pv) in fields(k, v, &known)? {
                        let at = format!("privileged.{pk}");
                        let p = &mut out.privileged;
                        match pk {
                            "enabled" => p.enabled = boolean(&at, pv)?,
                            "allowNamespaces" => {
                                p.allow_namespaces = NamespaceList(string_list(&at, pv)?)
                            }
                            _ => p.allow_service_accounts = string_list(&at, pv)?,
                        }
                    }
                }
                _ => out.warn_on_env_from = boolean(k, v)?,
            }
        }
        Ok(out)
    }

    /// Field errors, each naming its field under `prefix` (`deviceAccess`).
    pub fn validate(&self, prefix: &str) -> Result<(), FieldError> {
        let env = &self.device_env_vars;
        let field = format!("{prefix}.deviceEnvVars.names");
        nonempty_when_enabled(&field, env.enabled, &env.names, "variable")?;
        each_listed_once(&field, &env.names, |name| {
            (!is_env_name(name)).then(|| format!(
                "'{name}' is not an environment variable name (letters, digits and _, not starting with a digit), e.g. NVIDIA_VISIBLE_DEVICES"
            ))
        })?;

        let p = &self.privileged;
        p.allow_namespaces
            .validate(&format!("{prefix}.privileged.allowNamespaces"))?;
        let field = format!("{prefix}.privileged.allowServiceAccounts");
        each_listed_once(&field, &p.allow_service_accounts, |sa| {
            let ok = sa
                .split_once(':')
                .is_some_and(|(ns, name)| is_dns_label(ns) && is_dns_subdomain(name));
            (!ok).then(|| format!(
                "'{sa}' is not namespace:name of a service account (e.g. gpu-operator:nvidia-dcgm-exporter)"
            ))
        })?;

        let h = &self.device_host_paths;
        let field = format!("{prefix}.deviceHostPaths.paths");
        nonempty_when_enabled(&field, h.enabled, &h.paths, "device path")?;
        each_listed_once(&field, &h.paths, |path| {
            if path == "/" {
                Some("'/' would deny every hostPath volume; list device paths such as /dev/nvidia (the directories above them, / included, are denied with them)".to_string())
            } else if !path.starts_with('/') || normalize(path) != *path {
                Some(format!(
                    "'{path}' is not an absolute path without '.', '..', '//' or a trailing '/' (e.g. /dev/nvidia)"
                ))
            } else {
                None
            }
        })?;

        let r = &self.gpu_runtime_classes;
        let field = format!("{prefix}.gpuRuntimeClasses.names");
        nonempty_when_enabled(&field, r.enabled, &r.names, "RuntimeClass")?;
        each_listed_once(&field, &r.names, |name| {
            (!is_dns_subdomain(name)).then(|| format!(
                "'{name}' is not a RuntimeClass name (lowercase letters, digits, '-' and '.'), e.g. nvidia"
            ))
        })
    }
}

/// Checks each of `values`, named `field[i]`: what `wrong` finds wrong with it (`None`:
/// nothing), then that it is not listed twice.
fn each_listed_once(
    field: &str,
    values: &[String],
    wrong: impl Fn(&str) -> Option<String>,
) -> Result<(), FieldError> {
    for (i, value) in values.iter().enumerate() {
        if let Some(reason) = wrong(value) {
            return Err(FieldError::new(format!("{field}[{i}]"), reason));
        }
        if values[..i].contains(value) {
            return Err(FieldError::new(
                format!("{field}[{i}]"),
                format!("'{value}' is listed twice"),
            ));
        }
    }
    Ok(())
}

fn nonempty_when_enabled(
    field: &str,
    enabled: bool,
    values: &[String],
    what: &str,
) -> Result<(), FieldError> {
    if enabled && values.is_empty() {
        let block = field.rsplit_once('.').map(|(b, _)| b).unwrap_or(field);
        return Err(FieldError::new(
            field,
            format!("give at least one {what}, or set {block}.enabled: false to turn the rule off"),
        ));
    }
    Ok(())
}

fn is_env_name(s: &str) -> bool {
    let b = s.as_bytes();
    b.first()
        .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// A host path as the node resolves it, lexically: `//` and `.` dropped, `..` applied, no
/// trailing `/` (`/dev/./nvidia0/` is `/dev/nvidia0`; a relative path is read from `/`).
pub fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

/// How a host path reaches a device path of the settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceMount<'s> {
    /// The path starts with the device path: `/dev/nvidia0` for `/dev/nvidia`.
    Device(&'s str),
    /// The path is a directory above it: `/dev` or `/` for `/dev/nvidia`.
    Contains(&'s str),
}

/// Which device path (of `devices`) `host_path` exposes, if any.
pub fn device_mount<'s>(host_path: &str, devices: &'s [String]) -> Option<DeviceMount<'s>> {
    let path = normalize(host_path);
    if let Some(d) = devices.iter().find(|d| path.starts_with(d.as_str())) {
        return Some(DeviceMount::Device(d));
    }
    devices
        .iter()
        .find(|d| {
            path == "/"
                || d.strip_prefix(path.as_str())
                    .is_some_and(|r| r.starts_with('/'))
        })
        .map(|d| DeviceMount::Contains(d))
}

/// What KAI Scheduler's admission webhook writes into a pod that asks for a share of a
/// GPU (`gpu-fraction` / `gpu-memory` under its `schedulerName`), modelled on
/// NVIDIA/KAI-Scheduler `pkg/admission/webhook/v1alpha2/gpusharing/gpu_sharing.go`
/// (`Mutate`), `pkg/binder/common/gpu_access.go` (`AddGPUSharingEnvVars`,
/// `GetFractionContainerRef`), `pkg/binder/common/env_vars.go`,
/// `pkg/binder/common/volumes.go` and `pkg/binder/common/gpusharingconfigmap/config_map.go`
/// (the names), and `pkg/admission/webhook/v1alpha2/runtimeenforcement/runtime_enforcement.go`:
///
/// - the annotation `runai/shared-gpu-configmap: <owner or pod name>-<7 random
///   characters>-shared-gpu` (the prefix; kept when already set);
/// - in the fraction container (the one `gpu-fraction-container-name` names, init
///   containers first, else `containers[0]`; its index `N`, or `iN` for an init container):
///   `NVIDIA_VISIBLE_DEVICES` (and `RUNAI_NUM_OF_GPUS`, `GPU_PORTION`) from
///   `configMapKeyRef {name: <prefix>-<N>, key: <the same name>}`, and
///   `envFrom: [{configMapRef: {name: <prefix>-<N>-evar}}]`;
/// - a volume `<prefix>-<N>-vol` of that ConfigMap, and `runtimeClassName: nvidia` (its
///   `gpuPodRuntimeClassName`) on a pod that has none.
///
/// KAI's binder then writes the device it reserved into those ConfigMaps. The rules
/// accept exactly the variable and the `envFrom` entry above, in that container, on a pod
/// [`share`] recognizes as KAI's; the volume and the runtime class need no exception (a
/// ConfigMap volume is not a device, and a KAI pod is a GPU pod).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KaiWrites {
    pub role: ContainerRole,
    pub index: usize,
    /// `<prefix>-<N>`: the ConfigMap `NVIDIA_VISIBLE_DEVICES` comes from.
    pub config_map: String,
}

impl KaiWrites {
    /// What KAI wrote into `template`, when it is a KAI fractional pod under `settings`.
    pub fn of(template: &PodTemplate, settings: &Settings) -> Option<KaiWrites> {
        let share = share(&template.meta, &template.spec, &settings.fractional_gpus).ok()??;
        if share.scheduler != Scheduler::Kai {
            return None;
        }
        let prefix = template.meta.annotations.get(KAI_CONFIG_MAP_ANNOTATION)?;
        if !is_kai_prefix(prefix) {
            return None;
        }
        let spec = &template.spec;
        let (role, index) = match template
            .meta
            .annotations
            .get(KAI_FRACTION_CONTAINER_ANNOTATION)
        {
            Some(name) => match spec.init_containers.iter().position(|c| &c.name == name) {
                Some(i) => (ContainerRole::Init, i),
                None => (
                    ContainerRole::App,
                    spec.containers.iter().position(|c| &c.name == name)?,
                ),
            },
            None if !spec.containers.is_empty() => (ContainerRole::App, 0),
            None => return None,
        };
        let suffix = match role {
            ContainerRole::App => index.to_string(),
            _ => format!("i{index}"),
        };
        Some(KaiWrites {
            role,
            index,
            config_map: format!("{prefix}-{suffix}"),
        })
    }

    fn is_container(&self, role: ContainerRole, index: usize) -> bool {
        let init = |r: ContainerRole| matches!(r, ContainerRole::Init | ContainerRole::Sidecar);
        index == self.index && (role == self.role || (init(role) && init(self.role)))
    }

    /// True for the `NVIDIA_VISIBLE_DEVICES` entry KAI writes (`name` and its `valueFrom`).
    fn wrote_env(
        &self,
        role: ContainerRole,
        index: usize,
        name: &str,
        source: &ValueSource,
    ) -> bool {
        self.is_container(role, index)
            && name == KAI_VISIBLE_DEVICES
            && matches!(source, ValueSource::ConfigMapKey { name, key }
                if *name == self.config_map && key == KAI_VISIBLE_DEVICES)
    }

    /// True for the `envFrom` entry KAI writes: `{configMapRef: {name: <prefix>-<N>-evar}}`
    /// (`optional: false`), nothing else.
    fn wrote_env_from(&self, role: ContainerRole, index: usize, entry: &Value) -> bool {
        let Some(map) = entry.as_object() else {
            return false;
        };
        let only_config_map = map.iter().all(|(k, v)| k == "configMapRef" || v.is_null());
        let name = entry
            .at("/configMapRef/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        self.is_container(role, index)
            && only_config_map
            && name.strip_suffix("-evar") == Some(self.config_map.as_str())
    }
}

/// What an env var's `valueFrom` refers to, as the object's JSON says: the typed PodSpec
/// only knows that there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ValueSource {
    /// `configMapKeyRef` alone: the ConfigMap and the key.
    ConfigMapKey { name: String, key: String },
    /// `secretKeyRef` alone.
    SecretKey { name: String, key: String },
    /// Anything else: `fieldRef`, `resourceFieldRef`, several sources, an unreadable value.
    Other,
}

impl ValueSource {
    fn of(value_from: Option<&Value>) -> ValueSource {
        let Some(map) = value_from.and_then(Value::as_object) else {
            return ValueSource::Other;
        };
        let mut present = map.iter().filter(|(_, v)| !v.is_null());
        let (Some((kind, reference)), None) = (present.next(), present.next()) else {
            return ValueSource::Other;
        };
        let text = |field: &str| {
            reference
                .get(field)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        match kind.as_str() {
            "configMapKeyRef" => ValueSource::ConfigMapKey {
                name: text("name"),
                key: text("key"),
            },
            "secretKeyRef" => ValueSource::SecretKey {
                name: text("name"),
                key: text("key"),
            },
            _ => ValueSource::Other,
        }
    }
}

/// The JSON of a container of the template's PodSpec (`spec`), found by its list, index
/// and name; `None` for the containers the typed PodSpec took from elsewhere (KServe's
/// model-server shortcuts).
fn container_json<'v>(
    spec: Option<&'v Value>,
    role: ContainerRole,
    index: usize,
    name: &str,
) -> Option<&'v Value> {
    let list = match role {
        ContainerRole::App => "containers",
        ContainerRole::Init | ContainerRole::Sidecar => "initContainers",
        ContainerRole::Ephemeral => "ephemeralContainers",
    };
    let c = spec?.get(list)?.get(index)?;
    (c.get("name").and_then(Value::as_str).unwrap_or("") == name).then_some(c)
}

/// The `valueFrom` of the `j`-th env entry of a container's JSON, if it is that variable.
fn value_from_json<'v>(container: Option<&'v Value>, j: usize, name: &str) -> Option<&'v Value> {
    let var = container?.get("env")?.get(j)?;
    (var.get("name").and_then(Value::as_str) == Some(name))
        .then(|| var.get("valueFrom"))
        .flatten()
}

/// `<base>-<7 characters of Kubernetes' random alphabet>-shared-gpu`, as KAI generates it
/// (the base, the owner's or the pod's name, may be empty for a generateName pod).
fn is_kai_prefix(prefix: &str) -> bool {
    let Some(rest) = prefix.strip_suffix(KAI_PREFIX_SUFFIX) else {
        return false;
    };
    let b = rest.as_bytes();
    b.len() > KAI_RANDOM_CHARS
        && b[b.len() - KAI_RANDOM_CHARS - 1] == b'-'
        && b[b.len() - KAI_RANDOM_CHARS..]
            .iter()
            .all(|c| K8S_RANDOM_ALPHABET.as_bytes().contains(c))
}

/// Every container of a pod with its role and its index within its list.
fn containers(spec: &PodSpec) -> impl Iterator<Item = (ContainerRole, usize, &Container)> {
    let init_role = |c: &Container| {
        if c.restart_policy.as_deref() == Some("Always") {
            ContainerRole::Sidecar
        } else {
            ContainerRole::Init
        }
    };
    spec.containers
        .iter()
        .enumerate()
        .map(|(i, c)| (ContainerRole::App, i, c))
        .chain(
            spec.init_containers
                .iter()
                .enumerate()
                .map(move |(i, c)| (init_role(c), i, c)),
        )
        .chain(
            spec.ephemeral_containers
                .iter()
                .enumerate()
                .map(|(i, c)| (ContainerRole::Ephemeral, i, c)),
        )
}

fn who(role: ContainerRole, c: &Container) -> String {
    format!("{role} '{}'", c.name)
}

/// The resource to request instead of a device variable, for the message.
fn resource_for(var: &str) -> &'static str {
    match var {
        "AMD_VISIBLE_DEVICES" => "amd.com/gpu",
        "HABANA_VISIBLE_DEVICES" => "habana.ai/gaudi",
        _ => "nvidia.com/gpu",
    }
}

/// At most this many characters of a value are quoted in a message.
const MAX_QUOTED: usize = 64;

fn quoted(value: &str) -> String {
    match value.char_indices().nth(MAX_QUOTED) {
        Some((end, _)) => format!("{}...", &value[..end]),
        None => value.to_string(),
    }
}

fn describe_source(source: &ValueSource) -> String {
    match source {
        ValueSource::ConfigMapKey { name, key } => {
            format!("ConfigMap '{}' key '{}'", quoted(name), quoted(key))
        }
        ValueSource::SecretKey { name, key } => {
            format!("Secret '{}' key '{}'", quoted(name), quoted(key))
        }
        ValueSource::Other => "a reference".to_string(),
    }
}

/// Why a device `hostPath` in a pod that neither requests GPUs nor targets GPU nodes is
/// still GPU access, for the message: the scheduler may place it on any GPU node that
/// carries no taint, and the device path opens that node's GPUs.
const UNTAINTED: &str = "requests no GPU but can be scheduled onto any GPU node without a taint";

/// Why a pod counts as running on GPU nodes, for the message: `requests GPUs`,
/// `tolerates the GPU taint nvidia.com/gpu`, `selects GPU nodes with nodeSelector ...`;
/// `None` for a pod that does none of these.
fn gpu_node_reason(spec: &PodSpec, uses_gpu: bool, settings: &Settings) -> Option<String> {
    if uses_gpu {
        return Some("requests GPUs".into());
    }
    let t = targets(spec, settings);
    if let Some(taint) = t.tolerated.first() {
        return Some(format!("tolerates the GPU taint {}", describe_taint(taint)));
    }
    t.selected
        .first()
        .map(|key| format!("selects GPU nodes with {}", describe_selector(spec, key)))
}

/// True when `spec`'s service account or `namespace` is on the GPU-tooling allow-list.
fn tooling_allowed(spec: &PodSpec, namespace: &str, settings: &DeviceAccess) -> bool {
    let p = &settings.privileged;
    if p.allow_namespaces.contains(namespace) {
        return true;
    }
    let account = spec
        .service_account_name
        .as_deref()
        .filter(|a| !a.is_empty())
        .unwrap_or("default");
    p.allow_service_accounts
        .iter()
        .any(|sa| sa.split_once(':') == Some((namespace, account)))
}

/// The namespace a request's pods run in.
fn namespace<'a>(request: &'a AdmissionRequest, workload: &'a Workload) -> &'a str {
    if request.namespace.is_empty() {
        &workload.meta.namespace
    } else {
        &request.namespace
    }
}

/// The device-access problems of one pod template; `uses_gpu` is whether it requests GPUs
/// (every way [`crate::gpu`] counts them). The caller skips node agents.
pub fn check(
    template: &PodTemplate,
    subject: Subject,
    uses_gpu: bool,
    request: &AdmissionRequest,
    workload: &Workload,
    settings: &Settings,
) -> Vec<Problem> {
    let access = &settings.device_access;
    let spec = &template.spec;
    let mut problems = Vec::new();

    if access.device_env_vars.enabled {
        let kai = KaiWrites::of(template, settings);
        let spec_json = value_at(&request.object, &template.spec_pointer);
        for (role, index, c) in containers(spec) {
            for (j, var) in c.env.iter().enumerate() {
                if !access.device_env_vars.names.contains(&var.name) {
                    continue;
                }
                if var.value_from {
                    let json = container_json(spec_json, role, index, &c.name);
                    let source = ValueSource::of(value_from_json(json, j, &var.name));
                    if kai
                        .as_ref()
                        .is_some_and(|k| k.wrote_env(role, index, &var.name, &source))
                    {
                        continue;
                    }
                    problems.push(Problem::DeviceEnvVarFrom {
                        who: who(role, c),
                        name: var.name.clone(),
                        source: describe_source(&source),
                        resource: resource_for(&var.name).into(),
                    });
                } else if let Some(value) = var.value.as_deref()
                    && !NO_DEVICE_VALUES.contains(&value)
                {
                    problems.push(Problem::DeviceEnvVar {
                        who: who(role, c),
                        name: var.name.clone(),
                        value: quoted(value),
                        resource: resource_for(&var.name).into(),
                    });
                }
            }
        }
    }

    let device_rules = access.privileged.enabled || access.device_host_paths.enabled;
    if device_rules && !tooling_allowed(spec, namespace(request, workload), access) {
        let gpu_node = gpu_node_reason(spec, uses_gpu, settings);
        if access.privileged.enabled
            && let Some(reason) = &gpu_node
        {
            for (role, _, c) in containers(spec) {
                if c.security_context.as_ref().and_then(|s| s.privileged) == Some(true) {
                    problems.push(Problem::PrivilegedContainer {
                        who: who(role, c),
                        subject,
                        reason: reason.clone(),
                    });
                }
            }
        }
        if access.device_host_paths.enabled {
            for v in &spec.volumes {
                let Some(host) = &v.host_path else { continue };
                let Some(mount) = device_mount(&host.path, &access.device_host_paths.paths) else {
                    continue;
                };
                let (device, contains) = match mount {
                    DeviceMount::Device(d) => (d, false),
                    DeviceMount::Contains(d) => (d, true),
                };
                problems.push(Problem::DeviceHostPath {
                    volume: quoted(&v.name),
                    path: quoted(&host.path),
                    device: device.to_string(),
                    contains,
                    subject,
                    reason: gpu_node.clone().unwrap_or_else(|| UNTAINTED.to_string()),
                });
            }
        }
    }

    if access.gpu_runtime_classes.enabled
        && !uses_gpu
        && let Some(class) = spec.runtime_class_name.as_deref()
        && access.gpu_runtime_classes.names.iter().any(|n| n == class)
    {
        problems.push(Problem::GpuRuntimeClass {
            subject,
            class: class.to_string(),
        });
    }
    problems
}

/// The `envFrom` warnings of a workload (not a node agent): one per container of a pod
/// template that requests GPUs (`uses_gpu`), tolerates a GPU taint or selects GPU nodes,
/// at most [`MAX_LISTED`], then a count. KAI's own `envFrom` entry is not warned about.
pub fn env_from_warnings(
    workload: &Workload,
    object: &Value,
    settings: &Settings,
    uses_gpu: impl Fn(&PodTemplate) -> bool,
) -> Vec<String> {
    let access = &settings.device_access;
    if !access.warn_on_env_from {
        return Vec::new();
    }
    let example = access
        .device_env_vars
        .names
        .first()
        .map_or(KAI_VISIBLE_DEVICES, String::as_str);
    let several = workload.templates.len() > 1;
    let mut warnings = Vec::new();
    let mut more = 0usize;
    for template in &workload.templates {
        let spec = &template.spec;
        if !spec
            .containers
            .iter()
            .chain(&spec.init_containers)
            .chain(&spec.ephemeral_containers)
            .any(|c| !c.env_from.is_empty())
        {
            continue;
        }
        if !uses_gpu(template) && !targets(spec, settings).any() {
            continue;
        }
        let kai = KaiWrites::of(template, settings);
        let spec_json = value_at(object, &template.spec_pointer);
        for (role, index, c) in containers(spec) {
            if c.env_from.is_empty() {
                continue;
            }
            let entries = container_json(spec_json, role, index, &c.name)
                .and_then(|j| j.get("envFrom"))
                .and_then(Value::as_array);
            let sources: Vec<String> = match entries {
                Some(entries) => entries
                    .iter()
                    .filter(|e| {
                        !kai.as_ref()
                            .is_some_and(|k| k.wrote_env_from(role, index, e))
                    })
                    .map(describe_env_from)
                    .collect(),
                None => vec!["a ConfigMap or Secret".to_string(); c.env_from.len()],
            };
            let Some(first) = sources.first() else {
                continue;
            };
            if warnings.len() == MAX_LISTED {
                more += 1;
                continue;
            }
            let sources = match sources.len() {
                1 => first.clone(),
                2 => format!("{first} and {}", sources[1]),
                n => format!("{first} and {} more", n - 1),
            };
            let at = if several {
                format!("{}: ", template.location)
            } else {
                String::new()
            };
            warnings.push(format!(
                "{at}{} takes variables from {sources} (envFrom), which the GPU admission policy cannot read: a device variable such as {example} set there is not checked; set such variables in env instead",
                who(role, c)
            ));
        }
    }
    if more > 0 {
        warnings.push(format!(
            "and {more} more container{} with envFrom, not listed here",
            if more == 1 { "" } else { "s" }
        ));
    }
    warnings
}

/// `ConfigMap 'settings'`, `Secret 'token'` (an entry that names neither: `a ConfigMap or
/// Secret`, which the API server would refuse).
fn describe_env_from(entry: &Value) -> String {
    let name = |field: &str| entry.get(field)?.get("name")?.as_str().map(quoted);
    match (name("configMapRef"), name("secretRef")) {
        (Some(c), _) => format!("ConfigMap '{c}'"),
        (None, Some(s)) => format!("Secret '{s}'"),
        (None, None) => "a ConfigMap or Secret".to_string(),
    }
}

#[cfg(test)]
mod tests;
