#!/usr/bin/env python3
"""gpu-vram-fit-policy's nodeInventory under Kubewarden's real policy-server: what reading the GPU
nodes costs per decision, a section of BENCHMARKS.md.

For each size in --sizes (GPU pods in the cluster, default 1,000 and 10,000), one fakeapi serving
--nodes GPU nodes (default 2,500) of four products (FLEET: 10% NVIDIA-A100-SXM4-80GB, 40%
NVIDIA-H100-80GB-HBM3, 30% NVIDIA-L4, 20% NVIDIA-A10G) with the labels GPU Feature Discovery and the
GPU Operator put on a node (about 45 labels: policy_server_bench.full_node's plus the rest of GFD's)
and the pods (policy_server_bench.full_pod: VRAM fit does not list them, they only make the cluster
its size). One policy-server with VRAM fit four times and gpu-labels-policy (no host call) as the
host's floor:
- `off`: test_data/settings.yml (no host call), the request below;
- `accept`: test_data/settings_nodes.yml (nodeInventory on, nodeSelector nvidia.com/gpu.present=true),
  deployment_llama_8b_on_l4.json with its nodeSelector on NVIDIA-A100-SXM4-80GB: the list is narrowed
  to that product's nodes (10% of them), accepted;
- `wide`: the same settings, the pod allowed on the A100-80GBs or the L4s (required node affinity, two
  products): nothing narrows, every GPU node is listed (the cost of every decision before narrowing),
  accepted;
- `deny`: test_data/settings_nodes_deny.yml (noMatchingNodes: deny), the pod on NVIDIA-H200 (in the
  catalog, on no node): the narrowed list is empty, then the whole list names the products there are,
  denied.
For each: the first request after start-up (a reflector's initial list happens inside it), then hey at
concurrency 1 and 4 sized to about --seconds, then a checked pass (verdict, and the fit annotation
naming the memory the nodes report, or the denial naming the products).

The section replaces the one between <!-- vram-nodes:begin --> and <!-- vram-nodes:end --> in
BENCHMARKS.md (appended when absent). Without kwctl/policy-server on PATH it prints SKIPPED.

usage: bench/kubewarden/vram_nodes_bench.py [--out BENCHMARKS.md | --print] [--sizes 1000,10000]
                                            [--nodes 2500] [--seconds S] [--max-requests N]
"""

import json
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import policy_server_bench as psb  # noqa: E402
from policy_server_bench import hosts  # noqa: E402
import marked_section  # noqa: E402

BEGIN, END = marked_section.markers("vram-nodes")
VRAM = psb.VRAM
PRODUCT = "NVIDIA-A100-SXM4-80GB"
ABSENT = "NVIDIA-H200"
# (product, memory per GPU in MiB, share of the nodes in percent), in node order.
FLEET = [(PRODUCT, 81920, 10), ("NVIDIA-H100-80GB-HBM3", 81559, 40), ("NVIDIA-L4", 23034, 30),
         ("NVIDIA-A10G", 23028, 20)]

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


def product_of(i, nodes):
    """The FLEET product of node i of `nodes`, with its memory."""
    edge = 0
    for product, mib, percent in FLEET:
        edge += nodes * percent // 100
        if i < edge:
            return product, mib
    return FLEET[-1][:2]


def fleet_counts(nodes):
    counts = {}
    for i in range(nodes):
        p = product_of(i, nodes)[0]
        counts[p] = counts.get(p, 0) + 1
    return counts


def gfd_node(i, nodes):
    node = psb.full_node(i)
    product, mib = product_of(i, nodes)
    node["metadata"]["labels"].update(MORE_GFD_LABELS)
    node["metadata"]["labels"].update({"nvidia.com/gpu.product": product, "nvidia.com/gpu.memory": str(mib)})
    return node


def request(products):
    r = hosts.read_json(psb.policy_file(VRAM, "test_data/deployment_llama_8b_on_l4.json"))
    spec = r["object"]["spec"]["template"]["spec"]
    spec.pop("nodeSelector", None)
    if len(products) == 1:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": products[0]}
    else:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "nvidia.com/gpu.product", "operator": "In", "values": products}]}]}}}
    return r


def run_size(pods, args, log):
    rows = []
    module = psb.annotated(VRAM)
    counts = fleet_counts(args.nodes)
    with hosts.Host("vram-nodes-bench") as host:
        t = time.monotonic()
        objects = [gfd_node(i, args.nodes) for i in range(args.nodes)] + [psb.full_pod(i) for i in range(pods)]
        api = host.start_fakeapi(objects, poll_interval=1.0)
        snapshot_mib = api.snapshot.stat().st_size / 2**20
        log(f"  {pods} pods / {args.nodes} nodes {counts}: snapshot {snapshot_mib:.1f} MiB, fakeapi up in "
            f"{time.monotonic() - t:.1f} s")
        aware = hosts.context_aware_resources(module)

        def vram(settings):
            return hosts.PolicyEntry(f"file://{module}", settings=psb.policy_file(VRAM, f"test_data/{settings}"),
                                     context_aware_resources=aware, host_capabilities=["kubernetes/*"])
        entries = {
            "off": vram("settings.yml"),
            "accept": vram("settings_nodes.yml"),
            "wide": vram("settings_nodes.yml"),
            "deny": vram("settings_nodes_deny.yml"),
            "floor": hosts.PolicyEntry(f"file://{psb.annotated(psb.LABELS)}", settings={}),
        }
        server = host.start_policy_server(entries, api)
        try:
            log(f"  policy-server ready in {server.startup_seconds:.1f} s")
            one = hosts.admission_review(request([PRODUCT]))
            reviews = {
                "accept": (one, True, f"(81920 MiB per GPU, reported by {counts[PRODUCT]} nodes)"),
                "wide": (hosts.admission_review(request([PRODUCT, "NVIDIA-L4"])), True,
                         f"(23034 MiB per GPU, reported by {counts['NVIDIA-L4']} nodes)"),
                "deny": (hosts.admission_review(request([ABSENT])), False,
                         f"no node offers GPU product '{ABSENT}' (nvidia.com/gpu.product); the nodes offer "
                         f"{PRODUCT} ({counts[PRODUCT]} nodes)"),
                "off": (one, True, None),
                "floor": (hosts.admission_review(hosts.read_json(psb.policy_file(psb.LABELS, psb.FLOOR_REQUEST))),
                          True, None),
            }
            for pid, (rev, allowed, says) in reviews.items():
                def check(response, allowed=allowed, says=says):
                    if bool(response.get("allowed")) != allowed:
                        return f"allowed={response.get('allowed')}: {(response.get('status') or {}).get('message', '')[:300]}"
                    text = ((response.get("auditAnnotations") or {}).get("vram-fit", "") if allowed
                            else (response.get("status") or {}).get("message", ""))
                    if says and says not in text:
                        return f"expected {says!r} in {text[:300]!r}"
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
                    verdicts, problems = psb.checked_pass(server, pid, rev, c, max(4, 2 * c), check)
                    row["runs"].append({"c": c, "n": n, **h, "verdicts": verdicts, "problems": problems})
                    log(f"  [{pid}] c={c}: {n} requests, p50 {h['p50'] * 1000:.1f} ms, p99 {h['p99'] * 1000:.1f} ms, "
                        f"{h['rps']:.1f} req/s, HTTP {h['codes']}, checked {verdicts}"
                        f"{' ' + str(problems) if problems else ''}")
                rows.append(row)
            rss = psb.peak_rss_mib(server.process.pid)
            for r in rows:
                r["rss_mib"] = rss
        finally:
            host.stop(server.process)
    return rows


def section(rows, meta):
    nodes = rows[0]["nodes"]
    counts = fleet_counts(nodes)
    fleet = ", ".join(f"{n:,} x {p}" for p, n in counts.items())
    out = [BEGIN, "", "## Real host: VRAM fit reading the GPU nodes (nodeInventory), policy-server 1.36", "",
           f"Written by `bench/kubewarden/vram_nodes_bench.py` on {meta['date']}; {meta['host']}; load average "
           f"{meta['load_before']} before, {meta['load_after']} after (other work on the machine shows there: the "
           f"machine is shared); whole run {meta['seconds']:.0f} s. A fakeapi cluster of {nodes:,} GFD-labelled "
           f"GPU nodes (about 45 labels each: {fleet}) and GPU pods (not listed by VRAM fit: they make the cluster "
           "its size); one policy-server with VRAM fit as `off` (test_data/settings.yml: no host call), `accept` "
           f"(settings_nodes.yml; the pod selects {PRODUCT}: the list is narrowed to that product's nodes), "
           f"`wide` (the same settings; the pod allows {PRODUCT} or NVIDIA-L4: nothing narrows, every GPU node "
           "is listed, as every decision did before narrowing), `deny` (settings_nodes_deny.yml, noMatchingNodes: "
           f"deny; the pod selects {ABSENT}, on no node: the narrowed list is empty, then the whole list names the "
           "products), and gpu-labels-policy as the host's floor. Request: `deployment_llama_8b_on_l4.json` with "
           "its product selection changed as said; every answer checked (verdict; fit annotation naming the "
           "memory the nodes report, or the denial naming the products). p50/p99 (nearest rank) and req/s from "
           "hey's per-request CSV; *first request*: the first POST after start-up (a reflector's initial list is "
           "inside it).", "",
           "| pods | nodes | snapshot | policy | first request | c | requests | p50 | p99 | req/s | verdicts | policy-server peak RSS |",
           "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    names = {"accept": f"VRAM fit, nodeInventory, accept ({counts[PRODUCT]:,} nodes of the product listed)",
             "wide": f"VRAM fit, nodeInventory, not narrowed (all {nodes:,} listed)",
             "deny": f"VRAM fit, nodeInventory, deny (0 listed, then all {nodes:,})",
             "off": "VRAM fit, nodeInventory off", "floor": "floor (gpu-labels-policy)"}
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

    out += ["", f"Reading (p50, concurrency 1, over the pod counts): a decision whose pods select one product took "
            f"{span(p50('accept'))} with {counts[PRODUCT]:,} nodes of it listed, against {span(p50('wide'))} when all "
            f"{nodes:,} GPU nodes are listed, {span(p50('deny'))} on the denial path (an empty narrowed list, then "
            f"all of them), {span(p50('off'))} off and {span(p50('floor'))} for the floor. policy-server serializes "
            "every listed Node (field masks do not touch `metadata`: all its labels and annotations) for every call, "
            "so the cost follows the nodes listed, not the pods: narrowing pays in proportion to the selected "
            "product's share of the GPU nodes (a cluster of one product gains nothing), and a denial costs what "
            "every decision cost before. Each narrowed selector is one more reflector (a watch, and the Nodes of "
            "that product held once more) for the life of policy-server; VRAM fit narrows only to product names "
            "of its catalog and `gpuProducts`, so their number is bounded by the products requests select from "
            "that list.", "", END]
    return "\n".join(out)


def main():
    p = marked_section.argument_parser()
    p.add_argument("--sizes", default="1000,10000")
    p.add_argument("--nodes", type=int, default=2500)
    p.add_argument("--seconds", type=float, default=6)
    p.add_argument("--max-requests", type=int, default=4000)

    def measure(args, log):
        psb.ensure_hey()
        rows = []
        for pods in [int(s) for s in args.sizes.split(",")]:
            log(f"=== {pods} pods")
            rows += run_size(pods, args, log)
        return rows, {}

    return psb.section_main(p, BEGIN, END, measure, section)

if __name__ == "__main__":
    sys.exit(main())
