#!/usr/bin/env python3
"""The policies under Kubewarden's real policy-server over HTTP, load from `hey`; a section of
BENCHMARKS.md (not the harness's figures: this is the real host, its HTTP server, its reflector
cache and its per-request instances).

1. The capacity gate over fakeapi snapshots generated here: a pool of 1,000 and of 10,000 GPU
   pods (realistic Pods: labels, ownerReferences, annotations, containers with resources,
   nodeName, status; like bench/src/synth.rs), its nodes (8 GPUs each, about half
   allocated) and its ResourceQuotas (one per namespace, 21 namespaces, status.used summing
   to the pods' GPUs). For each size, one fakeapi, and for each usage mode (--modes) its own
   policy-server (module from file://, contextAwareResources from the module's metadata):
     pods           today's default: the pool's Nodes and Pods are listed (test_data/settings.yml)
     quotas         usage: quotas, capacity declared: only the pool's ResourceQuotas are listed
     nodes-quotas   usage: quotas, capacity measured: Nodes and ResourceQuotas (the node list's cost)
     pods-declared  usage: pods, capacity declared: Pods only (the pod list's cost)
     pods-dra       today's default with countDraClaims: Nodes, Pods (with their claim names) and
                    every ResourceClaim. Each pod of the pool also holds one allocated claim made
                    from a template (named in its status), of an RDMA NIC: the gate reads every
                    claim as it would a GPU claim, and every mode sees the same GPU numbers
     pods-brakes   usage: pods, capacity measured, with a namespace burst brake and the pool's
                   sustained rule: Nodes and Pods (with creation times and owner workloads),
                   every pod read once more (the brake's window and the sustained bound)
   Each gets the first request after start-up (latency and verdict, under the default 2 s
   evaluation deadline), then hey POSTing the gate's GPU Deployment CREATE
   (test_data/deployment_a100_4x2.json; its copy with priorityClassName a100-high for the quota
   modes) at concurrency 1 and 4, and a pass at the same concurrency that checks every verdict
   and the capacity annotation (numbers and where they come from) against the snapshot.
2. The static policies (labels, routing, vram fit) on the GPU Pod and GPU Deployment requests
   gpu-bench measures (bench/src/cases.rs), at concurrency 1 and 8, in one policy-server, in
   --rounds interleaved rounds (default 3; each row's figures the median round); with
   KUBEWARDEN_LABELS_POLICY naming a module file (Kubewarden's own labels policy), that
   policy too, right after each of ours on the same request, with settings asking for the
   same labels (criteria containsAllOf workload-type, team: it reads the object's own labels,
   ours the pod templates'); with KUBEWARDEN_MUTATING_POLICY naming a module file (Kubewarden's
   capabilities-psp), that policy on routing's two requests (settings: required_drop_capabilities
   ALL; every answer checked to carry a patch), its rows beside routing's. Both modules are built
   from kubewarden/policies at commit 6a01a242a770dbb168767a986ad0bc57cb3b61fb by
   `bench/kubewarden/build-kubewarden-policies.sh <checkout> [/work/kw-policies]` (see
   kubewarden_policies.py). The host's floor (bench/host-floor, see host_floor.py: accepts
   without reading anything) runs right after each of our rows with that policy's settings: no
   module answers those requests with those settings faster in this policy-server.

The section replaces the one between <!-- policy-server:begin --> and <!-- policy-server:end -->
in BENCHMARKS.md (appended when absent). Bounded: each hey run is sized from a few timed
requests to take about --seconds (default 8 s), at most --max-requests; the whole default run
takes about 6 minutes on the 2-core machine (most of it the 10,000-pod snapshot: generating it
and fakeapi loading it take about 30 s, and the two modes that list every Pod are slow there).
Without kwctl/policy-server on PATH it prints one SKIPPED line and exits 0; hey is installed
with apt-get when missing.

usage: bench/kubewarden/policy_server_bench.py [--out BENCHMARKS.md | --print] [--sizes 1000,10000]
                                               [--modes pods,quotas,nodes-quotas,pods-declared,pods-dra,
                                                        pods-brakes]
                                               [--seconds S] [--max-requests N] [--rounds R]
                                               [--capacity-only | --skip-static | --skip-capacity]
"""

import argparse
import base64
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e" / "kubewarden"))
import host_floor  # noqa: E402
import marked_section  # noqa: E402
import hosts  # noqa: E402
import host_info  # noqa: E402
from host_info import cpu_model  # noqa: E402
from kubewarden_policies import (  # noqa: E402
    LABELS_POLICY_ENV, LABELS_POLICY_SETTINGS, MUTATING_POLICY_ENV, MUTATING_POLICY_REQUESTS,
    MUTATING_POLICY_SETTINGS, module_from_env, mutating_policy_note)

REPO = hosts.REPO
BEGIN, END = marked_section.markers("policy-server")

LABELS = "gpu-labels-policy"
ROUTING = "gpu-pool-routing-policy"
VRAM = "gpu-vram-fit-policy"
CAPACITY = "gpu-capacity-gate-policy"

POOL = "a100"
POOL_LABEL = "gpu-admission/pool"
GPUS_PER_NODE = 8
# The gate's request: a Deployment of 4 replicas x 2 GPUs in pool a100 (namespace ml-serving);
# with the pool's PriorityClass for the modes whose usage comes from ResourceQuotas.
CAPACITY_REQUEST = "test_data/deployment_a100_4x2.json"
CAPACITY_REQUEST_CLASSED = "test_data/deployment_a100_4x2_priority.json"
REQUEST_NAMESPACE = "ml-serving"
INCOMING = 8
# The pool's pods are spread over TEAMS namespaces; each namespace, and the request's, has the
# pool's ResourceQuota.
TEAMS = 20
POOL_CLASSES = ["a100-high", "a100-low"]
THRESHOLD = 90

# The mode whose policy-server also runs gpu-labels-policy (no host call) right after the gate:
# what the host itself costs at that moment, to read the gate's figures against.
FLOOR_BESIDE = "quotas"
FLOOR_REQUEST = "test_data/deployment_labelled.json"

# Usage modes: (usage, capacity declared, what one decision lists).
MODES = {
    "pods": ("pods", False, "Nodes + Pods"),
    "quotas": ("quotas", True, "ResourceQuotas"),
    "nodes-quotas": ("quotas", False, "Nodes + ResourceQuotas"),
    "pods-declared": ("pods", True, "Pods"),
    "pods-dra": ("pods", False, "Nodes + Pods + ResourceClaims"),
    "pods-brakes": ("pods", False, "Nodes + Pods, with burst brake and sustained rule"),
}

# (policy id, policy, kind, request, settings, expected verdict): the GPU Pod and GPU
# Deployment of each static policy in bench/src/cases.rs.
STATIC_CASES = [
    ("labels", LABELS, "Pod", "test_data/pod_gpu_labelled.json", None, "accepted"),
    ("labels", LABELS, "Deployment", "test_data/deployment_labelled.json", None, "accepted"),
    ("routing", ROUTING, "Pod", "test_data/pod_batch.json", "test_data/settings.yml", "patched"),
    ("routing", ROUTING, "Deployment", "test_data/deployment_interactive.json", "test_data/settings.yml", "patched"),
    ("vram", VRAM, "Pod", "test_data/pod_mig_3g_40gb_llama_8b.json", "test_data/settings.yml", "accepted"),
    ("vram", VRAM, "Deployment", "test_data/deployment_llama_8b_on_l4.json", "test_data/settings.yml", "accepted"),
]
# Kubewarden's labels policy asking for the labels our labels policy requires by default. It
# reads the object's own metadata.labels (ours reads every pod template's).
KW_LABELS_SETTINGS = LABELS_POLICY_SETTINGS


class BenchError(Exception):
    """A step failed; the message says which and why."""


def policy_file(policy, name):
    return REPO / "policies" / policy / name


def annotated(policy):
    path = policy_file(policy, "annotated-policy.wasm")
    if not path.is_file():
        raise BenchError(f"{path} not found: run `make annotate`")
    return path


# --------------------------------------------------------------------------------------
# Synthetic pool: Pods and Nodes as the API server returns them
# --------------------------------------------------------------------------------------


def nodes_for(pods):
    """Nodes of 8 GPUs for `pods` one-GPU pods: about half of the GPUs allocated."""
    return max(1, math.ceil(pods / 4))


def _pod_metadata(i, workload, pod_hash):
    team = f"team-{i % TEAMS}"
    return {
        "name": f"{workload}-{pod_hash}-{i:06d}", "generateName": f"{workload}-{pod_hash}-", "namespace": team,
        "uid": f"3f1e2d3c-4b5a-6978-8a9b-{i:012d}", "creationTimestamp": "2026-08-17T09:12:44Z",
        "labels": {"app": workload, POOL_LABEL: POOL, "pod-template-hash": pod_hash,
                   "workload-type": "training" if workload.startswith("train") else "inference", "team": team},
        "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-08-17T09:00:00Z",
                        "prometheus.io/scrape": "true", "prometheus.io/port": "8000"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{workload}-{pod_hash}",
                             "uid": "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0", "controller": True,
                             "blockOwnerDeletion": True}],
    }


def _gpu_resources(cpu, memory):
    return {"limits": {"nvidia.com/gpu": "1", "cpu": cpu, "memory": memory},
            "requests": {"nvidia.com/gpu": "1", "cpu": cpu, "memory": memory}}


def _pod_status(i, container, image):
    conditions = [{"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": "2026-08-17T09:14:02Z"}
                  for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")]
    ip = f"10.244.{i // 250 % 250}.{i % 250}"
    return {"phase": "Running", "qosClass": "Guaranteed",
            "resourceClaimStatuses": [{"name": "nic", "resourceClaimName": claim_name(i)}], "hostIP": f"10.0.{i // 8 // 250 % 250}.{i // 8 % 250}",
            "podIP": ip, "podIPs": [{"ip": ip}], "startTime": "2026-08-17T09:12:46Z", "conditions": conditions,
            "containerStatuses": [{"name": container, "ready": True, "restartCount": 0, "started": True,
                                   "image": image, "imageID": f"{image}@sha256:{'6c0e4e8f' * 8}",
                                   "containerID": f"containerd://{i:064d}",
                                   "state": {"running": {"startedAt": "2026-08-17T09:13:10Z"}}, "lastState": {}}]}


_SA_VOLUME = {"name": "kube-api-access-abcde", "projected": {"defaultMode": 420, "sources": [
    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
    {"downwardAPI": {"items": [{"path": "namespace",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}
_SA_MOUNT = {"name": "kube-api-access-abcde", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
             "readOnly": True}
_CONTAINER_DEFAULTS = {"terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                       "imagePullPolicy": "IfNotPresent"}


def _common_spec(i):
    return {"nodeSelector": {POOL_LABEL: POOL},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": 300}],
            "nodeName": f"gpu-{POOL}-{i // GPUS_PER_NODE}", "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
            "resourceClaims": [{"name": "nic", "resourceClaimTemplateName": "rdma-nic"}],
            "serviceAccountName": "default", "serviceAccount": "default", "schedulerName": "default-scheduler",
            "priority": 0, "securityContext": {}, "terminationGracePeriodSeconds": 30, "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority"}


def inference_pod(i):
    """A vLLM server with a metrics sidecar and an init container."""
    image = "docker.io/vllm/vllm-openai:v0.6.3"
    probe = lambda delay: {"httpGet": {"path": "/health", "port": 8000, "scheme": "HTTP"},  # noqa: E731
                           "initialDelaySeconds": delay, "periodSeconds": 10, "timeoutSeconds": 1,
                           "successThreshold": 1, "failureThreshold": 3}
    spec = _common_spec(i)
    spec["containers"] = [
        {"name": "server", "image": image,
         "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size", "1", "--max-model-len",
                  "8192"],
         "env": [{"name": f"VAR_{k}", "value": f"value-{k}-{i}"} for k in range(6)],
         "ports": [{"name": "http", "containerPort": 8000, "protocol": "TCP"}],
         "resources": _gpu_resources("8", "64Gi"), "readinessProbe": probe(0), "livenessProbe": probe(120),
         "volumeMounts": [{"name": "cache", "mountPath": "/root/.cache/huggingface"},
                          {"name": "shm", "mountPath": "/dev/shm"}, _SA_MOUNT], **_CONTAINER_DEFAULTS},
        {"name": "metrics", "image": "prom/statsd-exporter:v0.26.0",
         "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "100m"}}, **_CONTAINER_DEFAULTS}]
    spec["initContainers"] = [{"name": "fetch-model", "image": "busybox:1.36", "command": ["sh", "-c", "true"],
                               "resources": {"limits": {"cpu": "1"}}, **_CONTAINER_DEFAULTS}]
    spec["volumes"] = [{"name": "cache", "persistentVolumeClaim": {"claimName": "hf-cache"}},
                       {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}, _SA_VOLUME]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": _pod_metadata(i, "llm-a100", "7d9f8c6b5"),
            "spec": spec, "status": _pod_status(i, "server", image)}


def training_pod(i):
    """A torchrun worker: one container, a long environment, data volumes."""
    image = "nvcr.io/nvidia/pytorch:24.08-py3"
    env = [{"name": k, "value": v} for k, v in (
        ("MASTER_ADDR", "train-llama-0.train-llama"), ("MASTER_PORT", "29500"), ("NCCL_DEBUG", "WARN"),
        ("NCCL_IB_DISABLE", "0"), ("NCCL_SOCKET_IFNAME", "eth0"), ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
        ("WANDB_PROJECT", "llama-pretrain"), ("HF_HOME", "/data/hf"), ("RANK", str(i % 64)))]
    env += [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
            {"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {"name": "wandb", "key": "api-key"}}}]
    spec = _common_spec(i)
    spec["containers"] = [
        {"name": "trainer", "image": image,
         "command": ["torchrun", "--nnodes=8", "--nproc-per-node=1", "--rdzv-backend=c10d", "train.py", "--config",
                     "configs/llama-8b.yaml"],
         "env": env, "resources": _gpu_resources("12", "96Gi"),
         "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "checkpoints", "mountPath": "/checkpoints"},
                          {"name": "shm", "mountPath": "/dev/shm"}, _SA_MOUNT],
         "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}, **_CONTAINER_DEFAULTS}]
    spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "datasets", "readOnly": True}},
                       {"name": "checkpoints", "persistentVolumeClaim": {"claimName": "checkpoints"}},
                       {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}}, _SA_VOLUME]
    spec["hostname"] = f"train-llama-{i % 64}"
    spec["subdomain"] = "train-llama"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": _pod_metadata(i, "train-llama", "5c7b9d4f8"),
            "spec": spec, "status": _pod_status(i, "trainer", image)}


def full_pod(i):
    """Pod i of the pool; every third one a training worker. Each holds one GPU."""
    return training_pod(i) if i % 3 == 2 else inference_pod(i)


def full_node(i):
    """Node i of the pool: GPU Feature Discovery labels, the GPU taint, conditions, images."""
    name = f"gpu-{POOL}-{i}"
    capacity = {"cpu": "128", "memory": "1056762036Ki", "nvidia.com/gpu": str(GPUS_PER_NODE),
                "ephemeral-storage": "3750157048Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0", "pods": "110"}
    images = [{"names": [f"{repo}@sha256:{k:02d}{'e4e8f0a4' * 7}ab", f"{repo}:{tag}"], "sizeBytes": size}
              for k, (repo, tag, size) in enumerate([
                  ("docker.io/vllm/vllm-openai", "v0.6.3", 9_800_000_000),
                  ("nvcr.io/nvidia/pytorch", "24.08-py3", 10_500_000_000),
                  ("nvcr.io/nvidia/k8s-device-plugin", "v0.16.2", 190_000_000),
                  ("nvcr.io/nvidia/gpu-feature-discovery", "v0.8.2", 120_000_000),
                  ("nvcr.io/nvidia/k8s/dcgm-exporter", "3.3.7-3.5.0-ubuntu22.04", 420_000_000),
                  ("registry.k8s.io/kube-proxy", "v1.30.4", 85_000_000),
                  ("registry.k8s.io/pause", "3.9", 320_000)])]
    labels = {POOL_LABEL: POOL, "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name,
              "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "p4d.24xlarge",
              "topology.kubernetes.io/zone": f"us-east-1{'abc'[i % 3]}", "nvidia.com/cuda.driver.major": "550",
              "nvidia.com/gpu.count": str(GPUS_PER_NODE), "nvidia.com/gpu.family": "ampere",
              "nvidia.com/gpu.memory": "81920", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
              "nvidia.com/gpu.replicas": "1", "nvidia.com/mig.strategy": "single", "nvidia.com/gpu.present": "true"}
    conditions = [{"type": t, "status": s, "reason": r, "lastHeartbeatTime": "2026-08-17T10:01:12Z",
                   "lastTransitionTime": "2026-08-01T07:00:03Z"}
                  for t, s, r in (("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                                  ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                                  ("PIDPressure", "False", "KubeletHasSufficientPID"),
                                  ("Ready", "True", "KubeletReady"))]
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"7a6b5c4d-3e2f-1a0b-9c8d-{i:012d}",
                         "creationTimestamp": "2026-08-01T07:00:00Z", "labels": labels,
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                                         "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
            "spec": {"podCIDR": f"10.244.{i % 250}.0/24", "providerID": f"aws:///us-east-1a/i-0{i:016x}",
                     "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
            "status": {"capacity": capacity, "allocatable": dict(capacity), "conditions": conditions,
                       "addresses": [{"type": "InternalIP", "address": f"10.0.{i // 250 % 250}.{i % 250}"},
                                     {"type": "Hostname", "address": name}],
                       "nodeInfo": {"kernelVersion": "5.15.0-1066-aws", "osImage": "Ubuntu 22.04.4 LTS",
                                    "containerRuntimeVersion": "containerd://1.7.19", "kubeletVersion": "v1.30.4",
                                    "operatingSystem": "linux", "architecture": "amd64"},
                       "images": images}}


def claim_name(i):
    return f"pod-{i:06d}-nic-x7k2p"


def claim(i):
    """The claim the claim controller made for pod i from ResourceClaimTemplate rdma-nic, allocated
    and reserved for the pod: one device of an RDMA NIC class (no GPU)."""
    team = f"team-{i % TEAMS}"
    node = f"gpu-{POOL}-{i // GPUS_PER_NODE}"
    request = {"name": "nic", "exactly": {"deviceClassName": "rdma.example.com", "allocationMode": "ExactCount",
                                          "count": 1}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": claim_name(i), "generateName": f"pod-{i:06d}-nic-", "namespace": team,
                         "uid": f"9d8c7b6a-5f4e-3d2c-1b0a-{i:012d}", "creationTimestamp": "2026-08-17T09:12:44Z",
                         "annotations": {"resource.kubernetes.io/pod-claim-name": "nic"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": f"pod-{i:06d}",
                                              "uid": f"3f1e2d3c-4b5a-6978-8a9b-{i:012d}", "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": {"devices": {"requests": [request]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "nic", "driver": "rdma.example.com", "pool": node, "device": f"nic-{i % GPUS_PER_NODE}"}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
                "reservedFor": [{"resource": "pods", "name": f"pod-{i:06d}",
                                 "uid": f"3f1e2d3c-4b5a-6978-8a9b-{i:012d}"}]}}


def quota(namespace, used, i):
    """The pool's ResourceQuota in `namespace` as the API server holds it: labelled with the pool,
    scoped to its PriorityClasses, counting `used` GPUs (and the CPU and memory of those pods)."""
    hard = {"requests.nvidia.com/gpu": str(nodes_for(10_000) * GPUS_PER_NODE), "requests.cpu": "4096",
            "requests.memory": "32Ti", "pods": "5000"}
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": f"gpu-{POOL}", "namespace": namespace, "uid": f"5b0c6e1a-8d2f-4c3b-9a7e-{i:012d}",
                         "creationTimestamp": "2026-08-01T07:00:00Z",
                         "labels": {POOL_LABEL: POOL, "app.kubernetes.io/part-of": "gpu-admission"},
                         "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "spec": {"hard": hard, "scopeSelector": {"matchExpressions": [
                {"scopeName": "PriorityClass", "operator": "In", "values": POOL_CLASSES}]}},
            "status": {"hard": dict(hard), "used": {"requests.nvidia.com/gpu": str(used), "requests.cpu": str(used * 8),
                                                    "requests.memory": f"{used * 64}Gi", "pods": str(used)}}}


def quotas_for(pods):
    """One quota per namespace holding the pool's pods (one GPU each), and one in the request's."""
    used = [0] * TEAMS
    for i in range(pods):
        used[i % TEAMS] += 1
    items = [quota(f"team-{t}", used[t], t) for t in range(TEAMS)]
    items.append(quota(REQUEST_NAMESPACE, 0, TEAMS))
    return items


def pool(pods):
    return ([full_node(i) for i in range(nodes_for(pods))] + [full_pod(i) for i in range(pods)]
            + quotas_for(pods) + [claim(i) for i in range(pods)])


def mode_settings(mode, pods):
    """The gate's settings for `mode`: test_data/settings.yml for today's; else pool a100 alone,
    its capacity declared as what its nodes offer (so every mode sees the same numbers)."""
    usage, declared, _ = MODES[mode]
    if mode == "pods":
        return policy_file(CAPACITY, "test_data/settings.yml")
    if mode == "pods-dra":
        return policy_file(CAPACITY, "test_data/settings_count_dra_claims.yml")
    a100 = {"name": POOL, "nodeSelector": {"matchLabels": {POOL_LABEL: POOL}}, "thresholdPercent": THRESHOLD,
            "usage": usage}
    if declared:
        a100["capacity"] = {"nvidia.com/gpu": nodes_for(pods) * GPUS_PER_NODE}
    if usage == "quotas":
        a100["priorityClasses"] = POOL_CLASSES
    settings = {"poolLabelKey": POOL_LABEL, "pools": [a100], "exemptNamespaces": ["gpu-operator", "kube-system"]}
    if mode == "pods-brakes":
        # Both rules read every pod's creation time; the brake fits and the pool is about half held.
        a100["sustained"] = {"thresholdPercent": 95, "for": "2m"}
        settings["burstBrakes"] = {"perNamespace": {"gpus": 64, "per": "10m"}}
    return settings


def expected_capacity(mode, pods):
    """The start of the capacity audit annotation each mode must give (numbers and sources)."""
    usage, declared, _ = MODES[mode]
    allocatable = nodes_for(pods) * GPUS_PER_NODE
    used = f"used {pods}" + (f" from {TEAMS + 1} ResourceQuotas" if usage == "quotas" else "")
    of = f"capacity {allocatable} declared in settings" if declared else f"{allocatable} allocatable"
    return f"{POOL}: nvidia.com/gpu {used} + incoming {INCOMING} = {pods + INCOMING} of {of}"


def section_main(parser, begin, end, measure, section):
    """The main() of a script that measures on policy-server and writes its own marked section
    of BENCHMARKS.md (gate_offers_bench, vram_nodes_bench, overshoot_bench). `parser` is
    marked_section.argument_parser() with the script's options. Without kwctl/policy-server on
    PATH it prints SKIPPED; otherwise `measure(args, log)` returns the rows and what the section
    says about them (a dict, to which host_info.run_meta's keys are added), and `section(rows,
    meta)` is printed or written as marked_section.print_or_write does. Returns the exit code."""
    args = parser.parse_args()
    if hosts.said_skipped(hosts.missing_tools()):
        return 0
    started = time.monotonic()
    load_before = host_info.load_average()
    rows, meta = measure(args, lambda text: print(text, flush=True))
    meta.update(host_info.run_meta(started, load_before))
    marked_section.print_or_write(args.out, args.print, begin, end, section(rows, meta))
    return 0


# --------------------------------------------------------------------------------------
# Load: hey, and a verdict-checking pass
# --------------------------------------------------------------------------------------


def ensure_hey():
    if shutil.which("hey"):
        return
    print("=== hey not found: apt-get install -y hey", flush=True)
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (sudo + ["apt-get", "update", "-qq"], sudo + ["apt-get", "install", "-y", "-qq", "hey"]):
        if subprocess.run(argv, env=env).returncode != 0:
            raise BenchError(f"{' '.join(argv)} failed; install hey (Debian package hey)")


def percentile(sorted_values, p):
    """Nearest-rank percentile of an ascending list."""
    return sorted_values[max(0, math.ceil(p / 100 * len(sorted_values)) - 1)]


def run_hey(url, body_file, requests, concurrency, timeout_s=30):
    """From hey's per-request CSV: p50 / p99 latency (s), requests/s over the run's wall time,
    HTTP status codes {code: count} (0: the request failed)."""
    argv = ["hey", "-n", str(requests), "-c", str(concurrency), "-m", "POST", "-T", "application/json",
            "-D", str(body_file), "-t", str(timeout_s), "-o", "csv", url]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=requests * timeout_s + 60)
    if out.returncode != 0:
        raise BenchError(f"{' '.join(argv)}: exit {out.returncode}: {out.stderr.strip()}")
    latencies, codes, end = [], {}, 0.0
    for line in out.stdout.splitlines()[1:]:
        fields = line.split(",")
        if len(fields) < 8:
            continue
        latency, code, offset = float(fields[0]), int(fields[6]), float(fields[7])
        latencies.append(latency)
        codes[code] = codes.get(code, 0) + 1
        end = max(end, offset + latency)
    if len(latencies) != requests:
        raise BenchError(f"hey reported {len(latencies)} of {requests} requests:\n{out.stdout[:2000]}")
    latencies.sort()
    return {"p50": percentile(latencies, 50), "p99": percentile(latencies, 99), "rps": requests / end,
            "codes": codes, "errors": out.stderr.strip()}


def verdict_of(response):
    """denied / patched (a JSONPatch of at least one operation) / accepted."""
    if not response.get("allowed"):
        return "denied"
    patch = response.get("patch")
    if not patch:
        return "accepted"
    try:
        operations = json.loads(base64.b64decode(patch))
    except ValueError:
        return "accepted (unreadable patch)"
    return "patched" if operations else "accepted"


def checked_pass(server, policy_id, review, concurrency, count, check):
    """`count` requests at `concurrency`, every answer through check(response) -> problem or
    None; returns (verdict counts, problems)."""
    def one(_):
        try:
            response = server.validate(policy_id, review, timeout=30)
        except (OSError, hosts.HostError) as e:
            return "error", str(e)
        return verdict_of(response), check(response)

    with ThreadPoolExecutor(concurrency) as pool_:
        results = list(pool_.map(one, range(count)))
    counts = {}
    for v, _ in results:
        counts[v] = counts.get(v, 0) + 1
    problems = sorted({p for _, p in results if p})
    return counts, problems


def time_requests(server, policy_id, review, n):
    """Wall time (s) of `n` sequential requests, and the last response."""
    started = time.monotonic()
    response = None
    for _ in range(n):
        response = server.validate(policy_id, review, timeout=60)
    return (time.monotonic() - started) / n, response


def sized(per_request_s, concurrency, seconds, max_requests):
    """Requests for a hey run of about `seconds`: a multiple of the concurrency (hey sends
    n / c per worker), at least 2 per worker."""
    n = min(max_requests, seconds / max(per_request_s, 1e-5) * concurrency)
    return max(2, int(n // concurrency)) * concurrency


# --------------------------------------------------------------------------------------
# The measurements
# --------------------------------------------------------------------------------------


def capacity_run(pods, args, log):
    """One fakeapi holding the pool of `pods`; one policy-server per mode in args.modes."""
    nodes = nodes_for(pods)
    module = annotated(CAPACITY)
    rows = []
    with hosts.Host("policy-server-bench") as host:
        t = time.monotonic()
        objects = pool(pods)
        api = host.start_fakeapi(objects, poll_interval=1.0)
        snapshot_mib = api.snapshot.stat().st_size / 2**20
        fakeapi_s = time.monotonic() - t
        log(f"  {pods} pods / {nodes} nodes / {TEAMS + 1} quotas: snapshot {snapshot_mib:.1f} MiB, fakeapi up in "
            f"{fakeapi_s:.1f} s")
        for mode in args.modes:
            row = {"pods": pods, "nodes": nodes, "mode": mode, "snapshot_mib": snapshot_mib, "fakeapi_s": fakeapi_s}
            row.update(mode_run(host, api, module, pods, mode, args, lambda text: log(f"  [{mode}] {text}")))
            rows.append(row)
    return rows


def mode_run(host, api, module, pods, mode, args, log):
    nodes = nodes_for(pods)
    allocatable = nodes * GPUS_PER_NODE
    expected = expected_capacity(mode, pods)
    fits = (pods + INCOMING) * 100 <= THRESHOLD * allocatable
    row = {"expected": "accepted" if fits else "denied", "lists": MODES[mode][2]}
    usage = MODES[mode][0]
    request = hosts.read_json(policy_file(CAPACITY, CAPACITY_REQUEST_CLASSED if usage == "quotas" else CAPACITY_REQUEST))
    review = hosts.admission_review(request)

    def check(response):
        if response.get("allowed") is not fits:
            return (f"allowed={response.get('allowed')}: "
                    f"{(response.get('status') or {}).get('message', '')[:300]}")
        capacity = (response.get("auditAnnotations") or {}).get("capacity", "")
        return None if capacity.startswith(expected) else f"capacity annotation {capacity!r}"

    entry = hosts.PolicyEntry(f"file://{module}", settings=mode_settings(mode, pods),
                              context_aware_resources=hosts.context_aware_resources(module),
                              host_capabilities=["kubernetes/*"])
    entries = {"capacity": entry}
    if mode == FLOOR_BESIDE:
        entries["floor"] = hosts.PolicyEntry(f"file://{annotated(LABELS)}", settings={})
    server = host.start_policy_server(entries, api)
    try:
        row["ready_s"] = server.startup_seconds
        log(f"policy-server ready in {row['ready_s']:.1f} s")

        t = time.monotonic()
        first = server.validate("capacity", review, timeout=120)
        row["first_s"] = time.monotonic() - t
        row["first_verdict"] = verdict_of(first)
        row["first_problem"] = check(first)
        row["first_message"] = (first.get("status") or {}).get("message", "")
        log(f"first request: {row['first_s'] * 1000:.0f} ms, {row['first_verdict']}"
            + (f" ({row['first_problem']})" if row["first_problem"] else ""))

        # Until the reflectors hold the pool, answers can be the deadline's.
        t = time.monotonic()
        settled = hosts.poll(lambda: check(server.validate("capacity", review, timeout=120)) is None, 60, 0.5,
                             f"capacity gate ({mode}) at {pods} pods: the expected verdict ({expected})")
        row["settled_s"] = time.monotonic() - t if settled else None
        per_request, _ = time_requests(server, "capacity", review, 3)
        body = host.root / f"review-{mode}.json"
        body.write_text(json.dumps(review))
        row["runs"] = []
        for c in (1, 4):
            n = sized(per_request, c, args.seconds, args.max_requests)
            h = run_hey(f"{server.url}/validate/capacity", body, n, c)
            counts, problems = checked_pass(server, "capacity", review, c, max(4, 2 * c), check)
            run = {"c": c, "n": n, **h, "verdicts": counts, "problems": problems}
            row["runs"].append(run)
            log(f"c={c}: {n} requests, p50 {h['p50'] * 1000:.1f} ms, p99 {h['p99'] * 1000:.1f} ms, "
                f"{h['rps']:.1f} req/s, HTTP {h['codes']}, checked {counts}{' ' + str(problems) if problems else ''}")
        if mode == FLOOR_BESIDE:
            row["floor"] = floor_runs(host, server, args, log)
        row["rss_mib"] = peak_rss_mib(server.process.pid)
    finally:
        host.stop(server.process)
    return row


def floor_runs(host, server, args, log):
    """The host's own cost at that moment: gpu-labels-policy (no host call) on its GPU Deployment in
    the same policy-server, right after the capacity runs, at the same concurrencies."""
    review = hosts.admission_review(hosts.read_json(policy_file(LABELS, FLOOR_REQUEST)))

    def check(response):
        return None if verdict_of(response) == "accepted" else f"{verdict_of(response)}"

    per_request, _ = time_requests(server, "floor", review, 20)
    body = host.root / "review-floor.json"
    body.write_text(json.dumps(review))
    runs = []
    for c in (1, 4):
        n = sized(per_request, c, args.seconds / 2, args.max_requests)
        h = run_hey(f"{server.url}/validate/floor", body, n, c)
        counts, problems = checked_pass(server, "floor", review, c, max(4, 2 * c), check)
        runs.append({"c": c, "n": n, **h, "verdicts": counts, "problems": problems})
        log(f"floor ({LABELS}) c={c}: {n} requests, p50 {h['p50'] * 1000:.1f} ms, p99 {h['p99'] * 1000:.1f} ms, "
            f"{h['rps']:.0f} req/s, checked {counts}")
    return runs


def peak_rss_mib(pid):
    """Peak resident memory of a process (VmHWM), MiB; None when unknown."""
    try:
        found = re.search(r"VmHWM:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    except OSError:
        return None
    return int(found.group(1)) / 1024 if found else None


def version_of(module):
    """io.kubewarden.policy.version from the module's embedded metadata, "?" without one."""
    metadata = hosts.embedded_metadata(module) or {}
    return (metadata.get("annotations") or {}).get("io.kubewarden.policy.version", "?")


def beside(cases, policy, extra):
    """`cases` (tuples whose second item is the policy, last the policy they are beside) with
    `extra` after the last of `policy` or beside it."""
    at = max((i + 1 for i, c in enumerate(cases) if policy in (c[1], c[-1])), default=len(cases))
    return cases[:at] + extra + cases[at:]


def static_run(args, log):
    """Every static case, with Kubewarden's labels-policy on the same request right after it and
    capabilities-psp after routing's; hey at c=1 and c=8, the whole list over `args.rounds`
    interleaved rounds (this VM's speed drifts between minutes: each round measures every case
    within a minute of the others). Rows keep every round's figures."""
    entries, cases = {}, []
    with hosts.Host("policy-server-bench") as host:
        for policy_id, policy, kind, req, settings, expected in STATIC_CASES:
            if policy_id not in entries:
                module = annotated(policy)
                entries[policy_id] = hosts.PolicyEntry(
                    f"file://{module}", settings=policy_file(policy, settings) if settings else {},
                    allowed_to_mutate=(policy == ROUTING))
            cases.append((policy_id, policy, kind, policy_file(policy, req), expected, None))
        try:
            kw_labels = module_from_env(os.environ, LABELS_POLICY_ENV)
            kw_mutating = module_from_env(os.environ, MUTATING_POLICY_ENV)
        except ValueError as e:
            raise BenchError(str(e)) from None
        if kw_labels:
            path = kw_labels.resolve()
            entries["kubewarden-labels"] = hosts.PolicyEntry(f"file://{path}", settings=KW_LABELS_SETTINGS)
            # Right after each of our cases, on its request: its verdict is recorded, not checked.
            cases = [c for case in cases for c in
                     (case, ("kubewarden-labels", f"Kubewarden labels-policy {version_of(path)}", case[2], case[3],
                             None, case[1]))]
        # The host's floor right after each of our cases, with that policy's settings.
        floor = host_floor.module(lambda argv: subprocess.run(["kwctl", *argv], check=True, capture_output=True),
                                  host.root / "host-floor.wasm")
        for policy_id, policy, _, _, settings, _ in STATIC_CASES:
            entries.setdefault(f"floor-{policy_id}", hosts.PolicyEntry(
                f"file://{floor}", settings=policy_file(policy, settings) if settings else {}))
        cases = [c for case in cases for c in
                 ((case, (f"floor-{case[0]}", host_floor.row_name(case[1]), case[2], case[3],
                          "accepted", case[1]))
                  if not case[0].startswith("kubewarden") else (case,))]
        if kw_mutating:
            path = kw_mutating.resolve()
            entries["kubewarden-mutating"] = hosts.PolicyEntry(f"file://{path}", settings=MUTATING_POLICY_SETTINGS,
                                                               allowed_to_mutate=True)
            # Beside routing's rows, on its requests, meant to come back patched.
            cases = beside(cases, ROUTING, [("kubewarden-mutating", f"Kubewarden capabilities-psp {version_of(path)}",
                                             kind, policy_file(ROUTING, req), "patched", ROUTING)
                                            for kind, req in MUTATING_POLICY_REQUESTS])
        # No host calls are made; policy-server still wants a cluster to connect to.
        api = host.start_fakeapi([])
        server = host.start_policy_server(entries, api)
        log(f"  policy-server ready in {server.startup_seconds:.1f} s with {', '.join(entries)}")
        rows = []
        for i, (policy_id, policy, kind, req, expected, beside_of) in enumerate(cases):
            review = hosts.admission_review(hosts.read_json(req))
            first = server.validate(policy_id, review)
            want = expected or verdict_of(first)

            def check(response, want=want):
                got = verdict_of(response)
                return None if got == want else f"{got}: {(response.get('status') or {}).get('message', '')[:200]}"

            if check(first):
                raise BenchError(f"{policy_id} {req.name}: expected {want}, got {check(first)}")
            per_request, _ = time_requests(server, policy_id, review, 20)
            body = host.root / f"case-{i}.json"
            body.write_text(json.dumps(review))
            for c in (1, 8):
                rows.append({"policy": policy, "id": policy_id, "module": entries[policy_id].module[len("file://"):],
                             "kind": kind, "request": str(req), "beside": beside_of, "c": c, "body": body,
                             "n": sized(per_request, c, args.seconds / 2, args.max_requests), "check": check,
                             "verdict": want, "runs": [], "message": (first.get("status") or {}).get("message", "")})
        for round_ in range(1, args.rounds + 1):
            for row in rows:
                h = run_hey(f"{server.url}/validate/{row['id']}", row["body"], row["n"], row["c"])
                row["runs"].append(h)
                if round_ == 1:
                    row["verdicts"], row["problems"] = checked_pass(server, row["id"], hosts.admission_review(
                        hosts.read_json(Path(row["request"]))), row["c"], 4 * row["c"], row["check"])
                log(f"  round {round_}: {row['id']} {row['kind']} {Path(row['request']).name} c={row['c']}: "
                    f"{row['n']} requests, p50 {h['p50'] * 1000:.1f} ms, {h['rps']:.0f} req/s, HTTP {h['codes']}")
        for row in rows:
            row["codes"] = {}
            for h in row["runs"]:
                for code, k in h["codes"].items():
                    row["codes"][code] = row["codes"].get(code, 0) + k
            row["rps"] = statistics.median(h["rps"] for h in row["runs"])
            row["p50"] = statistics.median(h["p50"] for h in row["runs"])
            row["p99"] = statistics.median(h["p99"] for h in row["runs"])
            row["errors"] = "; ".join(h["errors"] for h in row["runs"] if h["errors"])
            row["n"] *= len(row["runs"])
            del row["check"], row["body"]
    return rows


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------


def machine():
    cpu = cpu_model()
    mem = ""
    try:
        kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
        mem = f", {kb / 2**20:.0f} GiB RAM"
    except (OSError, AttributeError):
        pass
    return f"{os.cpu_count()} x {cpu}{mem}, {platform.system()} {platform.release()}"


def tool_version(argv):
    out = subprocess.run(argv, capture_output=True, text=True)
    return (out.stdout.strip().splitlines() or ["?"])[0]


def ms(seconds):
    return f"{seconds * 1000:.1f} ms"


def verdicts_text(run, expected):
    checked = sum(run["verdicts"].values())
    ok = run["verdicts"].get(expected, 0)
    codes = ", ".join(f"HTTP {c}: {n}" for c, n in sorted(run["codes"].items()))
    text = f"hey {codes}; checked {ok}/{checked} {expected}"
    if run["problems"]:
        text += " (" + "; ".join(p.replace("|", "\\|") for p in run["problems"])[:300] + ")"
    if run["errors"]:
        text += f"; hey errors: {run['errors'][:200]}"
    return text


def markdown(info, capacity_rows, static_rows, kept=None, kept_gate=None):
    out = [BEGIN, "", "## Real host: policy-server 1.36 over HTTP, fakeapi cluster", "",
           f"Not the harness figures above: the policies in Kubewarden's own policy-server ({info['policy_server']}, "
           f"plain HTTP on 127.0.0.1, default workers and 2 s evaluation deadline), fakeapi "
           f"(`../shared/tools/fakeapi`) as its cluster, load from `hey` (keep-alive). "
           f"Written by `bench/kubewarden/policy_server_bench.py` on {info['date']}; "
           f"{info['machine']}; load average {info['load_before']} before, {info['load_after']} after "
           f"(other builds were sharing the machine); whole run {info['elapsed']}. "
           "p50/p99 (nearest rank) and req/s (requests over the run's wall time) from hey's per-request CSV "
           "(0.1 ms resolution); every hey run is followed by a pass at the same "
           "concurrency whose answers are each checked against the expected verdict.", ""]
    if capacity_rows:
        out += [CAPACITY_HEADING, "",
                f"Pool `{POOL}` of N one-GPU pods (realistic Pods: labels, ownerReferences, annotations, containers, "
                f"nodeName, status) in {TEAMS} namespaces on N/4 nodes of 8 GPUs, and its {TEAMS + 1} ResourceQuotas "
                f"(one per namespace and one in the request's, scoped to the pool's PriorityClasses, `status.used` "
                "summing to the pods' GPUs), all served whole by fakeapi; the gate reads what its mode lists, with "
                "its field masks, through policy-server's reflector cache. Modes: *pods* (today's default: "
                "`test_data/settings.yml`, the pool's Nodes and Pods), *quotas* (`usage: quotas` with `capacity` "
                "declared: the pool's ResourceQuotas only), *nodes-quotas* (`usage: quotas`, capacity measured: "
                "Nodes and ResourceQuotas) and *pods-declared* (`usage: pods` with `capacity` declared: Pods only); "
                "the last two price the node list and the pod list on their own. Every mode sees the same numbers "
                "(the declared capacity is what the nodes offer). Request: "
                f"`{CAPACITY_REQUEST}` (Deployment CREATE, 4 x 2 GPUs; `{Path(CAPACITY_REQUEST_CLASSED).name}`, the "
                "same with the pool's PriorityClass, for the quota modes), expected accepted at about 50%. "
                "*First request*: the first POST after policy-server is ready (the reflectors' initial lists "
                "happen inside it); *settled*: until the expected verdict came back. Each mode has its own "
                "policy-server; the checked passes compare the capacity annotation, numbers and where they come "
                "from, with the snapshot.", ""]
        out += summary(capacity_rows)
        out += ["| pods | nodes | mode (lists) | policy-server ready | first request | settled after | "
                "policy-server peak RSS | c | requests | p50 | p99 | req/s | verdicts |",
                "|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for row in capacity_rows:
            first = f"{ms(row['first_s'])}, {row['first_verdict']}"
            if row["first_problem"]:
                first += ": " + row["first_message"][:160].replace("|", "\\|")
            for k, run in enumerate(row["runs"]):
                rss = f"{row['rss_mib']:.0f} MiB" if row.get("rss_mib") else "?"
                settled = f"{row['settled_s']:.1f} s" if row.get("settled_s") is not None else "never"
                lead = (f"| {row['pods']:,} | {row['nodes']:,} | {row['mode']} ({row['lists']}) | "
                        f"{row['ready_s']:.1f} s | {first} | {settled} | {rss} " if k == 0
                        else "| | | | | | | ")
                out.append(f"{lead}| {run['c']} | {run['n']} | {ms(run['p50'])} | {ms(run['p99'])} | "
                           f"{run['rps']:.1f} | {verdicts_text(run, row['expected'])} |")
            for run in row.get("floor") or []:
                out.append(f"| | | floor ({LABELS}, same policy-server) | | | | | {run['c']} | {run['n']} | "
                           f"{ms(run['p50'])} | {ms(run['p99'])} | {run['rps']:.1f} | {verdicts_text(run, 'accepted')} |")
        snapshots = sorted({(r["pods"], r["snapshot_mib"], r["fakeapi_s"]) for r in capacity_rows})
        out += ["", "Snapshots: " + "; ".join(f"{p:,} pods {mib:.1f} MiB (fakeapi up in {t:.0f} s)"
                                              for p, mib, t in snapshots) + ".", ""]
    if kept_gate and not capacity_rows:
        text, date = kept_gate
        heading, _, rest = text.partition("\n")
        out += [heading, "", f"(Not re-measured by the last run, which measured only the static policies: from the "
                             f"run of {date}.)", "", rest.strip("\n"), ""]
    if kept and not static_rows:
        text, date = kept
        heading, _, rest = text.partition("\n")
        out += [heading, "", f"(Not re-measured by the last run, which measured only the capacity gate: from the run "
                             f"of {date}.)", "", rest.strip("\n"), ""]
    if static_rows:
        mutating = next((r for r in static_rows if r["id"] == "kubewarden-mutating"), None)
        rounds = len(static_rows[0]["runs"])
        out += [STATIC_HEADING, "",
                "The GPU Pod and GPU Deployment of each static policy in `bench/src/cases.rs`, all policies in one "
                f"policy-server (modules from `file://`), in {rounds} interleaved rounds: each round runs hey on every "
                "row in turn, so a row and the rows beside it are measured within a minute of each other. A row's "
                "p50, p99 and req/s are the medians of its rounds; the rounds' req/s follow."
                + (" Kubewarden's labels policy ran right after each of our rows, on the same request, with settings "
                   f"`{json.dumps(KW_LABELS_SETTINGS)}` (its verdict recorded, not checked); *vs labels-policy* is "
                   "ours over it, median req/s against median req/s."
                   if any(r["id"] == "kubewarden-labels" for r in static_rows)
                   else f" `{LABELS_POLICY_ENV}` was not set: Kubewarden's own labels policy was not measured.")
                + (" " + mutating_policy_note(mutating["policy"], mutating["module"]) if mutating
                   else f" `{MUTATING_POLICY_ENV}` was not set: no Kubewarden mutating policy was measured."), "",
                "| policy | request | c | requests | p50 | p99 | req/s | req/s per round | vs labels-policy | verdicts |",
                "|---|---|---:|---:|---:|---:|---:|---|---:|---|"]
        labels_policy = {(r["beside"], r["request"], r["c"]): r["rps"] for r in static_rows
                         if r["id"] == "kubewarden-labels"}
        for r in static_rows:
            ours_or_floor = r["policy"] if r["beside"] is None else (r["beside"] if r["id"].startswith("floor-") else None)
            theirs = labels_policy.get((ours_or_floor, r["request"], r["c"]))
            versus = f"{r['rps'] / theirs:.2f}x" if theirs else ""
            per_round = " / ".join(f"{h['rps']:.0f}" for h in r["runs"])
            out.append(f"| {r['policy']} | {r['kind']} `{Path(r['request']).name}` | {r['c']} | {r['n']} | "
                       f"{ms(r['p50'])} | {ms(r['p99'])} | {r['rps']:.0f} | {per_round} | {versus} | "
                       f"{verdicts_text(r, r['verdict'])} |")
        out += ["", host_floor.note("policy-server"), ""]
        denials = {(r["policy"], Path(r["request"]).name): r["message"] for r in static_rows
                   if r["id"] == "kubewarden-labels" and r["verdict"] == "denied"}
        for (policy, req), message in denials.items():
            out += [f"{policy} denies `{req}`: \"{message}\" (it reads the object's own labels; gpu-labels-policy "
                    "reads the pod templates').", ""]
    out.append(END)
    return "\n".join(out) + "\n"


def summary(rows):
    """Per mode: p50 one request at a time at each pool size, how it grew, p99/p50, and the first
    request after start-up."""
    sizes = sorted({r["pods"] for r in rows})
    modes = [m for m in MODES if any(r["mode"] == m for r in rows)]
    by = {(r["mode"], r["pods"]): r for r in rows}
    head = ["mode (lists)"] + [f"p50 at {n:,} pods (c=1)" for n in sizes]
    if len(sizes) > 1:
        head.append(f"growth {sizes[0]:,} to {sizes[-1]:,} pods")
    head += [f"p99/p50 at {n:,}" for n in sizes] + [f"first request at {n:,}" for n in sizes]
    floors = {n: by[(FLOOR_BESIDE, n)].get("floor") for n in sizes if (FLOOR_BESIDE, n) in by}
    out = ["Per mode, one request at a time (c=1):", "", "| " + " | ".join(head) + " |",
           "|" + "---|" + "---:|" * (len(head) - 1)]
    for mode in modes:
        cells = [f"{mode} ({MODES[mode][2]})"]
        p50 = {n: by[(mode, n)]["runs"][0]["p50"] for n in sizes if (mode, n) in by}
        cells += [ms(p50[n]) if n in p50 else "-" for n in sizes]
        if len(sizes) > 1:
            lo, hi = p50.get(sizes[0]), p50.get(sizes[-1])
            cells.append(f"{hi / lo:.1f}x for {sizes[-1] / sizes[0]:.0f}x the pods" if lo and hi else "-")
        for n in sizes:
            r = by.get((mode, n))
            cells.append(f"{r['runs'][0]['p99'] / r['runs'][0]['p50']:.1f}" if r else "-")
        for n in sizes:
            r = by.get((mode, n))
            cells.append(f"{ms(r['first_s'])}, {r['first_verdict']}" + (" (deadline)" if r and r["first_problem"] else "")
                         if r else "-")
        out.append("| " + " | ".join(cells) + " |")
    if any(floors.values()):
        cells = [f"floor: {LABELS}, no host call, beside *{FLOOR_BESIDE}*"]
        cells += [ms(floors[n][0]["p50"]) if floors.get(n) else "-" for n in sizes]
        if len(sizes) > 1:
            cells.append("-")
        cells += [f"{floors[n][0]['p99'] / floors[n][0]['p50']:.1f}" if floors.get(n) else "-" for n in sizes]
        cells += ["-" for _ in sizes]
        out.append("| " + " | ".join(cells) + " |")
        out += ["", f"*Floor*: `{LABELS}` on `{FLOOR_REQUEST}` in the same policy-server as the *{FLOOR_BESIDE}* mode, "
                "measured right after it: what policy-server itself costs per request at that moment (HTTP, a fresh "
                "instance, JSON in and out). On a shared machine its tail is the scheduler's, and so is the gate's."]
    return out + [""]


STATIC_HEADING = "### Static policies"
CAPACITY_HEADING = "### Capacity gate over a synthetic pool"


def kept_static(document):
    """The static policies' subsection of the section in `document`, with the date of the run that
    wrote it, for a run that measures only the capacity gate (--capacity-only); None without one."""
    return kept_subsection(document, STATIC_HEADING, None)


def kept_capacity(document):
    """The capacity gate's subsection, likewise, for a run that measures only the static policies
    (--skip-capacity)."""
    return kept_subsection(document, CAPACITY_HEADING, STATIC_HEADING)


def kept_subsection(document, heading, next_heading):
    """The subsection of the section in `document` from `heading` to `next_heading` (or the
    section's end), without a note that it was kept before, and the date of the run that measured
    it; None without one."""
    if BEGIN not in document or END not in document:
        return None
    old = document[document.index(BEGIN):document.index(END)]
    if heading not in old:
        return None
    static = old[old.index(heading):]
    if next_heading and next_heading in static:
        static = static[:static.index(next_heading)]
    static = static.rstrip("\n") + "\n"
    # Kept once already: the note names the run that measured them.
    note = re.search(r"\n\(Not re-measured [^\n]*from the run of ([^\n]+?)\.\)\n", static)
    if note:
        return static.replace(note.group(0), "\n"), note.group(1)
    found = re.search(r"policy_server_bench.py` on ([^;]+);", old)
    return static, found.group(1) if found else "an earlier run"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(REPO / "BENCHMARKS.md"), help="file to write the section into")
    ap.add_argument("--print", action="store_true", help="print the section instead of writing it")
    ap.add_argument("--sizes", default="1000,10000", help="pool sizes (pods), comma-separated")
    ap.add_argument("--seconds", type=float, default=8.0, help="about how long one capacity hey run takes")
    ap.add_argument("--max-requests", type=int, default=2000, help="most requests in one hey run")
    ap.add_argument("--modes", default=",".join(MODES),
                    help=f"capacity gate usage modes, comma-separated, of {', '.join(MODES)}")
    ap.add_argument("--capacity-only", action="store_true",
                    help="only the capacity gate (as --skip-static); the section keeps the static policies' last figures")
    ap.add_argument("--skip-static", action="store_true")
    ap.add_argument("--rounds", type=int, default=3,
                    help="interleaved rounds over the static cases (each row: the median round)")
    ap.add_argument("--skip-capacity", action="store_true",
                    help="only the static policies; the section keeps the capacity gate's last figures")
    args = ap.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in args.modes if m not in MODES]
    if args.rounds < 1:
        ap.error("--rounds: at least 1")
    if unknown or not args.modes:
        ap.error(f"--modes: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(MODES)}")
    if args.capacity_only:
        args.skip_static = True
    if hosts.said_skipped(hosts.missing_tools(), "policy-server-bench"):
        return 0
    hosts.install_signal_handlers()
    started = time.monotonic()
    info = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "machine": machine(),
            "load_before": host_info.load_average(),
            "policy_server": tool_version(["policy-server", "--version"])}
    log = lambda text: print(text, flush=True)  # noqa: E731
    try:
        ensure_hey()
        capacity_rows, static_rows = [], []
        if not args.skip_capacity:
            for size in (int(s) for s in args.sizes.split(",") if s.strip()):
                log(f"=== capacity gate, {size:,} pods")
                capacity_rows.extend(capacity_run(size, args, log))
        if not args.skip_static:
            log("=== static policies")
            static_rows = static_run(args, log)
    except (BenchError, hosts.HostError) as e:
        print(f"policy-server-bench: {e}", file=sys.stderr)
        return 1
    elapsed = time.monotonic() - started
    info["elapsed"] = f"{elapsed // 60:.0f} min {elapsed % 60:.0f} s"
    info["load_after"] = host_info.load_average()
    out = Path(args.out)
    document = out.read_text() if out.exists() else ""
    kept = kept_static(document) if args.skip_static and not args.skip_capacity else None
    kept_gate = kept_capacity(document) if args.skip_capacity and not args.skip_static else None
    section = markdown(info, capacity_rows, static_rows, kept, kept_gate)
    if args.print:
        print(section)
        return 0
    try:
        marked_section.write(out, BEGIN, END, section)
    except ValueError as e:
        raise SystemExit(f"policy-server-bench: {e}") from None
    log(f"=== wrote the section into {out} ({elapsed:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
