//! Reading an object's pod templates: every location's matches, each template's spec,
//! metadata and pod count, within the input limits.

use super::kinds::{CustomKind, OneOrMany, TemplateLocation, builtin};
use super::pointer::{
    array_index, dot_to_pointer, pointer_to_location, push_dot_pointer, value_at,
};
use super::{MAX_CONTAINERS, MAX_RESOURCES, MAX_TEMPLATES, WorkloadError};
use crate::podspec::{Container, ObjectMeta, PodSpec};
use serde_json::{Map, Value};

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
        let meta =
            read_at::<ObjectMeta>(object, "/metadata", || "metadata".into())?.unwrap_or_default();
        let locations: &[TemplateLocation] = match builtin(group, kind) {
            Some(locations) => locations,
            None => custom
                .iter()
                .find(|c| c.group == group && c.kind == kind)
                .map_or(&[], CustomKind::template_locations),
        };
        let mut templates: Vec<PodTemplate> = Vec::new();
        for location in locations {
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

/// Pointers of the elements `path` selects. Plain dot paths are resolved directly;
/// anything else goes through the JSONPath engine (serde_json_path, RFC 9535).
pub(super) fn element_pointers(
    object: &Value,
    path: &str,
    kind: &str,
) -> Result<Vec<String>, WorkloadError> {
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
    let path = serde_json_path::JsonPath::parse(path).map_err(|e| WorkloadError::JsonPath {
        kind: kind.to_string(),
        path: path.to_string(),
        reason: e.to_string(),
    })?;
    // Each match comes with its location, as a JSON Pointer: a changed template is
    // written back to the same place.
    Ok(path
        .query_located(object)
        .into_iter()
        .filter(|found| !found.node().is_null())
        .take(MAX_TEMPLATES + 1)
        .map(|found| found.location().to_json_pointer())
        .collect())
}

pub(super) fn read_template(
    object: &Value,
    element: &str,
    location: &TemplateLocation,
) -> Result<PodTemplate, WorkloadError> {
    let resolve = |p: &str| match p.strip_prefix("$.") {
        Some(abs) => dot_to_pointer(abs),
        None if p.is_empty() => element.to_string(),
        None => {
            let mut pointer = String::with_capacity(element.len() + p.len() + 1);
            pointer.push_str(element);
            push_dot_pointer(&mut pointer, p);
            pointer
        }
    };
    // The first candidate present (not null), with its value: each value is looked up once.
    let first_present = |paths: &OneOrMany| -> Option<(String, &Value)> {
        paths.candidates().iter().find_map(|p| {
            let ptr = resolve(p);
            let value = value_at(object, &ptr).filter(|v| !v.is_null())?;
            Some((ptr, value))
        })
    };
    let (spec_pointer, spec_value) =
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
    let (metadata_pointer, metadata_value) = match first_present(&location.metadata) {
        Some((ptr, value)) => (ptr, Some(value)),
        None => (
            location
                .metadata
                .candidates()
                .first()
                .map(|p| resolve(p))
                .unwrap_or_default(),
            None,
        ),
    };
    let location_text = pointer_to_location(&spec_pointer);
    let count = container_count(spec_value, location);
    if count > MAX_CONTAINERS {
        return Err(WorkloadError::TooManyContainers {
            location: location_text,
            count,
        });
    }
    check_resource_lists(spec_value, &spec_pointer, location)?;
    let mut spec =
        read_value::<PodSpec>(Some(spec_value), || location_text.clone())?.unwrap_or_default();
    for path in &location.containers {
        let at = || pointer_to_location(&format!("{spec_pointer}{}", dot_to_pointer(path)));
        if let Some(mut container) = read_value::<Container>(value_at_dots(spec_value, path), at)? {
            if container.name.is_empty() {
                container.name = path.clone();
            }
            spec.containers.push(container);
        }
    }
    let meta = read_value::<ObjectMeta>(metadata_value, || pointer_to_location(&metadata_pointer))?
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

/// The containers of the PodSpec `spec`, counted on the raw JSON before any is read: the
/// `containers`, `initContainers` and `ephemeralContainers` arrays (a field of another
/// type is left to the typed read, which reports it) and the location's single containers
/// that are present (KServe's model-server shortcuts).
pub(super) fn container_count(spec: &Value, location: &TemplateLocation) -> usize {
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

/// Checks every `resources.limits` / `resources.requests` of the PodSpec `spec` (at
/// `spec_pointer`, for the message) against [`MAX_RESOURCES`], on the raw JSON: of each
/// container (also init, ephemeral, and the location's single containers) and the
/// pod-level resources.
pub(super) fn check_resource_lists(
    spec: &Value,
    spec_pointer: &str,
    location: &TemplateLocation,
) -> Result<(), WorkloadError> {
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
pub(super) fn value_at_dots<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(value, |target, key| match target {
        Value::Object(map) => map.get(key),
        Value::Array(items) => array_index(key).and_then(|i| items.get(i)),
        _ => None,
    })
}

/// Deserializes the value at `pointer`, `None` when absent or null; `location` names it
/// in the error (built only then).
pub(super) fn read_at<T: serde::de::DeserializeOwned>(
    object: &Value,
    pointer: &str,
    location: impl FnOnce() -> String,
) -> Result<Option<T>, WorkloadError> {
    read_value(value_at(object, pointer), location)
}

/// [`read_at`] of a value already found (`None`: absent).
fn read_value<T: serde::de::DeserializeOwned>(
    value: Option<&Value>,
    location: impl FnOnce() -> String,
) -> Result<Option<T>, WorkloadError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(v) => T::deserialize(v)
            .map(Some)
            .map_err(|e| WorkloadError::Malformed {
                location: location(),
                reason: e.to_string(),
            }),
    }
}

pub(super) fn short_json(v: &Value) -> String {
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
