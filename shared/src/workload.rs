//! Every pod template an admitted object carries, how many pods each stands for, and
//! writing a changed template back.
//!
//! Built-in kinds (Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet,
//! ReplicationController, Job, CronJob) are described with the same [`TemplateLocation`]
//! type that settings use for custom resources, so there is one extraction path for
//! both. A location's `path` is a JSONPath (RFC 9535) that may match several
//! elements (`$.spec.workerGroupSpecs[*]`); inside each element the PodSpec, the pod
//! metadata and the replica factors are plain dot paths, relative to the element or,
//! when they start with `$.`, to the object root.
//!
//! The JSONPath dialect is RFC 9535's (serde_json_path): `$` the object, `.name` or
//! `['name']` a member, `[*]` or `.*` every element or member, `[n]` one, `..name` at any
//! depth, and filters such as `[?@.name == 'worker']` (also written `[?(@.name ==
//! 'worker')]`, as `kubectl -o jsonpath` users know them) with the functions `length`,
//! `count` and `value`; `match` and `search` (regular expressions) and Goessner's script
//! expressions (`[(@.length-1)]`) are not in it. A path that is a plain dot path (`$.spec.predictor`) is
//! resolved directly, without the JSONPath engine. Members of an object are matched in
//! the order of their names.
//!
//! Every match is turned into JSON pointers, so a policy reads a template through typed
//! [`PodSpec`]/[`ObjectMeta`] and writes changes through [`spec_mut`] / [`metadata_mut`]
//! on the original JSON, without losing fields the rules do not model.
//!
//! - [`kinds`]: where pod templates live (the built-in kinds, and custom kinds' schema);
//! - [`extract`]: reading an object's templates within the input limits;
//! - [`pointer`]: JSON Pointers and dot paths, reading and writing in place;
//! - [`presets`]: ready-made custom kinds (KServe, LWS, KubeRay, Kubeflow).

pub use crate::limits::{MAX_CONTAINERS, MAX_RESOURCES, MAX_TEMPLATES};

mod extract;
mod kinds;
mod pointer;
pub mod presets;

#[cfg(test)]
use extract::*;
pub use extract::{PodTemplate, Workload};
pub use kinds::{CustomKind, OneOrMany, ReplicaFactor, TemplateLocation};
pub use pointer::{
    At, dot_to_pointer, metadata_mut, object_at_mut, pointer_to_location, spec_mut, value_at,
};

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

#[cfg(test)]
mod tests;
