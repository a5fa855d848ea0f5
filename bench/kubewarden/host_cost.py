#!/usr/bin/env python3
"""What a policy's own work costs a request in the real policy-server, in the harness's units.

The host's floor (bench/host-floor) is built three ways: as it is (no work), with WORK steps of
computation per call, and writing PAGES fresh pages per call (HOST_FLOOR_WORK, HOST_FLOOR_PAGES).
All three run in one policy-server with one static policy's settings and on its request (VRAM fit's
GPU Pod, or the case --case names), beside that policy and Kubewarden's labels-policy
(KUBEWARDEN_LABELS_POLICY), in interleaved rounds of hey at concurrency 1. The x86-count harness
(bench/x86_count.py) counts each module's instructions per call on a fresh instance, as
policy-server runs it, and the harness's page faults per fresh call are read from the kernel. From
the two measurements:

- microseconds per 1,000 guest instructions of the work variant (registers only: the least an
  instruction costs) and per page fault of the pages variant, each from its time and count above
  the floor's;
- the same price for the policy and labels-policy, whose instructions also read and write memory a
  fresh instance has not touched;
- the policy's time above labels-policy's, in the policy's instructions.

So a saving counted by the harness (`make bench`'s x86-count section) can be read as time in
policy-server on this machine, and a target such as "labels-policy's requests/s" as a number of
instructions to remove.

    bench/kubewarden/host_cost.py [--case vram:Pod] [--rounds N] [--requests N] [--out BENCHMARKS.md]

With --out, the section between `<!-- host-cost:begin -->` and `<!-- host-cost:end -->` is replaced
(appended when absent); without it, it is printed. Needs what policy_server_bench.py and
x86_count.py need: kwctl, policy-server, fakeapi (e2e/kubewarden/hosts.py), hey, valgrind, the
harness (<target dir>/bench-harness/gpu-bench) and the annotated modules (`make annotate`).
"""
import argparse
import datetime
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent.parent / "e2e" / "kubewarden"))
import host_floor  # noqa: E402
import marked_section  # noqa: E402
import hosts  # noqa: E402
import x86_count  # noqa: E402
from kubewarden_policies import LABELS_POLICY_ENV, LABELS_POLICY_SETTINGS, module_from_env  # noqa: E402
from policy_server_bench import (  # noqa: E402
    STATIC_CASES, annotated, machine, policy_file, run_hey, tool_version, verdict_of)

BEGIN, END = marked_section.markers("host-cost")
# About as many instructions as VRAM fit's own work on its Pod (~290k x86 per call).
WORK = 50_000
PAGES = 32
# Fresh calls whose page faults are read (the harness process's own allocations settle after a few
# hundred).
FAULT_CALLS = 2000
# The case measured by default: VRAM fit's GPU Pod (--case names another of policy_server_bench's
# static cases).
DEFAULT_CASE = "vram:Pod"


class CostError(Exception):
    """A step failed; the message says which and why."""


def case(name):
    """The static case `name` (`<policy id>:<kind>`, e.g. vram:Pod): (policy, request file,
    settings file or {} for none, expected verdict)."""
    known = []
    for policy_id, policy, kind, request, settings, expected in STATIC_CASES:
        known.append(f"{policy_id}:{kind}")
        if known[-1] == name:
            settings = policy_file(policy, settings) if settings else {}
            return policy, policy_file(policy, request), settings, expected
    raise CostError(f"--case {name}: not one of {', '.join(known)}")


def modules(root, policy, settings, expected, labels_policy):
    """[(row name, annotated module, settings (file or dict), expected verdict or None)]."""
    def kwctl(argv):
        subprocess.run(["kwctl", *argv], check=True, capture_output=True)

    rows = [
        ("host floor", host_floor.module(kwctl, root / "floor.wasm"), settings, "accepted"),
        (f"host floor + {WORK:,} steps of work", host_floor.module(kwctl, root / "work.wasm", work=WORK),
         settings, "accepted"),
        (f"host floor + {PAGES} pages written", host_floor.module(kwctl, root / "pages.wasm", pages=PAGES),
         settings, "accepted"),
        (policy, annotated(policy), settings, expected),
    ]
    if labels_policy:
        rows.append(("Kubewarden labels-policy", labels_policy, LABELS_POLICY_SETTINGS, None))
    return rows


def count_fresh(module, request, settings, calls):
    """(x86 instructions, page faults) per fresh-instance call, in the harness: the instructions
    of `calls` calls counted by callgrind, the faults the harness process took (Linux's minor and
    major faults of a run of FAULT_CALLS + 1 fresh calls, less those of a run of one)."""
    def faults(n):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([str(x86_count.BENCH), "wasm-loop", str(module), str(request), str(settings), "1", str(n)],
                       check=True, capture_output=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return after.ru_minflt + after.ru_majflt - before.ru_minflt - before.ru_majflt

    with tempfile.TemporaryDirectory() as tmp:
        if isinstance(settings, dict):
            path = Path(tmp) / "settings.json"
            path.write_text(json.dumps(settings))
            settings = path
        _, fresh, _ = x86_count.count(module, request, settings, 1, calls, False)
        pages = (faults(FAULT_CALLS + 1) - faults(1)) / FAULT_CALLS
    return fresh, pages


def time_in_policy_server(rows, request, rounds, requests, log):
    """{row name: [microseconds per request, one per round]} at concurrency 1, and each row's
    verdict."""
    entries = {f"m{i}": hosts.PolicyEntry(f"file://{module}", settings=settings,
                                          allowed_to_mutate=expected == "patched")
               for i, (_, module, settings, expected) in enumerate(rows)}
    times = {name: [] for name, *_ in rows}
    verdicts = {}
    with hosts.Host("host-cost") as host:
        server = host.start_policy_server(entries, host.start_fakeapi([]))
        review = hosts.admission_review(hosts.read_json(request))
        body = host.root / "review.json"
        body.write_text(json.dumps(review))
        for i, (name, _, _, expected) in enumerate(rows):
            verdicts[name] = verdict_of(server.validate(f"m{i}", review))
            if expected and verdicts[name] != expected:
                raise CostError(f"{name}: {verdicts[name]}, expected {expected}")
        for r in range(rounds):
            for i, (name, *_) in enumerate(rows):
                h = run_hey(f"{server.url}/validate/m{i}", body, requests, 1)
                if set(h["codes"]) != {200}:
                    raise CostError(f"{name}: HTTP codes {h['codes']}")
                times[name].append(1e6 / h["rps"])
                log(f"round {r + 1}: {name}: {1e6 / h['rps']:.0f} us per request")
    return times, verdicts


def section(rows, counts, times, verdicts, info):
    """The section's text. Each difference is taken within a round (the rows of a round ran within
    a minute or two of each other, and this VM drifts between minutes), then the median over the
    rounds is shown."""
    floor, work, pages = (rows[i][0] for i in range(3))
    rounds = range(len(times[floor]))

    def above(name, base=floor):
        return statistics.median(times[name][r] - times[base][r] for r in rounds)

    x86 = {name: c[0] for name, c in counts.items()}
    faults = {name: c[1] for name, c in counts.items()}
    per_k = above(work) / ((x86[work] - x86[floor]) / 1000)
    # The pages variant writes PAGES more pages than the floor; a count that does not show them
    # (another harness, another kernel) leaves the price unknown rather than divided by zero.
    page_faults = faults[pages] - faults[floor]
    per_page = above(pages) / page_faults if page_faults >= PAGES / 2 else None
    out = [BEGIN, "", "## Real host: what guest work costs in policy-server", "",
           f"Written by `bench/kubewarden/host_cost.py` on {info['when']}; {info['machine']}; load average "
           f"{' '.join(f'{x:.2f}' for x in info['load'][0])} before, {' '.join(f'{x:.2f}' for x in info['load'][1])} "
           f"after; {info['rounds']} interleaved rounds of {info['requests']} requests each at concurrency 1 (hey, "
           f"keep-alive), in one {info['policy_server']} with {info['policy']}'s settings, on its GPU "
           f"{info['kind']} `{info['request']}`. *x86* and *page faults* are per call on a fresh instance in the harness "
           "(callgrind's count, instantiation and the host's side included; the faults the harness process "
           "takes). *us per request* is policy-server's, wall time over requests at concurrency 1 (hey's and "
           "the HTTP stack's share is in every row and cancels in the differences): the median of the rounds, "
           "and *above the floor* the median of the rounds' differences with the floor (each taken within "
           f"one round). The floor is `bench/host-floor`; its variants do {WORK:,} steps of a dependent "
           f"multiply-add, or write one byte in each of {PAGES} fresh 4 KiB pages, per call.", "",
           "| module | x86 | above the floor | page faults | above the floor | us per request | above the floor "
           "| rounds (us) | verdict |",
           "|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for name, *_ in rows:
        out.append(f"| {name} | {x86[name] / 1000:,.1f}k | {(x86[name] - x86[floor]) / 1000:+,.1f}k | "
                   f"{faults[name]:.1f} | {faults[name] - faults[floor]:+.1f} | "
                   f"{statistics.median(times[name]):.0f} | {above(name):+.0f} | "
                   f"{' / '.join(f'{x:.0f}' for x in times[name])} | {verdicts[name]} |")
    out += ["", f"- The floor's work variant: **{per_k:.2f} us per 1,000 x86 instructions** above the floor. A chain of "
            "multiply-adds in registers, it is the least an instruction costs here.",
            f"- The pages variant: **{per_page:.1f} us per page fault** above the floor." if per_page is not None
            else f"- The pages variant: {page_faults:+.1f} page faults above the floor, not the {PAGES} it writes: "
                 "no price per page fault from this run."]
    price = {}
    for name, *_ in rows[3:]:
        d_x86, d_faults = (x86[name] - x86[floor]) / 1000, faults[name] - faults[floor]
        price[name] = above(name) / d_x86
        text = (f"- {name}: {above(name):+.0f} us above the floor for {d_x86:,.1f}k instructions and "
                f"{d_faults:+.1f} page faults: **{price[name]:.2f} us per 1,000 instructions**, faults included.")
        if per_page is not None:
            text += (f" {per_page * d_faults:.0f} us of it is the faults at the pages variant's price. The "
                     f"instructions and faults alone, at the variants' prices, come to "
                     f"{per_k * d_x86 + per_page * d_faults:.0f} us; the rest is what neither variant exercises "
                     "(caches, branches, memory read for the first time).")
        out.append(text)
    if len(rows) > 4:
        ours, theirs = rows[3][0], rows[4][0]
        gap = above(ours, theirs)
        out.append(f"- {ours} took {gap:+.0f} us per request more than {theirs} (median of the rounds' differences): "
                   f"about {gap / price[ours]:,.0f}k of its {(x86[ours] - x86[floor]) / 1000:,.0f}k x86 instructions "
                   "above the floor, at its own price.")
    out += ["", END]
    return "\n".join(out) + "\n"


def positive(text):
    """An argparse type: a whole number of at least 1."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of at least 1")
    return n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=positive, default=7, help="interleaved rounds (default 7)")
    ap.add_argument("--requests", type=positive, default=2000, help="requests per row and round (default 2000)")
    ap.add_argument("--fresh-calls", type=positive, default=50, help="fresh calls the harness counts (default 50)")
    ap.add_argument("--case", default=DEFAULT_CASE,
                    help=f"the static case measured, <policy id>:<kind> (default {DEFAULT_CASE})")
    ap.add_argument("--out", help="Markdown file whose host-cost section to replace (default: print)")
    args = ap.parse_args(argv)
    missing = [t for t in ("kwctl", "policy-server", "hey", "valgrind") if not shutil.which(t)]
    if missing or not x86_count.BENCH.is_file():
        print(f"host_cost: SKIPPED: missing {', '.join(missing) or x86_count.BENCH}")
        return 0
    try:
        labels_policy = module_from_env(os.environ, LABELS_POLICY_ENV)
        policy, request, settings, expected = case(args.case)
        with tempfile.TemporaryDirectory(prefix="host-cost-") as tmp:
            load_before = os.getloadavg()
            rows = modules(Path(tmp), policy, settings, expected, labels_policy)
            counts = {}
            for name, module, row_settings, _ in rows:
                counts[name] = count_fresh(module, request, row_settings, args.fresh_calls)
                print(f"host_cost: {name}: {counts[name][0]:,.0f} x86 and {counts[name][1]:.1f} page faults "
                      "per fresh call", flush=True)
            times, verdicts = time_in_policy_server(rows, request, args.rounds, args.requests,
                                                    lambda m: print(f"host_cost: {m}", flush=True))
    except (CostError, ValueError, hosts.HostError, subprocess.CalledProcessError) as e:
        print(f"host_cost: FAILED: {e}", file=sys.stderr)
        return 1
    info = {"when": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine(), "rounds": args.rounds, "requests": args.requests, "policy": policy,
            "kind": args.case.split(":", 1)[1], "request": request.name,
            "policy_server": tool_version(["policy-server", "--version"]),
            "load": (load_before, os.getloadavg())}
    text = section(rows, counts, times, verdicts, info)
    if args.out:
        path = Path(args.out)
        try:
            marked_section.write(path, BEGIN, END, text)
        except ValueError as e:
            raise SystemExit(f"host_cost: FAILED: {e}") from None
        print(f"host_cost: wrote {path}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
