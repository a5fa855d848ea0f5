//! No label or annotation a policy's README does not name, added to a workload the policy
//! denies, turns the denial into an acceptance. The denied workloads are every
//! `=> denied` line of each policy's `examples.txt` (request, settings, replay session);
//! the keys are generated (with and without a prefix) and any key the README's text
//! contains is left out; the labels and annotations go on the object and on every pod
//! template. Host calls are answered from the case's kwctl replay session, matched by what
//! they ask for (a call the session lacks fails, as it would in kwctl). Run natively.
#![cfg(not(target_arch = "wasm32"))]

use gpu_rules::admission::{AdmissionRequest, Verdict};
use gpu_rules::cluster::{Cluster, ClusterRequest};
use gpu_rules::policies::{Autoscaler, CapacityGate, Labels, Routing, VramFit};
use gpu_rules::policy::Policy;
use gpu_rules::workload::Workload;
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

fn policies_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies")
}

/// One recorded host call: what it asked (the request's fields) and the answer.
struct Exchange {
    asked: Map<String, Value>,
    answer: Result<String, String>,
}

/// A kwctl replay session answered by content, not order.
struct Session(Vec<Exchange>);

impl Session {
    fn read(path: &Path) -> Session {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let items: Vec<yaml_serde::Value> = yaml_serde::from_str(&text).unwrap();
        let exchanges = items
            .into_iter()
            .map(|item| {
                let request = item["request"].as_str().unwrap_or_default();
                // The first line is the request's tag (`!KubernetesGetResource`).
                let body = request.split_once('\n').map_or("", |(_, rest)| rest);
                let asked: Value = yaml_serde::from_str(body).unwrap_or(Value::Null);
                let response = &item["response"];
                let answer = match response["type"].as_str() {
                    Some("Success") => {
                        Ok(response["payload"].as_str().unwrap_or_default().to_string())
                    }
                    _ => Err(response["message"].as_str().unwrap_or("error").to_string()),
                };
                Exchange {
                    asked: asked.as_object().cloned().unwrap_or_default(),
                    answer,
                }
            })
            .collect();
        Session(exchanges)
    }
}

impl Cluster for Session {
    fn call(&self, request: &ClusterRequest) -> Result<Vec<u8>, String> {
        let asked = match request {
            ClusterRequest::Get(r) => serde_json::to_value(r),
            ClusterRequest::ListAll(r) => serde_json::to_value(r),
            ClusterRequest::ListInNamespace(r) => serde_json::to_value(r),
        }
        .unwrap();
        let same = |e: &Exchange| {
            [
                "api_version",
                "kind",
                "name",
                "namespace",
                "label_selector",
                "field_selector",
            ]
            .iter()
            .all(|k| {
                e.asked.get(*k).unwrap_or(&Value::Null) == asked.get(*k).unwrap_or(&Value::Null)
            })
        };
        match self.0.iter().find(|e| same(e)) {
            Some(e) => e.answer.clone().map(String::into_bytes),
            None => Err(format!("the session has no answer for {asked}")),
        }
    }
}

/// One denied example: the request, the settings and the session of a line of
/// `examples.txt`.
struct Case {
    line: String,
    request: AdmissionRequest,
    settings: Value,
    session: Session,
}

fn read_settings(path: Option<&Path>) -> Value {
    let Some(path) = path else {
        return json!({});
    };
    let text = std::fs::read_to_string(path).unwrap();
    let yaml: yaml_serde::Value = yaml_serde::from_str(&text).unwrap();
    serde_json::to_value(yaml).unwrap()
}

/// The `=> denied` lines of `policy`'s examples.txt, and its README.
fn denied_examples(policy: &str) -> (Vec<Case>, String) {
    let dir = policies_dir().join(policy);
    let examples = std::fs::read_to_string(dir.join("examples.txt")).unwrap();
    let mut cases = Vec::new();
    for line in examples.lines().filter(|l| !l.starts_with('#')) {
        let Some((files, "denied")) = line.split_once(" => ").map(|(f, v)| (f, v.trim())) else {
            continue;
        };
        let files: Vec<&str> = files.split_whitespace().collect();
        let request: AdmissionRequest =
            serde_json::from_str(&std::fs::read_to_string(dir.join(files[0])).unwrap()).unwrap();
        let settings = files.get(1).filter(|s| **s != "-").map(|s| dir.join(s));
        let session = match files.get(2) {
            Some(s) => Session::read(&dir.join(s)),
            None => Session(Vec::new()),
        };
        cases.push(Case {
            line: line.to_string(),
            request,
            settings: read_settings(settings.as_deref()),
            session,
        });
    }
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(
        cases.len() >= 3,
        "{policy}: only {} denied examples",
        cases.len()
    );
    (cases, readme)
}

/// Every preset custom kind (KServe, LeaderWorkerSet, Ray, PyTorchJob): where the pod
/// templates of the examples' custom resources are.
fn presets() -> &'static [gpu_rules::workload::CustomKind] {
    static PRESETS: OnceLock<Vec<gpu_rules::workload::CustomKind>> = OnceLock::new();
    PRESETS.get_or_init(gpu_rules::workload::presets::all)
}

/// `request` with `labels` and `annotations` added to the object's metadata and to every
/// pod template's.
fn with_keys(
    request: &AdmissionRequest,
    labels: &[(String, String)],
    annotations: &[(String, String)],
) -> AdmissionRequest {
    let mut object = request.object.clone();
    let mut pointers = vec!["/metadata".to_string()];
    if let Ok(w) = Workload::from_object(&object, presets()) {
        pointers.extend(w.templates.iter().map(|t| t.metadata_pointer.clone()));
    }
    for pointer in pointers {
        let Some(meta) = object.pointer_mut(&pointer).and_then(Value::as_object_mut) else {
            continue;
        };
        for (field, pairs) in [("labels", labels), ("annotations", annotations)] {
            let map = meta.entry(field).or_insert_with(|| json!({}));
            if !map.is_object() {
                *map = json!({});
            }
            for (k, v) in pairs {
                map[k.as_str()] = json!(v);
            }
        }
    }
    AdmissionRequest {
        object,
        ..request.clone()
    }
}

/// Keys with and without a DNS prefix, the shapes of Kubernetes label keys.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9-]{3,12}",
        "[a-z]{2,8}\\.(io|com|dev|sh)/[a-z][a-z0-9-]{2,12}",
    ]
}

fn pairs() -> impl Strategy<Value = Vec<(String, String)>> {
    prop::collection::vec((key(), "[a-z0-9]{0,8}"), 0..4)
}

/// Checks policy `P`: every denied example stays denied with the extra keys.
fn stays_denied<P: Policy>(
    labels: &[(String, String)],
    annotations: &[(String, String)],
) -> Result<(), TestCaseError>
where
    P::Settings: serde::de::DeserializeOwned,
{
    let policy = P::NAME;
    let (cases, readme) = cases(policy);
    let unnamed = |pairs: &[(String, String)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .filter(|(k, _)| !readme.contains(k.as_str()))
            .cloned()
            .collect()
    };
    let (labels, annotations) = (unnamed(labels), unnamed(annotations));
    for case in cases {
        let settings: P::Settings = serde_json::from_value(case.settings.clone())
            .unwrap_or_else(|e| panic!("{policy}: {}: {e}", case.line));
        let settings =
            P::check(Box::new(settings)).unwrap_or_else(|e| panic!("{policy}: {}: {e}", case.line));
        let base: Verdict = P::evaluate(&case.request, &settings, &case.session);
        prop_assert!(
            !base.allowed,
            "{policy}: {} is no longer denied: {base:?}",
            case.line
        );
        let request = with_keys(&case.request, &labels, &annotations);
        let v = P::evaluate(&request, &settings, &case.session);
        prop_assert!(
            !v.allowed,
            "{policy}: {} accepted with labels {labels:?} and annotations {annotations:?}: {v:?}",
            case.line
        );
    }
    Ok(())
}

/// The denied examples of `policy` and its README, read once.
fn cases(policy: &'static str) -> &'static (Vec<Case>, String) {
    static CASES: Mutex<BTreeMap<&str, &'static (Vec<Case>, String)>> = Mutex::new(BTreeMap::new());
    let mut read = CASES.lock().unwrap_or_else(|e| e.into_inner());
    read.entry(policy)
        .or_insert_with(|| Box::leak(Box::new(denied_examples(policy))))
}

/// One property test per policy: its name, and the policy it checks.
macro_rules! denials_stay {
    ($($test:ident: $policy:ty,)*) => {
        proptest! {
            #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
            $(
                #[test]
                fn $test(labels in pairs(), annotations in pairs()) {
                    stays_denied::<$policy>(&labels, &annotations)?;
                }
            )*
        }
    };
}

denials_stay! {
    unnamed_keys_never_turn_a_labels_denial_into_an_acceptance: Labels,
    unnamed_keys_never_turn_a_routing_denial_into_an_acceptance: Routing,
    unnamed_keys_never_turn_a_vram_fit_denial_into_an_acceptance: VramFit,
    unnamed_keys_never_turn_a_capacity_denial_into_an_acceptance: CapacityGate,
    unnamed_keys_never_turn_an_autoscaler_denial_into_an_acceptance: Autoscaler,
}

/// The keys the policies read are what makes the property worth checking: the README
/// names them, so they are left out; a key it names does change verdicts (the queue label
/// on a Job Kueue unsuspends, its LocalQueue existing).
#[test]
fn a_key_the_readme_names_can_change_the_verdict() {
    let (cases, readme) = cases(CapacityGate::NAME);
    assert!(readme.contains("kueue.x-k8s.io/queue-name"));
    let case = cases
        .iter()
        .find(|c| c.line.contains("job_a100_unsuspended.json"))
        .expect("the unsuspended Job example");
    let settings = CapacityGate::check(serde_json::from_value(case.settings.clone()).unwrap())
        .expect("the case's settings check");
    let mut request = with_keys(
        &case.request,
        &[("kueue.x-k8s.io/queue-name".into(), "team-a".into())],
        &[],
    );
    request.old_object["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = json!("team-a");
    let found = Session(vec![Exchange {
        asked:
            json!({"api_version": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "name": "team-a",
                      "namespace": case.request.namespace})
            .as_object()
            .cloned()
            .unwrap(),
        answer: Ok(r#"{"metadata":{"name":"team-a"}}"#.into()),
    }]);
    assert!(CapacityGate::evaluate(&request, &settings, &found).allowed);
}
