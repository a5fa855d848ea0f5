"""Every policy under Kubewarden's real policy-server, as a cluster runs it.

The annotated modules are pushed with `kwctl push` to a local docker-registry, and
policy-server pulls them from there (registry:// references, --sources-path for plain HTTP).
Its cluster is fakeapi serving a snapshot written here: the capacity gate's pools (the
nodes, pods and labels its test_data/settings.yml selects, with pods it must not count)
and the VRAM fit policy's model-registry ConfigMap. Each policy's contextAwareResources are
read from the module's own embedded metadata, so a module whose metadata lacks an entry the
gate needs fails here. AdmissionReviews built from the policies' test_data requests are
POSTed to /validate/<id> and the verdicts, messages, patches and audit annotations checked.

    make policy-server-e2e          # or: python3 e2e/kubewarden/test_policy_server.py [-k PATTERN]

GPU_ADMISSION_MODULES_DIR: a folder laid out like policies/ (<policy>/annotated-policy.wasm)
to test other annotated modules. POLICY_SERVER_KEEP_TMP=1 keeps the temporary folder (logs,
policies.yml, snapshot).
"""

import base64
import copy
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile
import time
import unittest
import urllib.parse
import urllib.request
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import hosts  # noqa: E402

LABELS = "gpu-labels-policy"
ROUTING = "gpu-pool-routing-policy"
VRAM = "gpu-vram-fit-policy"
CAPACITY = "gpu-capacity-gate-policy"
AUTOSCALER = "gpu-autoscaler-policy"
POLICIES = [LABELS, ROUTING, VRAM, CAPACITY, AUTOSCALER]

MODULES_DIR = Path(os.environ.get("GPU_ADMISSION_MODULES_DIR", hosts.POLICIES_DIR)).resolve()

POOL = "gpu-admission/pool"
GPU = "nvidia.com/gpu"
GPU_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}

# Polling a verdict after a snapshot change: fakeapi notices the new file within its poll
# interval (0.2 s here) and policy-server's watch delivers the change about 1 s later.
FLIP_TRIES = 100
FLIP_INTERVAL = 0.2


def module_path(policy):
    path = MODULES_DIR / policy / "annotated-policy.wasm"
    if not path.is_file():
        raise hosts.HostError(f"{path} not found: run `make annotate` (or fix GPU_ADMISSION_MODULES_DIR)")
    return path


def test_data(policy, name):
    return hosts.POLICIES_DIR / policy / "test_data" / name


def request(policy, name):
    return hosts.read_json(test_data(policy, name))


# --------------------------------------------------------------------------------------
# The cluster: the capacity gate's pools and the VRAM model registry
# --------------------------------------------------------------------------------------


def node(name, labels, gpus, unschedulable=False):
    allocatable = {"cpu": "124", "memory": "1031009920Ki", "pods": "110", **gpus}
    spec = {"providerID": f"aws:///us-east-1a/{name}", "taints": [GPU_TAINT]}
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                  **labels}},
            "spec": spec,
            "status": {"capacity": dict(allocatable), "allocatable": allocatable,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}


def pod(name, namespace, labels, gpus, node_name, phase="Running", resource=GPU):
    """A model-server pod holding `gpus` of `resource` (limits; requests default to them)."""
    spec = {"containers": [
        {"name": "server", "image": "vllm/vllm-openai:v0.6.3", "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct"],
         "resources": {"limits": {resource: str(gpus), "cpu": "8", "memory": "64Gi"},
                       "requests": {"cpu": "8", "memory": "64Gi"}}},
        {"name": "metrics", "image": "prom/statsd-exporter:v0.26.0", "resources": {"requests": {"cpu": "100m"}}}],
        "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
        "restartPolicy": "Always" if phase in ("Running", "Pending") else "Never"}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": name.rsplit("-", 1)[0], **labels},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{name}-rs",
                                              "uid": f"00000000-0000-4000-8000-{hashlib.sha256(name.encode()).hexdigest()[:12]}",
                                              "controller": True}]},
            "spec": spec, "status": {"phase": phase}}


def a100_pods(extra):
    """Pool a100's pods: 5 hold 8 GPUs each (one still Pending: it counts), `extra` more
    hold 8 each; and pods that must not count: Succeeded, Failed, and one on a pool node
    without the pool label (the gate counts pods by label)."""
    pods = [pod(f"a100-work-{i}", ["ml-serving", "ml-training"][i % 2], {POOL: "a100"}, 8,
                None if i == 4 else f"gpu-a100-{i}", phase="Pending" if i == 4 else "Running")
            for i in range(5 + extra)]
    pods.append(pod("a100-done-0", "ml-training", {POOL: "a100"}, 8, "gpu-a100-5", phase="Succeeded"))
    pods.append(pod("a100-failed-0", "ml-training", {POOL: "a100"}, 8, "gpu-a100-6", phase="Failed"))
    pods.append(pod("a100-unlabelled-0", "ml-serving", {}, 8, "gpu-a100-6"))
    return pods


def quota(name, namespace, labels, classes, used, gpu_hard="64"):
    """A ResourceQuota as the API server holds it, `used` GPUs counted in its status."""
    spec = {"hard": {"requests.nvidia.com/gpu": gpu_hard, "requests.cpu": "512"}}
    if classes is not None:
        spec["scopeSelector"] = {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In",
                                                       "values": classes}]}
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": spec,
            "status": {"hard": dict(spec["hard"]),
                       "used": {"requests.nvidia.com/gpu": str(used), "requests.cpu": str(used * 8)}}}


A100_CLASSES = ["a100-high", "a100-low"]


def a100_quotas(extra_used=0):
    """Pool a100's ResourceQuotas for settings_quotas.yml: the GPUs of a100_pods() by namespace
    (ml-serving 24, ml-training 16), scoped to the pool's classes; and quotas the gate must not
    read: another pool's, and one without the pool label."""
    return [quota("gpu-a100", "ml-serving", {POOL: "a100"}, A100_CLASSES, 24 + extra_used),
            quota("gpu-a100", "ml-training", {POOL: "a100"}, A100_CLASSES, 16),
            quota("gpu-h100", "ml-serving", {POOL: "h100"}, ["h100-serving"], 16),
            quota("compute", "ml-serving", {}, None, 64, gpu_hard="128")]


def deployment(name, namespace, replicas, pool=None, node_pool=False):
    """A Deployment labelled app=<name>: with a pool, a vLLM server of 2 GPUs whose template
    carries the pool label (and, with node_pool, the pool's nodeSelector); else a web server
    without GPUs."""
    labels = {"app": name}
    if pool:
        container = {"name": "server", "image": "vllm/vllm-openai:v0.6.3",
                     "resources": {"limits": {GPU: "2"}, "requests": {"cpu": "8", "memory": "64Gi"}}}
        spec = {"nodeSelector": {POOL: pool}} if node_pool else {}
        spec["containers"] = [container]
        template_labels = {**labels, POOL: pool}
    else:
        spec = {"containers": [{"name": "web", "image": "nginx:1.27",
                                "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}]}
        template_labels = dict(labels)
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "spec": {"replicas": replicas, "selector": {"matchLabels": dict(labels)},
                     "template": {"metadata": {"labels": template_labels}, "spec": spec}}}


def cluster(extra_a100_pods=0, extra_quota_used=0):
    """The snapshot. Pools as in the capacity gate's test_data/settings.yml:
    - a100: 8 nodes x 8 GPUs, one cordoned: 56 allocatable; 40 used (+8 per extra pod); GPU
      Feature Discovery's product and driver labels (NVIDIA-A100-SXM4-80GB, 535.104.05);
    - h100: 4 x 8 = 32 allocatable, 16 used;
    - l4-shared: 4 time-sliced nodes x 32 replicas = 128, 110 used; one more node labelled
      l4-shared but not time-sliced, which the pool's matchExpressions leave out;
    - a100-mig (mixed strategy): 16 mig-3g.40gb (10 used) and 28 mig-1g.10gb (4 used);
    plus a CPU node and kube-system pods, the Deployment the scale request reads, the
    ResourceQuotas of settings_quotas.yml's pool a100 (a100_quotas), and the VRAM fit
    policy's model registry ConfigMap gpu-system/gpu-models."""
    a100 = {POOL: "a100", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/cuda.driver.major": "535",
            "nvidia.com/cuda.driver.minor": "104", "nvidia.com/cuda.driver.rev": "05"}
    h100 = {POOL: "h100", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    l4 = {POOL: "l4-shared", "nvidia.com/gpu.product": "NVIDIA-L4-SHARED", "nvidia.com/gpu.replicas": "4",
          "nvidia.com/gpu.sharing-strategy": "time-slicing"}
    mig = {POOL: "a100-mig", "nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    objects = [node(f"gpu-a100-{i}", a100, {GPU: "8"}, unschedulable=(i == 7)) for i in range(8)]
    objects += [node(f"gpu-h100-{i}", h100, {GPU: "8"}) for i in range(4)]
    objects += [node(f"gpu-l4-{i}", l4, {GPU: "32"}) for i in range(4)]
    objects.append(node("gpu-l4-spare", {**l4, "nvidia.com/gpu.sharing-strategy": "none"}, {GPU: "8"}))
    objects += [node(f"gpu-mig-{i}", mig, {GPU: "0", "nvidia.com/mig-3g.40gb": "8"}) for i in range(2)]
    objects.append(node("gpu-mig-2", mig, {"nvidia.com/mig-1g.10gb": "28"}))
    cpu_node = node("cpu-0", {"node.kubernetes.io/instance-type": "m6i.4xlarge"}, {})
    cpu_node["spec"].pop("taints")
    objects.append(cpu_node)

    objects += a100_pods(extra_a100_pods)
    objects += a100_quotas(extra_quota_used)
    # A namespace quota of settings_namespace_quotas.yml (no pool label: the pools' quota
    # lists leave it out): 12 of 16 GPUs used in ml-quota.
    objects.append(quota("gpu-quota", "ml-quota", {}, None, 12, gpu_hard="16"))
    objects += [pod(f"h100-work-{i}", "ml-serving", {POOL: "h100"}, 8, f"gpu-h100-{i}") for i in range(2)]
    objects += [pod(f"l4-shared-work-{i}", ["ml-serving", "ml-training"][i % 2], {POOL: "l4-shared"}, 1,
                    f"gpu-l4-{i % 4}") for i in range(110)]
    objects += [pod(f"mig-3g-{i}", "ml-training", {POOL: "a100-mig"}, 1, f"gpu-mig-{i % 2}",
                    resource="nvidia.com/mig-3g.40gb") for i in range(10)]
    objects += [pod(f"mig-1g-{i}", "ml-training", {POOL: "a100-mig"}, 1, "gpu-mig-2",
                    resource="nvidia.com/mig-1g.10gb") for i in range(4)]
    objects += [{"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": f"coredns-{i}", "namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}},
                 "spec": {"nodeName": "cpu-0", "containers": [{"name": "coredns", "image": "coredns:1.11.1",
                                                               "resources": {"requests": {"cpu": "100m"}}}]},
                 "status": {"phase": "Running"}} for i in range(2)]

    objects.append(deployment("llm-a100", "ml-serving", 2, pool="a100", node_pool=True))
    # Scale from zero: the target of hpa_scale_from_zero.json, in pool h100-serving, which has
    # no node yet (settings_scale_from_zero.yml gives it maxAllocatable 64).
    objects.append(deployment("llm-serving", "ml-serving", 1, pool="h100-serving"))
    # The autoscaler policy's HPA of a workload without GPUs reads this one (its HPAs of
    # GPU workloads read llm-a100 above).
    objects.append(deployment("web", "frontend", 3))
    # The registry of settings_registry.yml: models that settings file does not list.
    objects.append({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gpu-models", "namespace": "gpu-system"},
        "data": {"models.yaml": "# Models served on the platform (gpu-vram-fit-policy registry)\n"
                                "microsoft/phi-4:\n  parametersBillions: 14.7\n  dtype: bf16\n  layers: 40\n"
                                "  kvHeads: 10\n  headDim: 128\n  contextLength: 16384\n  attentionHeads: 40\n"
                                "  aliases: [phi-4]\nbge-large: {vramGiB: 2}\n"}})
    # The routing policy's namespace of test_data (team-a), of team ml-a (its label team):
    # settings_team.yml stamps gpu-admission/team from it.
    objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "ml-a"}}})
    # The labels policy's gpuAccessLabel and gpuSharing (test_data/settings_gpu_access.yml,
    # settings_gpu_sharing.yml): a namespace allowed GPUs and one not; a tenant trusted to
    # share GPUs and one not.
    for name, labels in [("gpu-tenant-a", {"gpu-admission/gpu-access": "true"}), ("gpu-tenant-b", {}),
                         ("trusted-lab", {"gpu-admission/tenant-trust": "trusted"}),
                         ("shared-lab", {"gpu-admission/tenant-trust": "shared"})]:
        objects.append({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name, **labels}}})
    objects += gfd_nodes()
    objects += brake_objects()
    objects += dra_pool()
    return objects


# The burst brakes' pool l40s (BRAKE_SETTINGS): pods created minutes before the snapshot is
# written, so "recent" holds for the whole run (the window is an hour).
STARTED = int(time.time())
BRAKE_SETTINGS = {
    "poolLabelKey": POOL,
    "pools": [{"name": "l40s", "nodeSelector": {"matchLabels": {POOL: "l40s"}}, "thresholdPercent": 90}],
    "burstBrakes": {"perNamespace": {"gpus": 16, "per": "1h"}, "perTeam": {"gpus": 24, "per": "1h"}},
    "checkNamespaceQuotas": False,
}
# (name, namespace, GPUs, seconds before STARTED): brake-a and brake-b are team t1, brake-c team t2;
# the pod of 3 hours ago is out of the window. brake-a's pods are Deployment serve's, brake-b-0 is Job
# train's (BRAKE_OWNERS).
BRAKE_PODS = [("brake-a-0", "brake-a", 8, 120), ("brake-a-1", "brake-a", 4, 60), ("brake-b-0", "brake-b", 8, 90),
              ("brake-b-old", "brake-b", 8, 3 * 3600), ("brake-c-0", "brake-c", 8, 30)]
BRAKE_TEAMS = {"brake-a": "t1", "brake-b": "t1", "brake-c": "t2"}
BRAKE_OWNERS = {"brake-a-0": ("ReplicaSet", "serve-7f8d9"), "brake-a-1": ("ReplicaSet", "serve-7f8d9"),
                "brake-b-0": ("Job", "train")}


def rfc3339(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def brake_objects():
    """Pool l40s (8 nodes x 8 GPUs), its pods with creationTimestamps before STARTED and the team
    label routing stamps, and the Namespaces with their team label."""
    l40s = {POOL: "l40s", "nvidia.com/gpu.product": "NVIDIA-L40S"}
    objects = [node(f"gpu-l40s-{i}", l40s, {GPU: "8"}) for i in range(8)]
    for i, (name, namespace, gpus, ago) in enumerate(BRAKE_PODS):
        p = pod(name, namespace, {POOL: "l40s", "gpu-admission/team": BRAKE_TEAMS[namespace]}, gpus, f"gpu-l40s-{i}")
        p["metadata"]["creationTimestamp"] = rfc3339(STARTED - ago)
        if name in BRAKE_OWNERS:
            kind, owner = BRAKE_OWNERS[name]
            p["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1" if kind == "ReplicaSet" else "batch/v1",
                                                 "kind": kind, "name": owner, "uid": f"uid-{owner}",
                                                 "controller": True}]
            if kind == "ReplicaSet":
                p["metadata"]["labels"]["pod-template-hash"] = owner.rsplit("-", 1)[1]
        objects.append(p)
    for namespace, team in BRAKE_TEAMS.items():
        objects.append({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": namespace, "labels": {"gpu-admission/team": team}}})
    return objects


def brake_request(namespace):
    """The capacity gate's deployment_a100_4x2.json (4 x 2 GPUs) in `namespace`, in pool l40s."""
    req = request(CAPACITY, "deployment_a100_4x2.json")
    req["uid"] = f"brake-{namespace}"
    req["namespace"] = namespace
    obj = req["object"]
    obj["metadata"]["namespace"] = namespace
    obj["spec"]["template"]["metadata"]["labels"][POOL] = "l40s"
    obj["spec"]["template"]["spec"]["nodeSelector"] = {POOL: "l40s"}
    return req


def dra_pool():
    """Pool a100-dra (DRA_SETTINGS): 4 nodes x 8 GPUs = 32 allocatable, and gpu-dra-down, which
    carries GPU Feature Discovery's labels but reports 0 nvidia.com/gpu (its device plugin is
    down). Its pods request no GPU resource: they hold GPUs through allocated ResourceClaims,
    three of 8 (one made from a template, named in its pod's status), one of 4 shared by two
    pods (counted once): 28 in use; one more pod's claim is pending (counts nothing)."""
    labels = {POOL: "a100-dra", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.count": "8"}
    objects = [node(f"gpu-dra-{i}", labels, {GPU: "8"}) for i in range(4)]
    objects.append(node("gpu-dra-down", labels, {GPU: "0"}))

    def dra_pod(name, claim, generated=False, phase="Running"):
        p = pod(name, "ml-serving", {POOL: "a100-dra"}, 0, None if phase == "Pending" else "gpu-dra-0",
                phase=phase)
        del p["spec"]["containers"][0]["resources"]["limits"][GPU]
        if generated:
            p["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "eight-gpus"}]
            p["status"]["resourceClaimStatuses"] = [{"name": "gpus", "resourceClaimName": claim}]
        else:
            p["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": claim}]
        return p

    def claim(name, devices, allocated=True):
        c = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": name, "namespace": "ml-serving"},
             "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                 "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": devices}}]}}}
        if allocated:
            c["status"] = {"allocation": {"devices": {"results": [
                {"request": "gpus", "driver": "gpu.nvidia.com", "pool": "gpu-dra-0", "device": f"gpu-{d}"}
                for d in range(devices)]}},
                "reservedFor": [{"resource": "pods", "name": name, "uid": "00000000-0000-4000-8000-000000000001"}]}
        return c

    objects += [dra_pod("dra-work-0", "dra-gpus-0"), dra_pod("dra-work-1", "dra-gpus-1"),
                dra_pod("dra-work-2", "dra-work-2-gpus-k7x2q", generated=True),
                dra_pod("dra-team-0", "dra-shared"), dra_pod("dra-team-1", "dra-shared"),
                dra_pod("dra-pending-0", "dra-pending", phase="Pending")]
    objects += [claim("dra-gpus-0", 8), claim("dra-gpus-1", 8), claim("dra-work-2-gpus-k7x2q", 8),
                claim("dra-shared", 4), claim("dra-pending", 8, allocated=False)]
    return objects


# The capacity gate counting the claims of pool a100-dra (dra_pool).
DRA_SETTINGS = {"pools": [{"name": "a100-dra", "nodeSelector": {"matchLabels": {POOL: "a100-dra"}}}],
                "countDraClaims": True, "checkNamespaceQuotas": False}


def gfd_nodes():
    """The GPU nodes of VRAM fit's session_nodes_gfd.yml (GPU Feature Discovery labels,
    nvidia.com/gpu.present=true, no pool label: no pool of the other policies selects them)."""
    text = test_data(VRAM, "session_nodes_gfd.yml").read_text()
    payload = text.split("    payload: '", 1)[1].rsplit("'", 1)[0].replace("''", "'")
    return [{"apiVersion": "v1", "kind": "Node", **n} for n in json.loads(payload)["items"]]


def push_image(registry_addr, repository, tag, config):
    """Pushes an OCI image (one empty layer) whose config's `config` is `config` (Env, Labels)
    to the registry's v2 API, as `docker push` would; its reference (host:port/repository:tag)."""
    base = f"http://{registry_addr}/v2/{repository}"

    def blob(data):
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        with urllib.request.urlopen(urllib.request.Request(f"{base}/blobs/uploads/", data=b"", method="POST"),
                                    timeout=30) as r:
            location = urllib.parse.urljoin(f"http://{registry_addr}/", r.headers["Location"])
        put = urllib.request.Request(f"{location}{'&' if '?' in location else '?'}digest={urllib.parse.quote(digest)}",
                                     data=data, method="PUT", headers={"Content-Type": "application/octet-stream"})
        with urllib.request.urlopen(put, timeout=30) as r:
            if r.status != 201:
                raise hosts.HostError(f"blob upload to {registry_addr}: {r.status}")
        return {"digest": digest, "size": len(data)}

    tar = io.BytesIO()
    tarfile.open(fileobj=tar, mode="w").close()
    image_config = {"architecture": "amd64", "os": "linux", "config": config,
                    "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(tar.getvalue()).hexdigest()]}}
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                           **blob(json.dumps(image_config).encode())},
                "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                            **blob(gzip.compress(tar.getvalue(), mtime=0))}]}
    put = urllib.request.Request(f"{base}/manifests/{tag}", data=json.dumps(manifest).encode(), method="PUT",
                                 headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
    with urllib.request.urlopen(put, timeout=30) as r:
        if r.status != 201:
            raise hosts.HostError(f"manifest push to {registry_addr}: {r.status}")
    return f"{registry_addr}/{repository}:{tag}"


def vllm_env():
    """The Env of vllm/vllm-openai:v0.6.3's config (on nvidia/cuda:12.4.1), from VRAM fit's replay session."""
    text = test_data(VRAM, "session_nodes_cuda_image_535.yml").read_text()
    payload = text.rsplit("    payload: '", 1)[1].rsplit("'", 1)[0].replace("''", "'")
    return json.loads(payload)["config"]["config"]["Env"]


DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]


def reserve_settings(open_now):
    """The capacity gate keeping 16 GPUs of pool a100 for interactive work in window `peak` only,
    a window computed when the test starts: open now (yesterday, today and tomorrow, all day,
    UTC: it holds however long the test runs) or closed now (all day, three days from today:
    no day within one of today)."""
    today = time.gmtime().tm_wday
    days = [DAYS[(today + d) % 7] for d in ((-1, 0, 1) if open_now else (3,))]
    return {"poolLabelKey": POOL, "checkNamespaceQuotas": False,
            "schedules": {"peak": {"timeZone": "UTC", "windows": [{"days": days, "from": "00:00", "to": "24:00"}]}},
            "pools": [{"name": "a100", "nodeSelector": {"matchLabels": {POOL: "a100"}}, "thresholdPercent": 90,
                       "reserveWindows": [{"window": "peak", "reserve": {"interactive": 16}}]}]}


# --------------------------------------------------------------------------------------
# Expected answers (the messages the policies' own e2e tests assert)
# --------------------------------------------------------------------------------------

A100_FITS = "a100: nvidia.com/gpu used 40 + incoming 8 = 48 of 56 allocatable (85.7%), threshold 90%, fits"
A100_FULL = ("pool a100: nvidia.com/gpu would be 56 of 56 allocatable (100.0%) with this workload's 8 "
             "(48 in use), above the 90% threshold (room for 2 more). Wait for capacity, lower replicas, "
             "or target another pool.")
MIG_OVER = ("pool a100-mig: nvidia.com/mig-3g.40gb would be 15 of 16 allocatable (93.8%) with this workload's 5 "
            "(10 in use), above the 90% threshold (room for 4 more). Wait for capacity, lower replicas, or "
            "target another pool.")
QUOTAS_FIT = ("a100: nvidia.com/gpu used 40 from 2 ResourceQuotas + incoming 8 = 48 of capacity 64 declared in "
              "settings (75.0%), threshold 90%, fits")
QUOTAS_FULL = ("pool a100: nvidia.com/gpu would be 64 of capacity 64 declared in settings (100.0%) with this "
               "workload's 8 (56 in use from 2 ResourceQuotas), above the 90% threshold (room for 1 more). Wait for "
               "capacity, lower replicas, or target another pool.")
UNKNOWN_MODEL = "is not in the model registry, so its GPU memory cannot be checked"
MALFORMED = ("Deployment ml-serving/llm-a100 cannot be read, so it is denied: spec.replicas: must be a "
             "non-negative integer, got \"four\". Fix the manifest (for a custom resource, check its customKinds "
             "entry in the policy settings)")

TOLERATION_BATCH = {"effect": "NoSchedule", "key": "dedicated", "operator": "Equal", "value": "batch"}
TOLERATION_INTERACTIVE = {"effect": "NoSchedule", "key": "dedicated", "operator": "Equal", "value": "interactive"}
INTERACTIVE_AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In",
                           "values": ["NVIDIA-L4", "NVIDIA-A10G"]}]}]}}}


def patch_ops(response):
    """The decoded JSONPatch of an AdmissionResponse (None without one)."""
    if "patch" not in response or response["patch"] is None:
        return None
    return json.loads(base64.b64decode(response["patch"]))


def _unescape(token):
    return token.replace("~1", "/").replace("~0", "~")


def apply_patch(document, ops):
    """RFC 6902 add / replace / remove, enough for the routing policy's patches."""
    doc = copy.deepcopy(document)
    for op in ops:
        tokens = [_unescape(t) for t in op["path"].split("/")[1:]]
        parent = doc
        for t in tokens[:-1]:
            parent = parent[int(t)] if isinstance(parent, list) else parent[t]
        last = tokens[-1]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if op["op"] == "add":
                parent.insert(index, op["value"])
            elif op["op"] == "replace":
                parent[index] = op["value"]
            elif op["op"] == "remove":
                del parent[index]
            else:
                raise ValueError(f"unsupported op {op}")
        elif op["op"] in ("add", "replace"):
            parent[last] = op["value"]
        elif op["op"] == "remove":
            del parent[last]
        else:
            raise ValueError(f"unsupported op {op}")
    return doc


# --------------------------------------------------------------------------------------
# The test
# --------------------------------------------------------------------------------------


class PolicyServerE2E(hosts.HostTestCase):
    """One registry, one fakeapi and one policy-server for every test."""

    maxDiff = None

    @classmethod
    def _start(cls):
        host = cls.host
        registry = host.start_registry()
        cls.modules, cls.pushed = {}, {}
        for policy in POLICIES:
            path = module_path(policy)
            uri = registry.reference(f"gpu-admission/{policy}:v{hosts.policy_version(policy)}")
            host.push(path, uri)
            cls.modules[policy] = uri
            cls.pushed[policy] = hashlib.sha256(path.read_bytes()).hexdigest()
        # As `kwctl scaffold manifest --allow-context-aware` would put them in the policy.
        aware = {p: hosts.kwctl_context_aware_resources(module_path(p), host.env) for p in POLICIES}
        cls.context_aware = aware
        # Server images for VRAM fit's imageLabels (oci/v1/oci_manifest_config, pulled by policy-server):
        # vLLM's CUDA 12.4 environment, an image requiring CUDA 12.8 by CUDA_VERSION alone, and one
        # whose label asks for driver 550.54.
        cls.images = {
            "vllm": push_image(registry.addr, "ml/vllm-openai", "v0.6.3", {"Env": vllm_env()}),
            "cuda-12.8": push_image(registry.addr, "ml/trainer", "cu128",
                                    {"Env": ["PATH=/usr/local/cuda/bin:/usr/bin:/bin", "CUDA_VERSION=12.8.1"]}),
            "driver-550": push_image(registry.addr, "ml/support-bot", "2025.01",
                                     {"Env": ["PATH=/usr/bin:/bin"],
                                      "Labels": {"io.gpu-admission.min-driver-version": "550.54"}}),
        }
        cls.fakeapi = host.start_fakeapi(cluster())
        entry = hosts.PolicyEntry

        def reads(policy, settings, **more):
            """An entry of `policy` with `settings`, granted its contextAwareResources (unless
            `more` names others) and every Kubernetes host capability."""
            return entry(cls.modules[policy], settings=settings,
                         **{"context_aware_resources": aware[policy], "host_capabilities": ["kubernetes/*"], **more})

        policies = {
            "labels": entry(cls.modules[LABELS], settings={}, context_aware_resources=aware[LABELS]),
            # gpuAccessLabel and gpuSharing: the workload's Namespace (get_resource).
            "labels-access": reads(LABELS, test_data(LABELS, "settings_gpu_access.yml")),
            "labels-sharing": reads(LABELS, test_data(LABELS, "settings_gpu_sharing.yml")),
            "routing": entry(cls.modules[ROUTING], settings=test_data(ROUTING, "settings.yml"),
                             allowed_to_mutate=True, context_aware_resources=aware[ROUTING]),
            # teamLabelKey: team: reads the workload's Namespace.
            "routing-team": reads(ROUTING, test_data(ROUTING, "settings_team.yml"), allowed_to_mutate=True),
            # No host capabilities: with these settings the policy must make no host call.
            "vram": entry(cls.modules[VRAM], settings=test_data(VRAM, "settings.yml"),
                          context_aware_resources=aware[VRAM]),
            "vram-registry": reads(VRAM, test_data(VRAM, "settings_registry.yml")),
            # nodeInventory on: lists the GFD-labelled nodes (gfd_nodes); and without v1/Node in
            # its contextAwareResources, which must deny.
            "vram-nodes": reads(VRAM, test_data(VRAM, "settings_nodes.yml")),
            # The same with noMatchingNodes: deny (every GPU node standing).
            "vram-nodes-deny": reads(VRAM, test_data(VRAM, "settings_nodes_deny.yml")),
            # imageLabels too: the image configs policy-server pulls from the registry.
            "vram-nodes-images": reads(VRAM, test_data(VRAM, "settings_nodes_image_labels.yml"),
                                       host_capabilities=["kubernetes/*", "oci/v1/oci_manifest_config"]),
            "vram-nodes-ungranted": reads(VRAM, test_data(VRAM, "settings_nodes.yml"),
                                          context_aware_resources=[r for r in aware[VRAM] if r["kind"] != "Node"]),
            "capacity": reads(CAPACITY, test_data(CAPACITY, "settings.yml")),
            "autoscaler": reads(AUTOSCALER, test_data(AUTOSCALER, "settings.yml")),
            # The pools of settings.yml with namespace ResourceQuotas checked (the default).
            "capacity-ns-quotas": reads(CAPACITY, test_data(CAPACITY, "settings_namespace_quotas.yml")),
            # One pools block for both (test_data/settings_scale_from_zero.yml): pool h100-serving
            # scales from zero nodes up to maxAllocatable.
            "capacity-scale-from-zero": reads(CAPACITY, test_data(CAPACITY, "settings_scale_from_zero.yml")),
            "autoscaler-scale-from-zero": reads(AUTOSCALER, test_data(AUTOSCALER, "settings_scale_from_zero.yml")),
            # Pool a100 keeps 16 GPUs for interactive work in a window open now, or closed now.
            "capacity-reserve-peak": reads(CAPACITY, reserve_settings(open_now=True)),
            "capacity-reserve-offpeak": reads(CAPACITY, reserve_settings(open_now=False)),
            # Burst brakes in pool l40s (BRAKE_SETTINGS): pods by creationTimestamp, the Namespace's team.
            "capacity-brakes": reads(CAPACITY, BRAKE_SETTINGS),
            # countDraClaims: pool a100-dra, whose pods hold their GPUs through ResourceClaims.
            "capacity-dra": reads(CAPACITY, DRA_SETTINGS),
            # usage: quotas (pool a100, capacity declared) and usage: pods with capacity declared.
            "capacity-quotas": reads(CAPACITY, test_data(CAPACITY, "settings_quotas.yml")),
        }
        cls.server = host.start_policy_server(policies, cls.fakeapi)
        sys.stderr.write(f"policy-server ready in {cls.server.startup_seconds:.1f} s "
                         f"(modules from {registry.addr}, cluster {cls.fakeapi.url})\n")

    @classmethod
    def tearDownClass(cls):
        cls.host.close()

    # -- helpers ---------------------------------------------------------------------

    def review(self, policy_id, req):
        return self.server.validate(policy_id, hosts.admission_review(req))

    def check(self, policy_id, policy, name, allowed, says=(), message=None, code=None, audit=None,
              warns=(), req=None):
        """POSTs test_data request `name` (or `req`) to /validate/<policy_id> and checks the
        answer; returns it."""
        req = req if req is not None else request(policy, name)
        response = self.review(policy_id, req)
        label = f"{policy_id} {name}: {json.dumps(response)[:3000]}"
        self.assertEqual(response.get("uid"), req["uid"], label)
        self.assertIs(response.get("allowed"), allowed, label)
        text = (response.get("status") or {}).get("message", "")
        if message is not None:
            self.assertEqual(text, message, label)
        for s in says:
            self.assertIn(s, text, label)
        if code is not None:
            self.assertEqual((response.get("status") or {}).get("code"), code, label)
        annotations = response.get("auditAnnotations") or {}
        for key, value in (audit or {}).items():
            self.assertEqual(annotations.get(key), value, label)
        warnings = response.get("warnings") or []
        for w in warns:
            self.assertTrue(any(w in x for x in warnings), f"warning {w!r} missing: {label}")
        return response

    # -- the modules -------------------------------------------------------------------

    def test_modules_come_from_the_registry(self):
        downloaded = self.server.downloaded_modules()
        for policy, digest in self.pushed.items():
            self.assertIn(digest, downloaded, f"{policy}: policy-server did not download the pushed module "
                                              f"({self.modules[policy]}); it has {sorted(downloaded.values())}")
        for path in downloaded.values():
            self.assertIn(str(self.server.download_dir), str(path))

    def test_context_aware_resources_are_what_kwctl_reads_from_the_modules(self):
        # policies.yml got kwctl scaffold's list; the module's own section must say the same.
        for policy in POLICIES:
            embedded = hosts.context_aware_resources(module_path(policy))
            self.assertEqual(self.context_aware[policy], embedded, policy)
        self.assertIn("contextAwareResources", self.server.policies_file.read_text())

    # -- gpu-labels-policy -------------------------------------------------------------

    def test_labels(self):
        for name in ("pod_gpu_labelled.json", "deployment_labelled.json", "job_labelled.json",
                     "cronjob_labelled.json", "deployment_no_gpu.json", "pod_delete.json"):
            with self.subTest(name):
                self.check("labels", LABELS, name, True)
        denied = {  # request: what the message says
            "pod_gpu_missing_labels.json": [
                "Pod 'llm-chat' breaks the GPU admission rules (3 problems): 1) label 'workload-type' is missing "
                "(GPU pods must carry it): add workload-type: <one of interactive, batch, training> to "
                "metadata.labels; 2) label 'team' is missing",
                "3) container 'vllm' holds GPUs but requests no cpu and no memory"],
            "deployment_missing_team.json": [
                "1) label 'team' is missing (GPU pods must carry it): add team: <a non-empty value> to "
                "spec.template.metadata.labels"],
            "cronjob_bad_workload_type.json": [
                "label workload-type=Batch is not allowed: set workload-type to one of interactive, batch, training "
                "in spec.jobTemplate.spec.template.metadata.labels (values are case-sensitive: did you mean batch?)"],
            "pod_gpu_request_without_limit.json": [
                "container 'vllm' requests nvidia.com/gpu: 1 without a limit: put nvidia.com/gpu: 1 in its "
                "resources.limits"],
            "pod_no_gpu_tolerates_gpu_taint.json": [
                "the pod requests no GPU but tolerates the GPU taint nvidia.com/gpu with tolerations[0]"],
            "deployment_malformed.json": [
                "Deployment ml-serving/llm-server cannot be read, so it is denied: spec.template.spec: invalid "
                "type: map, expected a sequence"],
        }
        for name, says in denied.items():
            with self.subTest(name):
                self.check("labels", LABELS, name, False, says=says)
        with self.subTest("deployment_update_scales_legacy.json"):
            r = self.check("labels", LABELS, "deployment_update_scales_legacy.json", True,
                           warns=["this update is allowed because it changes no pod template and no label"])
            self.assertTrue((r.get("auditAnnotations") or {}).get("unchanged-noncompliant-object", "").startswith(
                "Deployment 'legacy-trainer' breaks the GPU admission rules (2 problems)"), r)

    def test_labels_gpu_access_and_sharing(self):
        def in_namespace(name, namespace):
            req = copy.deepcopy(request(LABELS, name))
            req["namespace"] = req["object"]["metadata"]["namespace"] = namespace
            return req

        access_denied = (
            "Pod 'llm-chat' breaks the GPU admission rules (1 problem): 1) namespace gpu-tenant-b may "
            "not use GPUs: its Namespace has no label gpu-admission/gpu-access (gpuAccessLabel), which "
            "the cluster admins set on the namespaces allowed GPUs; ask them to set "
            "gpu-admission/gpu-access: <one of true> on it, or run the workload without GPUs")
        sharing_denied = (
            "Pod 'eval-sweep' breaks the GPU admission rules (1 problem): 1) shares a GPU through KAI "
            "Scheduler fractions (0.5 of one GPU through KAI Scheduler), which gpuSharing.allow does not "
            "allow to workload-type=batch in namespace shared-lab (KAI Scheduler fractions is allowed to "
            "workload-type=interactive; namespaces matching gpu-admission/tenant-trust=trusted); ask for "
            "whole GPUs instead, or share through MIG")
        # (subtest, policy id, request, namespace, allowed, the whole message of a denial)
        for subtest, policy_id, name, namespace, allowed, message in [
            ("a namespace with the access label", "labels-access", "pod_gpu_labelled.json", "gpu-tenant-a",
             True, None),
            ("a namespace without it", "labels-access", "pod_gpu_labelled.json", "gpu-tenant-b",
             False, access_denied),
            ("a KAI fraction for interactive work", "labels-sharing", "pod_kai_gpu_sharing_labelled.json",
             "shared-lab", True, None),
            ("a KAI fraction for batch work in an untrusted namespace", "labels-sharing",
             "pod_kai_fraction_batch.json", "shared-lab", False, sharing_denied),
            ("a KAI fraction for batch work in a trusted namespace", "labels-sharing",
             "pod_kai_fraction_batch.json", "trusted-lab", True, None),
        ]:
            with self.subTest(subtest):
                self.check(policy_id, LABELS, f"{name} ({namespace})", allowed,
                           req=in_namespace(name, namespace), message=message)
        with self.subTest("a namespace that does not exist: not found, fail closed"):
            r = self.check("labels-access", LABELS, "pod_gpu_labelled.json (nowhere)", False,
                           req=in_namespace("pod_gpu_labelled.json", "nowhere"), says=[
                               "whether namespace nowhere may use GPUs (gpuAccessLabel gpu-admission/gpu-access) "
                               "cannot be checked: cannot get v1/Namespace nowhere: not found"])
            self.assertTrue((r.get("auditAnnotations") or {}).get("host-error"), r)

    def routed(self, name, expected_ops=None):
        """Checks a routed request's patch (exact ops, sorted by path, when given), then applies
        it and sends the result again: a routed object gets no second patch."""
        req = request(ROUTING, name)
        response = self.check("routing", ROUTING, name, True)
        self.assertEqual(response.get("patchType"), "JSONPatch", response)
        ops = patch_ops(response)
        self.assertTrue(ops, response)
        if expected_ops is not None:
            self.assertEqual(sorted(ops, key=lambda o: o["path"]), sorted(expected_ops, key=lambda o: o["path"]))
        again = copy.deepcopy(req)
        again["object"] = apply_patch(req["object"], ops)
        second = self.review("routing", again)
        self.assertIs(second.get("allowed"), True, second)
        self.assertIsNone(patch_ops(second), f"{name}: patched twice: {second}")
        return response, ops

    def test_routing_patches(self):
        with self.subTest("pod_batch.json"):
            response, _ = self.routed("pod_batch.json", [
                {"op": "add", "path": "/metadata/labels/gpu-admission~1pool", "value": "batch"},
                {"op": "add", "path": "/spec/nodeSelector", "value": {"gpu-admission/node-pool": "batch"}},
                {"op": "add", "path": "/spec/tolerations", "value": [TOLERATION_BATCH]}])
            self.assertTrue(any("a Pod's priority is resolved before this policy runs" in w
                                for w in response.get("warnings") or []), response)
        with self.subTest("deployment_interactive.json"):
            t = "/spec/template"
            self.routed("deployment_interactive.json", [
                {"op": "add", "path": f"{t}/metadata/labels/gpu-admission~1pool", "value": "interactive"},
                {"op": "add", "path": f"{t}/spec/affinity", "value": INTERACTIVE_AFFINITY},
                {"op": "add", "path": f"{t}/spec/nodeSelector", "value": {"gpu-admission/node-pool": "interactive"}},
                {"op": "add", "path": f"{t}/spec/priorityClassName", "value": "interactive-high"},
                {"op": "add", "path": f"{t}/spec/tolerations", "value": [TOLERATION_INTERACTIVE]}])
        with self.subTest("cronjob_batch.json"):
            _, ops = self.routed("cronjob_batch.json")
            self.assertIn("/spec/jobTemplate/spec/template/spec/nodeSelector/gpu-admission~1node-pool",
                          [o["path"] for o in ops])
        for name in ("job_batch.json", "inferenceservice_interactive.json", "raycluster_batch.json"):
            with self.subTest(name):
                self.routed(name)

    def test_routing_without_patch_and_denials(self):
        for name in ("deployment_routed_update.json", "deployment_no_gpu.json", "pod_exempt_namespace.json",
                     "replicaset_owned_unrouted.json"):
            with self.subTest(name):
                r = self.check("routing", ROUTING, name, True)
                self.assertIsNone(patch_ops(r), r)
        for name, says in [
            ("deployment_no_pool.json", "matches no GPU pool; pool interactive takes workload-type=interactive"),
            ("deployment_nodeselector_other_pool.json",
             "'interactive' points at the nodes of pool interactive, but the workload belongs to pool batch"),
            ("deployment_toleration_other_pool.json",
             "tolerates the taint of pool interactive (dedicated=interactive:NoSchedule)"),
            ("deployment_priority_not_allowed.json",
             "'system-cluster-critical' is not allowed: pool batch allows batch-low, batch-high"),
        ]:
            with self.subTest(name):
                r = self.check("routing", ROUTING, name, False, says=[says])
                self.assertIsNone(patch_ops(r), r)

    def test_routing_stamps_the_team_from_the_namespace(self):
        with self.subTest("deployment_interactive.json: the team label from namespace team-a"):
            r = self.check("routing-team", ROUTING, "deployment_interactive.json", True)
            self.assertIn({"op": "add", "path": "/spec/template/metadata/labels/gpu-admission~1team", "value": "ml-a"},
                          patch_ops(r), r)
        with self.subTest("deployment_team_forged.json"):
            self.check("routing-team", ROUTING, "deployment_team_forged.json", False, message=(
                "spec.template.metadata.labels.gpu-admission/team: 'ml-b' is not the team of namespace team-a, which "
                "is ml-a (its label team). The team is taken from the namespace, not set by hand: remove the label "
                "(the policy sets it to ml-a)"))
        with self.subTest("deployment_team_stamped_update.json: no patch"):
            r = self.check("routing-team", ROUTING, "deployment_team_stamped_update.json", True)
            self.assertIsNone(patch_ops(r), r)

    # -- gpu-vram-fit-policy -----------------------------------------------------------

    def test_vram_fit(self):
        with self.subTest("deployment_llama_70b_on_2_a10g.json"):
            self.check("vram", VRAM, "deployment_llama_70b_on_2_a10g.json", False, says=[
                "model meta-llama/Llama-3.1-70B-Instruct needs ~167 GiB GPU memory (weights 132 GiB bf16, KV cache "
                "20 GiB for 8 x 8192 tokens, overhead 10%); the pod asks for 2 x NVIDIA-A10G = 40 GiB usable at 90%.",
                "Request nvidia.com/gpu: 2 on NVIDIA-H100-NVL, or 2 on NVIDIA-H200 (nodeSelector "
                "nvidia.com/gpu.product)."])
        with self.subTest("deployment_llama_8b_on_l4.json"):
            self.check("vram", VRAM, "deployment_llama_8b_on_l4.json", True,
                       audit={"vram-need-mib": "17975", "vram-available-mib": "20730"})
        for name in ("deployment_llama_70b_on_4_h100.json", "pod_mig_3g_40gb_llama_8b.json",
                     "leaderworkerset_llama_70b_fits.json", "deployment_no_model.json"):
            with self.subTest(name):
                self.check("vram", VRAM, name, True)
        for name, says in [
            ("deployment_unknown_model.json", ["gpt-j-6b", UNKNOWN_MODEL]),
            ("pod_mig_1g_10gb_llama_8b.json", ["Request nvidia.com/mig-1g.20gb: 1"]),
            ("pod_four_mig_slices.json", ["MIG devices do not combine"]),
            ("leaderworkerset_llama_70b_too_small.json",
             ["the LeaderWorkerSet group of 4 pods (1 leader + 3 workers) asks for 8 x NVIDIA-A10G"]),
        ]:
            with self.subTest(name):
                self.check("vram", VRAM, name, False, says=says)

    def test_vram_fit_reads_the_registry_configmap(self):
        # microsoft/phi-4 is only in the ConfigMap, not in settings_registry.yml's models.
        self.assertNotIn("phi-4", test_data(VRAM, "settings_registry.yml").read_text())
        self.check("vram-registry", VRAM, "deployment_registry_model.json", True,
                   audit={"vram-model": "microsoft/phi-4", "vram-need-mib": "34362", "vram-available-mib": "41461"})
        self.check("vram-registry", VRAM, "deployment_registry_model_too_big.json", False, message=(
            "model microsoft/phi-4 needs ~34 GiB GPU memory (weights 28 GiB bf16, KV cache 3.2 GiB for 1 x 16384 "
            "tokens, overhead 10%); the pod asks for 1 x NVIDIA-L4 = 20 GiB usable at 90%. Request nvidia.com/gpu: "
            "2 on NVIDIA-L4, or 1 on NVIDIA-A100-SXM4-40GB, or 1 on NVIDIA-L40S (nodeSelector "
            "nvidia.com/gpu.product)."))
        # Without modelRegistry (settings.yml) the same model is unknown.
        self.check("vram", VRAM, "deployment_registry_model.json", False, says=["phi-4", UNKNOWN_MODEL])

    def test_vram_fit_reads_the_gpu_nodes(self):
        offer = ("the nodes offer NVIDIA-A100-SXM4-40GB (3 nodes), NVIDIA-A100-SXM4-80GB (2 nodes), NVIDIA-L4 "
                 "(2 nodes), NVIDIA-RTX-PRO-6000-Blackwell (1 node)")
        down = "not counted: gfd-h100-down-0"
        # Fits the catalog's 81,920 MiB per A100-80GB, not the 76,000 its nodes report.
        self.check("vram", VRAM, "deployment_nodes_70g_on_a100_80gb.json", False, says=["big-70g"])
        # One known product selected: only its nodes are listed (the H100 whose device plugin is
        # down is not among them).
        r = self.check("vram-nodes", VRAM, "deployment_nodes_70g_on_a100_80gb.json", False, says=[
            "the pod asks for 1 x NVIDIA-A100-SXM4-80GB (76000 MiB per GPU, reported by 2 nodes) = 66 GiB usable"])
        self.assertFalse(any(down in w for w in r.get("warnings") or []), r)
        # Not in the catalog: every GPU node listed, sized by its node.
        self.check("vram-nodes", VRAM, "deployment_nodes_70g_on_rtx_pro.json", True, warns=[down])
        self.check("vram-nodes", VRAM, "deployment_nodes_8b_on_a100_40gb.json", True)
        for name, message in [
            ("deployment_nodes_a100_80gb_absent.json",
             f"no node offers GPU product 'NVIDIA-A100-SXM4-80GB-HBM3' (nvidia.com/gpu.product); {offer}"),
            ("deployment_nodes_product_typo.json",
             "no node offers GPU product 'NVIDIA-A100-SXM4-40G' (nvidia.com/gpu.product) (did you mean "
             f"'NVIDIA-A100-SXM4-40GB'?); {offer}"),
            ("deployment_nodes_two_l4_per_pod.json",
             "the pod asks for 2 nvidia.com/gpu, and no node of NVIDIA-L4 has more than 1 allocatable: ask for at "
             "most 1 per pod and split the work over more pods"),
            ("deployment_nodes_driver_too_old.json",
             "the pod needs driver version 550.54 or later (annotation gpu-admission/min-driver-version on "
             "spec.template.spec), and the newest driver on the nodes of NVIDIA-A100-SXM4-40GB that offer its GPUs "
             "is 535.104.05"),
        ]:
            with self.subTest(name):
                self.check("vram-nodes", VRAM, name, False, message=message)
        # A catalog product on no node, with noMatchingNodes: deny (every GPU node standing).
        self.check("vram-nodes-deny", VRAM, "deployment_nodes_h100_scale_from_zero.json", False, warns=[down],
                   message=f"no node offers GPU product 'NVIDIA-H100-80GB-HBM3' (nvidia.com/gpu.product); {offer}")
        self.check("vram-nodes-ungranted", VRAM, "deployment_nodes_8b_on_a100_40gb.json", False, message=(
            "cannot list v1/Node: not granted to this policy: add {apiVersion: v1, kind: Node} to the "
            "ClusterAdmissionPolicy's contextAwareResources. gpu-vram-fit-policy denies what it cannot check "
            "(nodeInventory.enabled); the host's error is in the audit annotation host-error."))

    def test_vram_fit_checks_the_images_cuda_and_driver_needs_against_the_nodes(self):
        # The images are pulled by policy-server from the local registry; the nodes are fakeapi's
        # GFD nodes (the A100-SXM4-40GB on driver 535.104.05, CUDA 12.2).
        def on_a100_40gb(image):
            req = request(VRAM, "deployment_nodes_8b_on_a100_40gb.json")
            req["object"]["spec"]["template"]["spec"]["containers"][0]["image"] = self.images[image]
            return req

        # cuda>=12.4, or a 535 driver (forward compatibility): the nodes may run it.
        self.check("vram-nodes-images", VRAM, "vllm", True, req=on_a100_40gb("vllm"))
        self.check("vram-nodes-images", VRAM, "cuda-12.8", False, req=on_a100_40gb("cuda-12.8"), message=(
            f"container vllm runs image {self.images['cuda-12.8']}, which requires cuda>=12.8 (CUDA_VERSION 12.8.1 of "
            "the image), and no node that offers its GPUs meets it: NVIDIA-A100-SXM4-40GB with CUDA 12.2 and driver "
            "535.104.05 (3 nodes). The NVIDIA container toolkit refuses to start it there: use an image built for "
            "CUDA 12.2 or older, or update the nodes' driver"))
        self.check("vram-nodes-images", VRAM, "driver-550", False, req=on_a100_40gb("driver-550"), message=(
            "the pod needs driver version 550.54 or later (label io.gpu-admission.min-driver-version of image "
            f"{self.images['driver-550']}), and the newest driver on the nodes of NVIDIA-A100-SXM4-40GB that offer "
            "its GPUs is 535.104.05"))

    def test_vram_fit_narrows_the_node_list_and_lets_a_product_scale_from_zero(self):
        offer = ("the nodes offer NVIDIA-A100-SXM4-40GB (3 nodes), NVIDIA-A100-SXM4-80GB (2 nodes), NVIDIA-L4 "
                 "(2 nodes), NVIDIA-RTX-PRO-6000-Blackwell (1 node)")
        # A catalog product no node carries (its one node's device plugin is down): the narrowed
        # list finds no GPU node, the whole list names the products; warn (default) accepts.
        self.check("vram-nodes", VRAM, "deployment_nodes_h100_scale_from_zero.json", True, warns=[
            f"no node offers GPU product 'NVIDIA-H100-80GB-HBM3' (nvidia.com/gpu.product); {offer}: accepted "
            "without checking the nodes, as a node pool that scales from zero may create them "
            "(nodeInventory.noMatchingNodes: warn)",
            "not counted: gfd-h100-down-0"])
        # The selectors policy-server asked fakeapi for (its log has each LIST's query): the narrowed
        # ones and the whole one, nothing else for Nodes of these settings.
        self.check("vram-nodes", VRAM, "deployment_nodes_70g_on_a100_80gb.json", False)
        log = urllib.parse.unquote(self.fakeapi.process.log_path.read_text(errors="replace"))
        for selector in [r"labelSelector=nvidia\.com/gpu\.present=true,nvidia\.com/gpu\.product=NVIDIA-A100-SXM4-80GB",
                         r"labelSelector=nvidia\.com/gpu\.present=true,nvidia\.com/gpu\.product=NVIDIA-H100-80GB-HBM3",
                         r"labelSelector=nvidia\.com/gpu\.present=true(?!,)"]:
            self.assertRegex(log, selector, "the Node lists policy-server made")

    # -- gpu-capacity-gate-policy ------------------------------------------------------

    def test_capacity_below_and_over_thresholds(self):
        cases = [
            ("deployment_a100_4x2.json", True, None, A100_FITS),
            ("deployment_update_more_replicas.json", True, None,
             "a100: nvidia.com/gpu used 40 + incoming 2 = 42 of 56 allocatable (75.0%), threshold 90%, fits"),
            # kubectl scale: the Deployment is read with get_resource (2 GPUs per pod, 2 -> 6 replicas).
            ("deployment_scale_up.json", True, None, A100_FITS),
            ("inferenceservice_h100.json", True, None,
             "h100: nvidia.com/gpu used 16 + incoming 8 = 24 of 32 allocatable (75.0%), threshold 80%, fits"),
            ("deployment_l4_timesliced.json", True, None,
             "l4-shared: nvidia.com/gpu used 110 + incoming 6 = 116 of 128 allocatable (90.6%), threshold 95%, fits"),
            ("job_mig_3g.json", False, MIG_OVER,
             "a100-mig: nvidia.com/mig-3g.40gb used 10 + incoming 5 = 15 of 16 allocatable (93.8%), threshold 90%, "
             "over"),
        ]
        for name, allowed, message, capacity in cases:
            with self.subTest(name):
                self.check("capacity", CAPACITY, name, allowed, message=message, audit={"capacity": capacity})

    def test_capacity_denies_what_no_node_offers(self):
        # nodeOffers (deny by default): pool a100's seven schedulable nodes are GFD-labelled
        # NVIDIA-A100-SXM4-80GB with driver 535.104.05; pool a100-mig offers 3g.40gb and 1g.10gb.
        advice = ("Select a GPU product, MIG profile and driver or CUDA version the pool's nodes offer, or "
                  "target a pool whose nodes offer them (nodeOffers: deny).")
        there = "the nodes offer NVIDIA-A100-SXM4-80GB (7 nodes)"
        with self.subTest("the wrong product"):
            self.check("capacity", CAPACITY, "deployment_a100_product_40gb.json", False, message=(
                "pool a100: spec.template.spec: no node offers GPU product 'NVIDIA-A100-SXM4-40GB' "
                "(nvidia.com/gpu.product) (did you mean 'NVIDIA-A100-SXM4-80GB'?); " + there + ". " + advice),
                audit={"capacity": A100_FITS})
        with self.subTest("a typo"):
            self.check("capacity", CAPACITY, "deployment_a100_product_typo.json", False,
                       says=["no node offers GPU product 'NVIDIA-A100-SXM4-40G'", there])
        with self.subTest("the driver too old"):
            self.check("capacity", CAPACITY, "deployment_a100_min_driver_550.json", False, says=[
                "the pod needs driver version 550.54.15 or later (label gpu-admission/min-driver-version on "
                "spec.template.spec), and the newest driver on the nodes that offer its GPUs is 535.104.05"])
        with self.subTest("a MIG profile absent"):
            self.check("capacity", CAPACITY, "job_mig_2g.json", False, message=(
                "pool a100-mig: spec.template.spec: no node offers MIG profile 2g.20gb (nvidia.com/mig-2g.20gb); "
                "they offer 1g.10gb, 3g.40gb. " + advice))
        with self.subTest("the product there"):
            response = self.check("capacity", CAPACITY, "deployment_a100_product_80gb.json", True,
                                  audit={"capacity": A100_FITS})
            self.assertNotIn("node-offers", response.get("auditAnnotations") or {})

    def test_capacity_reserve_by_window(self):
        # Pool a100: 56 allocatable, 40 held by pods without a workload-type, 50 under 90%.
        with self.subTest("peak: batch denied by the interactive reserve"):
            self.check("capacity-reserve-peak", CAPACITY, "deployment_a100_4x2_batch.json", False, message=(
                "pool a100: 16 nvidia.com/gpu are kept for workload types interactive (16 reserved in window "
                "peak, 0 held by its pods); this workload (workload-type batch) may use 34 of the 50 under the "
                "threshold, 40 are in use, room for 0 more, it asks for 8. Wait for capacity, lower replicas, or "
                "target another pool."))
        with self.subTest("peak: interactive accepted into its reserve"):
            self.check("capacity-reserve-peak", CAPACITY, "deployment_a100_4x2_interactive.json", True,
                       audit={"capacity": A100_FITS})
        with self.subTest("off peak: batch accepted, nothing kept"):
            self.check("capacity-reserve-offpeak", CAPACITY, "deployment_a100_4x2_batch.json", True,
                       audit={"capacity": A100_FITS})
    def test_capacity_counts_allocated_dra_claims(self):
        # 4 x 2 GPUs into pool a100-dra: 28 in use through claims (the shared one once), 32
        # allocatable (gpu-dra-down offers nothing, and is named).
        req = copy.deepcopy(request(CAPACITY, "deployment_a100_4x2.json"))
        for labels in (req["object"]["metadata"].setdefault("labels", {}),
                       req["object"]["spec"]["template"]["metadata"]["labels"]):
            labels[POOL] = "a100-dra"
        req["object"]["spec"]["template"]["spec"].pop("nodeSelector", None)
        self.check("capacity-dra", CAPACITY, "deployment_a100_4x2.json (pool a100-dra)", False, req=req,
                   message="pool a100-dra: nvidia.com/gpu would be 36 of 32 allocatable (112.5%) with this "
                           "workload's 8 (28 in use), above the 90% threshold (room for 0 more). Wait for "
                           "capacity, lower replicas, or target another pool.",
                   audit={"dra-claims": "a100-dra: 4 of 5 ResourceClaims of the pool's pods allocated, holding "
                                        "28 nvidia.com/gpu (1 shared by several pods, counted once; 1 not "
                                        "allocated, not counted)"},
                   warns=["pool a100-dra: GPU nodes with GPU labels but no allocatable GPU (is their device "
                          "plugin down?), not counted as capacity: gpu-dra-down"])

    def test_capacity_without_cluster_reads(self):
        with self.subTest("pod_owned_by_replicaset.json"):
            self.check("capacity", CAPACITY, "pod_owned_by_replicaset.json", True, audit={
                "not-charged": "created by ReplicaSet llm-a100-7d9f8c6b5, which was charged for its pods "
                               "(chargePods: ownerless)"})
        with self.subTest("deployment_exempt_namespace.json"):
            self.check("capacity", CAPACITY, "deployment_exempt_namespace.json", True,
                       audit={"exempt": "namespace gpu-operator is in exemptNamespaces: not checked"})
        with self.subTest("deployment_no_pool.json"):
            self.check("capacity", CAPACITY, "deployment_no_pool.json", True, audit={
                "no-pool": "spec.template.spec (nvidia.com/gpu: 8): no configured pool is named by the pool label "
                           "or selected by the node selector; capacity not checked"})
        # An image-only update is a rollout now: its maxSurge pods are charged (chargeRolloutSurge).
        for name in ("deployment_cpu_only.json", "deployment_scale_down.json"):
            with self.subTest(name):
                r = self.check("capacity", CAPACITY, name, True)
                self.assertNotIn("capacity", r.get("auditAnnotations") or {}, r)
        with self.subTest("deployment_malformed.json"):
            self.check("capacity", CAPACITY, "deployment_malformed.json", False, message=MALFORMED, code=400)

    def test_capacity_from_resource_quotas(self):
        with self.subTest("quotas found"):
            self.check("capacity-quotas", CAPACITY, "deployment_a100_4x2_priority.json", True, audit={
                "capacity": QUOTAS_FIT, "pool": "a100"})
        with self.subTest("pods with declared capacity"):
            self.check("capacity-quotas", CAPACITY, "deployment_l4_timesliced.json", True, audit={
                "capacity": "l4-shared: nvidia.com/gpu used 110 + incoming 6 = 116 of capacity 128 declared in "
                            "settings (90.6%), threshold 95%, fits"})
        with self.subTest("no quota in the namespace"):
            req = request(CAPACITY, "deployment_a100_4x2_priority.json")
            req["namespace"] = req["object"]["metadata"]["namespace"] = "ml-research"
            self.check("capacity-quotas", CAPACITY, "(ml-research)", False, req=req, says=[
                "pool a100: namespace ml-research has no ResourceQuota labelled gpu-admission/pool=a100, so the "
                "pool's pods there would not be counted. Create it: {apiVersion: v1, kind: ResourceQuota, metadata: "
                "{name: gpu-a100, namespace: ml-research, labels: {gpu-admission/pool: \"a100\"}}",
                "The GPU capacity gate denies what it cannot count (unreadableCluster: deny)."],
                audit={"capacity": "pool a100: not checked"})
        with self.subTest("template without the pool's class"):
            self.check("capacity-quotas", CAPACITY, "deployment_a100_4x2.json", False, says=[
                "spec.template.spec has no priorityClassName. Set priorityClassName to one of a100-high, a100-low"])

    def test_capacity_checks_the_namespace_quotas(self):
        req = request(CAPACITY, "deployment_a100_4x2.json")
        with self.subTest("ml-serving: its unscoped quota counts the Deployment, with room"):
            # gpu-a100 and gpu-h100 are scoped to classes the Deployment does not have.
            self.check("capacity-ns-quotas", CAPACITY, "deployment_a100_4x2.json", True, audit={
                "capacity": A100_FITS,
                "quota": "namespace ml-serving: compute: requests.nvidia.com/gpu used 64 + incoming 8 = 72 of 128, fits"})
        with self.subTest("ml-quota: 12 of 16 used, +8 is over"):
            req["namespace"] = req["object"]["metadata"]["namespace"] = "ml-quota"
            self.check("capacity-ns-quotas", CAPACITY, "(ml-quota)", False, req=req, message=(
                "namespace ml-quota: ResourceQuota gpu-quota would hold 20 of its 16 requests.nvidia.com/gpu "
                "(12 used + 8 incoming): 2 of the 4 incoming replicas (2 nvidia.com/gpu each) fit. Lower replicas, "
                "free GPUs in the namespace, or ask for a larger quota."),
                audit={"capacity": A100_FITS})
        with self.subTest("a workload without GPUs makes no call"):
            r = self.check("capacity-ns-quotas", CAPACITY, "deployment_cpu_only.json", True)
            self.assertNotIn("quota", r.get("auditAnnotations") or {}, r)

    def test_capacity_from_resource_quotas_follows_the_cluster(self):
        req = request(CAPACITY, "deployment_a100_4x2_priority.json")
        before = self.fakeapi.state()
        self.check("capacity-quotas", CAPACITY, "deployment_a100_4x2_priority.json", True,
                   audit={"capacity": QUOTAS_FIT})
        try:
            # The quota admission plugin counted 16 more GPUs in ml-serving: 56 + 8 of 64 is over.
            self.fakeapi.write(cluster(extra_quota_used=16))
            hosts.poll(lambda: self.fakeapi.state() != before, 100, 0.1, "fakeapi reloading the snapshot")
            denied = self.wait_for_verdict("capacity-quotas", req, False, "16 more GPUs in a100's quotas")
            self.assertEqual(denied["status"]["message"], QUOTAS_FULL, denied)
        finally:
            self.fakeapi.write(cluster())
        accepted = self.wait_for_verdict("capacity-quotas", req, True, "the quota back at 24")
        self.assertEqual(accepted["auditAnnotations"]["capacity"], QUOTAS_FIT, accepted)

    def test_capacity_burst_brakes(self):
        # brake-a admitted 12 GPUs within the hour (8 of them 120 s before STARTED, which leave
        # the window an hour after their creation): 12 + 8 is over its 16.
        again = rfc3339(STARTED - 120 + 3600)
        with self.subTest("a namespace over its brake"):
            self.check("capacity-brakes", CAPACITY, "brake-a", False, req=brake_request("brake-a"), message=(
                "pool l40s: namespace brake-a was admitted 12 nvidia.com/gpu in the last 1h (2 pods: 12 by deployment serve); with this "
                "workload's 8 that is 20, over its burst brake of 16 per 1h (burstBrakes.perNamespace): it may try "
                f"again at {again} (when enough of those pods have left the window, if nothing else is admitted "
                "meanwhile); team t1 was admitted 20 nvidia.com/gpu in the last 1h (3 pods: 12 by deployment serve, 8 by job train); with this workload's 8 "
                "that is 28, over its burst brake of 24 per 1h (burstBrakes.perTeam): it may try again at "
                f"{again} (when enough of those pods have left the window, if nothing else is admitted meanwhile)."))
        with self.subTest("its sibling namespace of the team: under its own brake, over the team's"):
            # brake-b: 8 within the hour (its pod of 3 hours ago is out): 16 of 16 fits; team t1 does not.
            response = self.check("capacity-brakes", CAPACITY, "brake-b", False, req=brake_request("brake-b"),
                                  says=["pool l40s: team t1 was admitted 20 nvidia.com/gpu in the last 1h (3 pods: 12 by deployment serve, 8 by job train)"])
            self.assertNotIn("namespace brake-b was admitted", response["status"]["message"])
            self.assertIn("namespace brake-b nvidia.com/gpu admitted 8 + incoming 8 = 16 of 16 per 1h, fits",
                          response["auditAnnotations"]["burst-brake"])
        with self.subTest("a namespace of another team"):
            self.check("capacity-brakes", CAPACITY, "brake-c", True, req=brake_request("brake-c"), audit={
                "burst-brake": "l40s: namespace brake-c nvidia.com/gpu admitted 8 + incoming 8 = 16 of 16 per 1h, "
                               "fits; l40s: team t2 nvidia.com/gpu admitted 8 + incoming 8 = 16 of 24 per 1h, fits"})

    def wait_for_verdict(self, policy_id, req, allowed, what):
        """Sends `req` until its verdict is `allowed` (bounded tries); the last response."""
        response = None
        for _ in range(FLIP_TRIES):
            response = self.review(policy_id, req)
            if response.get("allowed") is allowed:
                return response
            time.sleep(FLIP_INTERVAL)
        self.fail(f"{what}: the verdict did not become allowed={allowed} after {FLIP_TRIES} tries "
                  f"{FLIP_INTERVAL} s apart; last answer: {json.dumps(response)[:2000]}")

    def test_capacity_follows_the_cluster(self):
        req = request(CAPACITY, "deployment_a100_4x2.json")
        before = self.fakeapi.state()
        self.check("capacity", CAPACITY, "deployment_a100_4x2.json", True, audit={"capacity": A100_FITS})
        try:
            # One more 8-GPU pod in pool a100: 48 used of 56, +8 is 100%.
            self.fakeapi.write(cluster(extra_a100_pods=1))
            hosts.poll(lambda: self.fakeapi.state() != before, 100, 0.1, "fakeapi reloading the snapshot")
            denied = self.wait_for_verdict("capacity", req, False, "one more pod in pool a100")
            self.assertEqual(denied["status"]["message"], A100_FULL, denied)
            self.assertEqual(denied["auditAnnotations"]["capacity"],
                             "a100: nvidia.com/gpu used 48 + incoming 8 = 56 of 56 allocatable (100.0%), "
                             "threshold 90%, over", denied)
        finally:
            self.fakeapi.write(cluster())
        # And back: the pod is gone, the same request fits again.
        accepted = self.wait_for_verdict("capacity", req, True, "the extra pod removed")
        self.assertEqual(accepted["auditAnnotations"]["capacity"], A100_FITS, accepted)

    # -- gpu-autoscaler-policy ---------------------------------------------------------

    def test_autoscaler(self):
        # Target Deployment ml-serving/llm-a100 (2 GPUs per pod) in pool a100: 7 schedulable
        # nodes of 8 GPUs (one is cordoned), 56 allocatable, so 28 replicas fit.
        ceiling = {"ceiling": "a100: 56 nvidia.com/gpu (nodes), 28 fit"}
        with self.subTest("hpa_cpu_gpu_deployment.json"):
            self.check("autoscaler", AUTOSCALER, "hpa_cpu_gpu_deployment.json", False, audit=ceiling, message=(
                "HorizontalPodAutoscaler ml-serving/llm-a100: it scales Deployment llm-a100 (2 nvidia.com/gpu per "
                "replica) on cpu only, and CPU utilization does not follow GPU inference load. Scale on requests per "
                "second, queue depth or a GPU metric with a Pods or External metric (e.g. vllm:num_requests_waiting "
                "or DCGM_FI_DEV_GPU_UTIL through a metrics adapter), or with a KEDA ScaledObject and a prometheus "
                "trigger."))
        for name in ("hpa_external_gpu_deployment.json", "scaledobject_prometheus.json"):
            with self.subTest(name):
                self.check("autoscaler", AUTOSCALER, name, True, audit=ceiling)
        with self.subTest("hpa_max_replicas_over_pool.json"):
            self.check("autoscaler", AUTOSCALER, "hpa_max_replicas_over_pool.json", False, message=(
                "HorizontalPodAutoscaler ml-serving/llm-a100: maxReplicas 40 x 2 nvidia.com/gpu per replica = 80 "
                "nvidia.com/gpu, more than pool a100 can ever hold (56 nvidia.com/gpu allocatable on its 7 "
                "schedulable nodes of 8). The largest maxReplicas that fits is 28: set maxReplicas to 28 or less. "
                "If pool a100 autoscales, give its ceiling in the policy settings (pools[0].maxAllocatable, "
                "karpenterNodePool or clusterAutoscaler)."))
        with self.subTest("scaledobject_cpu.json"):
            self.check("autoscaler", AUTOSCALER, "scaledobject_cpu.json", True, warns=[
                "ScaledObject ml-serving/llm-a100: it scales Deployment llm-a100 (2 nvidia.com/gpu per replica) on "
                "cpu triggers only"])
        with self.subTest("hpa_cpu_web.json"):
            self.check("autoscaler", AUTOSCALER, "hpa_cpu_web.json", True,
                       audit={"target": "Deployment frontend/web: no GPU"})
        with self.subTest("scaledjob_over_declared_capacity.json"):
            self.check("autoscaler", AUTOSCALER, "scaledjob_over_declared_capacity.json", False,
                       says=["The largest maxReplicaCount that fits is 8"])
        with self.subTest("hpa_research_namespace_max.json"):
            # The snapshot has no Deployment research-nlp/summarizer: the host's not-found answer.
            self.check("autoscaler", AUTOSCALER, "hpa_research_namespace_max.json", False, says=[
                "HorizontalPodAutoscaler research-nlp/summarizer: its target Deployment research-nlp/summarizer was "
                "not found: create the target before its autoscaler"])
        with self.subTest("hpa_malformed.json"):
            self.check("autoscaler", AUTOSCALER, "hpa_malformed.json", False, code=400, says=[
                "spec.maxReplicas: must be a non-negative integer, got \"eight\""])

    def test_scale_from_zero(self):
        # Pool h100-serving has no node; its ceiling (maxAllocatable) is 64 GPUs. Both policies,
        # given the same pools block, accept 8 replicas of 2 GPUs.
        self.check("capacity-scale-from-zero", CAPACITY, "deployment_serving_8x2.json", True, audit={
            "capacity": "h100-serving: nvidia.com/gpu used 0 + incoming 16 = 16 of 64 it can grow to (25.0%), "
                        "threshold 85%, fits (ceiling 64 from maxAllocatable in settings, 0 allocatable now)"})
        self.check("autoscaler-scale-from-zero", AUTOSCALER, "hpa_scale_from_zero.json", True, audit={
            "ceiling": "h100-serving: 64 nvidia.com/gpu (maxAllocatable), 32 fit"})


if __name__ == "__main__":
    hosts.install_signal_handlers()
    unittest.main(verbosity=2)
