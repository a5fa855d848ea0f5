"""What the fault, restart, scale and soak runs share (Python 3 stdlib only):

- the policies as policy-server loads them from the annotated modules (file:// URIs: the
  registry path is test_policy_server.py's subject), with fakeapi's cluster of that test;
- a kubeconfig that sends policy-server to a FaultProxy instead of fakeapi;
- the mixed requests of the load (every policy, GPU and non-GPU, good and bad input), each
  with the verdict it must get, and `judge`, which names what an answer was;
- RoundRobin, a tiny HTTP front for several policy-server replicas behind one address;
- RSS of a process.
"""

import http.client
import itertools
import json
import os
import re
import sys
import threading
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import hosts  # noqa: E402
import test_policy_server as base  # noqa: E402

LABELS, ROUTING, VRAM, CAPACITY, AUTOSCALER = base.LABELS, base.ROUTING, base.VRAM, base.CAPACITY, base.AUTOSCALER


def missing_tools():
    """Why the fault runs cannot run here, or None (no registry needed: modules are files)."""
    missing = [t for t in ("policy-server",) if hosts.shutil.which(t) is None]
    problems = [f"{', '.join(missing)} not on PATH"] if missing else []
    if not hosts.FAKEAPI.is_file():
        problems.append(f"{hosts.FAKEAPI} not found (set GPU_ADMISSION_SHARED to the shared folder)")
    if not hosts.TRUST_CONFIG.is_file():
        problems.append(f"{hosts.TRUST_CONFIG} not found")
    for policy in base.POLICIES:
        if not (base.MODULES_DIR / policy / "annotated-policy.wasm").is_file():
            problems.append(f"{base.MODULES_DIR / policy / 'annotated-policy.wasm'} not found (make annotate)")
    return "; ".join(problems) or None


def entry(policy, settings=None, mutating=False, host_calls=True, timeout_eval_seconds=None):
    path = base.module_path(policy)
    return hosts.PolicyEntry(f"file://{path}", settings=settings, allowed_to_mutate=mutating,
                             context_aware_resources=hosts.context_aware_resources(path),
                             host_capabilities=["kubernetes/*"] if host_calls else None,
                             timeout_eval_seconds=timeout_eval_seconds)


def policies():
    """The load's policies: every policy, the context-aware ones with their host calls."""
    td = base.test_data
    return {
        "labels": entry(LABELS, settings={}, host_calls=False),
        "routing": entry(ROUTING, settings=td(ROUTING, "settings.yml"), mutating=True, host_calls=False),
        "routing-team": entry(ROUTING, settings=td(ROUTING, "settings_team.yml"), mutating=True),
        "vram": entry(VRAM, settings=td(VRAM, "settings.yml"), host_calls=False),
        "vram-registry": entry(VRAM, settings=td(VRAM, "settings_registry.yml")),
        "capacity": entry(CAPACITY, settings=td(CAPACITY, "settings.yml")),
        "autoscaler": entry(AUTOSCALER, settings=td(AUTOSCALER, "settings.yml")),
    }


def proxy_kubeconfig(fakeapi, url, path):
    """fakeapi's kubeconfig (JSON) with its cluster's server replaced by `url` (a FaultProxy)."""
    config = json.loads(Path(fakeapi.kubeconfig).read_text())
    clusters = config.get("clusters") or []
    if len(clusters) != 1:
        raise hosts.HostError(f"{fakeapi.kubeconfig}: expected one cluster, found {len(clusters)}")
    clusters[0]["cluster"]["server"] = url
    Path(path).write_text(json.dumps(config, indent=2))
    return Path(path)


def rss_kib(pid):
    """Resident set size of `pid` in KiB (VmRSS of /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise hosts.HostError(f"/proc/{pid}/status has no VmRSS")


# --------------------------------------------------------------------------------------
# How a denial names a failed host call
# --------------------------------------------------------------------------------------

# The class of a failed host call, as every policy names it in a denial
# (shared/src/cluster/failure.rs, FailureClass).
HOST_ERROR_CLASSES = {
    "not granted": "not granted to this policy",
    "rbac": "forbidden by RBAC",
    "not found": "not found",
    "unreachable": "API server unreachable",
    "timeout": "API server timed out",
    "error": "API server error",
}
# The policies name the class (shared/src/cluster/failure.rs); False
# checks only that a denial is about a host call (for modules older than the classes, e.g.
# through GPU_ADMISSION_MODULES_DIR).
CLASSES_IN_MESSAGES = os.environ.get("GPU_ADMISSION_HOST_ERROR_CLASSES", "1") != "0"


def host_failure_problem(response, host_class):
    """None when `response` denies for a failed host call of class `host_class` (a key of
    HOST_ERROR_CLASSES), else what is wrong with it. The one place that knows how the policies
    phrase it."""
    text = (response.get("status") or {}).get("message", "")
    if response.get("allowed") is not False:
        return "not denied"
    if not re.search(r"cannot (get|list|be read)", text):
        return "does not say what could not be read"
    if CLASSES_IN_MESSAGES and not _names_only(text, host_class):
        return f"does not name the class {HOST_ERROR_CLASSES[host_class]!r} (and no other)"
    return None


def _names_only(text, host_class):
    others = [p for k, p in HOST_ERROR_CLASSES.items() if k != host_class and k != "not found"]
    return HOST_ERROR_CLASSES[host_class] in text and not any(p in text for p in others)


# --------------------------------------------------------------------------------------
# The requests of the load, each with its verdict
# --------------------------------------------------------------------------------------


@dataclass
class Case:
    """One request: POSTed to /validate/<policy_id> as `body` (bytes), with what the answer
    must be: allowed True/False, `says` in the denial's message, `audit` among the audit
    annotations' keys; or `bad`: the body is not a well-formed AdmissionReview and the answer
    must be a denial or a 4xx."""

    policy_id: str
    name: str
    body: bytes
    allowed: object = None
    says: str = ""
    gpu: bool = True
    bad: bool = False
    audit: str = ""


def _case(policy_id, policy, name, allowed, says="", gpu=True):
    return Case(policy_id, name, json.dumps(hosts.admission_review(base.request(policy, name))).encode(),
                allowed, says, gpu)


def good_cases():
    """Requests whose verdict does not move while the load's cluster changes (see soak.py)."""
    return [
        _case("labels", LABELS, "pod_gpu_labelled.json", True),
        _case("labels", LABELS, "pod_gpu_missing_labels.json", False, "label 'workload-type' is missing"),
        _case("labels", LABELS, "deployment_no_gpu.json", True, gpu=False),
        _case("routing", ROUTING, "pod_batch.json", True),
        _case("routing", ROUTING, "deployment_no_pool.json", False, "matches no GPU pool"),
        _case("routing", ROUTING, "deployment_no_gpu.json", True, gpu=False),
        _case("routing-team", ROUTING, "deployment_interactive.json", True),
        _case("vram", VRAM, "deployment_llama_8b_on_l4.json", True),
        _case("vram", VRAM, "deployment_llama_70b_on_2_a10g.json", False, "needs ~167 GiB GPU memory"),
        _case("vram-registry", VRAM, "deployment_registry_model.json", True),
        _case("capacity", CAPACITY, "deployment_a100_4x2.json", True),
        _case("capacity", CAPACITY, "job_mig_3g.json", False, "pool a100-mig"),
        _case("capacity", CAPACITY, "deployment_l4_timesliced.json", True),
        _case("capacity", CAPACITY, "deployment_cpu_only.json", True, gpu=False),
        _case("autoscaler", AUTOSCALER, "hpa_external_gpu_deployment.json", True),
        _case("autoscaler", AUTOSCALER, "hpa_max_replicas_over_pool.json", False, "The largest maxReplicas"),
        _case("autoscaler", AUTOSCALER, "hpa_cpu_web.json", True, gpu=False),
    ]


def deep(levels):
    return "[" * levels + "]" * levels


def bad_cases():
    """Input no policy can judge: each must be answered with a denial or a 4xx."""
    whole = json.dumps(hosts.admission_review(base.request(LABELS, "pod_gpu_labelled.json")))
    pod = base.request(LABELS, "pod_gpu_labelled.json")
    big = json.loads(json.dumps(pod))
    big["object"]["metadata"]["annotations"] = {"filler": "x" * (2 * 1024 * 1024)}
    nested = json.loads(json.dumps(pod))
    nested["object"]["metadata"]["annotations"] = {"deep": "PLACEHOLDER"}
    nested_text = json.dumps(hosts.admission_review(nested)).replace('"PLACEHOLDER"', deep(5000))
    deployment = base.request(LABELS, "deployment_missing_team.json")
    as_pod = json.loads(json.dumps(deployment))  # a Deployment said to be a Pod
    as_pod["kind"] = as_pod["requestKind"] = {"group": "", "version": "v1", "kind": "Pod"}
    as_pod["resource"] = as_pod["requestResource"] = {"group": "", "version": "v1", "resource": "pods"}
    pod_as_deployment = json.loads(json.dumps(base.request(LABELS, "pod_gpu_missing_labels.json")))
    pod_as_deployment["kind"] = {"group": "apps", "version": "v1", "kind": "Deployment"}
    kind_number = json.loads(json.dumps(pod))
    kind_number["kind"] = {"group": "", "version": "v1", "kind": 42}
    not_review = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}
    cases = [
        ("truncated", whole[: len(whole) // 2].encode()),
        ("truncated-after-request", whole[:-2].encode()),
        ("empty", b""),
        ("not-json", b"\x00\xffnot json at all"),
        ("2-MB-object", json.dumps(hosts.admission_review(big)).encode()),
        ("nesting-5000", nested_text.encode()),
        ("kind-is-a-number", json.dumps(hosts.admission_review(kind_number)).encode()),
        ("a-pod-not-a-review", json.dumps(not_review).encode()),
        ("review-without-request", json.dumps({"apiVersion": "admission.k8s.io/v1",
                                               "kind": "AdmissionReview"}).encode()),
        ("request-is-a-list", json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                          "request": [1, 2]}).encode()),
    ]
    malformed = json.dumps(hosts.admission_review(base.request(CAPACITY, "deployment_malformed.json"))).encode()
    out = [Case(policy_id, name, body, bad=True)
           for policy_id in ("labels", "capacity") for name, body in cases]
    # request.kind naming another kind than the object's: the object is judged as what it
    # is (labels denies both unlabelled GPU workloads, the gate finds their templates and no
    # pool in them), not as what request.kind says.
    for name, review in (("deployment-said-to-be-a-pod", as_pod), ("pod-said-to-be-a-deployment", pod_as_deployment)):
        body = json.dumps(hosts.admission_review(review)).encode()
        out.append(Case("labels", name, body, allowed=False, says="breaks the GPU admission rules"))
        out.append(Case("capacity", name, body, allowed=True, audit="no-pool"))
    out.append(Case("capacity", "deployment_malformed.json", malformed, allowed=False, says="cannot be read"))
    return out


def judge(case, status, body):
    """What an answer to `case` was: "right", "wrong", "5xx" or "4xx" (a 4xx is right for
    bad input); with a short reason."""
    if status >= 500:
        return "5xx", f"HTTP {status}: {body[:300]!r}"
    if status != 200:
        if case.bad:
            return "right", f"HTTP {status}"
        return "wrong", f"HTTP {status}: {body[:300]!r}"
    try:
        response = json.loads(body)["response"]
    except (ValueError, KeyError, TypeError):
        return "wrong", f"not an AdmissionReview: {body[:300]!r}"
    allowed = response.get("allowed")
    message = (response.get("status") or {}).get("message", "")
    if case.bad:
        return ("right", "denied") if allowed is False and message else ("wrong", f"answered {response}")
    if allowed is not case.allowed:
        return "wrong", f"allowed={allowed} ({message[:300]})"
    if case.says and case.says not in message:
        return "wrong", f"message lacks {case.says!r}: {message[:300]}"
    if case.audit and case.audit not in (response.get("auditAnnotations") or {}):
        return "wrong", f"no audit annotation {case.audit!r}: {response}"
    return "right", ""


def post(url, case, timeout=30.0):
    """(status, body) of POSTing `case` to `url`/validate/<id>; OSError when no answer."""
    _, status, body = post_front(url, case, timeout)
    return status, body


# --------------------------------------------------------------------------------------
# Several replicas behind one address
# --------------------------------------------------------------------------------------


class RoundRobin:
    """An HTTP front on a free 127.0.0.1 port: each request goes to the next backend in turn.
    The backend that answered is named in the X-Backend response header."""

    def __init__(self, backends):
        self.backends = list(backends)
        self._next = itertools.count()
        front = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format, *args):  # noqa: A002
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                index = next(front._next) % len(front.backends)
                parts = urllib.parse.urlsplit(front.backends[index])
                conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
                try:
                    conn.request("POST", self.path, body=body,
                                 headers={"Content-Type": self.headers.get("Content-Type", "application/json")})
                    resp = conn.getresponse()
                    status, data = resp.status, resp.read()
                except OSError as e:
                    status, data = 502, json.dumps({"error": f"backend {index}: {e}"}).encode()
                finally:
                    conn.close()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("X-Backend", str(index))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def post_front(url, case, timeout=30.0):
    """(backend index, status, body) of POSTing `case` to `url`/validate/<id>: the index is the
    RoundRobin backend that answered (-1 without a RoundRobin in front); OSError when no answer."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("POST", f"/validate/{case.policy_id}", body=case.body,
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return int(resp.getheader("X-Backend", "-1")), resp.status, resp.read()
    finally:
        conn.close()
