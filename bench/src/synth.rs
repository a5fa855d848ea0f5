//! Synthetic GPU pools: realistic Pod and Node objects as the API server returns them,
//! the same objects after Kubewarden's field masks, the `list_resources_all` answers
//! (`{"apiVersion", "kind", "metadata", "items"}`) and replay sessions serving them.
//!
//! The Pod shapes follow the capacity gate's own bench
//! (first written as a benchmark inside the policy crate): a vLLM inference server with
//! a metrics sidecar and an init container, here alternating with a torchrun training
//! pod. Every pod holds one `nvidia.com/gpu`; a pool of `n` pods has `ceil(n / 4)` nodes of
//! 8 GPUs (about 50% allocated). Objects carry no `managedFields` (the API server would
//! add them to whole objects), so the masked/whole ratios below are lower bounds.
//!
//! Masks are applied the way Kubewarden applies them (see `/work/shared/toolchain.md`):
//! `metadata` is always kept whole, everything else only along the masked paths; a path
//! goes through lists element by element (`spec.containers.resources` keeps each
//! container's `resources`).

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use gpu_e2e::{CallbackRequest, Exchange, RecordedResponse, ReplaySession};
use gpu_rules::cluster::ClusterRequest;
use serde_json::{Map, Value, json};

/// The pool every synthetic object belongs to, as named in the capacity gate's
/// `test_data/settings.yml`.
pub const POOL: &str = "a100";
/// The pool label (the gate's default `poolLabelKey`).
pub const POOL_LABEL: &str = "gpu-admission/pool";
/// GPUs per node; each pod holds one.
pub const GPUS_PER_NODE: usize = 8;

/// Nodes for a pool of `pods` GPU pods (about half of their GPUs allocated).
pub fn nodes_for(pods: usize) -> usize {
    pods.div_ceil(4).max(1)
}

fn pod_metadata(i: usize, workload: &str, hash: &str) -> Value {
    json!({
        "name": format!("{workload}-{hash}-{i:06}"),
        "generateName": format!("{workload}-{hash}-"),
        "namespace": format!("team-{}", i % 17),
        "uid": format!("3f1e2d3c-4b5a-6978-8a9b-{i:012}"),
        "resourceVersion": format!("{}", 9_000_000 + i),
        "creationTimestamp": "2026-08-17T09:12:44Z",
        "labels": {"app": workload, POOL_LABEL: POOL, "pod-template-hash": hash,
                   "workload-type": if workload.starts_with("train") { "training" } else { "inference" },
                   "team": format!("team-{}", i % 17)},
        "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-08-17T09:00:00Z"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{workload}-{hash}"),
                             "uid": "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0", "controller": true, "blockOwnerDeletion": true}]
    })
}

fn gpu_resources(cpu: &str, memory: &str) -> Value {
    json!({"limits": {"nvidia.com/gpu": "1", "cpu": cpu, "memory": memory},
           "requests": {"nvidia.com/gpu": "1", "cpu": cpu, "memory": memory}})
}

fn pod_status(i: usize, container: &str, image: &str) -> Value {
    let conditions: Vec<Value> = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .iter()
    .map(|t| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-08-17T09:14:02Z"}))
    .collect();
    json!({
        "phase": "Running", "qosClass": "Guaranteed", "hostIP": format!("10.0.{}.{}", i / 8 / 250 % 250, i / 8 % 250),
        "podIP": format!("10.244.{}.{}", i / 250 % 250, i % 250),
        "podIPs": [{"ip": format!("10.244.{}.{}", i / 250 % 250, i % 250)}],
        "startTime": "2026-08-17T09:12:46Z",
        "conditions": conditions,
        "containerStatuses": [{"name": container, "ready": true, "restartCount": 0, "started": true, "image": image,
                               "imageID": format!("{image}@sha256:6c0e4e8f0a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d"),
                               "containerID": format!("containerd://{i:064}"), "state": {"running": {"startedAt": "2026-08-17T09:13:10Z"}}, "lastState": {}}]
    })
}

fn service_account_volume() -> Value {
    json!({"name": "kube-api-access-abcde", "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}})
}

fn common_spec(i: usize) -> Map<String, Value> {
    let spec = json!({
        "nodeSelector": {POOL_LABEL: POOL},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
        "nodeName": format!("gpu-{POOL}-{}", i / GPUS_PER_NODE), "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default", "serviceAccount": "default", "schedulerName": "default-scheduler", "priority": 0,
        "securityContext": {}, "terminationGracePeriodSeconds": 30, "enableServiceLinks": true,
        "preemptionPolicy": "PreemptLowerPriority"
    });
    match spec {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// A vLLM inference pod: server + metrics sidecar + init container.
fn inference_pod(i: usize) -> Value {
    let image = "docker.io/vllm/vllm-openai:v0.6.3";
    let env: Vec<Value> = (0..6)
        .map(|k| json!({"name": format!("VAR_{k}"), "value": format!("value-{k}-{i}")}))
        .collect();
    let probe = |delay: u32| {
        json!({"httpGet": {"path": "/health", "port": 8000, "scheme": "HTTP"}, "initialDelaySeconds": delay,
                                    "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3})
    };
    let mut spec = common_spec(i);
    spec.insert("containers".into(), json!([
        {"name": "server", "image": image,
         "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size", "1", "--max-model-len", "8192"],
         "env": env, "ports": [{"name": "http", "containerPort": 8000, "protocol": "TCP"}],
         "resources": gpu_resources("8", "64Gi"), "readinessProbe": probe(0), "livenessProbe": probe(120),
         "volumeMounts": [{"name": "cache", "mountPath": "/root/.cache/huggingface"}, {"name": "shm", "mountPath": "/dev/shm"},
                          {"name": "kube-api-access-abcde", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
         "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"},
        {"name": "metrics", "image": "prom/statsd-exporter:v0.26.0", "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "100m"}},
         "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}
    ]));
    spec.insert("initContainers".into(), json!([
        {"name": "fetch-model", "image": "busybox:1.36", "command": ["sh", "-c", "true"], "resources": {"limits": {"cpu": "1"}},
         "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}
    ]));
    spec.insert(
        "volumes".into(),
        json!([
            {"name": "cache", "persistentVolumeClaim": {"claimName": "hf-cache"}},
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
            service_account_volume()
        ]),
    );
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": pod_metadata(i, "llm-a100", "7d9f8c6b5"),
           "spec": spec, "status": pod_status(i, "server", image)})
}

/// A torchrun training worker: one container, a long environment, data volumes.
fn training_pod(i: usize) -> Value {
    let image = "nvcr.io/nvidia/pytorch:24.08-py3";
    let mut env: Vec<Value> = [
        ("MASTER_ADDR", "train-llama-0.train-llama"),
        ("MASTER_PORT", "29500"),
        ("NCCL_DEBUG", "WARN"),
        ("NCCL_IB_DISABLE", "0"),
        ("NCCL_SOCKET_IFNAME", "eth0"),
        ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
        ("WANDB_PROJECT", "llama-pretrain"),
        ("HF_HOME", "/data/hf"),
    ]
    .iter()
    .map(|(k, v)| json!({"name": k, "value": v}))
    .collect();
    env.push(json!({"name": "RANK", "value": (i % 64).to_string()}));
    env.push(json!({"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}));
    env.push(json!({"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {"name": "wandb", "key": "api-key"}}}));
    let mut spec = common_spec(i);
    spec.insert("containers".into(), json!([
        {"name": "trainer", "image": image,
         "command": ["torchrun", "--nnodes=8", "--nproc-per-node=1", "--rdzv-backend=c10d", "train.py", "--config", "configs/llama-8b.yaml"],
         "env": env, "resources": gpu_resources("12", "96Gi"),
         "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "checkpoints", "mountPath": "/checkpoints"},
                          {"name": "shm", "mountPath": "/dev/shm"},
                          {"name": "kube-api-access-abcde", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
         "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
         "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}
    ]));
    spec.insert(
        "volumes".into(),
        json!([
            {"name": "data", "persistentVolumeClaim": {"claimName": "datasets", "readOnly": true}},
            {"name": "checkpoints", "persistentVolumeClaim": {"claimName": "checkpoints"}},
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}},
            service_account_volume()
        ]),
    );
    spec.insert("hostname".into(), json!(format!("train-llama-{}", i % 64)));
    spec.insert("subdomain".into(), json!("train-llama"));
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": pod_metadata(i, "train-llama", "5c7b9d4f8"),
           "spec": spec, "status": pod_status(i, "trainer", image)})
}

/// Pod `i` of the pool, whole; every third pod is a training worker.
pub fn full_pod(i: usize) -> Value {
    if i % 3 == 2 {
        training_pod(i)
    } else {
        inference_pod(i)
    }
}

/// Node `i` of the pool, whole: GPU Feature Discovery labels, a GPU taint, conditions,
/// node info and the image list the kubelet reports.
pub fn full_node(i: usize) -> Value {
    let name = format!("gpu-{POOL}-{i}");
    let images: Vec<Value> = [
        ("docker.io/vllm/vllm-openai", "v0.6.3", 9_800_000_000u64),
        ("nvcr.io/nvidia/pytorch", "24.08-py3", 10_500_000_000),
        ("nvcr.io/nvidia/k8s-device-plugin", "v0.16.2", 190_000_000),
        ("nvcr.io/nvidia/gpu-feature-discovery", "v0.8.2", 120_000_000),
        ("nvcr.io/nvidia/k8s/dcgm-exporter", "3.3.7-3.5.0-ubuntu22.04", 420_000_000),
        ("nvcr.io/nvidia/gpu-operator", "v24.6.1", 160_000_000),
        ("registry.k8s.io/kube-proxy", "v1.30.4", 85_000_000),
        ("docker.io/calico/node", "v3.28.1", 340_000_000),
        ("docker.io/calico/cni", "v3.28.1", 210_000_000),
        ("prom/statsd-exporter", "v0.26.0", 18_000_000),
        ("busybox", "1.36", 4_300_000),
        ("registry.k8s.io/pause", "3.9", 320_000),
    ]
    .iter()
    .enumerate()
    .map(|(k, (repo, tag, size))| {
        json!({"names": [format!("{repo}@sha256:{k:02}e4e8f0a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d"), format!("{repo}:{tag}")],
               "sizeBytes": size})
    })
    .collect();
    let conditions: Vec<Value> = [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ]
    .iter()
    .map(|(t, s, r, m)| json!({"type": t, "status": s, "reason": r, "message": m,
                               "lastHeartbeatTime": "2026-08-17T10:01:12Z", "lastTransitionTime": "2026-08-01T07:00:03Z"}))
    .collect();
    let capacity = json!({"cpu": "128", "memory": "1056762036Ki", "nvidia.com/gpu": GPUS_PER_NODE.to_string(),
                          "ephemeral-storage": "3750157048Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0", "pods": "110"});
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name, "uid": format!("7a6b5c4d-3e2f-1a0b-9c8d-{i:012}"), "resourceVersion": format!("{}", 8_000_000 + i),
            "creationTimestamp": "2026-08-01T07:00:00Z",
            "labels": {
                POOL_LABEL: POOL, "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "p4d.24xlarge", "topology.kubernetes.io/region": "us-east-1",
                "topology.kubernetes.io/zone": format!("us-east-1{}", ["a", "b", "c"][i % 3]),
                "nvidia.com/cuda.driver.major": "550", "nvidia.com/cuda.driver.minor": "90", "nvidia.com/cuda.driver.rev": "07",
                "nvidia.com/cuda.runtime.major": "12", "nvidia.com/cuda.runtime.minor": "4",
                "nvidia.com/gfd.timestamp": "1723880000", "nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "0",
                "nvidia.com/gpu.count": GPUS_PER_NODE.to_string(), "nvidia.com/gpu.family": "ampere",
                "nvidia.com/gpu.machine": "p4d.24xlarge", "nvidia.com/gpu.memory": "81920",
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.replicas": "1",
                "nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/mig.capable": "true", "nvidia.com/mig.strategy": "single",
                "nvidia.com/gpu.present": "true", "nvidia.com/gpu.deploy.device-plugin": "true",
                "nvidia.com/gpu.deploy.dcgm-exporter": "true", "nvidia.com/gpu.deploy.gpu-feature-discovery": "true"
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "nfd.node.kubernetes.io/feature-labels": "cpu-cpuid.ADX,cpu-cpuid.AESNI,cpu-cpuid.AVX,cpu-cpuid.AVX2,cpu-cpuid.AVX512F,pci-10de.present",
                "projectcalico.org/IPv4Address": format!("10.0.{}.{}/16", i / 250 % 250, i % 250),
                "csi.volume.kubernetes.io/nodeid": format!("{{\"ebs.csi.aws.com\":\"i-0{i:016x}\"}}")
            }
        },
        "spec": {"podCIDR": format!("10.244.{}.0/24", i % 250), "podCIDRs": [format!("10.244.{}.0/24", i % 250)],
                 "providerID": format!("aws:///us-east-1a/i-0{i:016x}"),
                 "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {
            "capacity": capacity.clone(), "allocatable": capacity,
            "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": format!("10.0.{}.{}", i / 250 % 250, i % 250)},
                          {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": format!("{i:032x}"), "systemUUID": format!("ec2{i:029x}"), "bootID": format!("b{i:031x}"),
                         "kernelVersion": "5.15.0-1066-aws", "osImage": "Ubuntu 22.04.4 LTS", "containerRuntimeVersion": "containerd://1.7.19",
                         "kubeletVersion": "v1.30.4", "kubeProxyVersion": "v1.30.4", "operatingSystem": "linux", "architecture": "amd64"},
            "images": images
        }
    })
}

/// A tree of mask paths: an empty child map means "keep this whole".
#[derive(Debug, Default)]
struct MaskTree(BTreeMap<String, MaskTree>);

impl MaskTree {
    fn new(masks: &[&str]) -> MaskTree {
        let mut root = MaskTree::default();
        for mask in masks {
            let mut node = &mut root;
            for part in mask.split('.') {
                node = node.0.entry(part.to_string()).or_default();
            }
        }
        root
    }

    fn filter(&self, value: &Value) -> Option<Value> {
        if self.0.is_empty() {
            return Some(value.clone());
        }
        match value {
            Value::Object(map) => {
                let kept: Map<String, Value> = self
                    .0
                    .iter()
                    .filter_map(|(k, sub)| Some((k.clone(), sub.filter(map.get(k)?)?)))
                    .collect();
                Some(Value::Object(kept))
            }
            Value::Array(items) => Some(Value::Array(
                items.iter().filter_map(|item| self.filter(item)).collect(),
            )),
            _ => None,
        }
    }
}

/// `object` as it crosses the host boundary under `masks`: `metadata` whole, the rest
/// only along the masked paths (through lists element by element).
pub fn apply_field_masks(object: &Value, masks: &[&str]) -> Value {
    let tree = MaskTree::new(masks);
    let mut out = match tree.filter(object) {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    if let Some(metadata) = object.get("metadata") {
        out.insert("metadata".into(), metadata.clone());
    }
    Value::Object(out)
}

/// A `list_resources_all` answer.
pub fn list_bytes(kind: &str, items: Vec<Value>) -> Vec<u8> {
    let list = json!({"apiVersion": "v1", "kind": format!("{kind}List"),
                      "metadata": {"resourceVersion": "918274"}, "items": items});
    list.to_string().into_bytes()
}

/// The four answers for one pool size: Pods and Nodes, whole and masked.
#[derive(Debug, Clone)]
pub struct PoolData {
    pub pods: usize,
    pub nodes: usize,
    pub pods_full: Vec<u8>,
    pub pods_masked: Vec<u8>,
    pub nodes_full: Vec<u8>,
    pub nodes_masked: Vec<u8>,
    /// Masked, with every pod's and every node's masked fields spelled differently (see
    /// [`make_distinct`]).
    pub pods_distinct: Vec<u8>,
    pub nodes_distinct: Vec<u8>,
}

impl PoolData {
    /// Bytes crossing the host boundary for one decision, masked or whole.
    pub fn bytes(&self, masked: bool) -> u64 {
        let (n, p) = if masked {
            (&self.nodes_masked, &self.pods_masked)
        } else {
            (&self.nodes_full, &self.pods_full)
        };
        (n.len() + p.len()) as u64
    }
}

/// Generates a pool of `pods` GPU pods, masked with the gate's own field masks.
pub fn pool(pods: usize, pod_masks: &[&str], node_masks: &[&str]) -> PoolData {
    let nodes = nodes_for(pods);
    let (mut pods_full, mut pods_masked) = (Vec::with_capacity(pods), Vec::with_capacity(pods));
    let mut pods_distinct = Vec::with_capacity(pods);
    for i in 0..pods {
        let pod = full_pod(i);
        let masked = apply_field_masks(&pod, pod_masks);
        pods_distinct.push(make_distinct(
            &masked,
            "/spec/containers/0/resources/requests",
            i,
        ));
        pods_masked.push(masked);
        pods_full.push(pod);
    }
    let (mut nodes_full, mut nodes_masked) = (Vec::with_capacity(nodes), Vec::with_capacity(nodes));
    let mut nodes_distinct = Vec::with_capacity(nodes);
    for i in 0..nodes {
        let node = full_node(i);
        let masked = apply_field_masks(&node, node_masks);
        nodes_distinct.push(make_distinct(&masked, "/status/allocatable", i));
        nodes_masked.push(masked);
        nodes_full.push(node);
    }
    PoolData {
        pods,
        nodes,
        pods_full: list_bytes("Pod", pods_full),
        pods_masked: list_bytes("Pod", pods_masked),
        nodes_full: list_bytes("Node", nodes_full),
        nodes_masked: list_bytes("Node", nodes_masked),
        pods_distinct: list_bytes("Pod", pods_distinct),
        nodes_distinct: list_bytes("Node", nodes_distinct),
    }
}

/// `object` with the `memory` entry of the resource map at `pointer` made unique to
/// object `i` (a MiB less per object): the worst case for the gate, whose parsers read
/// each distinct masked `spec` / `status` text once. Real pools sit between the two:
/// replicas share their pod spec, nodes of one type often differ only in allocatable
/// memory.
fn make_distinct(object: &Value, pointer: &str, i: usize) -> Value {
    let mut object = object.clone();
    if let Some(Value::Object(resources)) = object.pointer_mut(pointer) {
        resources.insert("memory".into(), json!(format!("{}Mi", 1_048_576 - i)));
    }
    object
}

/// The replay form of a request the rules make.
pub fn callback_request(request: &ClusterRequest) -> Result<CallbackRequest> {
    CallbackRequest::from_guest_payload(request.operation(), &request.payload())
}

/// A session answering `requests`, in order, with the given bytes.
pub fn session(exchanges: &[(ClusterRequest, &[u8])]) -> Result<ReplaySession> {
    let exchanges = exchanges
        .iter()
        .map(|(request, answer)| {
            let payload = String::from_utf8(answer.to_vec()).context("answers are JSON text")?;
            Ok(Exchange {
                request: callback_request(request)?,
                response: RecordedResponse::Success { payload },
            })
        })
        .collect::<Result<Vec<_>>>()?;
    if exchanges.is_empty() {
        bail!("a session needs at least one exchange");
    }
    Ok(ReplaySession::new(exchanges))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_rules::capacity::pods::parse_pods;
    use gpu_rules::capacity::queries::POD_FIELD_MASKS;
    use gpu_rules::gpu::GpuResources;
    use gpu_rules::pools::nodes::{NODE_FIELD_MASKS, parse_nodes};

    #[test]
    fn masks_keep_metadata_and_the_masked_paths_only() {
        let pod = full_pod(2);
        let masked = apply_field_masks(&pod, POD_FIELD_MASKS);
        assert_eq!(masked["metadata"], pod["metadata"]);
        assert_eq!(masked.get("status"), None);
        assert_eq!(masked.get("apiVersion"), None);
        assert_eq!(
            masked["spec"]["containers"][0],
            json!({"resources": pod["spec"]["containers"][0]["resources"]})
        );
        assert_eq!(masked["spec"].get("volumes"), None);
        let node = apply_field_masks(&full_node(0), NODE_FIELD_MASKS);
        assert_eq!(
            node["status"],
            json!({"allocatable": full_node(0)["status"]["allocatable"]})
        );
        assert_eq!(
            node["spec"],
            json!({"taints": full_node(0)["spec"]["taints"]})
        );
    }

    #[test]
    fn every_pod_holds_one_gpu_and_masks_shrink_the_answers() {
        let data = pool(30, POD_FIELD_MASKS, NODE_FIELD_MASKS);
        let names = GpuResources::default();
        for pods in [&data.pods_full, &data.pods_masked] {
            let totals = parse_pods(pods, &names).unwrap();
            assert_eq!(totals.pods, 30);
            assert_eq!(totals.used.get("nvidia.com/gpu"), Some(&30));
        }
        for nodes in [&data.nodes_full, &data.nodes_masked] {
            let totals = parse_nodes(nodes, &names).unwrap();
            assert_eq!((totals.nodes, totals.schedulable), (8, 8));
            assert_eq!(totals.allocatable.get("nvidia.com/gpu"), Some(&64));
        }
        assert!(
            data.bytes(false) > 3 * data.bytes(true),
            "{} vs {}",
            data.bytes(false),
            data.bytes(true)
        );
    }
}
