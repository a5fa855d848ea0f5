#!/usr/bin/env python3
"""gpu-vram-fit-policy's nodeInventory under Kubewarden's real policy-server: what reading the GPU
nodes costs per decision, a section of BENCHMARKS.md.

For each size in --sizes (GPU pods in the cluster, default 1,000 and 10,000), one fakeapi serving
--nodes GPU nodes (default 2,500) with the labels GPU Feature Discovery and the GPU Operator put
on a node (about 45 labels: policy_server_bench.full_node's plus the rest of GFD's) and the pods
(policy_server_bench.full_pod: VRAM fit does not list them, they only make the cluster its size).
One policy-server with VRAM fit twice: `off` (test_data/settings.yml: no host call) and `nodes`
(test_data/settings_nodes.yml: settings.yml with nodeInventory enabled, nodeSelector
nvidia.com/gpu.present=true: one
list of the 2,500 Nodes per decision, from policy-server's reflector cache), and
gpu-labels-policy (no host call) as the host's floor. Request: deployment_llama_8b_on_l4.json
with its nodeSelector on the nodes' product (NVIDIA-A100-SXM4-80GB), accepted by both. For each:
the first request after start-up (the reflector's initial list happens inside it), then hey at
concurrency 1 and 4 sized to about --seconds, then a checked pass (verdict, and for `nodes` the
fit annotation naming the memory the nodes report).

The section replaces the one between <!-- vram-nodes:begin --> and <!-- vram-nodes:end --> in
BENCHMARKS.md (appended when absent). Without kwctl/policy-server on PATH it prints SKIPPED.

usage: bench/kubewarden/vram_nodes_bench.py [--out BENCHMARKS.md | --print] [--sizes 1000,10000]
                                            [--nodes 2500] [--seconds S] [--max-requests N]
"""

import argparse
import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import policy_server_bench as psb  # noqa: E402
from policy_server_bench import hosts  # noqa: E402
import marked_section  # noqa: E402
from host_info import cpu_model  # noqa: E402

BEGIN = "<!-- vram-nodes:begin -->"
END = "<!-- vram-nodes:end -->"
VRAM = psb.VRAM
PRODUCT = "NVIDIA-A100-SXM4-80GB"

# The GFD / GPU Operator labels full_node does not already carry.
MORE_GFD_LABELS = {
    "nvidia.com/cuda.driver.minor": "54", "nvidia.com/cuda.driver.rev": "15",
    "nvidia.com/cuda.driver-version.full": "550.54.15", "nvidia.com/cuda.driver-version.major": "550",
    "nvidia.com/cuda.driver-version.minor": "54", "nvidia.com/cuda.driver-version.revision": "15",
    "nvidia.com/cuda.runtime.major": "12", "nvidia.com/cuda.runtime.minor": "4",
    "nvidia.com/cuda.runtime-version.full": "12.4", "nvidia.com/cuda.runtime-version.major": "12",
    "nvidia.com/cuda.runtime-version.minor": "4", "nvidia.com/gfd.timestamp": "1764806400",
    "nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "0",
    "nvidia.com/gpu.machine": "p4d.24xlarge", "nvidia.com/gpu.mode": "compute",
    "nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/mig.capable": "true",
    "nvidia.com/mps.capable": "false", "nvidia.com/gpu-driver-upgrade-state": "upgrade-done",
    "nvidia.com/gpu.deploy.container-toolkit": "true", "nvidia.com/gpu.deploy.dcgm": "true",
    "nvidia.com/gpu.deploy.dcgm-exporter": "true", "nvidia.com/gpu.deploy.device-plugin": "true",
    "nvidia.com/gpu.deploy.driver": "true", "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
    "nvidia.com/gpu.deploy.node-status-exporter": "true", "nvidia.com/gpu.deploy.operator-validator": "true",
    "feature.node.kubernetes.io/pci-10de.present": "true",
    "feature.node.kubernetes.io/kernel-version.full": "5.15.0-1066-aws",
    "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
}


def gfd_node(i):
    node = psb.full_node(i)
    node["metadata"]["labels"].update(MORE_GFD_LABELS)
    return node


def request():
    r = hosts.read_json(psb.policy_file(VRAM, "test_data/deployment_llama_8b_on_l4.json"))
    r["object"]["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": PRODUCT}
    return r


def run_size(pods, args, log):
    rows = []
    module = psb.annotated(VRAM)
    with hosts.Host("vram-nodes-bench") as host:
        t = time.monotonic()
        objects = [gfd_node(i) for i in range(args.nodes)] + [psb.full_pod(i) for i in range(pods)]
        api = host.start_fakeapi(objects, poll_interval=1.0)
        snapshot_mib = api.snapshot.stat().st_size / 2**20
        log(f"  {pods} pods / {args.nodes} nodes: snapshot {snapshot_mib:.1f} MiB, fakeapi up in "
            f"{time.monotonic() - t:.1f} s")
        aware = hosts.context_aware_resources(module)
        entries = {
            "off": hosts.PolicyEntry(f"file://{module}", settings=psb.policy_file(VRAM, "test_data/settings.yml"), context_aware_resources=aware,
                                     host_capabilities=["kubernetes/*"]),
            "nodes": hosts.PolicyEntry(f"file://{module}", settings=psb.policy_file(VRAM, "test_data/settings_nodes.yml"), context_aware_resources=aware,
                                       host_capabilities=["kubernetes/*"]),
            "floor": hosts.PolicyEntry(f"file://{psb.annotated(psb.LABELS)}", settings={}),
        }
        server = host.start_policy_server(entries, api)
        try:
            log(f"  policy-server ready in {server.startup_seconds:.1f} s")
            review = hosts.admission_review(request())
            floor_review = hosts.admission_review(hosts.read_json(psb.policy_file(psb.LABELS, psb.FLOOR_REQUEST)))
            for pid, rev in (("nodes", review), ("off", review), ("floor", floor_review)):
                def check(response, pid=pid):
                    if not response.get("allowed"):
                        return f"denied: {(response.get('status') or {}).get('message', '')[:300]}"
                    fit = (response.get("auditAnnotations") or {}).get("vram-fit", "")
                    if pid == "nodes" and f"(81920 MiB per GPU, reported by {args.nodes} nodes)" not in fit:
                        return f"vram-fit {fit!r}"
                    return None
                row = {"pods": pods, "nodes": args.nodes, "id": pid, "snapshot_mib": snapshot_mib}
                t = time.monotonic()
                first = server.validate(pid, rev, timeout=120)
                row["first_s"] = time.monotonic() - t
                row["first_problem"] = check(first)
                log(f"  [{pid}] first request {row['first_s'] * 1000:.0f} ms"
                    + (f" ({row['first_problem']})" if row["first_problem"] else ""))
                hosts.poll(lambda: check(server.validate(pid, rev, timeout=120)) is None, 60, 0.5,
                           f"{pid}: the expected answer")
                per_request, _ = psb.time_requests(server, pid, rev, 5)
                body = host.root / f"review-{pid}.json"
                body.write_text(json.dumps(rev))
                row["runs"] = []
                for c in (1, 4):
                    n = psb.sized(per_request, c, args.seconds, args.max_requests)
                    h = psb.run_hey(f"{server.url}/validate/{pid}", body, n, c)
                    counts, problems = psb.checked_pass(server, pid, rev, c, max(4, 2 * c), check)
                    row["runs"].append({"c": c, "n": n, **h, "verdicts": counts, "problems": problems})
                    log(f"  [{pid}] c={c}: {n} requests, p50 {h['p50'] * 1000:.1f} ms, p99 {h['p99'] * 1000:.1f} ms, "
                        f"{h['rps']:.1f} req/s, HTTP {h['codes']}, checked {counts}"
                        f"{' ' + str(problems) if problems else ''}")
                rows.append(row)
            rss = psb.peak_rss_mib(server.process.pid)
            for r in rows:
                r["rss_mib"] = rss
        finally:
            host.stop(server.process)
    return rows


def section(rows, meta):
    out = [BEGIN, "", "## Real host: VRAM fit reading the GPU nodes (nodeInventory), policy-server 1.36", "",
           f"Written by `bench/kubewarden/vram_nodes_bench.py` on {meta['date']}; {meta['host']}; load average "
           f"{meta['load_before']} before, {meta['load_after']} after (other work on the machine shows there); "
           f"whole run {meta['seconds']:.0f} s. "
           "VRAM fit in one policy-server twice, `off` (test_data/settings.yml, no host call) and `nodes` "
           "(the same with `nodeInventory` on: one `list_resources_all` of the GPU Nodes per decision, "
           "answered from policy-server's reflector cache), and gpu-labels-policy as the host's floor, over a "
           "fakeapi cluster of GFD-labelled nodes (about 45 labels each) and GPU pods (not listed by VRAM fit: "
           "they make the cluster its size). Request: `deployment_llama_8b_on_l4.json` with its nodeSelector on "
           f"{PRODUCT}, accepted by both; every `nodes` answer checked to size the GPU by the memory the nodes "
           "report. p50/p99 (nearest rank) and req/s from hey's per-request CSV; *first request*: the first "
           "POST after start-up (for `nodes` the reflector's initial list of the Nodes is inside it).", "",
           "| pods | nodes | snapshot | policy | first request | c | requests | p50 | p99 | req/s | verdicts | policy-server peak RSS |",
           "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    names = {"nodes": "VRAM fit, nodeInventory on", "off": "VRAM fit, nodeInventory off",
             "floor": "floor (gpu-labels-policy)"}
    for r in rows:
        for i, run in enumerate(r["runs"]):
            lead = (f"| {r['pods']:,} | {r['nodes']:,} | {r['snapshot_mib']:.0f} MiB | {names[r['id']]} | "
                    f"{r['first_s'] * 1000:.0f} ms") if i == 0 else "| | | | |"
            verdicts = ", ".join(f"{k} {v}" for k, v in sorted(run["verdicts"].items()))
            problems = f"; problems: {run['problems']}" if run["problems"] else ""
            out.append(f"{lead} | {run['c']} | {run['n']} | {run['p50'] * 1000:.1f} ms | {run['p99'] * 1000:.1f} ms | "
                       f"{run['rps']:.0f} | HTTP {run['codes']}; checked {verdicts}{problems} | "
                       f"{r['rss_mib']:.0f} MiB |")
    def p50(pid, c=1):
        return [run["p50"] * 1000 for r in rows if r["id"] == pid for run in r["runs"] if run["c"] == c]

    def span(values):
        return f"{min(values):.1f}-{max(values):.1f} ms" if values else "n/a"

    out += ["", f"Reading: with `nodeInventory` on, a decision over {rows[0]['nodes']:,} GFD-labelled Nodes took "
            f"{span(p50('nodes'))} (p50, concurrency 1) against {span(p50('off'))} off and {span(p50('floor'))} for "
            "the floor. The list is answered from the reflector cache, but policy-server serializes every listed Node "
            "(field masks do not touch `metadata`: all its labels and annotations) into JSON for every call, and the "
            "module reads it all: the cost grows with the Nodes selected, not with the pods. Select only the GPU "
            "nodes that matter with `nodeInventory.nodeSelector`; no list is made when the request has no GPU pod, "
            "when the setting is off, or on an UPDATE that changes none of the policy's inputs.", "", END]
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out")
    p.add_argument("--print", action="store_true")
    p.add_argument("--sizes", default="1000,10000")
    p.add_argument("--nodes", type=int, default=2500)
    p.add_argument("--seconds", type=float, default=6)
    p.add_argument("--max-requests", type=int, default=4000)
    args = p.parse_args()
    missing = hosts.missing_tools()
    if missing:
        print(f"SKIPPED: {missing}")
        return 0
    psb.ensure_hey()
    started = time.monotonic()
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    rows = []
    for pods in [int(s) for s in args.sizes.split(",")]:
        print(f"=== {pods} pods", flush=True)
        rows += run_size(pods, args, lambda t: print(t, flush=True))
    meta = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "host": f"{os.cpu_count()} x {cpu_model()}, Linux {platform.release()}",
            "load_before": load_before, "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "seconds": time.monotonic() - started}
    text = section(rows, meta)
    if args.print or not args.out:
        print(text)
    if args.out:
        out = Path(args.out)
        out.write_text(marked_section.replace(out.read_text() if out.exists() else "", BEGIN, END, text) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
