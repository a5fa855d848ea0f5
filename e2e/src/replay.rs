//! Replay of recorded host-capability interactions, in kwctl's own session format.
//!
//! A session file is what `kwctl run --record-host-capabilities-interactions` writes
//! and `--replay-host-capabilities-interactions` reads: a YAML list of exchanges
//!
//! ```yaml
//! - type: Exchange
//!   request: |
//!     !KubernetesGetResource
//!     api_version: v1
//!     kind: Namespace
//!     name: team-a
//!     namespace: null
//!     disable_cache: false
//!   response:
//!     type: Success
//!     payload: '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a"}}'
//! ```
//!
//! Exchanges are consumed in order. Each actual request must equal the recorded one
//! field by field (an omitted `Option` field is `null`), as kwctl's replay proxy
//! requires; otherwise the host call fails with kwctl's error texts.

use std::collections::{BTreeSet, VecDeque};
use std::fmt;
use std::path::Path;

use anyhow::{Context, Result, anyhow};
use serde::{Deserialize, Serialize};

/// A host-capability request, as policy-evaluator's `CallbackRequestType` spells the
/// Kubernetes variants and `OciManifestAndConfig` (the YAML tag is the variant name,
/// fields are snake_case).
///
/// `Debug` prints the same text kwctl prints in its "unexpected request" error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CallbackRequest {
    /// `kubewarden`/`kubernetes`/`get_resource`.
    KubernetesGetResource {
        /// `v1` for the core group, `group/version` otherwise.
        api_version: String,
        /// Singular PascalCase kind.
        kind: String,
        /// Object name.
        name: String,
        /// Namespace of a namespaced object, `None` for cluster-scoped kinds.
        namespace: Option<String>,
        /// Bypass Kubewarden's 5 s cache.
        disable_cache: bool,
        /// Fields to keep in the response (`None` = the whole object).
        #[serde(default)]
        field_masks: Option<BTreeSet<String>>,
    },
    /// `kubewarden`/`kubernetes`/`list_resources_all`.
    KubernetesListResourceAll {
        /// `v1` for the core group, `group/version` otherwise.
        api_version: String,
        /// Singular PascalCase kind.
        kind: String,
        /// Label selector sent to the API server.
        #[serde(default)]
        label_selector: Option<String>,
        /// Field selector sent to the API server.
        #[serde(default)]
        field_selector: Option<String>,
        /// Fields to keep in the response (`None` = whole objects).
        #[serde(default)]
        field_masks: Option<BTreeSet<String>>,
    },
    /// `kubewarden`/`kubernetes`/`list_resources_by_namespace`.
    KubernetesListResourceNamespace {
        /// `v1` for the core group, `group/version` otherwise.
        api_version: String,
        /// Singular PascalCase kind.
        kind: String,
        /// Namespace scoping the list.
        namespace: String,
        /// Label selector sent to the API server.
        #[serde(default)]
        label_selector: Option<String>,
        /// Field selector sent to the API server.
        #[serde(default)]
        field_selector: Option<String>,
        /// Fields to keep in the response (`None` = whole objects).
        #[serde(default)]
        field_masks: Option<BTreeSet<String>>,
    },
    /// `kubewarden`/`oci`/`v1/oci_manifest_config`: an image's manifest and config.
    OciManifestAndConfig {
        /// The image reference (`registry.example.com/org/server:1.0`).
        image: String,
    },
}

impl CallbackRequest {
    /// The `apiVersion` the request is about (empty for an OCI request).
    pub fn api_version(&self) -> &str {
        match self {
            Self::KubernetesGetResource { api_version, .. }
            | Self::KubernetesListResourceAll { api_version, .. }
            | Self::KubernetesListResourceNamespace { api_version, .. } => api_version,
            Self::OciManifestAndConfig { .. } => "",
        }
    }

    /// The kind the request is about (empty for an OCI request).
    pub fn kind(&self) -> &str {
        match self {
            Self::KubernetesGetResource { kind, .. }
            | Self::KubernetesListResourceAll { kind, .. }
            | Self::KubernetesListResourceNamespace { kind, .. } => kind,
            Self::OciManifestAndConfig { .. } => "",
        }
    }

    /// What the request asks, the two list requests as one [`ListCall`].
    pub fn call(&self) -> Call<'_> {
        match self {
            Self::KubernetesGetResource {
                api_version,
                kind,
                name,
                namespace,
                field_masks,
                ..
            } => Call::Get(GetCall {
                api_version,
                kind,
                name,
                namespace: namespace.as_deref(),
                field_masks: field_masks.as_ref(),
            }),
            Self::KubernetesListResourceAll {
                api_version,
                kind,
                label_selector,
                field_selector,
                field_masks,
            }
            | Self::KubernetesListResourceNamespace {
                api_version,
                kind,
                label_selector,
                field_selector,
                field_masks,
                ..
            } => Call::List(ListCall {
                api_version,
                kind,
                namespace: match self {
                    Self::KubernetesListResourceNamespace { namespace, .. } => Some(namespace),
                    _ => None,
                },
                label_selector: label_selector.as_deref(),
                field_selector: field_selector.as_deref(),
                field_masks: field_masks.as_ref(),
            }),
            Self::OciManifestAndConfig { image } => Call::Image(image),
        }
    }

    /// Builds the request a guest made with waPC operation `operation` of namespace
    /// `kubernetes`, from its JSON payload (the SDK's `GetResourceRequest`,
    /// `ListAllResourcesRequest` or `ListResourcesByNamespaceRequest`).
    pub fn from_guest_payload(operation: &str, payload: &[u8]) -> Result<Self> {
        let parsed = match operation {
            "get_resource" => serde_json::from_slice::<GetResourceRequest>(payload).map(Into::into),
            "list_resources_all" => {
                serde_json::from_slice::<ListResourcesRequest>(payload).map(|r| {
                    ListResourcesRequest {
                        namespace: None,
                        ..r
                    }
                    .into()
                })
            }
            "list_resources_by_namespace" => {
                serde_json::from_slice::<ListResourcesRequest>(payload).and_then(|r| {
                    match r.namespace {
                        Some(_) => Ok(r.into()),
                        None => Err(serde::de::Error::missing_field("namespace")),
                    }
                })
            }
            other => return Err(anyhow!("unknown operation: {other}")),
        };
        parsed.with_context(|| {
            format!(
                "cannot parse the {operation} request {}",
                String::from_utf8_lossy(payload)
            )
        })
    }
}

/// Wire format of the SDK's `kubernetes::GetResourceRequest`.
#[derive(Deserialize)]
struct GetResourceRequest {
    api_version: String,
    kind: String,
    name: String,
    namespace: Option<String>,
    disable_cache: bool,
    field_masks: Option<BTreeSet<String>>,
}

impl From<GetResourceRequest> for CallbackRequest {
    fn from(r: GetResourceRequest) -> Self {
        Self::KubernetesGetResource {
            api_version: r.api_version,
            kind: r.kind,
            name: r.name,
            namespace: r.namespace,
            disable_cache: r.disable_cache,
            field_masks: r.field_masks,
        }
    }
}

/// Wire format of the SDK's `kubernetes::ListAllResourcesRequest` and
/// `ListResourcesByNamespaceRequest` (the one with a `namespace`).
#[derive(Deserialize)]
struct ListResourcesRequest {
    api_version: String,
    kind: String,
    namespace: Option<String>,
    label_selector: Option<String>,
    field_selector: Option<String>,
    field_masks: Option<BTreeSet<String>>,
}

impl From<ListResourcesRequest> for CallbackRequest {
    fn from(r: ListResourcesRequest) -> Self {
        match r.namespace {
            Some(namespace) => Self::KubernetesListResourceNamespace {
                api_version: r.api_version,
                kind: r.kind,
                namespace,
                label_selector: r.label_selector,
                field_selector: r.field_selector,
                field_masks: r.field_masks,
            },
            None => Self::KubernetesListResourceAll {
                api_version: r.api_version,
                kind: r.kind,
                label_selector: r.label_selector,
                field_selector: r.field_selector,
                field_masks: r.field_masks,
            },
        }
    }
}

/// What a [`CallbackRequest`] asks, borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call<'a> {
    /// One object (`get_resource`).
    Get(GetCall<'a>),
    /// A list, in one namespace or all.
    List(ListCall<'a>),
    /// An image's manifest and config.
    Image(&'a str),
}

/// A `get_resource` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetCall<'a> {
    /// `v1` for the core group, `group/version` otherwise.
    pub api_version: &'a str,
    /// Singular PascalCase kind.
    pub kind: &'a str,
    /// The object's name.
    pub name: &'a str,
    /// Its namespace, `None` for cluster-scoped kinds.
    pub namespace: Option<&'a str>,
    /// Fields to keep in the response (`None` = the whole object).
    pub field_masks: Option<&'a BTreeSet<String>>,
}

/// A list request (`list_resources_all`, `list_resources_by_namespace`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListCall<'a> {
    /// `v1` for the core group, `group/version` otherwise.
    pub api_version: &'a str,
    /// Singular PascalCase kind.
    pub kind: &'a str,
    /// The namespace listed, `None` for all namespaces.
    pub namespace: Option<&'a str>,
    /// Label selector sent to the API server.
    pub label_selector: Option<&'a str>,
    /// Field selector sent to the API server.
    pub field_selector: Option<&'a str>,
    /// Fields to keep of each item (`None` = whole objects).
    pub field_masks: Option<&'a BTreeSet<String>>,
}

/// The recorded answer to one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum RecordedResponse {
    /// The host answered with these bytes (a JSON document, stored as a string).
    Success {
        /// The response body given to the guest.
        payload: String,
    },
    /// The host call failed with this message.
    Error {
        /// The error text given to the guest.
        message: String,
    },
}

/// One recorded request and its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchange {
    /// What the guest is expected to ask.
    pub request: CallbackRequest,
    /// What the host answers.
    pub response: RecordedResponse,
}

/// The on-disk form of an exchange: `request` is itself a YAML document.
#[derive(Deserialize, Serialize)]
#[serde(tag = "type")]
enum RawExchange {
    Exchange {
        request: String,
        response: RecordedResponse,
    },
}

/// An ordered queue of recorded exchanges, consumed by host calls.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplaySession {
    exchanges: VecDeque<Exchange>,
}

/// Why a replayed host call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayError {
    /// Every recorded exchange has been consumed.
    Exhausted,
    /// The guest asked something other than the next recorded request.
    Unexpected {
        /// The next recorded request.
        expected: Box<CallbackRequest>,
        /// What the guest asked.
        actual: Box<CallbackRequest>,
    },
    /// The recorded response was an error; this is its message.
    Recorded(String),
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exhausted => f.write_str("the list of recorded responses is empty"),
            Self::Unexpected { expected, actual } => write!(
                f,
                "Replay error: unexpected request. Was expecting {expected:?}, got {actual:?} instead"
            ),
            Self::Recorded(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ReplayError {}

impl ReplaySession {
    /// A session built from exchanges given in code.
    pub fn new(exchanges: impl IntoIterator<Item = Exchange>) -> Self {
        Self {
            exchanges: exchanges.into_iter().collect(),
        }
    }

    /// Reads a kwctl session file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read replay session {}", path.display()))?;
        Self::from_yaml_str(&text)
            .with_context(|| format!("invalid replay session {}", path.display()))
    }

    /// Parses a kwctl session document.
    pub fn from_yaml_str(yaml: &str) -> Result<Self> {
        let raw: Option<Vec<RawExchange>> =
            yaml_serde::from_str(yaml).context("expected a YAML list of `type: Exchange` items")?;
        let exchanges = raw
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, RawExchange::Exchange { request, response })| {
                let request = yaml_serde::from_str(&request)
                    .with_context(|| format!("exchange {i}: cannot parse request {request:?}"))?;
                Ok(Exchange { request, response })
            })
            .collect::<Result<_>>()?;
        Ok(Self { exchanges })
    }

    /// Serializes the session in kwctl's format.
    pub fn to_yaml_string(&self) -> Result<String> {
        let raw = self
            .exchanges
            .iter()
            .map(|e| {
                Ok(RawExchange::Exchange {
                    request: yaml_serde::to_string(&e.request)?,
                    response: e.response.clone(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(yaml_serde::to_string(&raw)?)
    }

    /// Exchanges not consumed yet, in order.
    pub fn remaining(&self) -> impl Iterator<Item = &Exchange> {
        self.exchanges.iter()
    }

    /// Number of exchanges not consumed yet.
    pub fn len(&self) -> usize {
        self.exchanges.len()
    }

    /// True when every exchange has been consumed.
    pub fn is_empty(&self) -> bool {
        self.exchanges.is_empty()
    }

    /// Consumes the next exchange for `actual`, exactly as kwctl's replay proxy does:
    /// the exchange is popped even when it does not match.
    pub fn answer(&mut self, actual: &CallbackRequest) -> Result<Vec<u8>, ReplayError> {
        let exchange = self.exchanges.pop_front().ok_or(ReplayError::Exhausted)?;
        if exchange.request != *actual {
            return Err(ReplayError::Unexpected {
                expected: Box::new(exchange.request),
                actual: Box::new(actual.clone()),
            });
        }
        match exchange.response {
            RecordedResponse::Success { payload } => Ok(payload.into_bytes()),
            RecordedResponse::Error { message } => Err(ReplayError::Recorded(message)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION: &str = r#"
- type: Exchange
  request: |
    !KubernetesGetResource
    api_version: v1
    kind: Namespace
    name: team-a
    namespace: null
    disable_cache: false
  response:
    type: Success
    payload: '{"kind":"Namespace"}'
- type: Exchange
  request: |
    !KubernetesListResourceNamespace
    api_version: v1
    kind: Pod
    namespace: team-a
    label_selector: app=x
    field_masks:
    - spec.containers.name
  response:
    type: Error
    message: forbidden
"#;

    fn get(name: &str) -> CallbackRequest {
        CallbackRequest::KubernetesGetResource {
            api_version: "v1".into(),
            kind: "Namespace".into(),
            name: name.into(),
            namespace: None,
            disable_cache: false,
            field_masks: None,
        }
    }

    #[test]
    fn parses_kwctl_sessions() {
        let s = ReplaySession::from_yaml_str(SESSION).unwrap();
        assert_eq!(s.len(), 2);
        let second = s.remaining().nth(1).unwrap();
        assert_eq!(
            second.request,
            CallbackRequest::KubernetesListResourceNamespace {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: "team-a".into(),
                label_selector: Some("app=x".into()),
                field_selector: None,
                field_masks: Some(BTreeSet::from(["spec.containers.name".to_string()])),
            }
        );
        assert_eq!(
            second.response,
            RecordedResponse::Error {
                message: "forbidden".into()
            }
        );
    }

    #[test]
    fn round_trips_through_yaml() {
        let s = ReplaySession::from_yaml_str(SESSION).unwrap();
        let again = ReplaySession::from_yaml_str(&s.to_yaml_string().unwrap()).unwrap();
        assert_eq!(s, again);
    }

    #[test]
    fn answers_in_order_then_reports_exhaustion() {
        let mut s = ReplaySession::from_yaml_str(SESSION).unwrap();
        assert_eq!(
            s.answer(&get("team-a")).unwrap(),
            br#"{"kind":"Namespace"}"#
        );
        let err = s.answer(&get("team-a")).unwrap_err();
        assert!(err.to_string().starts_with(
            "Replay error: unexpected request. Was expecting KubernetesListResourceNamespace {"
        ));
        assert_eq!(
            s.answer(&get("team-a")).unwrap_err().to_string(),
            "the list of recorded responses is empty"
        );
    }

    #[test]
    fn guest_payloads_with_omitted_options_are_null() {
        let r = CallbackRequest::from_guest_payload(
            "get_resource",
            br#"{"api_version":"v1","kind":"Namespace","name":"team-a","disable_cache":false}"#,
        )
        .unwrap();
        assert_eq!(r, get("team-a"));
        assert!(CallbackRequest::from_guest_payload("get_resource", b"{").is_err());
        assert!(CallbackRequest::from_guest_payload("can_i", b"{}").is_err());
    }

    #[test]
    fn rejects_unknown_request_types() {
        let yaml = "- type: Exchange\n  request: \"!DNSLookupHost\\nhost: x\\n\"\n  response: {type: Success, payload: '[]'}\n";
        let err = ReplaySession::from_yaml_str(yaml).unwrap_err();
        assert!(format!("{err:#}").contains("exchange 0"), "{err:#}");
    }
}
