"""Kubewarden's own policies that kwctl_bench.py and policy_server_bench.py measure beside ours.

Both come from https://github.com/kubewarden/policies at commit COMMIT, built (release,
wasm32-wasip1, their Cargo profile and lock file) and annotated by
`bench/kubewarden/build-kubewarden-policies.sh <checkout> [/work/kw-policies]`; no Kubewarden
code is kept in this repository. Each is measured only when its environment variable names its
module:

  KUBEWARDEN_LABELS_POLICY=<dir>/labels-policy.wasm      labels-policy 0.1.10, beside our labels
                                                         policy on its GPU Pod and Deployment, and
                                                         beside routing and VRAM fit on theirs
  KUBEWARDEN_MUTATING_POLICY=<dir>/capabilities-psp.wasm capabilities-psp 1.0.13, beside our
                                                         routing policy on the Pod and Deployment
                                                         it patches

capabilities-psp is the mutating policy because, like routing, it validates a workload's pod
spec and then changes it (each container's securityContext), for Pods and for Deployments (on
CREATE), handing the host the mutated object to compute the JSONPatch from, as routing does. The
other Rust mutating policies fit less: container-resources is written in Go now, and its defaults
would not change our requests (their containers set requests and limits);
allow-privilege-escalation-psp changes one boolean; user-group-psp calls the host for image
configuration.

The settings, the requests and the environment variables are in kubewarden_policies.json beside
this file, which gpu-bench (`gpu-bench guest-work`, bench/src/guest_work.rs) reads too.
"""

import json
from pathlib import Path

SHARED = json.loads((Path(__file__).resolve().parent / "kubewarden_policies.json").read_text())

COMMIT = SHARED["commit"]
BUILD_SCRIPT = "bench/kubewarden/build-kubewarden-policies.sh"

LABELS_POLICY_ENV = SHARED["labels"]["env"]
# The labels our labels policy requires by default, in labels-policy's settings (`criteria` over
# label names on the object's own metadata.labels).
LABELS_POLICY_SETTINGS = SHARED["labels"]["settings"]
# Our labels policy's GPU Pods and Deployments, labelled and not (bench/src/cases.rs): (kind, file
# relative to policies/gpu-labels-policy).
LABELS_POLICY_REQUESTS = tuple(tuple(r) for r in SHARED["labels"]["requests"])
# The GPU Pod and Deployment of our other static policies, which labels-policy also runs on so
# that each of ours is compared with it on its own requests: {policy: ((kind, file relative to
# policies/<policy>), ...)}.
LABELS_POLICY_ALSO_BESIDE = {policy: tuple(tuple(r) for r in requests)
                             for policy, requests in SHARED["labels"]["also_beside"].items()}

MUTATING_POLICY_ENV = SHARED["mutating"]["env"]
# Every capability dropped from every container (what the Pod Security Standards' restricted
# profile asks for): on routing's requests, whose containers set no securityContext, the policy
# adds `securityContext.capabilities` (drop ALL) to each container.
MUTATING_POLICY_SETTINGS = SHARED["mutating"]["settings"]
# Routing's Pod and Deployment that it patches (bench/src/cases.rs): (kind, file relative to
# policies/gpu-pool-routing-policy).
MUTATING_POLICY_REQUESTS = tuple(tuple(r) for r in SHARED["mutating"]["requests"])


def mutating_policy_note(name, module):
    """One sentence for a table note: which policy, which settings, what it changes."""
    return (f"`{name}` is Kubewarden's capabilities-psp policy (`{module}`, built from "
            f"kubewarden/policies {COMMIT[:12]}) on routing's Pod and Deployment requests with settings "
            f"`{json.dumps(MUTATING_POLICY_SETTINGS)}`: it checks the containers' added capabilities, "
            "then adds `securityContext: {capabilities: {add: [], drop: [ALL]}}` to each container "
            "(a Deployment's pod template's), returning the mutated object for the host to compute "
            "the JSONPatch from, as routing does (on these requests it adds the pool label, "
            "nodeSelector and tolerations, and on the Deployment's template the priority class and "
            "node affinity too).")


def module_from_env(environ, name):
    """The module file named by environment variable `name`, None when unset; ValueError when it
    names no file."""
    value = environ.get(name)
    if not value:
        return None
    path = Path(value)
    if not path.is_file():
        raise ValueError(f"{name}={value}: no such file (build it with {BUILD_SCRIPT})")
    return path

