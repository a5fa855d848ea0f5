//! The waPC host callback: the host capabilities a policy may call during one evaluation.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;

use crate::replay::{CallbackRequest, ReplaySession};

/// Which Kubernetes resources a policy may read through host capabilities.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ContextAwareAccess {
    /// Every resource (the harness default: tests need not annotate modules).
    #[default]
    Unrestricted,
    /// Only these `(apiVersion, kind)` pairs, like a ClusterAdmissionPolicy's
    /// `contextAwareResources`; an empty set is kwctl's default (no access).
    Only(BTreeSet<(String, String)>),
}

impl ContextAwareAccess {
    /// No access at all (`kwctl run` without `--allow-context-aware`).
    pub fn none() -> Self {
        Self::Only(BTreeSet::new())
    }

    /// The `contextAwareResources` of policy metadata (`kwctl run --allow-context-aware`);
    /// no metadata, or metadata without the field, grants nothing.
    pub fn from_metadata(metadata: Option<&Value>) -> Self {
        let resources = metadata
            .and_then(|m| m.get("contextAwareResources"))
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(|r| {
                        Some((
                            r.get("apiVersion")?.as_str()?.to_string(),
                            r.get("kind")?.as_str()?.to_string(),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self::Only(resources)
    }

    /// Whether `api_version`/`kind` may be read.
    pub fn allows(&self, api_version: &str, kind: &str) -> bool {
        match self {
            Self::Unrestricted => true,
            Self::Only(set) => set.contains(&(api_version.to_string(), kind.to_string())),
        }
    }
}

/// One host call the guest made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCall {
    /// waPC binding (e.g. `kubewarden`).
    pub binding: String,
    /// waPC namespace (e.g. `kubernetes`).
    pub namespace: String,
    /// waPC operation (e.g. `get_resource`).
    pub operation: String,
    /// The guest's payload, as text.
    pub payload: String,
    /// `Ok(response text)` or `Err(error text given to the guest)`.
    pub outcome: Result<String, String>,
}

impl HostCall {
    /// What was called: (binding, namespace, operation).
    pub fn target(&self) -> (&str, &str, &str) {
        (&self.binding, &self.namespace, &self.operation)
    }
}

/// What policy-evaluator puts before the error of a host call that reached its callback
/// handler (a replayed or recorded error, a Kubernetes API error) when it gives it to the
/// guest. Refusals decided before the handler (a resource outside `contextAwareResources`)
/// carry no prefix.
pub const CALLBACK_FAILURE: &str = "Callback evaluation failure: ";

/// Answers the Kubernetes and OCI host calls of an evaluation from something other than a
/// replay session: a cluster snapshot, a live cluster (see [`crate::Policy::evaluate_with`]).
/// Calls outside the policy's `contextAwareResources` are refused before they reach it.
pub trait HostResponder: Send + Sync {
    /// The response body for `request`, or the error text given to the guest (after
    /// policy-evaluator's [`CALLBACK_FAILURE`] prefix).
    fn answer(&self, request: &CallbackRequest) -> Result<Vec<u8>, String>;
}

/// Where an evaluation's host calls are answered from.
#[derive(Default)]
pub(crate) enum Answers {
    /// Nowhere: every call fails with "no replay session".
    #[default]
    None,
    /// A kwctl session, consumed in order.
    Replay(ReplaySession),
    /// A [`HostResponder`].
    Responder(Arc<dyn HostResponder>),
}

impl From<Option<ReplaySession>> for Answers {
    fn from(replay: Option<ReplaySession>) -> Self {
        replay.map_or(Self::None, Self::Replay)
    }
}

impl std::fmt::Debug for Answers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::None => f.write_str("None"),
            Self::Replay(s) => f.debug_tuple("Replay").field(s).finish(),
            Self::Responder(_) => f.write_str("Responder"),
        }
    }
}

impl Answers {
    fn answer(
        &mut self,
        request: &CallbackRequest,
        target: (&str, &str, &str),
    ) -> Result<Vec<u8>, String> {
        let (binding, namespace, operation) = target;
        match self {
            Self::Replay(session) => session
                .answer(request)
                .map_err(|e| format!("{CALLBACK_FAILURE}{e}")),
            Self::Responder(responder) => responder
                .answer(request)
                .map_err(|e| format!("{CALLBACK_FAILURE}{e}")),
            Self::None => Err(format!(
                "no replay session: cannot serve host call {binding}/{namespace}/{operation}"
            )),
        }
    }
}

/// State shared between the harness and the host callback of one evaluation.
#[derive(Debug, Default)]
pub(crate) struct HostContext {
    access: ContextAwareAccess,
    answers: Mutex<Answers>,
    calls: Mutex<Vec<HostCall>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave these plain values inconsistent.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl HostContext {
    pub(crate) fn new(access: ContextAwareAccess, answers: impl Into<Answers>) -> Self {
        Self {
            access,
            answers: Mutex::new(answers.into()),
            calls: Mutex::new(Vec::new()),
        }
    }

    /// Starts another evaluation in a kept instance: its own replay session and
    /// an empty host-call log.
    pub(crate) fn start(&self, replay: Option<ReplaySession>) {
        *lock(&self.answers) = replay.into();
        lock(&self.calls).clear();
    }

    /// The replay session as left by the evaluation (if it had one), and every host call made.
    pub(crate) fn finish(&self) -> (Option<ReplaySession>, Vec<HostCall>) {
        let replay = match std::mem::take(&mut *lock(&self.answers)) {
            Answers::Replay(session) => Some(session),
            _ => None,
        };
        (replay, std::mem::take(&mut *lock(&self.calls)))
    }

    /// Serves one waPC host call.
    pub(crate) fn handle(
        &self,
        binding: &str,
        namespace: &str,
        operation: &str,
        payload: &[u8],
    ) -> Result<Vec<u8>, String> {
        let outcome = self.dispatch((binding, namespace, operation), payload);
        lock(&self.calls).push(HostCall {
            binding: binding.to_string(),
            namespace: namespace.to_string(),
            operation: operation.to_string(),
            payload: String::from_utf8_lossy(payload).into_owned(),
            outcome: outcome
                .as_ref()
                .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
                .map_err(Clone::clone),
        });
        outcome
    }

    /// The answer to the call `target` (binding, namespace, operation) with `payload`.
    fn dispatch(&self, target: (&str, &str, &str), payload: &[u8]) -> Result<Vec<u8>, String> {
        let (binding, namespace, operation) = target;
        match target {
            // The SDK's logging drain; policy-evaluator accepts and logs it.
            ("kubewarden", "tracing", "log") => Ok(Vec::new()),
            (
                "kubewarden",
                "kubernetes",
                "get_resource" | "list_resources_all" | "list_resources_by_namespace",
            ) => {
                let request = CallbackRequest::from_guest_payload(operation, payload)
                    .map_err(|e| format!("{e:#}"))?;
                if !self.access.allows(request.api_version(), request.kind()) {
                    return Err(format!(
                        "Policy has not been granted access to Kubernetes {}/{} resources. The violation has been reported.",
                        request.api_version(),
                        request.kind()
                    ));
                }
                lock(&self.answers).answer(&request, target)
            }
            // The image reference as a JSON string (the SDK's `get_manifest_and_config`);
            // policy-evaluator grants OCI calls without contextAwareResources.
            ("kubewarden", "oci", "v1/oci_manifest_config") => {
                let image: String = serde_json::from_slice(payload).map_err(|e| {
                    format!(
                        "cannot parse the {operation} request {}: {e}",
                        String::from_utf8_lossy(payload)
                    )
                })?;
                let request = CallbackRequest::OciManifestAndConfig { image };
                lock(&self.answers).answer(&request, target)
            }
            _ => Err(format!(
                "unsupported host call {binding}/{namespace}/{operation}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const GET_NS: &[u8] = br#"{"api_version":"v1","kind":"Namespace","name":"a","namespace":null,"disable_cache":false,"field_masks":null}"#;

    /// A session of one exchange (kwctl's YAML): `request` answered with `response`.
    fn one_exchange(request: &str, response: &str) -> ReplaySession {
        ReplaySession::from_yaml_str(&format!(
            "- type: Exchange\n  request: \"{request}\"\n  response: {response}\n"
        ))
        .unwrap()
    }

    /// The request of [`GET_NS`] as a session writes it.
    const GET_NS_RECORDED: &str = "!KubernetesGetResource\\napi_version: v1\\nkind: Namespace\\nname: a\\ndisable_cache: false\\n";

    #[test]
    fn access_from_metadata() {
        let m = json!({"contextAwareResources": [{"apiVersion": "v1", "kind": "Namespace"}]});
        let access = ContextAwareAccess::from_metadata(Some(&m));
        assert!(access.allows("v1", "Namespace"));
        assert!(!access.allows("v1", "Pod"));
        assert_eq!(
            ContextAwareAccess::from_metadata(None),
            ContextAwareAccess::none()
        );
    }

    #[test]
    fn denied_resources_do_not_consume_the_session() {
        let session = one_exchange(GET_NS_RECORDED, "{type: Success, payload: '{}'}");
        let ctx = HostContext::new(ContextAwareAccess::none(), Some(session));
        let err = ctx
            .handle("kubewarden", "kubernetes", "get_resource", GET_NS)
            .unwrap_err();
        assert_eq!(
            err,
            "Policy has not been granted access to Kubernetes v1/Namespace resources. The violation has been reported."
        );
        let (left, calls) = ctx.finish();
        assert_eq!(left.unwrap().len(), 1);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].outcome, Err(err));
    }

    #[test]
    fn replayed_errors_carry_the_callback_failure_prefix() {
        let session = one_exchange(
            GET_NS_RECORDED,
            "{type: Error, message: 'namespaces \"a\" not found'}",
        );
        let ctx = HostContext::new(ContextAwareAccess::Unrestricted, Some(session));
        assert_eq!(
            ctx.handle("kubewarden", "kubernetes", "get_resource", GET_NS)
                .unwrap_err(),
            "Callback evaluation failure: namespaces \"a\" not found"
        );
        assert_eq!(
            ctx.handle("kubewarden", "kubernetes", "get_resource", GET_NS)
                .unwrap_err(),
            "Callback evaluation failure: the list of recorded responses is empty"
        );
    }

    #[test]
    fn image_configs_are_served_from_the_session() {
        let session = one_exchange(
            "!OciManifestAndConfig\\nimage: ghcr.io/a/b:1\\n",
            "{type: Success, payload: '{\"digest\": \"sha256:0\"}'}",
        );
        let ctx = HostContext::new(ContextAwareAccess::none(), Some(session));
        assert_eq!(
            ctx.handle(
                "kubewarden",
                "oci",
                "v1/oci_manifest_config",
                br#""ghcr.io/a/b:1""#
            ),
            Ok(br#"{"digest": "sha256:0"}"#.to_vec()),
            "no contextAwareResources needed"
        );
        assert!(
            ctx.handle("kubewarden", "oci", "v1/oci_manifest_config", b"{")
                .unwrap_err()
                .starts_with("cannot parse the v1/oci_manifest_config request {")
        );
    }

    #[test]
    fn unknown_calls_and_missing_sessions_are_named() {
        let ctx = HostContext::new(ContextAwareAccess::Unrestricted, Answers::None);
        assert_eq!(
            ctx.handle("kubewarden", "net", "v1/dns_lookup_host", b"\"x\"")
                .unwrap_err(),
            "unsupported host call kubewarden/net/v1/dns_lookup_host"
        );
        assert_eq!(
            ctx.handle("kubewarden", "kubernetes", "get_resource", GET_NS)
                .unwrap_err(),
            "no replay session: cannot serve host call kubewarden/kubernetes/get_resource"
        );
        assert_eq!(
            ctx.handle("kubewarden", "tracing", "log", b"{}"),
            Ok(Vec::new())
        );
    }
}
