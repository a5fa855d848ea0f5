//! Benchmark: one capacity decision of the built wasm module over pools of 100, 1,000,
//! 10,000 and 50,000 GPU pods, with the Pod list as Kubewarden's field masks deliver it
//! (metadata + the masked `spec.*.resources`) versus full Pod objects (what would cross
//! the host boundary without masks). Same module, same request, same numbers: only the
//! bytes crossing the boundary differ.
//!
//! The module runs in wapc + wasmtime (the runtime pieces of Kubewarden's
//! policy-evaluator), one instance reused across calls like policy-server's workers; the
//! host answers `list_resources_all` from memory. A second table parses the same lists
//! natively, typed and streaming (`gpu_rules::capacity::state::parse_pods`) versus a
//! naive `serde_json::Value` parse, to separate parsing from the wasm boundary.
//!
//! Figures are the on-CPU time of the measuring thread (median per decision), with the
//! wall-clock median in brackets: on a shared build machine the wall clock mostly
//! measures waiting for a core.
//!
//! Run: `cargo build --release --target wasm32-wasip1 -p gpu-capacity-gate-policy`, then
//! `cargo bench -p gpu-capacity-gate-policy --bench decision` (the first build compiles
//! wasmtime optimised, ~20 minutes on 2 cores; `--profile dev` builds faster but inflates
//! the wasm figures several times, because the guest's `memory.copy` / `memory.grow` go
//! through wasmtime's then unoptimised runtime). `GPU_ADMISSION_WASM_DIR` overrides where
//! the module is looked up, e.g. to compare builds of the module. Prints figures; asserts
//! only that every decision counted every pod.

use gpu_rules::capacity::state::parse_pods;
use gpu_rules::gpu::GpuResources;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wapc::WapcHost;
use wasmtime_provider::WasmtimeEngineProviderBuilder;

const SIZES: &[usize] = &[100, 1_000, 10_000, 50_000];
/// Time spent measuring one configuration (at least 5, at most 200 iterations).
const BUDGET: Duration = Duration::from_secs(2);

fn module_path() -> PathBuf {
    let dir = std::env::var_os("GPU_ADMISSION_WASM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/wasm32-wasip1/release")
        });
    dir.join("gpu_capacity_gate_policy.wasm")
}

/// The metadata Kubewarden passes through whatever the masks say.
fn metadata(i: usize) -> Value {
    json!({
        "name": format!("llm-a100-7d9f8c6b5-{i:06}"),
        "generateName": "llm-a100-7d9f8c6b5-",
        "namespace": format!("team-{}", i % 17),
        "uid": format!("3f1e2d3c-4b5a-6978-8a9b-{i:012}"),
        "resourceVersion": format!("{}", 9_000_000 + i),
        "creationTimestamp": "2026-08-17T09:12:44Z",
        "labels": {"app": "llm-a100", "gpu-admission/pool": "a100", "pod-template-hash": "7d9f8c6b5",
                   "workload-type": "inference", "team": format!("team-{}", i % 17)},
        "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-08-17T09:00:00Z"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "llm-a100-7d9f8c6b5",
                             "uid": "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0", "controller": true, "blockOwnerDeletion": true}]
    })
}

fn resources() -> Value {
    json!({"limits": {"nvidia.com/gpu": "1", "cpu": "8", "memory": "64Gi"},
           "requests": {"nvidia.com/gpu": "1", "cpu": "8", "memory": "64Gi"}})
}

/// A Pod as `list_resources_all` returns it under the policy's field masks.
fn masked_pod(i: usize) -> Value {
    json!({"metadata": metadata(i),
           "spec": {"containers": [{"resources": resources()}, {"resources": {"limits": {"cpu": "1"}}}],
                    "initContainers": [{"resources": {"limits": {"cpu": "1"}}}]}})
}

/// The same Pod, whole: spec and status as the API server returns them.
fn full_pod(i: usize) -> Value {
    let conditions: Vec<Value> = ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
        .iter()
        .map(|t| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-08-17T09:14:02Z"}))
        .collect();
    let env: Vec<Value> = (0..6)
        .map(|k| json!({"name": format!("VAR_{k}"), "value": format!("value-{k}-{i}")}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": metadata(i),
        "spec": {
            "containers": [
                {"name": "server", "image": "vllm/vllm-openai:v0.6.3",
                 "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size", "1", "--max-model-len", "8192"],
                 "env": env, "ports": [{"name": "http", "containerPort": 8000, "protocol": "TCP"}],
                 "resources": resources(),
                 "readinessProbe": {"httpGet": {"path": "/health", "port": 8000, "scheme": "HTTP"}, "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
                 "livenessProbe": {"httpGet": {"path": "/health", "port": 8000, "scheme": "HTTP"}, "initialDelaySeconds": 120, "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
                 "volumeMounts": [{"name": "cache", "mountPath": "/root/.cache/huggingface"}, {"name": "shm", "mountPath": "/dev/shm"},
                                  {"name": "kube-api-access-abcde", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
                 "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"},
                {"name": "metrics", "image": "prom/statsd-exporter:v0.26.0", "resources": {"limits": {"cpu": "1"}},
                 "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}
            ],
            "initContainers": [{"name": "fetch-model", "image": "busybox:1.36", "command": ["sh", "-c", "true"], "resources": {"limits": {"cpu": "1"}}}],
            "volumes": [{"name": "cache", "persistentVolumeClaim": {"claimName": "hf-cache"}}, {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
                        {"name": "kube-api-access-abcde", "projected": {"defaultMode": 420, "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}],
            "nodeSelector": {"gpu-admission/pool": "a100"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "nodeName": format!("gpu-a100-{}", i / 8), "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "schedulerName": "default-scheduler", "priority": 0,
            "securityContext": {}, "terminationGracePeriodSeconds": 30, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority"
        },
        "status": {
            "phase": "Running", "qosClass": "Guaranteed", "hostIP": "10.0.12.7", "podIP": format!("10.244.{}.{}", i / 250 % 250, i % 250),
            "startTime": "2026-08-17T09:12:46Z",
            "conditions": conditions,
            "containerStatuses": [{"name": "server", "ready": true, "restartCount": 0, "started": true, "image": "docker.io/vllm/vllm-openai:v0.6.3",
                                   "imageID": "docker.io/vllm/vllm-openai@sha256:6c0e4e8f0a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d",
                                   "containerID": format!("containerd://{i:064}"), "state": {"running": {"startedAt": "2026-08-17T09:13:10Z"}}, "lastState": {}}]
        }
    })
}

fn list(kind: &str, items: Vec<Value>) -> Vec<u8> {
    serde_json::to_vec(&json!({"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": "918274"}, "items": items}))
        .unwrap()
}

/// `pods` pods of one GPU on `pods / 4` nodes of 8 GPUs (50% allocated).
fn node_list(pods: usize) -> Vec<u8> {
    let nodes = (0..pods.div_ceil(4))
        .map(|i| json!({"metadata": {"name": format!("gpu-a100-{i}"), "labels": {"gpu-admission/pool": "a100"}},
                        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
                        "status": {"allocatable": {"cpu": "124", "memory": "1031009920Ki", "nvidia.com/gpu": "8", "pods": "110"}}}))
        .collect();
    list("NodeList", nodes)
}

#[derive(Default)]
struct Answers {
    nodes: Arc<Vec<u8>>,
    pods: Arc<Vec<u8>>,
}

fn payload() -> Vec<u8> {
    let request = json!({
        "uid": "bench", "operation": "CREATE", "namespace": "ml", "name": "llm",
        "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "object": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "llm", "namespace": "ml"},
                   "spec": {"replicas": 2, "template": {"metadata": {"labels": {"gpu-admission/pool": "a100"}},
                            "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}
    });
    let settings = json!({"pools": [{"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}}}]});
    serde_json::to_vec(&json!({"request": request, "settings": settings})).unwrap()
}

/// Nanoseconds this thread has spent on a CPU (`CLOCK_THREAD_CPUTIME_ID`), so figures do
/// not include time spent waiting for a core on a busy machine. `None` off Linux x86_64.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn thread_cpu_ns() -> Option<u64> {
    #[repr(C)]
    struct Timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }
    unsafe extern "C" {
        fn clock_gettime(clock: i32, tp: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut t = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: glibc's clock_gettime writes one timespec (two i64 on x86_64 Linux) to `t`.
    let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut t) };
    (rc == 0).then(|| t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64)
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
fn thread_cpu_ns() -> Option<u64> {
    None
}

/// One configuration's figures: medians of on-CPU time and of wall time per call.
struct Timing {
    cpu: Duration,
    wall: Duration,
}

/// Runs `f` repeatedly within the time budget (at least 5, at most 200 times, after one
/// warm-up call) and returns the medians. On-CPU time falls back to wall time where
/// the thread clock is not available.
fn measure(mut f: impl FnMut()) -> Timing {
    f();
    let mut cpu = Vec::new();
    let mut wall = Vec::new();
    let started = Instant::now();
    while wall.len() < 200 && (wall.len() < 5 || started.elapsed() < BUDGET) {
        let c = thread_cpu_ns();
        let t = Instant::now();
        f();
        let elapsed = t.elapsed();
        wall.push(elapsed);
        cpu.push(match (c, thread_cpu_ns()) {
            (Some(a), Some(b)) => Duration::from_nanos(b.saturating_sub(a)),
            _ => elapsed,
        });
    }
    cpu.sort();
    wall.sort();
    Timing {
        cpu: cpu[cpu.len() / 2],
        wall: wall[wall.len() / 2],
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let path = module_path();
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; build it first: cargo build --release --target wasm32-wasip1 -p gpu-capacity-gate-policy",
            path.display()
        )
    });
    let answers = Arc::new(Mutex::new(Answers::default()));
    let served = Arc::clone(&answers);
    let engine = WasmtimeEngineProviderBuilder::new()
        .module_bytes(&bytes)
        .build()
        .expect("the module compiles");
    let host = WapcHost::new(
        Box::new(engine),
        Some(Box::new(move |_, binding, namespace, operation, msg| {
            if (binding, namespace, operation) != ("kubewarden", "kubernetes", "list_resources_all")
            {
                return Err(
                    format!("unexpected host call {binding}/{namespace}/{operation}").into(),
                );
            }
            let request: Value = serde_json::from_slice(msg)?;
            let answers = served.lock().unwrap();
            Ok(match request["kind"].as_str() {
                Some("Node") => answers.nodes.as_ref().clone(),
                Some("Pod") => answers.pods.as_ref().clone(),
                other => return Err(format!("unexpected kind {other:?}").into()),
            })
        })),
    )
    .expect("the module instantiates");
    let payload = payload();
    let names = GpuResources::default();

    println!(
        "gpu-capacity-gate-policy: one decision in wasm ({}, {} bytes)",
        path.display(),
        bytes.len()
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "on-CPU time of the measuring thread, median per decision (wall-clock median in brackets); load average {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "{:>7} | {:>9} {:>20} {:>7} | {:>9} {:>20} {:>7} | {:>6} | {:>12} {:>12} {:>6}",
        "pods",
        "masked MB",
        "wasm ms",
        "us/pod",
        "full MB",
        "wasm ms",
        "us/pod",
        "ratio",
        "native typed",
        "native Value",
        "ratio"
    );
    for &n in SIZES {
        let masked = list("PodList", (0..n).map(masked_pod).collect());
        let full = list("PodList", (0..n).map(full_pod).collect());
        let nodes = Arc::new(node_list(n));
        let mut row = Vec::new();
        for pods in [&masked, &full] {
            {
                let mut a = answers.lock().unwrap();
                a.nodes = Arc::clone(&nodes);
                a.pods = Arc::new(pods.clone());
            }
            let check = host.call("validate", &payload).expect("validate answers");
            let response: Value = serde_json::from_slice(&check).unwrap();
            let capacity = response["audit_annotations"]["capacity"]
                .as_str()
                .unwrap_or("");
            assert!(
                response["accepted"] == true
                    && capacity.contains(&format!("used {n} + incoming 2 ")),
                "the decision did not count every pod: {response}"
            );
            let timing = measure(|| {
                host.call("validate", &payload).unwrap();
            });
            row.push((pods.len(), timing));
        }
        let native_typed = measure(|| {
            let t = parse_pods(&full, &names).unwrap();
            assert_eq!(t.pods as usize, n);
        });
        let native_value = measure(|| {
            let v: Value = serde_json::from_slice(&full).unwrap();
            let gpus: u64 = v["items"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|p| {
                    p["spec"]["containers"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                })
                .filter_map(|c| {
                    c["resources"]["limits"]["nvidia.com/gpu"]
                        .as_str()
                        .and_then(|s| s.parse::<u64>().ok())
                })
                .sum();
            assert_eq!(gpus as usize, n);
        });
        let per_pod = |d: Duration| d.as_secs_f64() * 1e6 / n as f64;
        let cell = |t: &Timing| format!("{:.2} [{:.2}]", ms(t.cpu), ms(t.wall));
        println!(
            "{:>7} | {:>9.2} {:>20} {:>7.2} | {:>9.2} {:>20} {:>7.2} | {:>5.1}x | {:>9.2} ms {:>9.2} ms {:>5.1}x",
            n,
            row[0].0 as f64 / 1e6,
            cell(&row[0].1),
            per_pod(row[0].1.cpu),
            row[1].0 as f64 / 1e6,
            cell(&row[1].1),
            per_pod(row[1].1.cpu),
            row[1].1.cpu.as_secs_f64() / row[0].1.cpu.as_secs_f64(),
            ms(native_typed.cpu),
            ms(native_value.cpu),
            native_value.cpu.as_secs_f64() / native_typed.cpu.as_secs_f64(),
        );
    }
    println!(
        "wasm: the built module deciding one Deployment, Pod list masked vs whole (ratio = whole / masked);"
    );
    println!(
        "native: parsing the whole list, typed and streaming (parse_pods) vs serde_json::Value (ratio = Value / typed)"
    );
    if cfg!(debug_assertions) {
        println!(
            "note: built without optimisation (--profile dev): the native columns are not representative, and the wasm ones are inflated by wasmtime's unoptimised runtime"
        );
    }
}
