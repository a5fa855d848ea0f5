//! Every pod template an admitted object carries, how many pods each stands for, and
//! writing a changed template back.
//!
//! Built-in kinds (Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet,
//! ReplicationController, Job, CronJob) are described with the same [`TemplateLocation`]
//! type that settings use for custom resources, so there is one extraction path for
//! both. A location's `path` is a JSONPath (jsonpath_lib) that may match several
//! elements (`$.spec.workerGroupSpecs[*]`); inside each element the PodSpec, the pod
//! metadata and the replica factors are plain dot paths, relative to the element or,
//! when they start with `$.`, to the object root.
//!
//! Every match is turned into JSON pointers, so a policy reads a template through typed
//! [`PodSpec`]/[`ObjectMeta`] and writes changes through [`spec_mut`] / [`metadata_mut`]
//! on the original JSON, without losing fields the rules do not model.

pub use crate::limits::{MAX_CONTAINERS, MAX_RESOURCES, MAX_TEMPLATES};
use crate::podspec::{Container, ObjectMeta, PodSpec};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::borrow::Cow;

/// Why the pod templates of an object could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    #[error("the object has no kind or apiVersion")]
    NoKind,
    #[error("{location}: {reason}")]
    Malformed { location: String, reason: String },
    #[error("JSONPath '{path}' of {kind} could not be evaluated: {reason}")]
    JsonPath {
        kind: String,
        path: String,
        reason: String,
    },
    #[error("the object has more than {MAX_TEMPLATES} pod templates")]
    TooManyTemplates,
    #[error(
        "{location} has {count} containers (containers, initContainers and ephemeralContainers together); gpu-admission policies read at most {MAX_CONTAINERS} per pod template"
    )]
    TooManyContainers { location: String, count: usize },
    #[error(
        "{location} has {count} resource names; gpu-admission policies read at most {MAX_RESOURCES} per list"
    )]
    TooManyResources { location: String, count: usize },
    #[error("{location}: the number of pods overflows")]
    TooManyPods { location: String },
}

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

fn one() -> u64 {
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

fn default_pod_spec() -> OneOrMany {
    OneOrMany::One("template.spec".into())
}

fn default_metadata() -> OneOrMany {
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
        if self.templates.is_empty() {
            presets::find(&self.group, &self.kind)
                .map(|p| p.templates)
                .unwrap_or_default()
        } else {
            self.templates.clone()
        }
    }

    /// Checks the description; errors name the field under `field` (e.g. `customKinds[0]`).
    pub fn validate(&self, field: &str) -> Result<(), String> {
        if self.group.trim().is_empty() {
            return Err(format!(
                "{field}.group: must name the API group, e.g. serving.kserve.io"
            ));
        }
        if self.kind.trim().is_empty() {
            return Err(format!("{field}.kind: must not be empty"));
        }
        if builtin(&self.group, &self.kind).is_some() {
            return Err(format!(
                "{field}: {}/{} is built in and cannot be redefined",
                self.group, self.kind
            ));
        }
        if self.templates.is_empty() && presets::find(&self.group, &self.kind).is_none() {
            return Err(format!(
                "{field}.templates: give at least one template location ({}/{} has no built-in description; those exist for {})",
                self.group,
                self.kind,
                presets::all()
                    .iter()
                    .map(|p| format!("{}/{}", p.group, p.kind))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        for (i, t) in self.templates.iter().enumerate() {
            let f = format!("{field}.templates[{i}]");
            if !t.path.starts_with('$') {
                return Err(format!(
                    "{f}.path: a JSONPath must start with '$' (got '{}')",
                    t.path
                ));
            }
            jsonpath_lib::Compiled::compile(&t.path)
                .map_err(|e| format!("{f}.path: invalid JSONPath '{}': {e}", t.path))?;
            for (name, paths, allow_empty) in [
                ("podSpec", &t.pod_spec, true),
                ("metadata", &t.metadata, false),
            ] {
                if paths.candidates().is_empty() {
                    return Err(format!("{f}.{name}: give at least one path"));
                }
                for p in paths.candidates() {
                    check_dot_path(p, allow_empty).map_err(|e| format!("{f}.{name}: {e}"))?;
                }
            }
            for (j, c) in t.containers.iter().enumerate() {
                check_dot_path(c, false).map_err(|e| format!("{f}.containers[{j}]: {e}"))?;
            }
            for (j, r) in t.replicas.iter().enumerate() {
                check_dot_path(&r.path, false)
                    .map_err(|e| format!("{f}.replicas[{j}].path: {e}"))?;
            }
        }
        Ok(())
    }
}

fn check_dot_path(path: &str, allow_empty: bool) -> Result<(), String> {
    if path.is_empty() {
        return if allow_empty {
            Ok(())
        } else {
            Err("must not be empty".into())
        };
    }
    let rel = path.strip_prefix("$.").unwrap_or(path);
    if rel
        .split('.')
        .any(|s| s.is_empty() || s.contains(['[', ']', '*', '$']))
    {
        return Err(format!(
            "'{path}' must be a dot path like template.spec or $.spec.replicas (no wildcards or brackets)"
        ));
    }
    Ok(())
}

/// One pod template found in an object.
#[derive(Debug, Clone)]
pub struct PodTemplate {
    /// Where it is, for messages: `spec.template.spec`, `spec.workerGroupSpecs[1].template.spec`.
    pub location: String,
    /// JSON pointer of the PodSpec.
    pub spec_pointer: String,
    /// JSON pointer of the pod metadata (may not exist yet in the object).
    pub metadata_pointer: String,
    /// Pods this template stands for.
    pub pods: u64,
    pub spec: PodSpec,
    pub meta: ObjectMeta,
}

/// An admitted object and its pod templates.
#[derive(Debug, Clone)]
pub struct Workload {
    pub group: String,
    pub kind: String,
    /// The object's own metadata (for a Pod, the same as its template's).
    pub meta: ObjectMeta,
    /// Empty when the kind carries no pod template (or is an unconfigured custom kind).
    pub templates: Vec<PodTemplate>,
}

impl Workload {
    /// Reads the pod templates of `object` (its `apiVersion` and `kind` pick the rule).
    pub fn from_object(object: &Value, custom: &[CustomKind]) -> Result<Workload, WorkloadError> {
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        if kind.is_empty() || api_version.is_empty() {
            return Err(WorkloadError::NoKind);
        }
        let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
        let meta = read_at::<ObjectMeta>(object, "/metadata", "metadata")?.unwrap_or_default();
        let locations: Vec<TemplateLocation> = match builtin(group, kind) {
            Some(locations) => locations,
            None => custom
                .iter()
                .find(|c| c.group == group && c.kind == kind)
                .map(CustomKind::locations)
                .unwrap_or_default(),
        };
        let mut templates: Vec<PodTemplate> = Vec::new();
        for location in &locations {
            for element in element_pointers(object, &location.path, kind)? {
                let t = read_template(object, &element, location)?;
                match templates
                    .iter_mut()
                    .find(|x| x.spec_pointer == t.spec_pointer)
                {
                    // The same template reached twice (e.g. an LWS leader falling back to the
                    // worker template) stands for the pods of both.
                    Some(existing) => {
                        existing.pods = existing.pods.checked_add(t.pods).ok_or_else(|| {
                            WorkloadError::TooManyPods {
                                location: t.location.clone(),
                            }
                        })?
                    }
                    None => templates.push(t),
                }
                if templates.len() > MAX_TEMPLATES {
                    return Err(WorkloadError::TooManyTemplates);
                }
            }
        }
        Ok(Workload {
            group: group.to_string(),
            kind: kind.to_string(),
            meta,
            templates,
        })
    }

    /// The number of pods the object stands for.
    pub fn pods(&self) -> u64 {
        self.templates
            .iter()
            .fold(0u64, |a, t| a.saturating_add(t.pods))
    }

    /// True for a bare Pod.
    pub fn is_pod(&self) -> bool {
        self.group.is_empty() && self.kind == "Pod"
    }
}

/// The pod template rules of a built-in kind.
fn builtin(group: &str, kind: &str) -> Option<Vec<TemplateLocation>> {
    let loc = |path: &str, spec: &str, meta: &str, replicas: Option<&str>| TemplateLocation {
        path: path.into(),
        pod_spec: OneOrMany::One(spec.into()),
        metadata: OneOrMany::One(meta.into()),
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
    let controller =
        |replicas: Option<&str>| vec![loc("$.spec.template", "spec", "metadata", replicas)];
    Some(match (group, kind) {
        ("", "Pod") => vec![loc("$", "spec", "metadata", None)],
        ("apps", "Deployment" | "StatefulSet" | "ReplicaSet") | ("", "ReplicationController") => {
            controller(Some("$.spec.replicas"))
        }
        // One pod per matching node: unknown at admission time, counted as one.
        ("apps", "DaemonSet") => controller(None),
        ("batch", "Job") => controller(Some("$.spec.parallelism")),
        ("batch", "CronJob") => vec![loc(
            "$.spec.jobTemplate.spec.template",
            "spec",
            "metadata",
            Some("$.spec.jobTemplate.spec.parallelism"),
        )],
        _ => return None,
    })
}

/// Pointers of the elements `path` selects. Plain dot paths are resolved directly;
/// anything else goes through jsonpath_lib.
fn element_pointers(object: &Value, path: &str, kind: &str) -> Result<Vec<String>, WorkloadError> {
    if path == "$" {
        return Ok(vec![String::new()]);
    }
    let plain_segment = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    if let Some(rel) = path
        .strip_prefix("$.")
        .filter(|rel| rel.split('.').all(plain_segment))
    {
        let pointer = dot_to_pointer(rel);
        return Ok(match value_at(object, &pointer) {
            Some(v) if !v.is_null() => vec![pointer],
            _ => vec![],
        });
    }
    // Mark every match in a copy, then find the marks: this yields exact pointers, so
    // a changed template can be written back to the same place.
    const MARK: &str = "\u{0}gpu-admission-match";
    let marked = jsonpath_lib::replace_with(object.clone(), path, &mut |v| {
        if v.is_null() {
            Some(v)
        } else {
            Some(serde_json::json!({ MARK: true }))
        }
    })
    .map_err(|e| WorkloadError::JsonPath {
        kind: kind.to_string(),
        path: path.to_string(),
        reason: format!("{e:?}"),
    })?;
    let mut found = Vec::new();
    find_marks(&marked, &mut String::new(), MARK, &mut found);
    Ok(found)
}

fn find_marks(v: &Value, at: &mut String, mark: &str, found: &mut Vec<String>) {
    if found.len() > MAX_TEMPLATES {
        return;
    }
    match v {
        Value::Object(map) if map.len() == 1 && map.contains_key(mark) => found.push(at.clone()),
        Value::Object(map) => {
            for (k, child) in map {
                let len = at.len();
                at.push('/');
                at.push_str(&escape_token(k));
                find_marks(child, at, mark, found);
                at.truncate(len);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                let len = at.len();
                at.push('/');
                at.push_str(&i.to_string());
                find_marks(child, at, mark, found);
                at.truncate(len);
            }
        }
        _ => {}
    }
}

fn read_template(
    object: &Value,
    element: &str,
    location: &TemplateLocation,
) -> Result<PodTemplate, WorkloadError> {
    let resolve = |p: &str| match p.strip_prefix("$.") {
        Some(abs) => dot_to_pointer(abs),
        None if p.is_empty() => element.to_string(),
        None => format!("{element}{}", dot_to_pointer(p)),
    };
    let first_present = |paths: &OneOrMany| -> Option<String> {
        paths
            .candidates()
            .iter()
            .map(|p| resolve(p))
            .find(|ptr| value_at(object, ptr).is_some_and(|v| !v.is_null()))
    };
    let spec_pointer =
        first_present(&location.pod_spec).ok_or_else(|| WorkloadError::Malformed {
            location: pointer_to_location(element),
            reason: format!(
                "no pod spec at {}",
                location
                    .pod_spec
                    .candidates()
                    .iter()
                    .map(|p| pointer_to_location(&resolve(p)))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
        })?;
    let metadata_pointer = first_present(&location.metadata)
        .or_else(|| location.metadata.candidates().first().map(|p| resolve(p)))
        .unwrap_or_default();
    let location_text = pointer_to_location(&spec_pointer);
    let count = container_count(object, &spec_pointer, location);
    if count > MAX_CONTAINERS {
        return Err(WorkloadError::TooManyContainers {
            location: location_text,
            count,
        });
    }
    check_resource_lists(object, &spec_pointer, location)?;
    let mut spec = read_at::<PodSpec>(object, &spec_pointer, &location_text)?.unwrap_or_default();
    for path in &location.containers {
        let pointer = format!("{spec_pointer}{}", dot_to_pointer(path));
        let at = pointer_to_location(&pointer);
        if let Some(mut container) = read_at::<Container>(object, &pointer, &at)? {
            if container.name.is_empty() {
                container.name = path.clone();
            }
            spec.containers.push(container);
        }
    }
    let meta = read_at::<ObjectMeta>(
        object,
        &metadata_pointer,
        &pointer_to_location(&metadata_pointer),
    )?
    .unwrap_or_default();

    let mut pods: u64 = 1;
    for factor in &location.replicas {
        let ptr = resolve(&factor.path);
        let value = match value_at(object, &ptr) {
            None | Some(Value::Null) => factor.default,
            Some(v) => v.as_u64().ok_or_else(|| WorkloadError::Malformed {
                location: pointer_to_location(&ptr),
                reason: format!("must be a non-negative integer, got {}", short_json(v)),
            })?,
        };
        let value = value.saturating_sub(factor.subtract).max(factor.at_least);
        pods = pods
            .checked_mul(value)
            .ok_or_else(|| WorkloadError::TooManyPods {
                location: location_text.clone(),
            })?;
    }
    Ok(PodTemplate {
        location: location_text,
        spec_pointer,
        metadata_pointer,
        pods,
        spec,
        meta,
    })
}

/// The containers of the PodSpec at `spec_pointer`, counted on the raw JSON before any is
/// read: the `containers`, `initContainers` and `ephemeralContainers` arrays (a field of
/// another type is left to the typed read, which reports it) and the location's single
/// containers that are present (KServe's model-server shortcuts).
fn container_count(object: &Value, spec_pointer: &str, location: &TemplateLocation) -> usize {
    let Some(spec) = value_at(object, spec_pointer) else {
        return 0;
    };
    let lists: usize = ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .filter_map(|field| spec.get(field).and_then(Value::as_array))
        .map(Vec::len)
        .sum();
    let singles = location
        .containers
        .iter()
        .filter(|path| value_at_dots(spec, path).is_some_and(|v| !v.is_null()))
        .count();
    lists + singles
}

/// Checks every `resources.limits` / `resources.requests` of the PodSpec at
/// `spec_pointer` against [`MAX_RESOURCES`], on the raw JSON: of each container (also
/// init, ephemeral, and the location's single containers) and the pod-level resources.
fn check_resource_lists(
    object: &Value,
    spec_pointer: &str,
    location: &TemplateLocation,
) -> Result<(), WorkloadError> {
    let Some(spec) = value_at(object, spec_pointer) else {
        return Ok(());
    };
    // Where each holder is, as a pointer suffix: built only for the message.
    let mut holders: Vec<(Holder, &Value)> = vec![(Holder::Spec, spec)];
    for field in ["containers", "initContainers", "ephemeralContainers"] {
        if let Some(items) = spec.get(field).and_then(Value::as_array) {
            holders.extend(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (Holder::Item(field, i), c)),
            );
        }
    }
    for path in &location.containers {
        if let Some(c) = value_at_dots(spec, path) {
            holders.push((Holder::Single(path), c));
        }
    }
    for (at, holder) in holders {
        for list in ["limits", "requests"] {
            let count = holder
                .get("resources")
                .and_then(|r| r.get(list))
                .and_then(Value::as_object)
                .map_or(0, Map::len);
            if count > MAX_RESOURCES {
                let at = match at {
                    Holder::Spec => String::new(),
                    Holder::Item(field, i) => format!("/{field}/{i}"),
                    Holder::Single(path) => dot_to_pointer(path),
                };
                return Err(WorkloadError::TooManyResources {
                    location: pointer_to_location(&format!("{spec_pointer}{at}/resources/{list}")),
                    count,
                });
            }
        }
    }
    Ok(())
}

/// What holds a `resources` in a PodSpec (see [`check_resource_lists`]).
enum Holder<'a> {
    /// The pod-level `resources`.
    Spec,
    /// `containers[i]` and the other lists.
    Item(&'static str, usize),
    /// A single container at a dot path (KServe's shortcuts).
    Single(&'a str),
}

/// The value at dot path `path` (`worker.containers.0`) under `value`, as
/// `value_at(value, &dot_to_pointer(path))` finds it, without building the pointer.
fn value_at_dots<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(value, |target, key| match target {
        Value::Object(map) => map.get(key),
        Value::Array(items) => array_index(key).and_then(|i| items.get(i)),
        _ => None,
    })
}

/// Deserializes the value at `pointer`, `None` when absent or null.
fn read_at<T: serde::de::DeserializeOwned>(
    object: &Value,
    pointer: &str,
    location: &str,
) -> Result<Option<T>, WorkloadError> {
    match value_at(object, pointer) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => T::deserialize(v)
            .map(Some)
            .map_err(|e| WorkloadError::Malformed {
                location: location.to_string(),
                reason: e.to_string(),
            }),
    }
}

/// The PodSpec of `template` in `object`, for changing it in place.
pub fn spec_mut<'a>(
    object: &'a mut Value,
    template: &PodTemplate,
) -> Result<&'a mut Map<String, Value>, WorkloadError> {
    object_at_mut(object, &template.spec_pointer).ok_or_else(|| WorkloadError::Malformed {
        location: template.location.clone(),
        reason: "is not an object".into(),
    })
}

/// The pod metadata of `template` in `object`, created (with any missing parents) if absent.
pub fn metadata_mut<'a>(
    object: &'a mut Value,
    template: &PodTemplate,
) -> Result<&'a mut Map<String, Value>, WorkloadError> {
    object_at_mut(object, &template.metadata_pointer).ok_or_else(|| WorkloadError::Malformed {
        location: pointer_to_location(&template.metadata_pointer),
        reason: "is not an object".into(),
    })
}

/// The value at JSON Pointer `pointer` (RFC 6901), as `Value::pointer` finds it, without
/// allocating: serde_json unescapes every token into a new `String`, and workload
/// extraction resolves dozens of pointers per request.
pub fn value_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a Value> {
    if pointer.is_empty() {
        return Some(value);
    }
    pointer
        .strip_prefix('/')?
        .split('/')
        .try_fold(value, |target, token| {
            let token = unescape_token(token);
            match target {
                Value::Object(map) => map.get(token.as_ref()),
                Value::Array(items) => array_index(&token).and_then(|i| items.get(i)),
                _ => None,
            }
        })
}

/// A pointer token with `~1` and `~0` decoded (borrowed when it has none).
fn unescape_token(token: &str) -> Cow<'_, str> {
    if token.contains('~') {
        Cow::Owned(token.replace("~1", "/").replace("~0", "~"))
    } else {
        Cow::Borrowed(token)
    }
}

/// An array index token: digits without a sign or leading zeros (as serde_json reads them).
fn array_index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() > 1) {
        return None;
    }
    token.parse().ok()
}

/// The object at `pointer`, creating missing (or null) members as empty objects.
/// `None` when something on the way is not an object (or an array index out of range).
pub fn object_at_mut<'a>(root: &'a mut Value, pointer: &str) -> Option<&'a mut Map<String, Value>> {
    let mut current = root;
    for token in pointer.split('/').skip(1) {
        let token = unescape_token(token);
        current = match current {
            Value::Object(map) => {
                let slot = map.entry(token.into_owned()).or_insert(Value::Null);
                if slot.is_null() {
                    *slot = Value::Object(Map::new());
                }
                slot
            }
            Value::Array(items) => items.get_mut(token.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    current.as_object_mut()
}

/// `spec.template` -> `/spec/template`.
pub fn dot_to_pointer(path: &str) -> String {
    path.split('.')
        .map(|s| format!("/{}", escape_token(s)))
        .collect()
}

fn escape_token(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

/// `/spec/workerGroupSpecs/1/template/spec` -> `spec.workerGroupSpecs[1].template.spec`.
pub fn pointer_to_location(pointer: &str) -> String {
    let mut out = String::new();
    for token in pointer.split('/').skip(1) {
        let token = unescape_token(token);
        if !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{token}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&token);
        }
    }
    if out.is_empty() {
        "(object)".into()
    } else {
        out
    }
}

fn short_json(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 40 {
        let mut end = 40;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &s[..end])
    } else {
        s
    }
}

/// Ready-made descriptions of common AI custom resources, for documentation and tests.
/// Policies do not enable them unless their settings list them.
pub mod presets {
    use super::*;

    fn factor(path: &str, default: u64, subtract: u64, at_least: u64) -> ReplicaFactor {
        ReplicaFactor {
            path: path.into(),
            default,
            subtract,
            at_least,
        }
    }

    fn location(
        path: &str,
        spec: &[&str],
        meta: &[&str],
        replicas: Vec<ReplicaFactor>,
    ) -> TemplateLocation {
        let many = |v: &[&str]| OneOrMany::Many(v.iter().map(|s| s.to_string()).collect());
        TemplateLocation {
            path: path.into(),
            pod_spec: many(spec),
            metadata: many(meta),
            replicas,
            containers: Vec::new(),
        }
    }

    /// KServe predictor fields that hold one container each (the model-server shortcuts).
    pub const KSERVE_MODEL_CONTAINERS: &[&str] = &[
        "model",
        "huggingface",
        "pytorch",
        "triton",
        "tensorflow",
        "onnx",
        "sklearn",
        "xgboost",
        "lightgbm",
        "paddle",
        "pmml",
    ];

    /// KServe InferenceService: the predictor is an inline PodSpec whose model-server
    /// shortcuts (`model`, `huggingface`, ...) are containers too; multi-node serving adds
    /// `workerSpec` with `pipelineParallelSize - 1` worker pods per replica. Pods carry the
    /// InferenceService's labels. Scale-to-zero (`minReplicas: 0`) is counted as one replica.
    pub fn kserve_inference_service() -> CustomKind {
        let mut predictor = location(
            "$.spec.predictor",
            &[""],
            &["$.metadata"],
            vec![factor("minReplicas", 1, 0, 1)],
        );
        predictor.containers = KSERVE_MODEL_CONTAINERS
            .iter()
            .map(|s| s.to_string())
            .collect();
        CustomKind {
            group: "serving.kserve.io".into(),
            kind: "InferenceService".into(),
            templates: vec![
                predictor,
                location(
                    "$.spec.predictor.workerSpec",
                    &[""],
                    &["$.metadata"],
                    vec![
                        factor("$.spec.predictor.minReplicas", 1, 0, 1),
                        factor("pipelineParallelSize", 2, 1, 1),
                    ],
                ),
            ],
        }
    }

    /// LeaderWorkerSet: `replicas` groups of `size` pods, one leader (leaderTemplate, or
    /// the worker template when absent) and `size - 1` workers.
    pub fn leader_worker_set() -> CustomKind {
        CustomKind {
            group: "leaderworkerset.x-k8s.io".into(),
            kind: "LeaderWorkerSet".into(),
            templates: vec![
                location(
                    "$.spec.leaderWorkerTemplate",
                    &["leaderTemplate.spec", "workerTemplate.spec"],
                    &["leaderTemplate.metadata", "workerTemplate.metadata"],
                    vec![factor("$.spec.replicas", 1, 0, 0)],
                ),
                location(
                    "$.spec.leaderWorkerTemplate",
                    &["workerTemplate.spec"],
                    &["workerTemplate.metadata"],
                    vec![factor("$.spec.replicas", 1, 0, 0), factor("size", 1, 1, 0)],
                ),
            ],
        }
    }

    /// KubeRay RayCluster: one head pod and `replicas` pods per worker group.
    pub fn ray_cluster() -> CustomKind {
        CustomKind {
            group: "ray.io".into(),
            kind: "RayCluster".into(),
            templates: vec![
                location(
                    "$.spec.headGroupSpec",
                    &["template.spec"],
                    &["template.metadata"],
                    vec![],
                ),
                location(
                    "$.spec.workerGroupSpecs[*]",
                    &["template.spec"],
                    &["template.metadata"],
                    vec![factor("replicas", 1, 0, 0)],
                ),
            ],
        }
    }

    /// Kubeflow PyTorchJob: every replica type (Master, Worker) times its `replicas`.
    pub fn pytorch_job() -> CustomKind {
        CustomKind {
            group: "kubeflow.org".into(),
            kind: "PyTorchJob".into(),
            templates: vec![location(
                "$.spec.pytorchReplicaSpecs.*",
                &["template.spec"],
                &["template.metadata"],
                vec![factor("replicas", 1, 0, 0)],
            )],
        }
    }

    /// The ready-made description of `group`/`kind`, if there is one. Builds only that
    /// one: workload readers call this for every admitted custom resource.
    pub fn find(group: &str, kind: &str) -> Option<CustomKind> {
        let make = match (group, kind) {
            ("serving.kserve.io", "InferenceService") => kserve_inference_service,
            ("leaderworkerset.x-k8s.io", "LeaderWorkerSet") => leader_worker_set,
            ("ray.io", "RayCluster") => ray_cluster,
            ("kubeflow.org", "PyTorchJob") => pytorch_job,
            _ => return None,
        };
        Some(make())
    }

    /// All of the above.
    pub fn all() -> Vec<CustomKind> {
        vec![
            kserve_inference_service(),
            leader_worker_set(),
            ray_cluster(),
            pytorch_job(),
        ]
    }
}

#[cfg(test)]
mod tests;
