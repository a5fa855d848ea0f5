#!/usr/bin/env python3
"""gpu-labels-policy's Namespace read (gpuAccessLabel, gpuSharing's namespaceSelector) through
Kubewarden's real policy-server over HTTP, fakeapi as its cluster, load from `hey`; prints a
markdown section for BENCHMARKS.md.

One policy-server holds the labels policy three times (module from file://, the annotated
module of `make annotate`, contextAwareResources from its metadata): with its defaults (no host
call), with test_data/settings_gpu_access.yml (one get_resource of the workload's Namespace,
answered from policy-server's cache after the first) and with test_data/settings_gpu_sharing.yml
(the KAI fraction of a batch pod, allowed only by a namespaceSelector: one get). The requests
are pod_gpu_labelled.json (namespace ml-serving, labelled gpu-admission/gpu-access=true here)
and pod_kai_fraction_batch.json (namespace ml-research, labelled tenant-trust=trusted). Every
row's verdict is checked; the rows run at concurrency 1 and 8 in --rounds interleaved rounds
(each round runs every row in turn), the figures being the median round's.

usage: bench/kubewarden/namespace_get_bench.py [--rounds N] [--seconds S]
Needs kwctl, policy-server (PATH) and hey.
"""

import argparse
import json
import os
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e" / "kubewarden"))
import hosts  # noqa: E402
import policy_server_bench as psb  # noqa: E402

LABELS = "gpu-labels-policy"
NAMESPACES = [("ml-serving", {"gpu-admission/gpu-access": "true"}),
              ("ml-research", {"gpu-admission/tenant-trust": "trusted"})]
# policy id, settings file (None: defaults), request, what the row shows
ROWS = [("defaults", None, "pod_gpu_labelled.json", "defaults: no host call"),
        ("access", "settings_gpu_access.yml", "pod_gpu_labelled.json", "gpuAccessLabel: 1 get of the Namespace"),
        ("sharing", "settings_gpu_sharing.yml", "pod_kai_fraction_batch.json",
         "gpuSharing (namespaceSelector): 1 get of the Namespace")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=4.0, help="about how long one hey run takes")
    ap.add_argument("--max-requests", type=int, default=4000)
    args = ap.parse_args()
    psb.ensure_hey()
    module = psb.annotated(LABELS)
    aware = hosts.kwctl_context_aware_resources(module, os.environ)
    objects = [{"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": n, "labels": {"kubernetes.io/metadata.name": n, **labels}}}
               for n, labels in NAMESPACES]
    load_before = os.getloadavg()
    with hosts.Host("namespace-get-bench") as host:
        entries = {pid: hosts.PolicyEntry(f"file://{module}",
                                          settings=psb.policy_file(LABELS, f"test_data/{s}") if s else {},
                                          context_aware_resources=aware, host_capabilities=["kubernetes/*"])
                   for pid, s, _, _ in ROWS}
        api = host.start_fakeapi(objects)
        server = host.start_policy_server(entries, api)
        rows = []
        for i, (pid, settings, req, what) in enumerate(ROWS):
            review = hosts.admission_review(hosts.read_json(psb.policy_file(LABELS, f"test_data/{req}")))
            first = server.validate(pid, review)
            if psb.verdict_of(first) != "accepted":
                raise psb.BenchError(f"{pid} {req}: {json.dumps(first)[:500]}")
            per_request, _ = psb.time_requests(server, pid, review, 20)
            body = host.root / f"case-{i}.json"
            body.write_text(json.dumps(review))
            for c in (1, 8):
                rows.append({"id": pid, "what": what, "request": req, "settings": settings or "{}", "c": c,
                             "body": body, "review": review, "runs": [],
                             "n": psb.sized(per_request, c, args.seconds, args.max_requests)})
        for round_ in range(args.rounds):
            for row in rows:
                h = psb.run_hey(f"{server.url}/validate/{row['id']}", row["body"], row["n"], row["c"])
                row["runs"].append(h)
                sys.stderr.write(f"round {round_ + 1}: {row['id']} c={row['c']}: p50 {h['p50'] * 1000:.2f} ms, "
                                 f"{h['rps']:.0f} req/s, HTTP {h['codes']}\n")
        for row in rows:
            last = server.validate(row["id"], row["review"])
            row["verdict"] = psb.verdict_of(last)
    load_after = os.getloadavg()
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"Written by `bench/kubewarden/namespace_get_bench.py --rounds {args.rounds}` on {now}; "
          f"{psb.machine()}; load average {' '.join(f'{x:.2f}' for x in load_before)} before, "
          f"{' '.join(f'{x:.2f}' for x in load_after)} after; {psb.tool_version(['policy-server', '--version'])}, "
          f"hey keep-alive, {args.rounds} interleaved rounds, each row the median round.\n")
    print("| settings | request | c | requests | p50 | p99 | req/s | req/s per round | vs defaults | verdict |")
    print("|---|---|---:|---:|---:|---:|---:|---|---:|---|")
    base = {}
    for row in rows:
        rps = statistics.median(h["rps"] for h in row["runs"])
        if row["id"] == "defaults":
            base[row["c"]] = rps
        codes = {}
        for h in row["runs"]:
            for code, k in h["codes"].items():
                codes[code] = codes.get(code, 0) + k
        ratio = f"{rps / base[row['c']]:.2f}x" if row["c"] in base else ""
        print(f"| {row['what']} (`{row['settings']}`) | `{row['request']}` | {row['c']} | "
              f"{row['n'] * len(row['runs'])} | {psb.ms(statistics.median(h['p50'] for h in row['runs']))} | "
              f"{psb.ms(statistics.median(h['p99'] for h in row['runs']))} | {rps:.0f} | "
              f"{' / '.join(str(round(h['rps'])) for h in row['runs'])} | {ratio} | "
              f"{row['verdict']}; HTTP {', '.join(f'{c}: {n}' for c, n in sorted(codes.items()))} |")


if __name__ == "__main__":
    main()
