//! Where context-aware policies read the cluster: a snapshot file (what `kubectl get -o yaml`
//! writes: a `List` of objects; several documents and files work too), a live cluster
//! ([`crate::kube`]), or nowhere (the evaluation is then reported as skipped).
//!
//! The snapshot answers the calls policy-server makes: get one object (by apiVersion,
//! kind, namespace and name), list all objects of a kind or those of one namespace, with
//! label and field selectors; `field_masks` prune what is returned as policy-server does
//! ([`apply_field_masks`]).

use std::collections::BTreeMap;
use std::sync::Mutex;

use gpu_e2e::{
    Call, CallbackRequest, GetCall, HostResponder, ListCall, RecordedResponse, ReplaySession,
};
use gpu_rules::selector::{LabelSelector, Operator, Requirement};
use serde_json::{Value, json};

use crate::input::{InputError, Manifest};

/// The error given to a policy's host call when no cluster was given; an evaluation that
/// got it is reported as skipped.
pub const NO_CLUSTER: &str =
    "gpu-admission check: no cluster to read (give --snapshot FILE or --kubeconfig FILE)";

/// Answers every call with [`NO_CLUSTER`].
#[derive(Debug, Default)]
pub struct NoCluster;

impl HostResponder for NoCluster {
    fn answer(&self, _request: &CallbackRequest) -> Result<Vec<u8>, String> {
        Err(NO_CLUSTER.to_string())
    }
}

/// Host calls answered from a kwctl session (`--replay-host-capabilities-interactions`):
/// exchanges consumed in order, as kwctl does. Each object checked starts from the whole
/// session again.
#[derive(Debug)]
pub struct Replay {
    recorded: ReplaySession,
    left: Mutex<ReplaySession>,
}

impl Replay {
    /// A responder replaying `session`.
    pub fn new(session: ReplaySession) -> Self {
        Self {
            left: Mutex::new(session.clone()),
            recorded: session,
        }
    }

    /// Starts the session again (before each object).
    pub fn rewind(&self) {
        *self.left.lock().unwrap_or_else(|e| e.into_inner()) = self.recorded.clone();
    }
}

impl HostResponder for Replay {
    fn answer(&self, request: &CallbackRequest) -> Result<Vec<u8>, String> {
        self.left
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .answer(request)
            .map_err(|e| e.to_string())
    }
}

/// A cluster's objects, read from snapshot files, and the objects of the run admitted so far
/// ([`Snapshot::apply`]).
#[derive(Debug, Default)]
pub struct Snapshot {
    /// (apiVersion, kind) -> objects.
    objects: BTreeMap<(String, String), Vec<Value>>,
    /// Objects admitted earlier in the run, as `kubectl apply` of the whole set creates them.
    applied: Mutex<Vec<Value>>,
}

impl Snapshot {
    /// The objects of a snapshot (Lists already opened by [`crate::input`]).
    pub fn new(manifests: impl IntoIterator<Item = Manifest>) -> Self {
        let mut objects: BTreeMap<(String, String), Vec<Value>> = BTreeMap::new();
        for m in manifests {
            let key = (
                m.object["apiVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                m.object["kind"].as_str().unwrap_or_default().to_string(),
            );
            objects.entry(key).or_default().push(m.object);
        }
        Self {
            objects,
            applied: Mutex::new(Vec::new()),
        }
    }

    /// Adds an admitted object (replacing the snapshot's or an earlier one of the same
    /// apiVersion, kind, namespace and name): later objects of the run see it, as when the
    /// whole set is applied in order (a HorizontalPodAutoscaler finds the Deployment of the
    /// same chart).
    pub fn apply(&self, object: Value) {
        let mut applied = self.applied.lock().unwrap_or_else(|e| e.into_inner());
        applied.retain(|o| !same_object(o, &object));
        applied.push(object);
    }

    /// The cluster a kwctl session shows: the objects its successful gets and lists
    /// returned (apiVersion, kind and the listed namespace filled in where the payload
    /// leaves them out). `None` when no snapshot gives the session's answers: an error other
    /// than a missing object, an image registry's answer, no exchange at all, or answers the
    /// snapshot does not reproduce (lists no cluster gives together, errors in other words).
    pub fn from_session(session: &ReplaySession) -> Option<Self> {
        let mut objects: Vec<Value> = Vec::new();
        for exchange in session.remaining() {
            let payload = match &exchange.response {
                RecordedResponse::Success { payload } => {
                    serde_json::from_str::<Value>(payload).ok()?
                }
                RecordedResponse::Error { message } if message.starts_with("Cannot find ") => {
                    continue;
                }
                RecordedResponse::Error { .. } => return None,
            };
            let (api_version, kind, namespace, listed) = match &exchange.request {
                CallbackRequest::KubernetesGetResource {
                    api_version,
                    kind,
                    namespace,
                    ..
                } => (api_version, kind, namespace.clone(), vec![payload]),
                CallbackRequest::KubernetesListResourceAll {
                    api_version, kind, ..
                } => (
                    api_version,
                    kind,
                    None,
                    payload["items"].as_array()?.clone(),
                ),
                CallbackRequest::KubernetesListResourceNamespace {
                    api_version,
                    kind,
                    namespace,
                    ..
                } => (
                    api_version,
                    kind,
                    Some(namespace.clone()),
                    payload["items"].as_array()?.clone(),
                ),
                CallbackRequest::OciManifestAndConfig { .. } => return None,
            };
            for mut object in listed {
                let map = object.as_object_mut()?;
                map.entry("apiVersion")
                    .or_insert_with(|| Value::String(api_version.clone()));
                map.entry("kind")
                    .or_insert_with(|| Value::String(kind.clone()));
                if let Some(ns) = &namespace
                    && let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut)
                {
                    meta.entry("namespace")
                        .or_insert_with(|| Value::String(ns.clone()));
                }
                if !objects.iter().any(|o| same_object(o, &object)) {
                    objects.push(object);
                }
            }
        }
        let snapshot = Self::new(objects.into_iter().map(|object| Manifest {
            file: "session".into(),
            line: 1,
            object,
        }));
        // A session asserts its calls; an empty one (no call expected) is no cluster state.
        if session.is_empty() {
            return None;
        }
        session
            .remaining()
            .all(|e| snapshot.reproduces(&e.request, &e.response))
            .then_some(snapshot)
    }

    /// Whether the snapshot answers `request` as `recorded`: the same objects (by namespace
    /// and name), or the same error. Hand-written sessions can record lists no cluster would
    /// give together, or errors in other words.
    fn reproduces(&self, request: &CallbackRequest, recorded: &RecordedResponse) -> bool {
        let names = |v: &Value| -> Vec<(String, String)> {
            let mut out: Vec<(String, String)> = match v["items"].as_array() {
                Some(items) => items.iter().map(key_of).collect(),
                None => vec![key_of(v)],
            };
            out.sort();
            out
        };
        let namespace = match request {
            CallbackRequest::KubernetesListResourceNamespace { namespace, .. } => {
                Some(namespace.clone())
            }
            CallbackRequest::KubernetesGetResource { namespace, .. } => namespace.clone(),
            _ => None,
        };
        let with_namespace = |mut v: Value| {
            let fill = |o: &mut Value| {
                if let (Some(ns), Some(meta)) = (
                    &namespace,
                    o.get_mut("metadata").and_then(Value::as_object_mut),
                ) {
                    meta.entry("namespace")
                        .or_insert_with(|| Value::String(ns.clone()));
                }
            };
            match v.get_mut("items").and_then(Value::as_array_mut) {
                Some(items) => items.iter_mut().for_each(fill),
                None => fill(&mut v),
            }
            v
        };
        match (self.answer(request), recorded) {
            (Ok(bytes), RecordedResponse::Success { payload }) => {
                let ours: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                let theirs: Value = serde_json::from_str(payload).unwrap_or(Value::Null);
                names(&ours) == names(&with_namespace(theirs))
            }
            (Err(ours), RecordedResponse::Error { message }) => ours == *message,
            _ => false,
        }
    }

    /// Reads snapshot files.
    pub fn from_files(paths: &[String]) -> Result<Self, Vec<InputError>> {
        let manifests = crate::input::read_manifests(paths, &mut std::io::empty())?;
        Ok(Self::new(manifests))
    }

    /// The labels of Namespace `name` in the snapshot, if it is there.
    pub fn namespace_labels(&self, name: &str) -> Option<BTreeMap<String, String>> {
        self.objects
            .get(&("v1".to_string(), "Namespace".to_string()))?
            .iter()
            .find(|o| o["metadata"]["name"] == name)
            .map(labels_of)
    }

    /// The objects of a kind: the snapshot's, with those the run applied in place of the
    /// snapshot's of the same name.
    fn of_kind(&self, api_version: &str, kind: &str) -> Vec<Value> {
        let applied = self.applied.lock().unwrap_or_else(|e| e.into_inner());
        let applied: Vec<&Value> = applied
            .iter()
            .filter(|o| o["apiVersion"] == api_version && o["kind"] == kind)
            .collect();
        self.objects
            .get(&(api_version.to_string(), kind.to_string()))
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter(|o| !applied.iter().any(|a| same_object(a, o)))
            .chain(applied.iter().copied())
            .cloned()
            .collect()
    }

    fn list(&self, list: &ListCall) -> Result<Vec<u8>, String> {
        let ListCall {
            api_version,
            kind,
            namespace,
            label_selector,
            field_selector,
            field_masks: masks,
        } = *list;
        let labels = label_selector
            .map(parse_label_selector)
            .transpose()?
            .unwrap_or_default();
        let fields = field_selector
            .map(parse_field_selector)
            .transpose()?
            .unwrap_or_default();
        let items: Vec<Value> = self
            .of_kind(api_version, kind)
            .into_iter()
            .filter(|o| namespace.is_none_or(|ns| o["metadata"]["namespace"] == ns))
            .filter(|o| labels.matches(&labels_of(o)))
            .filter(|o| fields.iter().all(|f| f.matches(o)))
            .map(|mut o| {
                apply_field_masks(&mut o, masks);
                o
            })
            .collect();
        Ok(serde_json::to_vec(&json!({
            "apiVersion": api_version,
            "kind": format!("{kind}List"),
            "metadata": {"resourceVersion": "0"},
            "items": items,
        }))
        .unwrap_or_default())
    }
}

impl HostResponder for Snapshot {
    fn answer(&self, request: &CallbackRequest) -> Result<Vec<u8>, String> {
        match request.call() {
            Call::Get(get) => self
                .of_kind(get.api_version, get.kind)
                .into_iter()
                .find(|o| {
                    o["metadata"]["name"] == get.name
                        && get
                            .namespace
                            .is_none_or(|ns| o["metadata"]["namespace"] == ns)
                })
                .map(|mut o| {
                    apply_field_masks(&mut o, get.field_masks);
                    serde_json::to_vec(&o).unwrap_or_default()
                })
                // policy-server's words for a missing object.
                .ok_or_else(|| not_found(&get)),
            Call::List(list) => self.list(&list),
            Call::Image(image) => Err(format!(
                "Cannot fetch manifest and config of {image}: a cluster snapshot holds no image registry"
            )),
        }
    }
}

/// policy-server's words for a missing object.
pub fn not_found(get: &GetCall) -> String {
    format!(
        "Cannot find {}/{} named '{}' inside of namespace '{:?}'",
        get.api_version, get.kind, get.name, get.namespace
    )
}

/// Prunes `object` to `masks` as policy-server does (kube-rs `field_mask::prune_in_place` on
/// the object's data): `apiVersion`, `kind` and `metadata` are kept whole; of the rest, only
/// the dot paths named (a path through a list applies to every item; a path that ends on a
/// value keeps all of it). No masks (`None` or empty) keeps everything.
pub fn apply_field_masks(object: &mut Value, masks: Option<&std::collections::BTreeSet<String>>) {
    let Some(masks) = masks.filter(|m| !m.is_empty()) else {
        return;
    };
    let paths: Vec<Vec<&str>> = masks.iter().map(|m| m.split('.').collect()).collect();
    let paths: Vec<&[&str]> = paths.iter().map(Vec::as_slice).collect();
    if let Some(map) = object.as_object_mut() {
        prune_fields(map, &paths, |key| {
            matches!(key, "apiVersion" | "kind" | "metadata")
        });
    }
}

fn prune(value: &mut Value, paths: &[&[&str]]) {
    if paths.iter().any(|p| p.is_empty()) {
        return;
    }
    match value {
        Value::Array(items) => items.iter_mut().for_each(|i| prune(i, paths)),
        Value::Object(map) => prune_fields(map, paths, |_| false),
        _ => {}
    }
}

/// Keeps of `map` the fields `kept` names whole and those the first step of a path names, pruned
/// to the rest of their paths.
fn prune_fields(
    map: &mut serde_json::Map<String, Value>,
    paths: &[&[&str]],
    kept: impl Fn(&str) -> bool,
) {
    map.retain(|key, value| {
        if kept(key) {
            return true;
        }
        let below: Vec<&[&str]> = paths
            .iter()
            .filter(|p| p.first() == Some(&key.as_str()))
            .map(|p| &p[1..])
            .collect();
        if below.is_empty() {
            return false;
        }
        prune(value, &below);
        true
    });
}

/// (namespace, name) of an object.
fn key_of(o: &Value) -> (String, String) {
    (
        o["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        o["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

/// Same apiVersion, kind, namespace and name.
fn same_object(a: &Value, b: &Value) -> bool {
    a["apiVersion"] == b["apiVersion"]
        && a["kind"] == b["kind"]
        && a["metadata"]["namespace"] == b["metadata"]["namespace"]
        && a["metadata"]["name"] == b["metadata"]["name"]
}

/// `metadata.labels` as a map (non-string values left out).
pub fn labels_of(object: &Value) -> BTreeMap<String, String> {
    object["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Splits at commas outside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

/// A label selector in the API's query form: `a=b`, `a==b`, `a!=b`, `a in (x,y)`,
/// `a notin (x)`, `a`, `!a`, joined by commas.
pub fn parse_label_selector(text: &str) -> Result<LabelSelector, String> {
    let mut selector = LabelSelector::default();
    for part in split_top_level(text) {
        let requirement = |key: &str, operator, values: Vec<String>| Requirement {
            key: key.trim().to_string(),
            operator,
            values,
        };
        let set = |rest: &str| -> Result<Vec<String>, String> {
            let inner = rest
                .trim()
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| format!("label selector {text:?}: expected (values) in {part:?}"))?;
            Ok(inner.split(',').map(|v| v.trim().to_string()).collect())
        };
        if let Some((key, value)) = part.split_once("!=") {
            selector.match_expressions.push(requirement(
                key,
                Operator::NotIn,
                vec![value.trim().to_string()],
            ));
        } else if let Some((key, value)) = part.split_once("==").or_else(|| part.split_once('=')) {
            selector
                .match_labels
                .insert(key.trim().to_string(), value.trim().to_string());
        } else if let Some((key, rest)) = part.split_once(" notin ") {
            selector
                .match_expressions
                .push(requirement(key, Operator::NotIn, set(rest)?));
        } else if let Some((key, rest)) = part.split_once(" in ") {
            selector
                .match_expressions
                .push(requirement(key, Operator::In, set(rest)?));
        } else if let Some(key) = part.strip_prefix('!') {
            selector
                .match_expressions
                .push(requirement(key, Operator::DoesNotExist, vec![]));
        } else if part
            .chars()
            .all(|c| !c.is_whitespace() && c != '(' && c != ')')
        {
            selector
                .match_expressions
                .push(requirement(part, Operator::Exists, vec![]));
        } else {
            return Err(format!("label selector {text:?}: cannot read {part:?}"));
        }
    }
    Ok(selector)
}

/// One field selector term: `path=value`, `path==value` or `path!=value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    path: Vec<String>,
    value: String,
    equal: bool,
}

impl FieldRequirement {
    /// An unset field reads as the empty string, as the API server compares it.
    fn matches(&self, object: &Value) -> bool {
        let mut at = object;
        for segment in &self.path {
            at = &at[segment.as_str()];
        }
        let actual = match at {
            Value::Null => String::new(),
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        (actual == self.value) == self.equal
    }
}

/// A field selector: terms joined by commas.
pub fn parse_field_selector(text: &str) -> Result<Vec<FieldRequirement>, String> {
    split_top_level(text)
        .into_iter()
        .map(|part| {
            let (path, value, equal) = if let Some((p, v)) = part.split_once("!=") {
                (p, v, false)
            } else if let Some((p, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (p, v, true)
            } else {
                return Err(format!(
                    "field selector {text:?}: expected field=value or field!=value, got {part:?}"
                ));
            };
            Ok(FieldRequirement {
                path: path.trim().split('.').map(str::to_string).collect(),
                value: value.trim().to_string(),
                equal,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> Snapshot {
        let objects = [
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a", "labels": {"pool": "x"}}, "spec": {"unschedulable": true}}),
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "b", "labels": {"pool": "y"}}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml", "labels": {"pool": "x"}}, "spec": {"nodeName": "a"}, "status": {"phase": "Running"}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "q", "namespace": "ops"}, "status": {"phase": "Succeeded"}}),
        ];
        Snapshot::new(objects.into_iter().map(|object| Manifest {
            file: "s".into(),
            line: 1,
            object,
        }))
    }

    fn names(payload: Vec<u8>) -> Vec<String> {
        let list: Value = serde_json::from_slice(&payload).unwrap();
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    }

    fn list_all(label: Option<&str>, field: Option<&str>) -> CallbackRequest {
        CallbackRequest::KubernetesListResourceAll {
            api_version: "v1".into(),
            kind: "Pod".into(),
            label_selector: label.map(str::to_string),
            field_selector: field.map(str::to_string),
            field_masks: None,
        }
    }

    #[test]
    fn lists_with_selectors() {
        let s = snapshot();
        assert_eq!(names(s.answer(&list_all(None, None)).unwrap()), ["p", "q"]);
        assert_eq!(
            names(s.answer(&list_all(Some("pool=x"), None)).unwrap()),
            ["p"]
        );
        assert_eq!(
            names(s.answer(&list_all(Some("!pool"), None)).unwrap()),
            ["q"]
        );
        assert_eq!(
            names(
                s.answer(&list_all(None, Some("status.phase!=Succeeded")))
                    .unwrap()
            ),
            ["p"]
        );
        assert_eq!(
            names(s.answer(&list_all(None, Some("spec.nodeName="))).unwrap()),
            ["q"]
        );
        let by_ns = CallbackRequest::KubernetesListResourceNamespace {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: "ops".into(),
            label_selector: None,
            field_selector: None,
            field_masks: None,
        };
        assert_eq!(names(s.answer(&by_ns).unwrap()), ["q"]);
        let list: Value =
            serde_json::from_slice(&s.answer(&list_all(None, None)).unwrap()).unwrap();
        assert_eq!(list["kind"], "PodList");
    }

    #[test]
    fn gets_and_misses_with_policy_servers_words() {
        let s = snapshot();
        let get = |name: &str, namespace: Option<&str>| CallbackRequest::KubernetesGetResource {
            api_version: "v1".into(),
            kind: if namespace.is_some() { "Pod" } else { "Node" }.into(),
            name: name.into(),
            namespace: namespace.map(str::to_string),
            disable_cache: false,
            field_masks: None,
        };
        let node: Value = serde_json::from_slice(&s.answer(&get("a", None)).unwrap()).unwrap();
        assert_eq!(node["spec"]["unschedulable"], true);
        assert_eq!(
            s.answer(&get("p", Some("ops"))).unwrap_err(),
            "Cannot find v1/Pod named 'p' inside of namespace 'Some(\"ops\")'"
        );
        assert_eq!(
            s.answer(&get("z", None)).unwrap_err(),
            "Cannot find v1/Node named 'z' inside of namespace 'None'"
        );
    }

    #[test]
    fn field_masks_prune_all_but_metadata() {
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "b"}},
            "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "i", "resources": {"limits": {"x": "1"}}}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1"},
        });
        let masks = std::collections::BTreeSet::from([
            "spec.containers.resources".to_string(),
            "status.phase".to_string(),
        ]);
        apply_field_masks(&mut pod, Some(&masks));
        assert_eq!(
            pod,
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "labels": {"a": "b"}},
                "spec": {"containers": [{"resources": {"limits": {"x": "1"}}}]},
                "status": {"phase": "Running"},
            })
        );
        let mut whole = json!({"spec": {"a": 1}});
        apply_field_masks(&mut whole, None);
        assert_eq!(whole, json!({"spec": {"a": 1}}));
    }

    #[test]
    fn label_selector_forms() {
        let sel = parse_label_selector("a=1,b!=2,c in (x, y),d notin (z),e,!f").unwrap();
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(sel.matches(&labels(&[("a", "1"), ("c", "y"), ("e", "")])));
        assert!(!sel.matches(&labels(&[("a", "1"), ("b", "2"), ("c", "y"), ("e", "")])));
        assert!(!sel.matches(&labels(&[("a", "1"), ("c", "y"), ("e", ""), ("f", "")])));
        assert!(!sel.matches(&labels(&[("a", "1"), ("c", "w"), ("e", "")])));
        assert!(parse_label_selector("a in x").is_err());
        assert!(parse_field_selector("spec.nodeName").is_err());
    }
}
