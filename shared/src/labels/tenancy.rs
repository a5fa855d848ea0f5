//! Who may use GPUs at all, and who may share them: rules on the workload's Namespace,
//! whose labels users who can create pods cannot set. Both are off by default (they need
//! `get` on namespaces, a grant the policy did not need before them); switched on, a
//! Namespace that cannot be read denies the GPU workload, with the class of the failure
//! ([`crate::cluster::HostFailure::explanation`]).
//!
//! - **`gpuAccessLabel`** (rule `gpuAccess`): a template that uses a GPU is denied unless
//!   its Namespace carries the label (with one of `allowedValues`, or matching `pattern`;
//!   without either, any non-empty value).
//! - **`gpuSharing`** (rule `gpuSharing`): with `enabled`, a template that uses a shared
//!   GPU ([`SharingModel`]: time-sliced or MPS replicas `*.shared`, MIG `nvidia.com/mig-*`,
//!   KAI Scheduler or HAMi fractions) is denied unless an entry of `allow` lists its model
//!   and matches it: the template's workload type (its label `workloadTypeLabel`) is one of
//!   the entry's `workloadTypes`, and its Namespace matches the entry's
//!   `namespaceSelector` (an entry without either matches every template). Whole GPUs
//!   are never a sharing model.
//!
//! The Namespace is read once per request, only when a rule needs it: for `gpuAccess`,
//! when a template uses a GPU; for `gpuSharing`, when a template shares one and only an
//! entry with a `namespaceSelector` could allow it.

use super::problems::{Expected, Problem};
use super::settings::RequiredLabel;
use crate::cluster::{Cluster, HostFailure, namespace_labels};
use crate::fractional::Scheduler;
use crate::gpu::PodGpus;
use crate::selector::LabelSelector;
use crate::settings::{FieldError, validate_label_key, validate_label_value};
use crate::workload::PodTemplate;
use serde::{Deserialize, Serialize};
use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::fmt;

/// The rule name of `gpuAccessLabel`, for exceptions.
pub const GPU_ACCESS_RULE: &str = "gpuAccess";
/// The rule name of `gpuSharing`, for exceptions.
pub const GPU_SHARING_RULE: &str = "gpuSharing";

/// How a pod shares a GPU with others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SharingModel {
    /// Replicas of the NVIDIA device plugin's time-slicing or MPS (`nvidia.com/gpu.shared`,
    /// `nvidia.com/mig-1g.10gb.shared`: any GPU resource named `*.shared`). No memory
    /// isolation between the pods on a device.
    TimeSlicing,
    /// MIG instances (`nvidia.com/mig-*`, or DRA's `mig.nvidia.com` class): hardware
    /// isolation of memory and compute.
    Mig,
    /// KAI Scheduler fractions (`gpu-fraction`, `gpu-memory`).
    Kai,
    /// HAMi virtual GPUs (`nvidia.com/gpumem`, `gpumem-percentage`, `gpucores`).
    Hami,
}

impl SharingModel {
    /// The name settings use.
    pub fn setting(self) -> &'static str {
        match self {
            SharingModel::TimeSlicing => "timeSlicing",
            SharingModel::Mig => "mig",
            SharingModel::Kai => "kai",
            SharingModel::Hami => "hami",
        }
    }
}

impl fmt::Display for SharingModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SharingModel::TimeSlicing => "time-slicing",
            SharingModel::Mig => "MIG",
            SharingModel::Kai => "KAI Scheduler fractions",
            SharingModel::Hami => "HAMi fractions",
        })
    }
}

/// One entry of `gpuSharing.allow`: the models it allows, to the templates it matches.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct SharingRule {
    pub models: Vec<SharingModel>,
    /// Workload types (values of `workloadTypeLabel`) it applies to; empty: every type.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub workload_types: Vec<String>,
    /// Namespaces (by their labels) it applies to; unset or empty: every namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
}

impl SharingRule {
    fn selector(&self) -> Option<&LabelSelector> {
        self.namespace_selector.as_ref().filter(|s| !s.is_empty())
    }

    fn takes_type(&self, workload_type: Option<&str>) -> bool {
        self.workload_types.is_empty()
            || workload_type.is_some_and(|t| self.workload_types.iter().any(|w| w == t))
    }

    /// `workload types interactive, batch in namespaces matching trust=high`.
    fn describe(&self, type_label: &str) -> String {
        let types = (!self.workload_types.is_empty())
            .then(|| format!("{type_label}={}", self.workload_types.join("|")));
        let namespaces = self
            .selector()
            .map(|s| format!("namespaces matching {}", s.to_query()));
        match (types, namespaces) {
            (None, None) => "every workload".into(),
            (Some(t), None) => t,
            (None, Some(n)) => n,
            (Some(t), Some(n)) => format!("{t} in {n}"),
        }
    }
}

/// `gpuSharing`: which sharing models which workloads may use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct GpuSharing {
    /// Off by default: every sharing model is allowed.
    pub enabled: bool,
    /// The pod template label whose value is the workload type.
    pub workload_type_label: String,
    /// What is allowed; with `enabled` and no entry, no GPU may be shared.
    pub allow: Vec<SharingRule>,
}

impl Default for GpuSharing {
    fn default() -> Self {
        GpuSharing {
            enabled: false,
            workload_type_label: super::settings::WORKLOAD_TYPE_LABEL.into(),
            allow: Vec::new(),
        }
    }
}

impl GpuSharing {
    pub fn is_default(&self) -> bool {
        *self == GpuSharing::default()
    }

    /// Field errors, named under `gpuSharing`.
    pub fn validate(&self) -> Result<(), FieldError> {
        validate_label_key("gpuSharing.workloadTypeLabel", &self.workload_type_label)?;
        for (i, rule) in self.allow.iter().enumerate() {
            let field = format!("gpuSharing.allow[{i}]");
            if rule.models.is_empty() {
                return Err(FieldError::new(
                    format!("{field}.models"),
                    "list the sharing models it allows: timeSlicing, mig, kai, hami",
                ));
            }
            for (j, t) in rule.workload_types.iter().enumerate() {
                let f = format!("{field}.workloadTypes[{j}]");
                if t.is_empty() {
                    return Err(FieldError::new(f, "a workload type must not be empty"));
                }
                validate_label_value(&f, t)?;
            }
            if let Some(s) = &rule.namespace_selector {
                s.validate(&format!("{field}.namespaceSelector"))?;
            }
        }
        Ok(())
    }
}

/// `gpuAccessLabel`, unless unset or left with an empty key (as forms send it).
pub fn access_label(label: &Option<RequiredLabel>) -> Option<&RequiredLabel> {
    label.as_ref().filter(|l| !l.key.is_empty())
}

/// Settings validation of `gpuAccessLabel`.
pub fn validate_access_label(label: &Option<RequiredLabel>) -> Result<(), FieldError> {
    match access_label(label) {
        Some(l) => l.validate("gpuAccessLabel", &[]),
        None => Ok(()),
    }
}

/// The workload's Namespace, read on first use (at most once per request).
pub struct Namespace<'a> {
    pub name: &'a str,
    cluster: &'a dyn Cluster,
    labels: OnceCell<Result<BTreeMap<String, String>, HostFailure>>,
}

impl<'a> Namespace<'a> {
    pub fn new(cluster: &'a dyn Cluster, name: &'a str) -> Namespace<'a> {
        Namespace {
            name,
            cluster,
            labels: OnceCell::new(),
        }
    }

    /// Its labels, or why they cannot be read.
    pub fn labels(&self) -> &Result<BTreeMap<String, String>, HostFailure> {
        self.labels
            .get_or_init(|| namespace_labels(self.cluster, self.name))
    }

    /// The failure of the read, if one was made and failed.
    pub fn failure(&self) -> Option<&HostFailure> {
        self.labels.get().and_then(|r| r.as_ref().err())
    }
}

/// The `gpuAccess` problem of a GPU template in `namespace`, if any.
pub fn check_access(label: &RequiredLabel, namespace: &Namespace) -> Option<Problem> {
    let labels = match namespace.labels() {
        Ok(labels) => labels,
        Err(failure) => {
            return Some(Problem::NamespaceUnreadable {
                rule: GPU_ACCESS_RULE,
                what: format!(
                    "whether namespace {} may use GPUs (gpuAccessLabel {})",
                    namespace.name, label.key
                ),
                explanation: failure.explanation(),
            });
        }
    };
    let value = labels.get(&label.key).map(String::as_str).unwrap_or("");
    let fits = !value.is_empty()
        && match (label.allowed(), label.glob()) {
            (Some(values), _) => values.iter().any(|v| v == value),
            (None, Some(pattern)) => crate::settings::wildcard::matches(pattern, value),
            (None, None) => true,
        };
    (!fits).then(|| Problem::NoGpuAccess {
        namespace: namespace.name.to_string(),
        key: label.key.clone(),
        value: (!value.is_empty()).then(|| value.to_string()),
        expected: match (label.allowed(), label.glob()) {
            (Some(values), _) => Expected::OneOf(values.to_vec()),
            (None, Some(p)) => Expected::Pattern(p.to_string()),
            (None, None) => Expected::NonEmpty,
        },
    })
}

/// The sharing models a template uses, each with what shows it (`nvidia.com/gpu.shared`,
/// `0.5 of one GPU through KAI Scheduler`).
pub fn models(gpus: &PodGpus) -> Vec<(SharingModel, String)> {
    let mut out: Vec<(SharingModel, String)> = Vec::new();
    let mut add =
        |model: SharingModel, what: String| match out.iter_mut().find(|(m, _)| *m == model) {
            Some((_, shown)) => {
                shown.push_str(", ");
                shown.push_str(&what);
            }
            None => out.push((model, what)),
        };
    for resource in gpus.effective.keys() {
        if resource.ends_with(".shared") {
            add(SharingModel::TimeSlicing, resource.clone());
        }
        if resource.starts_with("nvidia.com/mig") {
            add(SharingModel::Mig, resource.clone());
        }
    }
    if let Some(share) = &gpus.share {
        let model = match share.scheduler {
            Scheduler::Kai => SharingModel::Kai,
            Scheduler::Hami => SharingModel::Hami,
        };
        add(model, share.to_string());
    }
    out.sort();
    out
}

/// The `gpuSharing` problems of a template that uses `gpus`, in `namespace`.
pub fn check_sharing(
    sharing: &GpuSharing,
    template: &PodTemplate,
    gpus: &PodGpus,
    namespace: &Namespace,
) -> Vec<Problem> {
    if !sharing.enabled {
        return Vec::new();
    }
    let type_label = &sharing.workload_type_label;
    let workload_type = template
        .meta
        .labels
        .get(type_label)
        .map(String::as_str)
        .filter(|t| !t.is_empty());
    let mut out = Vec::new();
    for (model, what) in models(gpus) {
        let candidates: Vec<&SharingRule> = sharing
            .allow
            .iter()
            .filter(|r| r.models.contains(&model) && r.takes_type(workload_type))
            .collect();
        if candidates.iter().any(|r| r.selector().is_none()) {
            continue;
        }
        if !candidates.is_empty() {
            match namespace.labels() {
                Ok(labels) => {
                    if candidates
                        .iter()
                        .any(|r| r.selector().is_some_and(|s| s.matches(labels)))
                    {
                        continue;
                    }
                }
                Err(failure) => {
                    out.push(Problem::NamespaceUnreadable {
                        rule: GPU_SHARING_RULE,
                        what: format!(
                            "whether namespace {} may use {model} ({what}) under gpuSharing.allow",
                            namespace.name
                        ),
                        explanation: failure.explanation(),
                    });
                    continue;
                }
            }
        }
        out.push(Problem::SharingNotAllowed {
            model,
            what,
            workload: match workload_type {
                Some(t) => format!("{type_label}={t}"),
                None => format!("a workload without the label {type_label}"),
            },
            namespace: namespace.name.to_string(),
            allowed_to: sharing
                .allow
                .iter()
                .filter(|r| r.models.contains(&model))
                .map(|r| r.describe(type_label))
                .collect(),
            allowed_here: allowed_here(sharing, workload_type, namespace),
        });
    }
    out
}

/// The models this workload may use in its namespace, as far as is known without another
/// read (entries with a namespace selector count when the Namespace was read and matches).
fn allowed_here(
    sharing: &GpuSharing,
    workload_type: Option<&str>,
    namespace: &Namespace,
) -> Vec<SharingModel> {
    let labels = namespace.labels.get().and_then(|r| r.as_ref().ok());
    let mut out: Vec<SharingModel> = sharing
        .allow
        .iter()
        .filter(|r| r.takes_type(workload_type))
        .filter(|r| match r.selector() {
            None => true,
            Some(s) => labels.is_some_and(|l| s.matches(l)),
        })
        .flat_map(|r| r.models.iter().copied())
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests;
