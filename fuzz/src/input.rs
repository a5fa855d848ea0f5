//! The structure-aware inputs of the policy targets, turned into a [`Fixture`]: an admission
//! payload `{"request": ..., "settings": ...}` and the host's answers.
//!
//! A request is a seed request (any policy's `test_data`) or one built from scratch, then
//! edited ([`crate::tree::Edit`]); its settings are one of the policy's settings files or a
//! tree, also edited. Host answers are recorded session answers, generated Node and Pod
//! lists, ConfigMaps holding registry YAML, arbitrary trees, raw text or errors.

use crate::replay::{Answer, Fixture, Policy};
use crate::seeds::{pick, seeds};
use crate::tree::{Builder, Edit, Node, Qty, apply_all, object, word};
use arbitrary::Arbitrary;
use serde_json::{Map, Value, json};

/// Input of `<policy>_request`: mostly changes to the request.
#[derive(Arbitrary, Debug)]
pub struct RequestInput {
    pub request: RequestBase,
    pub operation: Option<Operation>,
    pub old_object: OldObject,
    pub object_edits: Vec<Edit>,
    pub settings: SettingsBase,
    /// Edits from the payload's root: the envelope's fields, with wrong types.
    pub payload_edits: Vec<Edit>,
    pub answers: Vec<AnswerInput>,
}

/// Input of `<policy>_settings`: an unchanged seed request under changed settings.
#[derive(Arbitrary, Debug)]
pub struct SettingsInput {
    pub request: u8,
    pub operation: Option<Operation>,
    pub settings: SettingsBase,
    pub settings_edits: Vec<Edit>,
    pub answers: Vec<AnswerInput>,
}

#[derive(Arbitrary, Debug)]
pub enum RequestBase {
    Seed(u8),
    Built {
        kind: u8,
        namespace: u16,
        sub_resource: Option<u16>,
        metadata: Node,
        spec: Node,
    },
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
    Word(u16),
}

/// `oldObject` of the request.
#[derive(Arbitrary, Debug)]
pub enum OldObject {
    Keep,
    Null,
    /// The (edited) object with more edits: an UPDATE that changes a little.
    Edited(Vec<Edit>),
    Tree(Node),
}

#[derive(Arbitrary, Debug)]
pub enum SettingsBase {
    Seed(u8),
    Tree(Node),
}

/// One host answer.
#[derive(Arbitrary, Debug)]
pub enum AnswerInput {
    Seed(u8),
    SeedEdited(u8, Vec<Edit>),
    Nodes(Vec<NodeInput>),
    Pods(Vec<PodInput>),
    /// A list of `n` copies of one pod: large pools.
    ManyPods(u16, PodInput),
    Registry(RegistryText),
    Tree(Node),
    Text(String),
    Bytes(Vec<u8>),
    Error(u16),
}

#[derive(Arbitrary, Debug)]
pub struct NodeInput {
    pool: u16,
    product: u16,
    resource: u16,
    gpus: Qty,
    unschedulable: bool,
    taint: Option<u16>,
    extra: Option<Node>,
}

#[derive(Arbitrary, Debug)]
pub struct PodInput {
    pool: u16,
    containers: Vec<(u16, Qty, Option<Qty>)>,
    init: Option<(u16, Qty, bool)>,
    pod_level: Option<Qty>,
    extra: Option<Node>,
}

/// The text of a registry ConfigMap's `models.yaml`.
#[derive(Arbitrary, Debug)]
pub enum RegistryText {
    /// A tree written as block YAML, `indent` spaces a level (0 breaks it).
    Yaml { tree: Node, indent: u8, key: bool },
    /// A flow collection nested `depth` deep (`[[[...]]]`, `{a: {a: ...}}`).
    Flow { depth: u16, mapping: bool },
    /// Arbitrary lines.
    Lines(Vec<String>),
}

const KINDS: &[(&str, &str, &str)] = &[
    ("v1", "Pod", "pods"),
    ("apps/v1", "Deployment", "deployments"),
    ("apps/v1", "StatefulSet", "statefulsets"),
    ("apps/v1", "DaemonSet", "daemonsets"),
    ("apps/v1", "ReplicaSet", "replicasets"),
    ("batch/v1", "Job", "jobs"),
    ("batch/v1", "CronJob", "cronjobs"),
    (
        "serving.kserve.io/v1beta1",
        "InferenceService",
        "inferenceservices",
    ),
    (
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
        "leaderworkersets",
    ),
    ("ray.io/v1", "RayCluster", "rayclusters"),
    ("kubeflow.org/v1", "PyTorchJob", "pytorchjobs"),
    (
        "autoscaling/v2",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
    ),
    ("keda.sh/v1alpha1", "ScaledObject", "scaledobjects"),
    ("keda.sh/v1alpha1", "ScaledJob", "scaledjobs"),
];

impl Operation {
    fn text(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
            Operation::Word(w) => word(w),
        }
    }
}

impl RequestInput {
    pub fn fixture(&self, policy: Policy) -> Fixture {
        let mut b = Builder::default();
        let mut request = match &self.request {
            RequestBase::Seed(i) => pick(&seeds().requests, *i).clone(),
            RequestBase::Built {
                kind,
                namespace,
                sub_resource,
                metadata,
                spec,
            } => built_request(&mut b, *kind, *namespace, *sub_resource, metadata, spec),
        };
        if let Some(op) = self.operation {
            request["operation"] = json!(op.text());
        }
        if let Some(object) = request.get_mut("object") {
            apply_all(object, &self.object_edits, &mut b);
        }
        let old = match &self.old_object {
            OldObject::Keep => None,
            OldObject::Null => Some(Value::Null),
            OldObject::Edited(edits) => {
                let mut old = request["object"].clone();
                apply_all(&mut old, edits, &mut b);
                Some(old)
            }
            OldObject::Tree(node) => Some(b.json(node)),
        };
        if let (Some(old), Some(map)) = (old, request.as_object_mut()) {
            map.insert("oldObject".into(), old);
        }
        let settings = self.settings.value(policy, &mut b);
        let mut payload = object([("request", request), ("settings", settings)]);
        apply_all(&mut payload, &self.payload_edits, &mut b);
        Fixture {
            payload,
            answers: answers(&self.answers, &mut b),
        }
    }
}

impl SettingsInput {
    pub fn fixture(&self, policy: Policy) -> Fixture {
        let mut b = Builder::default();
        let mut request = pick(&seeds().requests, self.request).clone();
        if let Some(op) = self.operation {
            request["operation"] = json!(op.text());
        }
        let mut settings = self.settings.value(policy, &mut b);
        apply_all(&mut settings, &self.settings_edits, &mut b);
        Fixture {
            payload: object([("request", request), ("settings", settings)]),
            answers: answers(&self.answers, &mut b),
        }
    }
}

impl SettingsBase {
    fn value(&self, policy: Policy, b: &mut Builder) -> Value {
        match self {
            SettingsBase::Seed(i) => {
                let index = Policy::ALL.iter().position(|p| *p == policy).unwrap_or(0);
                pick(&seeds().settings[index], *i).clone()
            }
            SettingsBase::Tree(node) => b.json(node),
        }
    }
}

fn built_request(
    b: &mut Builder,
    kind: u8,
    namespace: u16,
    sub_resource: Option<u16>,
    metadata: &Node,
    spec: &Node,
) -> Value {
    let (api_version, kind, resource) = *pick(KINDS, kind);
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let object = object([
        ("apiVersion", json!(api_version)),
        ("kind", json!(kind)),
        ("metadata", b.json(metadata)),
        ("spec", b.json(spec)),
    ]);
    let name = object
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or(json!("fuzz"));
    let mut request = json!({
        "uid": "fuzz",
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "subResource": sub_resource.map(word),
        "name": name,
        "namespace": word(namespace),
        "operation": "CREATE",
        "userInfo": {"username": "fuzz", "groups": ["system:authenticated"]},
        "oldObject": null,
        "dryRun": false,
    });
    if let Some(map) = request.as_object_mut() {
        map.insert("object".into(), object);
    }
    request
}

fn answers(inputs: &[AnswerInput], b: &mut Builder) -> Vec<Answer> {
    inputs.iter().map(|a| a.answer(b)).collect()
}

fn text(v: &Value) -> Answer {
    Answer::Ok(v.to_string().into_bytes())
}

impl AnswerInput {
    fn answer(&self, b: &mut Builder) -> Answer {
        let recorded = || {
            let all = &seeds().answers;
            (!all.is_empty()).then_some(all)
        };
        match self {
            AnswerInput::Seed(i) => match recorded() {
                Some(all) => pick(all, *i).clone(),
                None => Answer::Err("no recorded answers".into()),
            },
            AnswerInput::SeedEdited(i, edits) => {
                let Some(Answer::Ok(bytes)) = recorded().map(|all| pick(all, *i)) else {
                    return Answer::Err("no recorded answer".into());
                };
                match serde_json::from_slice::<Value>(bytes) {
                    Ok(mut v) => {
                        apply_all(&mut v, edits, b);
                        text(&v)
                    }
                    Err(_) => Answer::Ok(bytes.clone()),
                }
            }
            AnswerInput::Nodes(nodes) => {
                text(&list("NodeList", nodes.iter().map(|n| n.json(b)).collect()))
            }
            AnswerInput::Pods(pods) => {
                text(&list("PodList", pods.iter().map(|p| p.json(b)).collect()))
            }
            AnswerInput::ManyPods(n, pod) => {
                let pod = pod.json(b);
                let size = crate::tree::count(&pod).max(1);
                let n = (usize::from(*n) % 20_000).min(b.left / size);
                b.left -= n * size;
                text(&list("PodList", vec![pod; n]))
            }
            AnswerInput::Registry(registry) => {
                let (key, yaml) = registry.text(b);
                text(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "gpu-models", "namespace": "gpu-system"},
                             "data": {key: yaml}}))
            }
            AnswerInput::Tree(node) => text(&b.json(node)),
            AnswerInput::Text(t) => Answer::Ok(t.as_bytes().to_vec()),
            AnswerInput::Bytes(bytes) => Answer::Ok(bytes.clone()),
            AnswerInput::Error(w) => Answer::Err(word(*w).to_string()),
        }
    }
}

fn list(kind: &str, items: Vec<Value>) -> Value {
    object([
        ("apiVersion", json!("v1")),
        ("kind", json!(kind)),
        ("metadata", json!({"resourceVersion": "1"})),
        ("items", Value::Array(items)),
    ])
}

fn merge(v: &mut Value, extra: &Option<Node>, b: &mut Builder) {
    if let (Some(extra), Some(map)) = (extra, v.as_object_mut())
        && let Value::Object(fields) = b.json(extra)
    {
        map.extend(fields);
    }
}

const POOLS: &[&str] = &[
    "a100",
    "h100",
    "l4-shared",
    "a100-mig",
    "batch",
    "interactive",
    "",
];

impl NodeInput {
    fn json(&self, b: &mut Builder) -> Value {
        let mut node = json!({
            "metadata": {"name": format!("node-{}", self.pool), "labels": {
                "gpu-admission/pool": pick(POOLS, self.pool),
                "nvidia.com/gpu.product": word(self.product),
            }},
            "status": {"allocatable": {word(self.resource): self.gpus.to_json(), "cpu": "64"}},
            "spec": {"unschedulable": self.unschedulable},
        });
        if let Some(t) = self.taint {
            node["spec"]["taints"] = json!([{"key": word(t), "effect": "NoSchedule"}]);
        }
        merge(&mut node, &self.extra, b);
        node
    }
}

impl PodInput {
    fn json(&self, b: &mut Builder) -> Value {
        let container = |(res, limit, request): &(u16, Qty, Option<Qty>)| {
            let mut resources = json!({"limits": {word(*res): limit.to_json()}});
            if let Some(r) = request {
                resources["requests"] = json!({word(*res): r.to_json()});
            }
            json!({"name": "c", "resources": resources})
        };
        let mut spec =
            json!({"containers": self.containers.iter().map(container).collect::<Vec<_>>()});
        if let Some((res, q, always)) = &self.init {
            let mut c = container(&(*res, q.clone(), None));
            if *always {
                c["restartPolicy"] = json!("Always");
            }
            spec["initContainers"] = json!([c]);
        }
        if let Some(q) = &self.pod_level {
            spec["resources"] = json!({"limits": {"nvidia.com/gpu": q.to_json()}});
        }
        let mut pod = json!({
            "metadata": {"name": "p", "namespace": "ml",
                         "labels": {"gpu-admission/pool": pick(POOLS, self.pool)}},
            "spec": spec,
        });
        merge(&mut pod, &self.extra, b);
        pod
    }
}

impl RegistryText {
    /// `(data key, text)`.
    fn text(&self, b: &mut Builder) -> (&'static str, String) {
        match self {
            RegistryText::Yaml { tree, indent, key } => {
                let mut out = String::new();
                yaml(&b.json(tree), usize::from(*indent % 5), 0, &mut out);
                (if *key { "models.yaml" } else { "models.json" }, out)
            }
            RegistryText::Flow { depth, mapping } => {
                let depth = usize::from(*depth);
                let text = if *mapping {
                    format!("m: {}1{}", "{a: ".repeat(depth), "}".repeat(depth))
                } else {
                    format!("m: {}1{}", "[".repeat(depth), "]".repeat(depth))
                };
                ("models.yaml", text)
            }
            RegistryText::Lines(lines) => ("models.yaml", lines.join("\n")),
        }
    }
}

/// Writes `v` as block YAML (scalars as JSON, which YAML reads too).
fn yaml(v: &Value, indent: usize, level: usize, out: &mut String) {
    let pad = " ".repeat(indent * level);
    match v {
        Value::Object(map) => write_map(map, indent, level, &pad, out),
        Value::Array(items) => {
            for item in items {
                out.push_str(&format!("{pad}- {item}\n"));
            }
        }
        other => out.push_str(&format!("{pad}{other}\n")),
    }
}

fn write_map(map: &Map<String, Value>, indent: usize, level: usize, pad: &str, out: &mut String) {
    for (k, v) in map {
        match v {
            Value::Object(_) | Value::Array(_) => {
                out.push_str(&format!("{pad}{k}:\n"));
                yaml(v, indent, level + 1, out);
            }
            scalar => out.push_str(&format!("{pad}{k}: {scalar}\n")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::run_fixture;
    use arbitrary::Unstructured;

    #[test]
    fn seeds_load_and_the_simplest_inputs_pass() {
        assert!(seeds().requests.len() > 50, "{}", seeds().requests.len());
        assert!(!seeds().answers.is_empty());
        for policy in Policy::ALL {
            let request = RequestInput::arbitrary(&mut Unstructured::new(&[])).unwrap();
            let fixture = request.fixture(policy);
            assert!(
                fixture.payload["request"]["object"].is_object(),
                "{fixture:?}"
            );
            assert_eq!(run_fixture(policy, &fixture), Ok(()));
            let settings = SettingsInput::arbitrary(&mut Unstructured::new(&[7; 64])).unwrap();
            assert_eq!(run_fixture(policy, &settings.fixture(policy)), Ok(()));
        }
    }
}
