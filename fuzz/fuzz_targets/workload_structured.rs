#![no_main]
//! Structure-aware: objects of every known kind whose bodies are arbitrary JSON built
//! from the keys the rules look at, with wrong types, deep nesting and long arrays.
use arbitrary::Arbitrary;
use gpu_rules::gpu::{GpuResources, workload_gpus};
use gpu_rules::workload::{Workload, presets};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value, json};

const KINDS: &[(&str, &str)] = &[
    ("v1", "Pod"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("batch/v1", "Job"),
    ("batch/v1", "CronJob"),
    ("serving.kserve.io/v1beta1", "InferenceService"),
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
    ("ray.io/v1", "RayCluster"),
    ("kubeflow.org/v1", "PyTorchJob"),
];

const KEYS: &[&str] = &[
    "spec", "template", "metadata", "labels", "containers", "initContainers",
    "ephemeralContainers", "resources", "limits", "requests", "nvidia.com/gpu",
    "nvidia.com/mig-3g.40gb", "amd.com/gpu", "replicas", "parallelism", "jobTemplate",
    "predictor", "workerSpec", "pipelineParallelSize", "minReplicas", "leaderWorkerTemplate",
    "leaderTemplate", "workerTemplate", "size", "headGroupSpec", "workerGroupSpecs",
    "pytorchReplicaSpecs", "Worker", "restartPolicy", "Always", "name", "nodeSelector",
    "tolerations", "affinity",
];

#[derive(Arbitrary, Debug)]
enum Node {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Quantity(u8, u16),
    Text(String),
    Array(Vec<Node>),
    Object(Vec<(u8, Node)>),
    Repeat(u16, Box<Node>),
}

fn to_json(node: &Node, depth: u32) -> Value {
    if depth > 24 {
        return Value::Null;
    }
    match node {
        Node::Null => Value::Null,
        Node::Bool(b) => json!(b),
        Node::Int(i) => json!(i),
        Node::Float(f) => serde_json::Number::from_f64(*f).map(Value::Number).unwrap_or(Value::Null),
        Node::Quantity(suffix, n) => {
            let s = ["", "m", "k", "Gi", "e3", ".5", "Ei", "e-9"][usize::from(*suffix) % 8];
            json!(format!("{n}{s}"))
        }
        Node::Text(s) => json!(s),
        Node::Array(items) => Value::Array(items.iter().map(|n| to_json(n, depth + 1)).collect()),
        Node::Object(fields) => {
            let mut map = Map::new();
            for (k, v) in fields {
                map.insert(KEYS[usize::from(*k) % KEYS.len()].to_string(), to_json(v, depth + 1));
            }
            Value::Object(map)
        }
        Node::Repeat(n, item) => {
            let item = to_json(item, depth + 1);
            Value::Array(vec![item; usize::from(*n) % 2048])
        }
    }
}

fuzz_target!(|input: (u8, Node, Node)| {
    let (kind, spec, metadata) = input;
    let (api_version, kind) = KINDS[usize::from(kind) % KINDS.len()];
    let object = json!({"apiVersion": api_version, "kind": kind,
                        "metadata": to_json(&metadata, 0), "spec": to_json(&spec, 0)});
    if let Ok(w) = Workload::from_object(&object, &presets::all()) {
        let _ = workload_gpus(&w, &GpuResources::default());
    }
});
