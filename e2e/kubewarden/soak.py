#!/usr/bin/env python3
"""Soak: mixed load on one policy-server while the cluster changes under it.

    make soak                                   # 10 minutes, figures into BENCHMARKS.md
    python3 e2e/kubewarden/soak.py --seconds 25 # the short form `make test` runs

policy-server (the annotated modules as file:// URIs) serves every policy of
loadrig.policies() with fakeapi as its cluster. `--clients` threads send requests in a closed
loop, drawn (seeded) from loadrig's cases: every policy, GPU and non-GPU requests, and
`--bad-percent` of bad input (truncated reviews, a 2 MB object, 5,000 levels of nesting, wrong
kinds, a malformed Deployment). Every `--change-every` seconds the snapshot changes (pods of
pool l4-shared deleted or added back, the autoscalers' target Deployment resized, a CPU node
added or removed): fakeapi turns each change into watch events policy-server's caches follow.
The requests are chosen so that these changes move no verdict, so every answer is checked.

Printed (and with --out, written to BENCHMARKS.md between <!-- soak:begin/end --> markers):
per minute the requests, p50 and p99 latency, errors; RSS of policy-server after warm-up and at
the end. The run fails (exit 1) on any HTTP 5xx, any wrong verdict, any request without an
answer, policy-server not ready at the end, or (unless --no-rss-bound) RSS at the end more
than --rss-bound-mib above RSS at the end of the first minute (after warm-up in runs under two
minutes).
"""

import argparse
import os
import platform
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "kubewarden"))
import hosts  # noqa: E402
import loadrig  # noqa: E402
import marked_section  # noqa: E402 - bench/kubewarden, on sys.path above
import test_policy_server as base  # noqa: E402

BEGIN, END = marked_section.markers("soak")


def changed_cluster(step):
    """The snapshot at change `step`: odd steps delete 10 of pool l4-shared's 110 pods, resize
    Deployment ml-serving/llm-a100 to 3 replicas and add a CPU node; even steps put them back."""
    objects = base.cluster()
    if step % 2 == 0:
        return objects
    out = []
    for o in objects:
        name = o["metadata"]["name"]
        if o["kind"] == "Pod" and name.startswith("l4-shared-work-") and int(name.rsplit("-", 1)[1]) >= 100:
            continue
        if o["kind"] == "Deployment" and name == "llm-a100":
            o["spec"]["replicas"] = 3
        out.append(o)
    extra = base.node(f"cpu-soak-{step}", {"node.kubernetes.io/instance-type": "m6i.large"}, {})
    extra["spec"].pop("taints")
    out.append(extra)
    return out


def percentile(values, p):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


class Load:
    def __init__(self, url, cases, bad, bad_percent, seed):
        self.url, self.cases, self.bad, self.bad_percent = url, cases, bad, bad_percent
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.samples = []  # (t, case, outcome, latency, detail)
        self.stop = threading.Event()

    def pick(self):
        with self.lock:
            if self.rng.random() * 100 < self.bad_percent:
                return self.rng.choice(self.bad)
            return self.rng.choice(self.cases)

    def client(self):
        while not self.stop.is_set():
            case = self.pick()
            t0 = time.monotonic()
            try:
                status, body = loadrig.post(self.url, case)
                outcome, detail = loadrig.judge(case, status, body)
            except OSError as e:
                outcome, detail = "no answer", repr(e)
            with self.lock:
                self.samples.append((t0, case, outcome, time.monotonic() - t0, detail))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--change-every", type=float, default=5.0)
    ap.add_argument("--bad-percent", type=float, default=10.0)
    ap.add_argument("--rss-bound-mib", type=float, default=64.0)
    ap.add_argument("--no-rss-bound", action="store_true", help="do not fail on RSS growth (short runs)")
    ap.add_argument("--seed", type=int, default=44)
    ap.add_argument("--out", help="BENCHMARKS.md: replace its soak section with the figures")
    args = ap.parse_args()
    for name in ("seconds", "clients", "change_every"):
        if getattr(args, name) <= 0:
            ap.error(f"--{name.replace('_', '-')} must be above 0")
    if not 0 <= args.bad_percent <= 100:
        ap.error("--bad-percent must be between 0 and 100")

    if hosts.said_skipped(loadrig.missing_tools(), "soak"):
        return 0
    hosts.install_signal_handlers()
    with hosts.Host("policy-server-soak") as host:
        fakeapi = host.start_fakeapi(base.cluster())
        server = host.start_policy_server(loadrig.policies(), fakeapi)
        version = (subprocess.run(["policy-server", "--version"], capture_output=True, text=True).stdout
                   .strip().splitlines() or ["policy-server (version unknown)"])[0]
        cases, bad = loadrig.good_cases(), loadrig.bad_cases()
        # Warm-up: every case once, each checked, before RSS is first read.
        for case in cases + bad:
            outcome, detail = loadrig.judge(case, *loadrig.post(server.url, case))
            if outcome != "right":
                print(f"soak: warm-up {case.policy_id} {case.name}: {outcome}: {detail}")
                return 1
        pid = server.process.pid
        rss_start = loadrig.rss_kib(pid)
        load = Load(server.url, cases, bad, args.bad_percent, args.seed)
        threads = [threading.Thread(target=load.client, daemon=True) for _ in range(args.clients)]
        t_start = time.monotonic()
        for t in threads:
            t.start()
        rss, changes, step = [(0.0, rss_start)], 0, 0
        deadline = t_start + args.seconds
        next_change = t_start + args.change_every
        while time.monotonic() < deadline and server.process.alive():
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
            if time.monotonic() >= next_change:
                step += 1
                fakeapi.write(changed_cluster(step))
                changes += 1
                next_change += args.change_every
            if not rss or time.monotonic() - t_start - rss[-1][0] >= 10:
                rss.append((time.monotonic() - t_start, loadrig.rss_kib(pid)))
        load.stop.set()
        for t in threads:
            t.join(60)
        elapsed = time.monotonic() - t_start
        alive = server.process.alive()
        ready = alive and server._ready()
        rss_end = loadrig.rss_kib(pid) if alive else 0
        state = fakeapi.state()

    commit = subprocess.run(["git", "-C", str(hosts.REPO), "log", "-1", "--format=%h"], capture_output=True,
                            text=True).stdout.strip() or "an unknown commit"
    samples = load.samples
    minutes = {}
    for t0, case, outcome, latency, _ in samples:
        # The few requests sent between the deadline and the clients' stop join the last minute.
        minute = int(min(t0 - t_start, max(args.seconds - 1e-3, 0)) // 60)
        minutes.setdefault(minute, []).append((outcome, latency))
    rows = []
    for m in sorted(minutes):
        items = minutes[m]
        lat = [l for o, l in items if o == "right"]
        errors = sum(1 for o, _ in items if o != "right")
        rows.append((m + 1, len(items), percentile(lat, 50) * 1000, percentile(lat, 99) * 1000, errors))
    counts = {}
    for _, case, outcome, _, _ in samples:
        counts[outcome] = counts.get(outcome, 0) + 1
    bad_sent = sum(1 for _, c, _, _, _ in samples if c.bad)
    gpu = sum(1 for _, c, _, _, _ in samples if not c.bad and c.gpu)
    non_gpu = sum(1 for _, c, _, _, _ in samples if not c.bad and not c.gpu)
    failures = [(c, o, d) for _, c, o, _, d in samples if o != "right"]
    # Growth from the steady state: RSS at the end of the first minute (after warm-up in runs
    # shorter than two minutes). The warm-up's 2 MB bodies raise RSS before it settles.
    steady = [r for t, r in rss if t >= 60] if elapsed >= 120 else []
    rss_base = steady[0] if steady else rss_start
    growth_mib = (rss_end - rss_base) / 1024
    max_rss = max(r for _, r in rss + [(elapsed, rss_end)])

    lines = [
        BEGIN,
        "## Soak: mixed load on policy-server while the cluster changes",
        "",
        f"`make soak` (e2e/kubewarden/soak.py --seconds {args.seconds:g}): {version}, {os.cpu_count()} cores "
        f"({platform.machine()}, shared with other work; load average at the end "
        f"{os.getloadavg()[0]:.1f}), fakeapi as the cluster, the annotated modules built at {commit} as "
        "file:// URIs. "
        f"{args.clients} clients in a closed loop over every policy "
        f"({len(loadrig.policies())} entries), {len(cases)} requests whose verdict must not move "
        f"(GPU and non-GPU) and {args.bad_percent:g}% bad input ({len(bad)} bad requests: truncated reviews, a 2 MB "
        f"object, 5,000 levels of nesting, wrong kinds, a malformed Deployment); the snapshot changed "
        f"{changes} times (every {args.change_every:g} s: 10 pods deleted or added back, a Deployment "
        f"resized, a node added or removed; fakeapi's resourceVersion moved to {state.get('resourceVersion')}).",
        "",
        f"Requests: {len(samples)} ({gpu} GPU, {non_gpu} non-GPU, {bad_sent} bad input) in {elapsed:.0f} s; "
        f"answers: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + ".",
        f"RSS of policy-server: {rss_start / 1024:.1f} MiB after warm-up, {rss_base / 1024:.1f} MiB "
        f"{'after the first minute' if steady else 'as the baseline'}, {rss_end / 1024:.1f} MiB at the end "
        f"(growth from the baseline {growth_mib:+.1f} MiB, bound {args.rss_bound_mib:g} MiB), highest sample "
        f"{max_rss / 1024:.1f} MiB; ready at the end: {'yes' if ready else 'NO'}.",
        "",
        "| minute | requests | p50 ms | p99 ms | errors | RSS at the minute's end MiB |",
        "|---|---|---|---|---|---|",
    ]
    for minute, n, p50, p99, errors in rows:
        at = [r for t, r in rss if t <= minute * 60]
        lines.append(f"| {minute} | {n} | {p50:.1f} | {p99:.1f} | {errors} | "
                     f"{(at[-1] if at else rss_start) / 1024:.1f} |")
    lines += ["", "Latencies are of right answers (bad input included: a 4xx or a denial), measured by the "
              "load generator (Python, on the same 2 cores) from send to last byte.", END]
    text = "\n".join(lines) + "\n"
    print(text)
    for case, outcome, detail in failures[:20]:
        print(f"soak: {outcome}: {case.policy_id} {case.name}: {detail}")

    problems = []
    if failures:
        problems.append(f"{len(failures)} answers were not right ({', '.join(sorted({o for _, o, _ in failures}))})")
    if not ready:
        problems.append("policy-server was not ready at the end")
    if not args.no_rss_bound and growth_mib > args.rss_bound_mib:
        problems.append(f"RSS grew {growth_mib:.1f} MiB, more than {args.rss_bound_mib:g} MiB")
    if args.out and not problems:
        out = Path(args.out)
        marked_section.write(out, BEGIN, END, text)
        print(f"soak: wrote {out}")
    if problems:
        print("soak: FAILED: " + "; ".join(problems))
        return 1
    print(f"soak: passed ({len(samples)} requests, no 5xx, no wrong verdict, no lost request)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
