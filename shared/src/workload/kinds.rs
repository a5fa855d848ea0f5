//! Where pod templates live: the built-in kinds' locations and the schema of a custom
//! kind's (from settings), with its validation.

use super::presets;
use crate::settings::{FieldError, validate_group_kind};
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// One path or a list of candidate paths (the first one present is used).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn candidates(&self) -> &[String] {
        match self {
            OneOrMany::One(s) => std::slice::from_ref(s),
            OneOrMany::Many(v) => v,
        }
    }
}

/// One factor of a template's pod count: the integer at `path` (default `default` when
/// absent), minus `subtract`, at least `atLeast`. A template stands for the product of its
/// factors (1 pod when it has none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReplicaFactor {
    /// Dot path relative to the matched element, or `$.`-rooted.
    pub path: String,
    #[serde(default = "one")]
    pub default: u64,
    #[serde(default)]
    pub subtract: u64,
    #[serde(default)]
    pub at_least: u64,
}

pub(super) fn one() -> u64 {
    1
}

/// Where pod templates live in one kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TemplateLocation {
    /// JSONPath selecting the element(s) that hold a pod template.
    pub path: String,
    /// Dot path(s) of the PodSpec inside the element; `""` is the element itself.
    #[serde(default = "default_pod_spec")]
    pub pod_spec: OneOrMany,
    /// Dot path(s) of the pod metadata (labels, annotations). May be `$.`-rooted, e.g.
    /// `$.metadata` for KServe, whose pods inherit the InferenceService's labels.
    #[serde(default = "default_metadata")]
    pub metadata: OneOrMany,
    /// Factors whose product is the number of pods each element stands for.
    #[serde(default)]
    pub replicas: Vec<ReplicaFactor>,
    /// Dot paths, relative to the PodSpec, of single containers kept outside its
    /// `containers` list (KServe's `model`, `huggingface`, ... shortcuts). They count as
    /// app containers, named after the path when they have no name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<String>,
}

pub(super) fn default_pod_spec() -> OneOrMany {
    OneOrMany::One("template.spec".into())
}

pub(super) fn default_metadata() -> OneOrMany {
    OneOrMany::One("template.metadata".into())
}

/// How to find the pod templates of a custom resource (from settings).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CustomKind {
    /// API group, any version (`serving.kserve.io`).
    pub group: String,
    pub kind: String,
    /// Where its pod templates are. May be left out for the kinds that have a ready-made
    /// description in [`presets`] (KServe InferenceService, LeaderWorkerSet, RayCluster,
    /// PyTorchJob): naming the kind is enough.
    #[serde(default)]
    pub templates: Vec<TemplateLocation>,
}

impl CustomKind {
    /// Its template locations: the ones given, or the built-in description when none are.
    pub fn locations(&self) -> Vec<TemplateLocation> {
        self.template_locations().to_vec()
    }

    /// [`CustomKind::locations`], borrowed: the built-in descriptions are made once and
    /// shared by every request.
    pub fn template_locations(&self) -> &[TemplateLocation] {
        if self.templates.is_empty() {
            presets::shared(&self.group, &self.kind).map_or(&[], |p| p.templates.as_slice())
        } else {
            &self.templates
        }
    }

    /// Checks the description; errors name the field under `field` (e.g. `customKinds[0]`).
    pub fn validate(&self, field: &str) -> Result<(), FieldError> {
        validate_group_kind(field, &self.group, &self.kind, "serving.kserve.io")?;
        if builtin(&self.group, &self.kind).is_some() {
            return Err(FieldError::new(
                field,
                format!(
                    "{}/{} is built in and cannot be redefined",
                    self.group, self.kind
                ),
            ));
        }
        if self.templates.is_empty() && !presets::exists(&self.group, &self.kind) {
            return Err(FieldError::new(
                format!("{field}.templates"),
                format!(
                    "give at least one template location ({}/{} has no built-in description; those exist for {})",
                    self.group,
                    self.kind,
                    presets::all()
                        .iter()
                        .map(|p| format!("{}/{}", p.group, p.kind))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        for (i, t) in self.templates.iter().enumerate() {
            let f = format!("{field}.templates[{i}]");
            if !t.path.starts_with('$') {
                return Err(FieldError::new(
                    format!("{f}.path"),
                    format!("a JSONPath must start with '$' (got '{}')", t.path),
                ));
            }
            serde_json_path::JsonPath::parse(&t.path).map_err(|e| {
                FieldError::new(
                    format!("{f}.path"),
                    format!("invalid JSONPath '{}': {e}", t.path),
                )
            })?;
            for (name, paths, allow_empty) in [
                ("podSpec", &t.pod_spec, true),
                ("metadata", &t.metadata, false),
            ] {
                if paths.candidates().is_empty() {
                    return Err(FieldError::new(
                        format!("{f}.{name}"),
                        "give at least one path",
                    ));
                }
                for p in paths.candidates() {
                    check_dot_path(|| format!("{f}.{name}"), p, allow_empty)?;
                }
            }
            for (j, c) in t.containers.iter().enumerate() {
                check_dot_path(|| format!("{f}.containers[{j}]"), c, false)?;
            }
            for (j, r) in t.replicas.iter().enumerate() {
                check_dot_path(|| format!("{f}.replicas[{j}].path"), &r.path, false)?;
            }
        }
        Ok(())
    }
}

/// Checks a dot path (`template.spec`, `$.spec.replicas`) at the settings field `field`
/// names (built only for the error).
pub(super) fn check_dot_path(
    field: impl FnOnce() -> String,
    path: &str,
    allow_empty: bool,
) -> Result<(), FieldError> {
    if path.is_empty() {
        return if allow_empty {
            Ok(())
        } else {
            Err(FieldError::new(field(), "must not be empty"))
        };
    }
    let rel = path.strip_prefix("$.").unwrap_or(path);
    if rel
        .split('.')
        .any(|s| s.is_empty() || s.contains(['[', ']', '*', '$']))
    {
        return Err(FieldError::new(
            field(),
            format!(
                "'{path}' must be a dot path like template.spec or $.spec.replicas (no wildcards or brackets)"
            ),
        ));
    }
    Ok(())
}

/// The pod template rules of a built-in kind, made once and shared by every request.
pub(super) fn builtin(group: &str, kind: &str) -> Option<&'static [TemplateLocation]> {
    static BUILTIN: OnceLock<Builtin> = OnceLock::new();
    let kinds = BUILTIN.get_or_init(Builtin::new);
    Some(match (group, kind) {
        ("", "Pod") => &kinds.pod,
        ("apps", "Deployment" | "StatefulSet" | "ReplicaSet") | ("", "ReplicationController") => {
            &kinds.replicated
        }
        // One pod per matching node: unknown at admission time, counted as one.
        ("apps", "DaemonSet") => &kinds.daemon_set,
        ("batch", "Job") => &kinds.job,
        ("batch", "CronJob") => &kinds.cron_job,
        _ => return None,
    })
}

/// The locations of the built-in kinds (see [`builtin`]).
struct Builtin {
    pod: [TemplateLocation; 1],
    replicated: [TemplateLocation; 1],
    daemon_set: [TemplateLocation; 1],
    job: [TemplateLocation; 1],
    cron_job: [TemplateLocation; 1],
}

impl Builtin {
    fn new() -> Builtin {
        let loc = |path: &str, replicas: Option<&str>| TemplateLocation {
            path: path.into(),
            pod_spec: OneOrMany::One("spec".into()),
            metadata: OneOrMany::One("metadata".into()),
            replicas: replicas
                .map(|p| ReplicaFactor {
                    path: p.into(),
                    default: 1,
                    subtract: 0,
                    at_least: 0,
                })
                .into_iter()
                .collect(),
            containers: Vec::new(),
        };
        Builtin {
            pod: [loc("$", None)],
            replicated: [loc("$.spec.template", Some("$.spec.replicas"))],
            daemon_set: [loc("$.spec.template", None)],
            job: [loc("$.spec.template", Some("$.spec.parallelism"))],
            cron_job: [loc(
                "$.spec.jobTemplate.spec.template",
                Some("$.spec.jobTemplate.spec.parallelism"),
            )],
        }
    }
}
