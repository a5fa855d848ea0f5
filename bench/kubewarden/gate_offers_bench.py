#!/usr/bin/env python3
"""The capacity gate's nodeOffers under Kubewarden's real policy-server: what checking a
template's product selection against the pool's nodes costs per decision, a section of
BENCHMARKS.md.

For each size in --sizes (one-GPU pods in pool a100, default 1,000 and 10,000), one fakeapi
serving the pool as policy_server_bench builds it (pods / 4 nodes of 8 GPUs, each with GPU Feature
Discovery's labels: NVIDIA-A100-SXM4-80GB), and one policy-server with the gate on
test_data/settings.yml (nodeOffers: deny, the default), asked three requests in turn:
- `plain`: deployment_a100_4x2.json, which selects no product: nothing is read beyond the pool's
  Node and Pod lists (what every decision did before nodeOffers);
- `selects`: the same Deployment with nodeSelector nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB
  (the nodes' product): the Node list is read once more for its labels, accepted;
- `absent`: the same on NVIDIA-H100-80GB-HBM3, which no node carries: denied naming the product
  there;
- `plain` again, last: how much of a difference the order alone makes.
No request adds a host call (the lists are the same: the check reads the labels the Node list
already carries). For each: hey at concurrency 1 sized to about --seconds, then a checked pass.

The section replaces the one between <!-- gate-offers:begin --> and <!-- gate-offers:end --> in
BENCHMARKS.md (appended when absent). Without kwctl/policy-server on PATH it prints SKIPPED.

usage: bench/kubewarden/gate_offers_bench.py [--out BENCHMARKS.md | --print] [--sizes 1000,10000]
                                             [--seconds S] [--max-requests N]
"""

import copy
import json
import sys
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import policy_server_bench as psb  # noqa: E402
from policy_server_bench import hosts  # noqa: E402
import marked_section  # noqa: E402

BEGIN, END = marked_section.markers("gate-offers")
CAPACITY = psb.CAPACITY
THERE = "NVIDIA-A100-SXM4-80GB"
ABSENT = "NVIDIA-H100-80GB-HBM3"


def request(product):
    r = hosts.read_json(psb.policy_file(CAPACITY, psb.CAPACITY_REQUEST))
    if product:
        r = copy.deepcopy(r)
        r["object"]["spec"]["template"]["spec"]["nodeSelector"]["nvidia.com/gpu.product"] = product
    return r


def run_size(pods, args, log):
    rows = []
    module = psb.annotated(CAPACITY)
    nodes = psb.nodes_for(pods)
    with hosts.Host("gate-offers-bench") as host:
        objects = [psb.full_node(i) for i in range(nodes)] + [psb.full_pod(i) for i in range(pods)]
        api = host.start_fakeapi(objects, poll_interval=1.0)
        snapshot_mib = api.snapshot.stat().st_size / 2**20
        log(f"  {pods} pods / {nodes} nodes: snapshot {snapshot_mib:.1f} MiB")
        entry = hosts.PolicyEntry(f"file://{module}", settings=psb.policy_file(CAPACITY, "test_data/settings.yml"),
                                  context_aware_resources=hosts.context_aware_resources(module),
                                  host_capabilities=["kubernetes/*"])
        server = host.start_policy_server({"capacity": entry}, api)
        try:
            fits = (pods + psb.INCOMING) * 100 <= psb.THRESHOLD * nodes * psb.GPUS_PER_NODE
            cases = [
                ("plain", request(None), fits, None),
                ("selects", request(THERE), fits, None),
                ("absent", request(ABSENT), False, f"no node offers GPU product '{ABSENT}' (nvidia.com/gpu.product); "
                                                   f"the nodes offer {THERE} ({nodes} nodes)"),
                # Again last: the order's own effect on the figures (policy-server warming up).
                ("plain-again", request(None), fits, None),
            ]
            for name, req, allowed, says in cases:
                review = hosts.admission_review(req)

                def check(response, allowed=allowed, says=says):
                    if bool(response.get("allowed")) != allowed:
                        return f"allowed={response.get('allowed')}: {(response.get('status') or {}).get('message', '')[:300]}"
                    if says and says not in (response.get("status") or {}).get("message", ""):
                        return f"expected {says!r}"
                    return None
                hosts.poll(lambda: check(server.validate("capacity", review, timeout=120)) is None, 60, 0.5,
                           f"{name}: the expected answer")
                per_request, _ = psb.time_requests(server, "capacity", review, 3)
                body = host.root / f"review-{name}.json"
                body.write_text(json.dumps(review))
                n = psb.sized(per_request, 1, args.seconds, args.max_requests)
                h = psb.run_hey(f"{server.url}/validate/capacity", body, n, 1)
                verdicts, problems = psb.checked_pass(server, "capacity", review, 1, 4, check)
                rows.append({"pods": pods, "nodes": nodes, "snapshot_mib": snapshot_mib, "id": name, "n": n, **h,
                             "verdicts": verdicts, "problems": problems})
                log(f"  [{name}] {n} requests, p50 {h['p50'] * 1000:.1f} ms, p99 {h['p99'] * 1000:.1f} ms, "
                    f"HTTP {h['codes']}, checked {verdicts}{' ' + str(problems) if problems else ''}")
        finally:
            host.stop(server.process)
    return rows


def section(rows, meta):
    names = {"plain": "selects no product (no label read)",
             "selects": f"selects {THERE}, which the nodes carry (labels read)",
             "absent": f"selects {ABSENT}, on no node (labels read, denied)",
             "plain-again": "selects no product, measured again last"}
    out = [BEGIN, "", "## Real host: the capacity gate's nodeOffers, policy-server 1.36", "",
           f"Written by `bench/kubewarden/gate_offers_bench.py` on {meta['date']}; {meta['host']}; load average "
           f"{meta['load_before']} before, {meta['load_after']} after (the machine is shared); whole run "
           f"{meta['seconds']:.0f} s. Pool a100 of one-GPU pods on pods/4 GFD-labelled nodes "
           "(`policy_server_bench.full_pod`, `full_node`), the gate on test_data/settings.yml (nodeOffers: deny, the "
           "default), one request at a time (hey, concurrency 1), every answer checked. The three requests make the "
           "same two host calls (the pool's Node and Pod lists): a template that selects a product only adds a second "
           "reading of the Node list's labels inside the module.", "",
           "| pods | nodes | snapshot | request | requests | p50 | p99 | verdicts |",
           "|---:|---:|---:|---|---:|---:|---:|---|"]
    for r in rows:
        verdicts = ", ".join(f"{k} {v}" for k, v in sorted(r["verdicts"].items()))
        problems = f"; problems: {r['problems']}" if r["problems"] else ""
        out.append(f"| {r['pods']:,} | {r['nodes']:,} | {r['snapshot_mib']:.0f} MiB | {names[r['id']]} | {r['n']} | "
                   f"{r['p50'] * 1000:.1f} ms | {r['p99'] * 1000:.1f} ms | HTTP {r['codes']}; checked {verdicts}{problems} |")
    for pods in sorted({r["pods"] for r in rows}):
        p50 = {r["id"]: r["p50"] * 1000 for r in rows if r["pods"] == pods}
        plain = sorted([p50["plain"], p50["plain-again"]])
        out += ["", f"Reading at {pods:,} pods: the two runs of the request that selects no product took {plain[0]:.1f} and "
                f"{plain[1]:.1f} ms (p50); the one that selects the nodes' product {p50['selects']:.1f} ms and the "
                f"denied one {p50['absent']:.1f} ms: differences of the size of the spread between two runs of the same "
                f"request ({plain[1] - plain[0]:.1f} ms) on this shared machine. No host call is added; the second "
                "reading of the Node list is linear in the pool's nodes."]
    out += ["", END]
    return "\n".join(out)


def main():
    p = marked_section.argument_parser()
    p.add_argument("--sizes", default="1000,10000")
    p.add_argument("--seconds", type=float, default=6)
    p.add_argument("--max-requests", type=int, default=2000)

    def measure(args, log):
        psb.ensure_hey()
        return [row for pods in [int(s) for s in args.sizes.split(",")] for row in run_size(pods, args, log)], {}

    return psb.section_main(p, BEGIN, END, measure, section)

if __name__ == "__main__":
    sys.exit(main())
