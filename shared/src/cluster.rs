//! Reading live cluster state through Kubewarden's context-aware host calls.
//!
//! The requests are serialized exactly as the SDK's own `GetResourceRequest`,
//! `ListAllResourcesRequest` and `ListResourcesByNamespaceRequest` (snake_case fields,
//! `null` for absent options), so replay sessions recorded by `kwctl` match; an image's
//! config ([`OciManifestConfig`]) is asked for with the image reference as a JSON string,
//! as the SDK's `get_manifest_and_config` does. Rules take a
//! `&dyn Cluster`; the wasm glue implements it with waPC host calls, tests with fakes.
//! A call that fails is a [`HostFailure`], worded by the class of failure it shows.

use serde::Serialize;
use std::collections::BTreeSet;

mod failure;
mod namespace;

pub use failure::{
    FailureClass, HOST_ERROR_MAX, HostError, HostFailure, Unreachable, call, classify, short_error,
};
pub use namespace::{namespace_labels, namespace_request};

/// One context-aware host call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterRequest {
    Get(GetResource),
    ListAll(ListAll),
    ListInNamespace(ListInNamespace),
}

/// `kubewarden/kubernetes/get_resource`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GetResource {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
    pub disable_cache: bool,
    pub field_masks: Option<BTreeSet<String>>,
}

impl GetResource {
    /// ConfigMap `namespace/name`, read whole (its data is what the rules read), from the
    /// host's cache.
    pub fn config_map(namespace: &str, name: &str) -> Self {
        GetResource {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: name.to_string(),
            namespace: Some(namespace.to_string()),
            disable_cache: false,
            field_masks: None,
        }
    }
}

/// `kubewarden/kubernetes/list_resources_all`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListAll {
    pub api_version: String,
    pub kind: String,
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub field_masks: Option<BTreeSet<String>>,
}

/// `kubewarden/kubernetes/list_resources_by_namespace`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListInNamespace {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub field_masks: Option<BTreeSet<String>>,
}

impl ClusterRequest {
    /// The waPC operation name.
    pub fn operation(&self) -> &'static str {
        match self {
            ClusterRequest::Get(_) => "get_resource",
            ClusterRequest::ListAll(_) => "list_resources_all",
            ClusterRequest::ListInNamespace(_) => "list_resources_by_namespace",
        }
    }

    /// The JSON payload the host expects.
    pub fn payload(&self) -> Vec<u8> {
        let r = match self {
            ClusterRequest::Get(r) => serde_json::to_vec(r),
            ClusterRequest::ListAll(r) => serde_json::to_vec(r),
            ClusterRequest::ListInNamespace(r) => serde_json::to_vec(r),
        };
        // Serializing plain strings, bools and sets cannot fail.
        r.unwrap_or_default()
    }

    /// `v1/Node` — what the request reads, for messages.
    pub fn what(&self) -> String {
        let (v, k) = match self {
            ClusterRequest::Get(r) => (&r.api_version, &r.kind),
            ClusterRequest::ListAll(r) => (&r.api_version, &r.kind),
            ClusterRequest::ListInNamespace(r) => (&r.api_version, &r.kind),
        };
        format!("{v}/{k}")
    }
}

/// `kubewarden/oci/v1/oci_manifest_config`: an image's manifest and config (the SDK's
/// `get_manifest_and_config`). The payload is the image reference as a JSON string; the
/// answer is `{"manifest": ..., "digest": ..., "config": <the image config>}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciManifestConfig {
    pub image: String,
}

impl OciManifestConfig {
    /// The JSON payload the host expects.
    pub fn payload(&self) -> Vec<u8> {
        serde_json::to_vec(&self.image).unwrap_or_default()
    }
}

/// Answers host calls: the raw JSON of the object or list, or the host's error text.
pub trait Cluster {
    fn call(&self, request: &ClusterRequest) -> Result<Vec<u8>, String>;

    /// An image's manifest and config. Hosts that serve no OCI registry answer with an
    /// error, as Kubewarden does for a capability it does not grant.
    fn oci_manifest_config(&self, request: &OciManifestConfig) -> Result<Vec<u8>, String> {
        Err(format!(
            "this host serves no OCI registry (asked for the config of image {})",
            request.image
        ))
    }
}

/// A host that answers no context-aware call (a policy evaluated without a cluster: tests,
/// and the native benchmark of requests that make no call).
pub struct NoCluster;

impl Cluster for NoCluster {
    fn call(&self, request: &ClusterRequest) -> Result<Vec<u8>, String> {
        Err(format!(
            "no cluster is connected (asked for {})",
            request.what()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_match_the_sdk_wire_format() {
        let get = ClusterRequest::Get(GetResource {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "models".into(),
            namespace: Some("gpu".into()),
            disable_cache: false,
            field_masks: None,
        });
        assert_eq!(get.operation(), "get_resource");
        assert_eq!(
            String::from_utf8(get.payload()).unwrap(),
            r#"{"api_version":"v1","kind":"ConfigMap","name":"models","namespace":"gpu","disable_cache":false,"field_masks":null}"#
        );
        let list = ClusterRequest::ListAll(ListAll {
            api_version: "v1".into(),
            kind: "Node".into(),
            label_selector: Some("pool=a".into()),
            field_selector: None,
            field_masks: Some(BTreeSet::from(["status.allocatable".to_string()])),
        });
        assert_eq!(list.operation(), "list_resources_all");
        assert_eq!(list.what(), "v1/Node");
        assert_eq!(
            String::from_utf8(list.payload()).unwrap(),
            r#"{"api_version":"v1","kind":"Node","label_selector":"pool=a","field_selector":null,"field_masks":["status.allocatable"]}"#
        );
        let oci = OciManifestConfig {
            image: "ghcr.io/org/server:1.0".into(),
        };
        assert_eq!(oci.payload(), br#""ghcr.io/org/server:1.0""#);
    }
}

/// Clusters for tests: [`fake::Objects`] answers `get_resource` by kind and name and records
/// calls, [`fake::Script`] answers a script of calls in order.
#[cfg(test)]
pub mod fake {
    use super::{Cluster, ClusterRequest};
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    #[derive(Default)]
    pub struct Objects {
        objects: BTreeMap<(String, String), Result<String, String>>,
        pub calls: RefCell<Vec<ClusterRequest>>,
    }

    impl Objects {
        pub fn with(mut self, kind: &str, name: &str, object: serde_json::Value) -> Objects {
            self.objects
                .insert((kind.into(), name.into()), Ok(object.to_string()));
            self
        }

        pub fn failing(mut self, kind: &str, name: &str, error: &str) -> Objects {
            self.objects
                .insert((kind.into(), name.into()), Err(error.into()));
            self
        }
    }

    impl Cluster for Objects {
        fn call(&self, request: &ClusterRequest) -> Result<Vec<u8>, String> {
            self.calls.borrow_mut().push(request.clone());
            let ClusterRequest::Get(get) = request else {
                return Err(format!("unexpected host call {request:?}"));
            };
            match self.objects.get(&(get.kind.clone(), get.name.clone())) {
                Some(answer) => answer.clone().map(String::into_bytes),
                None => Err(format!(
                    "Cannot find {}/{} named '{}' inside of namespace '{:?}'",
                    get.api_version, get.kind, get.name, get.namespace
                )),
            }
        }
    }

    /// Answers host calls from a script, in order, and fails the test on any other call.
    pub struct Script {
        pub answers: RefCell<Vec<(ClusterRequest, Result<String, String>)>>,
        /// How many calls were made.
        pub calls: RefCell<usize>,
    }

    impl Script {
        pub fn new(answers: Vec<(ClusterRequest, Result<String, String>)>) -> Script {
            Script {
                answers: RefCell::new(answers),
                calls: RefCell::new(0),
            }
        }

        /// A script that expects no call.
        pub fn none() -> Script {
            Script::new(Vec::new())
        }

        /// Whether every scripted call was made.
        pub fn done(&self) -> bool {
            self.answers.borrow().is_empty()
        }
    }

    impl Cluster for Script {
        fn call(&self, request: &ClusterRequest) -> Result<Vec<u8>, String> {
            *self.calls.borrow_mut() += 1;
            let mut answers = self.answers.borrow_mut();
            assert!(!answers.is_empty(), "unexpected host call {request:?}");
            let (expected, answer) = answers.remove(0);
            assert_eq!(&expected, request, "host call differs from the script");
            answer.map(String::into_bytes)
        }
    }
}
