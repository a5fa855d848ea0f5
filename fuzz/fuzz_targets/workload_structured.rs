#![no_main]
//! Structure-aware: objects of every known kind whose bodies are arbitrary JSON built
//! from the keys the rules look at, with wrong types, deep nesting and long arrays.
//! `FUZZ_DUMP=<file>` writes the object (the fixture the regression test reads).
use gpu_admission_fuzz::tree::{Builder, Node, object};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

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

fuzz_target!(|input: (u8, Node, Node)| {
    let (kind, spec, metadata) = input;
    let (api_version, kind) = KINDS[usize::from(kind) % KINDS.len()];
    let mut b = Builder::default();
    let object = object([
        ("apiVersion", json!(api_version)),
        ("kind", json!(kind)),
        ("metadata", b.json(&metadata)),
        ("spec", b.json(&spec)),
    ]);
    gpu_admission_fuzz::dump(&object);
    let bytes = serde_json::to_vec(&object).unwrap_or_default();
    if let Err(e) = gpu_admission_fuzz::replay::workload(&bytes) {
        panic!("{e}");
    }
});
