#!/usr/bin/env python3
"""How far above its threshold a pool ends up when admissions race for its last GPUs, through
Kubewarden's real policy-server (its workers, its reflector cache of the cluster), with and without
the capacity gate's `pools[].headroom`: a section of BENCHMARKS.md.

The cluster (fakeapi): pool a100 of --nodes nodes x 8 GPUs (64 by default), threshold 90% (57 GPUs
may be held), and Running pods holding all but --free of them (49: exactly 8 free under the
threshold). One policy-server runs the gate once per headroom in --headrooms (policy ids `h0`,
`h4`...; `h0` has no headroom). A round: the pool is reset to those pods (and the round waits until
policy-server's cache shows it), then --concurrency threads (16) each POST the AdmissionReview of a
new bare Pod asking for 1 GPU at the same moment (a barrier); each Pod the gate allows is added to
the fakeapi snapshot as soon as its answer arrives, as the API server would persist it (the
snapshot rewritten and `POST /fakeapi/reload`: a watch event reaches policy-server's reflector).
When every answer is in, the round waits until the gate's audit shows every added pod and reports
the GPUs held against the threshold: `overshoot` = held - 57 (0 when at or under). --rounds rounds
per headroom, interleaved.

The section replaces the one between <!-- overshoot:begin --> and <!-- overshoot:end --> in
BENCHMARKS.md (appended when absent). Without kwctl/policy-server on PATH it prints SKIPPED.

usage: bench/kubewarden/overshoot_bench.py [--out BENCHMARKS.md | --print] [--rounds 5]
                                           [--headrooms 0,4,8] [--concurrency 16] [--free 8]
"""

import json
import os
import re
import sys
import threading
import time
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import policy_server_bench as psb  # noqa: E402
from policy_server_bench import hosts  # noqa: E402
import marked_section  # noqa: E402

BEGIN, END = marked_section.markers("overshoot")
CAPACITY = psb.CAPACITY
POOL, POOL_LABEL, GPUS_PER_NODE = psb.POOL, psb.POOL_LABEL, psb.GPUS_PER_NODE
THRESHOLD = 90
NAMESPACE = "ml-batch"
GPU = "nvidia.com/gpu"


def settings(headroom):
    pool = {"name": POOL, "nodeSelector": {"matchLabels": {POOL_LABEL: POOL}}, "thresholdPercent": THRESHOLD}
    if headroom:
        pool["headroom"] = headroom
    return {"pools": [pool]}


def pod(name, gpus, node=None):
    """A Pod of the pool holding `gpus` GPUs: Running on `node`, or Pending (just created)."""
    spec = {"containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.08-py3",
                            "resources": {"limits": {GPU: str(gpus)}}}],
            "nodeSelector": {POOL_LABEL: POOL}}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}",
                         "labels": {POOL_LABEL: POOL, "workload-type": "batch"}},
            "spec": spec, "status": {"phase": "Running" if node else "Pending"}}


def base_cluster(nodes, used):
    """The pool's nodes and Running pods holding `used` GPUs (up to 8 per node)."""
    objects = [psb.full_node(i) for i in range(nodes)]
    objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    k = 0
    for n in range(nodes):
        take = min(GPUS_PER_NODE, used)
        if take:
            objects.append(pod(f"held-{k}", take, f"gpu-{POOL}-{n}"))
            k += 1
        used -= take
    return objects


def review(name):
    """The AdmissionReview of CREATE of a bare 1-GPU Pod named `name`."""
    obj = pod(name, 1)
    del obj["status"]
    return hosts.admission_review({
        "uid": f"req-{name}", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "name": name, "namespace": NAMESPACE, "operation": "CREATE",
        "userInfo": {"username": "bench", "groups": ["system:authenticated"]},
        "object": obj, "oldObject": None, "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}})


USED = re.compile(r"nvidia\.com/gpu used (\d+) ")


def seen_used(server, pid):
    """GPUs in use as the gate sees them now (its audit of a probe that is never added)."""
    response = server.validate(pid, review("probe"), timeout=60)
    found = USED.search((response.get("auditAnnotations") or {}).get("capacity", ""))
    if not found:
        raise hosts.HostError(f"{pid}: no GPUs in use in the audit of {response}")
    return int(found.group(1))


class Cluster:
    """The fakeapi snapshot: the base objects and the pods added this round."""

    def __init__(self, api, base):
        self.api, self.base, self.added, self.lock = api, base, [], threading.Lock()

    def reset(self, base):
        with self.lock:
            self.base, self.added = base, []
            self._publish()

    def add(self, obj):
        with self.lock:
            self.added.append(obj)
            self._publish()

    def _publish(self):
        self.api.write(self.base + self.added)
        status, body = hosts.http("POST", f"{self.api.url}/fakeapi/reload", b"", timeout=30)
        if status != 200:
            raise hosts.HostError(f"fakeapi reload: HTTP {status} {body[:300]!r}")


def race(server, pid, cluster, round_no, concurrency):
    """One round: `concurrency` admissions at once; allowed pods added as their answers arrive.
    Returns (allowed, denied, errors, seconds from the barrier to the last answer)."""
    barrier = threading.Barrier(concurrency + 1)
    results = [None] * concurrency
    answered = [None] * concurrency
    reviews = [review(f"r{round_no}-{pid}-{i}") for i in range(concurrency)]

    def one(i):
        barrier.wait()
        try:
            response = server.validate(pid, reviews[i], timeout=120)
        except hosts.HostError as e:
            results[i] = f"error: {e}"[:200]
            return
        answered[i] = time.monotonic()
        if response.get("allowed"):
            cluster.add(pod(reviews[i]["request"]["name"], 1))
            results[i] = "allowed"
        else:
            results[i] = "denied"

    threads = [threading.Thread(target=one, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.monotonic()
    for t in threads:
        t.join()
    seconds = time.monotonic() - started
    errors = [r for r in results if r.startswith("error")]
    first = min((t for t in answered if t is not None), default=started) - started
    return results.count("allowed"), results.count("denied"), errors, seconds, first


def run(args, log):
    nodes = args.nodes
    allocatable = nodes * GPUS_PER_NODE
    limit = THRESHOLD * allocatable // 100
    module = psb.annotated(CAPACITY)
    rows = []
    with hosts.Host("overshoot-bench") as host:
        base = base_cluster(nodes, limit - args.free)
        api = host.start_fakeapi(base, poll_interval=0)
        cluster = Cluster(api, base)
        aware = hosts.context_aware_resources(module)
        headrooms = [int(h) for h in args.headrooms.split(",")]
        entries = {f"h{h}": hosts.PolicyEntry(f"file://{module}", settings=settings(h), context_aware_resources=aware,
                                              host_capabilities=["kubernetes/*"])
                   for h in headrooms}
        server = host.start_policy_server(entries, api)
        try:
            workers = os.cpu_count()
            log(f"  policy-server ready in {server.startup_seconds:.1f} s; pool {allocatable} GPUs, limit {limit} "
                f"at {THRESHOLD}%")
            # (headroom, where the pool starts: --free GPUs under the threshold, or under the
            # line the headroom makes the gate stop at).
            runs = [(h, start) for h in headrooms for start in (("threshold", "stop") if h else ("threshold",))]
            for round_no in range(args.rounds):
                for h, start in runs:
                    pid = f"h{h}"
                    used = limit - args.free - (h if start == "stop" else 0)
                    cluster.reset(base_cluster(nodes, used))
                    hosts.poll(lambda: seen_used(server, pid) == used, 600, 0.05, f"{pid}: the reset pool")
                    allowed, denied, errors, seconds, first = race(server, pid, cluster, round_no, args.concurrency)
                    t = time.monotonic()
                    hosts.poll(lambda: seen_used(server, pid) == used + allowed, 600, 0.05,
                               f"{pid}: the {allowed} added pods")
                    settle = time.monotonic() - t
                    held = used + allowed
                    row = {"round": round_no + 1, "headroom": h, "start": start, "used": used, "allowed": allowed, "denied": denied,
                           "errors": errors, "held": held, "overshoot": max(0, held - limit),
                           "seconds": seconds, "first": first, "settle": settle}
                    rows.append(row)
                    log(f"  round {round_no + 1} headroom {h} ({used} held at the start): {allowed} allowed, {denied} denied"
                        f"{', errors ' + str(errors) if errors else ''}; pool holds {held} of {allocatable} "
                        f"(limit {limit}): {row['overshoot']} over, answers from {first * 1000:.0f} to {seconds * 1000:.0f} ms, the "
                        f"cache showed every added pod {settle * 1000:.0f} ms after the last answer")
        finally:
            host.stop(server.process)
    meta = {"nodes": nodes, "allocatable": allocatable, "limit": limit, "free": args.free, "workers": workers}
    return rows, meta


def section(rows, meta):
    by = {}
    for r in rows:
        by.setdefault((r["headroom"], r["start"]), []).append(r)
    free, limit = meta["free"], meta["limit"]
    out = [BEGIN, "", "## Real host: overshoot when admissions race for a pool's last GPUs, policy-server 1.36", "",
           f"Written by `bench/kubewarden/overshoot_bench.py --rounds {meta['rounds']}` on {meta['date']}; "
           f"{meta['host']}; load average {meta['load_before']} before, {meta['load_after']} after (other work on "
           f"the machine shows there); whole run {meta['seconds']:.0f} s. Pool a100 in fakeapi: {meta['nodes']} "
           f"nodes x 8 GPUs = {meta['allocatable']}, threshold {THRESHOLD}% (at most {limit} held), Running pods "
           f"holding all but {free} GPUs under the threshold, or (*start: stop line*) all but {free} under the "
           f"line the headroom makes the gate stop at ({limit} - headroom). Each round: {meta['concurrency']} "
           "threads POST a CREATE of a bare 1-GPU Pod to policy-server at the same moment (policy-server's "
           f"default workers: one per CPU, {meta['workers']} here; the gate's lists answered from its reflector "
           "cache); each allowed Pod is added to the fakeapi snapshot as soon as its answer arrives (snapshot "
           "rewritten, `POST /fakeapi/reload`: a watch event to policy-server), as the API server would persist "
           "it. *held*: GPUs the pool holds once every added pod is in policy-server's cache; *over*: held above "
           f"the threshold's {limit}; *cache caught up*: from the last answer until a probe's audit showed every "
           "added pod (the watch lag, plus up to 50 ms of polling). The policy is the gate with the "
           "`pools[].headroom` of the row.", "",
           "| headroom | start | rounds | allowed per round | held at the end | over the threshold: min / median / max "
           "| first / last answer (median) | cache caught up (median) |",
           "|---:|---|---:|---|---|---|---:|---:|"]
    for (h, start), rs in sorted(by.items()):
        overs = sorted(r["overshoot"] for r in rs)
        secs = sorted(r["seconds"] for r in rs)
        firsts = sorted(r["first"] for r in rs)
        settle = sorted(r["settle"] for r in rs)
        allowed = ", ".join(str(r["allowed"]) for r in rs)
        errors = sum(len(r["errors"]) for r in rs)
        where = (f"{free} free under the threshold ({rs[0]['used']} held)" if start == "threshold"
                 else f"{free} free under the stop line ({rs[0]['used']} held)")
        out.append(f"| {h or 'none'} | {where} | {len(rs)} | {allowed}{f' ({errors} errors)' if errors else ''} | "
                   f"{', '.join(sorted(set(str(r['held']) for r in rs)))} | {overs[0]} / {overs[len(overs) // 2]} / "
                   f"{overs[-1]} | {firsts[len(firsts) // 2] * 1000:.0f} / {secs[len(secs) // 2] * 1000:.0f} ms | {settle[len(settle) // 2] * 1000:.0f} ms |")
    out += ["", "Reading: every admission judges the pool as policy-server's cache shows it when its evaluation "
            "starts; a pod admitted a moment earlier is in that snapshot only once the API server has persisted it "
            "and the watch event has reached the cache. Here policy-server evaluated the whole burst before the "
            "first allowed pod, added to fakeapi as its answer arrived, reached its cache (every pod that fitted the "
            "room all of them saw was allowed, although the cache caught up within milliseconds of the last "
            "answer): each passed alone, and the pool ended above its threshold by what they took together beyond "
            "that room. A real API server adds its own persist and watch delay to that lag. A headroom of H does not "
            "change that arithmetic for a burst; it moves the line the gate stops at H GPUs below the threshold, so "
            "a pool the gate has filled (as far as it lets it: the *stop line* rows) ends a burst of R GPUs at most "
            "R - H - (room it saw) above its threshold instead of R - (room it saw): the overshoot is bounded by the "
            "burst one watch lag can bring, less H. The bound costs H GPUs that stay idle under the threshold when "
            "nothing races; a headroom at least the room the burst sees admits nothing of it (the rows where the "
            "pool starts with no more room than the headroom). Size H to the largest burst expected within one "
            "watch lag (policy-server replicas x workers x the largest pod, or the burst brake's window). No "
            "admission policy can do better without state shared between calls: see the gate's README (What an "
            "admission policy cannot prevent) and SECURITY.md.", "", END]
    return "\n".join(out)


def main():
    p = marked_section.argument_parser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--headrooms", default="0,4,8")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--free", type=int, default=8)
    p.add_argument("--nodes", type=int, default=8)

    def measure(args, log):
        rows, meta = run(args, log)
        meta.update({"rounds": args.rounds, "concurrency": args.concurrency})
        return rows, meta

    return psb.section_main(p, BEGIN, END, measure, section)

if __name__ == "__main__":
    sys.exit(main())
