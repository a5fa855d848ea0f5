#!/usr/bin/env python3
"""`kwctl bench` of every policy on the benchmark requests, written into BENCHMARKS.md.

The requests are the ones gpu-bench measures (bench/src/cases.rs: a GPU Pod, a GPU Deployment and
an InferenceService per policy, accepted and denied, routing's patches, the context-aware ones with
their replay sessions), read from that file so the two cannot drift apart.

Kubewarden's own policies are measured in the same run when their modules are named (built from
kubewarden/policies at commit 6a01a242a770dbb168767a986ad0bc57cb3b61fb by
`bench/kubewarden/build-kubewarden-policies.sh <checkout> [/work/kw-policies]`; see
kubewarden_policies.py):
  KUBEWARDEN_LABELS_POLICY=<module>    labels-policy on the labels policy's GPU Pod and
                                       Deployment requests, with settings asking for the same labels
  KUBEWARDEN_MUTATING_POLICY=<module>  capabilities-psp (settings: required_drop_capabilities ALL)
                                       on routing's Pod and Deployment requests, each checked to
                                       come back patched by `kwctl run`
Their rows go beside those of the policy they are compared with.

The host's floor (bench/host-floor, see host_floor.py: accepts without reading anything) runs on
each static policy's GPU Pod and Deployment with that policy's settings, beside its rows: no
module can answer those requests with those settings faster in kwctl.

Each module is annotated with `kwctl annotate` (metadata.yml, README.md) into a temporary
directory, each request is run once with `kwctl run` (its verdict goes in the table, and it fills
the wasmtime cache), then measured with `kwctl bench`, whose run time is bounded by
--warm-up-time and --measurement-time (whole seconds, per function measured; about 5 s a request
with the defaults) and --num-samples. kwctl's replay proxy answers each recorded exchange once,
so context-aware requests are measured with their session repeated (--session-copies, doubled
and rerun when kwctl reports it ran out). The table replaces the one between
<!-- kwctl-bench:begin --> and <!-- kwctl-bench:end --> in BENCHMARKS.md (appended when absent).

--rounds N (default 1) runs the whole list of cases N times, round after round (every case once in
table order, then again, ...), so the cases compared with each other are measured in the same
minutes: on a 2-core VM one module's min and median move by 20-40% between runs as the machine's
speed drifts, more than some of the differences measured. `kwctl run` still checks each verdict
once (before the case's first round), and a context-aware case's later rounds start from the
session copies its previous round needed. With N > 1 a row is over its case's N runs: the lowest
`validate` min, the median of the runs' mins, the median of the runs' medians and the lowest and
highest of the runs' medians (their spread), iterations summed, and `validate_settings`' median of
the runs' medians; each run's mean, max and stddev are left out (they describe one run). Under the
table, one line per request that ours and Kubewarden's policy both ran compares their medians of
medians (ours/theirs). With N = 1 the section is the single run's table, as before.
`make bench` runs it with --rounds 5.

Without kwctl on PATH it prints one SKIPPED line and exits 0.

usage: bench/kubewarden/kwctl_bench.py [--out BENCHMARKS.md | --print] [--rounds N]
                                       [--warm-up-time S] [--measurement-time S] [--num-samples N]
                                       [--session-copies N] [--policies P,...]
"""

import argparse
import base64
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import host_floor  # noqa: E402
import marked_section  # noqa: E402
from cargo_target import target_dir  # noqa: E402
from host_info import cpu_model  # noqa: E402
from kubewarden_policies import (  # noqa: E402
    LABELS_POLICY_ALSO_BESIDE, LABELS_POLICY_ENV, LABELS_POLICY_REQUESTS, LABELS_POLICY_SETTINGS,
    MUTATING_POLICY_ENV, MUTATING_POLICY_REQUESTS, MUTATING_POLICY_SETTINGS, module_from_env, mutating_policy_note)

REPO = Path(__file__).resolve().parents[2]
# CI puts a copy of shared/ beside the clone; GPU_ADMISSION_SHARED overrides it.
SHARED = Path(os.environ.get("GPU_ADMISSION_SHARED", REPO.parent / "shared")).resolve()
TRUST_CONFIG = SHARED / "kubewarden" / "offline-sigstore-trust-config.json"
CASES_RS = REPO / "bench" / "src" / "cases.rs"
BEGIN, END = marked_section.markers("kwctl-bench")


class BenchError(Exception):
    """A step failed; the message says which and why."""


@dataclass
class Case:
    policy: str  # directory under policies/, or "kubewarden/<module>" for Kubewarden's own policy
    kind: str
    request: str  # relative to cwd
    settings: str | None  # a file relative to cwd
    settings_json: str | None
    session: str | None
    intent: str  # accept, deny, patch, or "" when not stated
    cwd: Path

    def name(self):
        stem = Path(self.request).stem
        return f"{stem} + {Path(self.session).stem}" if self.session else stem


# ------------------------------------------------------------------------------------------------
# The cases of bench/src/cases.rs
# ------------------------------------------------------------------------------------------------

# case(POLICY, "kind", "request", settings, session, Intent): settings and session None or Some("path").
CASE_CALL = re.compile(
    r'case\(\s*(\w+),\s*"([^"]*)",\s*"([^"]*)",\s*(?:None|Some\("([^"]*)"\)),\s*(?:None|Some\("([^"]*)"\)),'
    r'\s*(\w+),?\s*\)', re.S)
POLICY_CONST = re.compile(r'const (\w+): &str = "([^"]+)";')


def read_bench_cases(path=CASES_RS):
    """The CASES of bench/src/cases.rs, as Case rows (a parse error is a BenchError)."""
    text = path.read_text()
    names = dict(POLICY_CONST.findall(text))
    start = text.find("pub const CASES: &[Case] = &[")
    if start < 0:
        raise BenchError(f"{path}: no `pub const CASES: &[Case] = &[` found")
    body = text[start:text.index("\n];", start)]
    cases = []
    for m in CASE_CALL.finditer(body):
        const, kind, request, settings, session, intent = m.groups()
        if const not in names:
            raise BenchError(f"{path}: unknown policy constant {const}")
        policy = names[const]
        cases.append(Case(policy, kind, request, settings, None, session, intent.lower(),
                          REPO / "policies" / policy))
    expected = body.count("case(")
    if not cases or len(cases) != expected:
        raise BenchError(f"{path}: read {len(cases)} of {expected} cases; has CASES changed shape?")
    return cases


def labels_policy_cases(module, policy="gpu-labels-policy", requests=LABELS_POLICY_REQUESTS):
    """Kubewarden's labels-policy on `policy`'s `requests` (by default our labels policy's Pod
    and Deployment requests)."""
    cwd = REPO / "policies" / policy
    return [Case(f"kubewarden/{Path(module).stem}", kind, request, None,
                 json.dumps(LABELS_POLICY_SETTINGS, separators=(",", ":")), None, "", cwd)
            for kind, request in requests]


def mutating_policy_cases(module):
    """Kubewarden's mutating policy on routing's Pod and Deployment requests, meant to patch both."""
    cwd = REPO / "policies" / "gpu-pool-routing-policy"
    return [Case(f"kubewarden/{Path(module).stem}", kind, request, None,
                 json.dumps(MUTATING_POLICY_SETTINGS, separators=(",", ":")), None, "patch", cwd)
            for kind, request in MUTATING_POLICY_REQUESTS]


def floor_cases(cases):
    """The host floor (host_floor.py) on each static policy's GPU Pod and Deployment, with the
    settings that policy's case on the same request uses, each beside the policy's own rows."""
    requests = {"gpu-labels-policy": [next(r for r in LABELS_POLICY_REQUESTS if r[0] == kind)
                                      for kind in ("Pod", "Deployment")],
                **LABELS_POLICY_ALSO_BESIDE}
    for policy, wanted in requests.items():
        ours = {c.request: c for c in cases if c.policy == policy and not c.session}
        extra = [Case(host_floor.row_name(policy), kind, request, ours[request].settings,
                      ours[request].settings_json, None, "accept", REPO / "policies" / policy)
                 for kind, request in wanted if request in ours]
        cases = beside(cases, policy, extra)
    return cases


def beside(cases, policy, extra):
    """`cases` with `extra` inserted after the last case of `policy` (at the end without one)."""
    at = max((i + 1 for i, c in enumerate(cases) if c.policy == policy), default=len(cases))
    return cases[:at] + extra + cases[at:]


# ------------------------------------------------------------------------------------------------
# kwctl
# ------------------------------------------------------------------------------------------------


class Kwctl:
    def __init__(self, exe, home):
        self.exe = exe
        self.env = dict(os.environ, XDG_CACHE_HOME=str(home / "cache"),
                        XDG_CONFIG_HOME=str(home / "config"), XDG_DATA_HOME=str(home / "data"))
        for name in ("KUBECONFIG", "RUST_BACKTRACE", "RUST_LIB_BACKTRACE"):
            self.env.pop(name, None)

    def run(self, args, cwd=None, check=True, stderr_path=None):
        """Runs kwctl; with `stderr_path`, stderr goes to that file (kwctl bench can log a lot)."""
        err = open(stderr_path, "w") if stderr_path else subprocess.PIPE
        try:
            proc = subprocess.run([self.exe, "--no-color", *args], cwd=cwd, env=self.env,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                  text=True)
        finally:
            if stderr_path:
                err.close()
        if check and proc.returncode != 0:
            detail = proc.stderr if not stderr_path else tail(stderr_path)
            raise BenchError(f"kwctl {' '.join(args)} failed ({proc.returncode}): "
                             f"{(detail or proc.stdout).strip()[:2000]}")
        return proc

    def version(self):
        out = self.run(["--version"]).stdout.strip().splitlines()
        return out[0].strip() if out else "kwctl (unknown version)"


def case_args(case, session=None):
    """kwctl run / bench flags for `case`; `session` replaces the case's replay session."""
    args = ["--request-path", case.request]
    if case.settings:
        args += ["--settings-path", case.settings]
    if case.settings_json:
        args += ["--settings-json", case.settings_json]
    if case.session:
        args += ["--allow-context-aware", "--replay-host-capabilities-interactions",
                 str(session or case.session)]
    return args + ["--sigstore-trust-config", str(TRUST_CONFIG)]


def tail(path, limit=4000):
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - limit))
        return f.read().decode("utf-8", "replace")


# kwctl's replay proxy serves each recorded exchange once; these say a session ran out.
REPLAY_FAILURES = ("the list of recorded responses is empty", "Replay error")


def replay_failed(stderr_path):
    with open(stderr_path, errors="replace") as f:
        return any(any(m in line for m in REPLAY_FAILURES) for line in f)


def repeated_session(session, copies, out):
    """`session` (a kwctl replay session: a YAML list) with its exchanges `copies` times over."""
    lines = [l for l in Path(session).read_text().splitlines()
             if not l.startswith("#") and l.strip() not in ("---", "")]
    if not lines or not lines[0].startswith("- "):
        raise BenchError(f"{session}: not a list of exchanges")
    body = "\n".join(lines) + "\n"
    with open(out, "w") as f:
        for _ in range(copies):
            f.write(body)
    return out


def verdict(stdout):
    """accept / deny / patch from kwctl run's AdmissionResponse."""
    line = next((l for l in reversed(stdout.splitlines()) if l.lstrip().startswith("{")), None)
    if line is None:
        raise BenchError(f"kwctl run printed no AdmissionResponse: {stdout.strip()}")
    response = json.loads(line)
    if not response.get("allowed"):
        return "deny"
    if response.get("patch") and json.loads(base64.b64decode(response["patch"])):
        return "patch"
    return "accept"


# kwctl bench (tiny-bench) prints, per function measured (validate_settings, then validate):
#   validate [5.0 thousand iterations in 1.89s with 100.0 samples]:
#   \telapsed\t[min mean max]:\t[346.73µs 368.77µs 421.18µs] (sample data: med = 364.16µs, var = ..., stddev = 15.98µs)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
T = r"([0-9.]+)\s*(ns|µs|us|ms|s)"
UNIT_NS = {"ns": 1, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9}
BENCH_BLOCK = re.compile(
    r"^(\w+) \[([0-9.]+)( thousand| million)? iterations in " + T + r" with ([0-9.]+) samples\]:\s*\n"
    r"\s*elapsed\s*\[min mean max\]:\s*\[" + T + r"\s+" + T + r"\s+" + T + r"\]"
    r"\s*\(sample data: med = " + T + r", var = [^,]*, stddev = " + T + r"\)",
    re.M)


def ns(value, unit):
    return float(value) * UNIT_NS[unit]


def parse_bench(output):
    """{function: {'iterations', 'samples', 'min', 'mean', 'max', 'median', 'stddev'} (times in ns)}."""
    out = {}
    for m in BENCH_BLOCK.finditer(ANSI.sub("", output)):
        g = m.groups()
        scale = {" thousand": 1e3, " million": 1e6}.get(g[2], 1)
        out[g[0]] = {
            "iterations": round(float(g[1]) * scale),
            "seconds": ns(g[3], g[4]) / 1e9,
            "samples": round(float(g[5])),
            "min": ns(g[6], g[7]), "mean": ns(g[8], g[9]), "max": ns(g[10], g[11]),
            "median": ns(g[12], g[13]), "stddev": ns(g[14], g[15]),
        }
    if "validate" not in out:
        raise BenchError(f"cannot read kwctl bench's output:\n{ANSI.sub('', output).strip()[:2000]}")
    return out


def fmt_ns(value):
    if value is None:
        return "–"
    if value >= 1e6:
        return f"{value / 1e6:.2f} ms"
    if value >= 1e3:
        return f"{value / 1e3:.1f} µs"
    return f"{value:.0f} ns"


def fmt_range(low, high):
    """`low`-`high` with one unit when both print in the same one, and how much higher `high` is."""
    a, b = fmt_ns(low), fmt_ns(high)
    unit = a.split()[-1]
    span = f"{a.rsplit(' ', 1)[0]}–{b}" if unit == b.split()[-1] else f"{a}–{b}"
    return f"{span} (+{(high / low - 1) * 100:.0f}%)" if low > 0 else span


def over_rounds(runs):
    """One case's kwctl bench runs (parse_bench's dicts, one a round) in one row: `validate`'s
    lowest min, median of the mins, median of the medians, lowest and highest median, iterations
    summed; `validate_settings`' median of the medians (None when no run reported it)."""
    mins = [r["validate"]["min"] for r in runs]
    medians = [r["validate"]["median"] for r in runs]
    settings = [r["validate_settings"]["median"] for r in runs if "validate_settings" in r]
    return {
        "min": min(mins),
        "median_of_mins": statistics.median(mins),
        "median_of_medians": statistics.median(medians),
        "medians_low": min(medians),
        "medians_high": max(medians),
        "iterations": sum(r["validate"]["iterations"] for r in runs),
        "settings_median": statistics.median(settings) if settings else None,
    }


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------


def machine():
    cpu = cpu_model()
    return f"{os.cpu_count()} cores, {cpu}, {platform.system()} {platform.release()}"


def load():
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def comparisons(rows, pairs):
    """Lines comparing ours with Kubewarden's on each request both ran: `pairs` is
    [(our policy, Kubewarden's policy)], compared on the median of the rounds' medians."""
    lines = []
    for ours, theirs in pairs:
        mine = {(r["case"].cwd, r["case"].request): r for r in rows
                if r["case"].policy == ours and not r["case"].session}
        for row in rows:
            c = row["case"]
            other = mine.get((c.cwd, c.request)) if c.policy == theirs else None
            if other is None:
                continue
            a = over_rounds(other["runs"])["median_of_medians"]
            b = over_rounds(row["runs"])["median_of_medians"]
            lines.append(f"- `{c.name()}`: {ours} median of medians {fmt_ns(a)} vs "
                         f"{theirs.split('/')[-1]} {fmt_ns(b)} (ours/theirs = {a / b:.2f})")
    return lines


def floor_lines(rows, labels_policy):
    """Per floor row: the floor, ours and (when measured) labels-policy on the same request, min
    and median of medians."""
    lines = []
    by = {(r["case"].policy, r["case"].cwd, r["case"].request): over_rounds(r["runs"]) for r in rows}
    for row in rows:
        c = row["case"]
        policy = c.cwd.name
        if c.policy != host_floor.row_name(policy):
            continue
        floor, ours = by[(c.policy, c.cwd, c.request)], by.get((policy, c.cwd, c.request))
        theirs = by.get((labels_policy, c.cwd, c.request)) if labels_policy else None
        parts = [f"floor {fmt_ns(floor['min'])} / {fmt_ns(floor['median_of_medians'])}"]
        if ours:
            parts.append(f"{policy} {fmt_ns(ours['min'])} / {fmt_ns(ours['median_of_medians'])}")
        if theirs:
            parts.append(f"labels-policy {fmt_ns(theirs['min'])} / {fmt_ns(theirs['median_of_medians'])} "
                         f"(floor/labels-policy = {floor['min'] / theirs['min']:.2f} / "
                         f"{floor['median_of_medians'] / theirs['median_of_medians']:.2f})")
        lines.append(f"- `{c.name()}` with {policy}'s settings: " + "; ".join(parts))
    return lines


def markdown(rows, info):
    rounds = info["rounds"]
    if rounds == 1:
        columns = ("the columns are the per-call time of the fastest sample, the median and mean of the "
                   "samples, the slowest sample and their standard deviation.")
    else:
        columns = (
            f"The whole list of cases ran {rounds} rounds, one after the other (every case once, in "
            "table order, then again), so the rows compared with each other were measured in the same "
            "minutes; `kwctl run` checked each verdict once, before the case's first round. A row is "
            f"over its case's {rounds} runs of kwctl bench: the lowest per-call time of any run's "
            "fastest sample (`validate` min), the median of the runs' fastest samples, the median of "
            "the runs' medians, and the lowest and highest of the runs' medians (how far the runs "
            "moved, with how much higher the highest is); iterations summed over the runs; "
            "`validate_settings`, the median of the runs' medians. Each run's mean, slowest sample "
            "and standard deviation are left out: they describe one run, and the spread of the "
            "medians says how far the machine drifted between runs.")
    lines = [
        BEGIN,
        f"## real host: {info['kwctl_short']} bench",
        "",
        "Not the harness: Kubewarden's own `kwctl bench` (policy-evaluator on wasmtime, what `kwctl run` "
        "and policy-server evaluate a policy with), written by `bench/kubewarden/kwctl_bench.py`; rerun "
        "it, do not edit by hand. The requests are gpu-bench's (`bench/src/cases.rs`), each module "
        "annotated by `kwctl annotate`. kwctl bench times `validate_settings`, then `validate` "
        "(request and settings in, AdmissionResponse out, in one kept policy instance) in "
        f"{info['samples']} samples{'; ' if rounds == 1 else ' a run. '}{columns}",
        "",
        "kwctl's replay proxy answers each recorded exchange once, so a context-aware request is "
        f"measured with its session repeated ({info['copies']:,} copies to start with, doubled whenever "
        "kwctl reports the session ran out"
        + ("" if rounds == 1 else "; a case's later rounds start from the count its previous round "
           "needed")
        + "): every iteration gets the recorded cluster state, not the fail-closed answer of an "
        "exhausted session.",
        "",
        "| | |",
        "|---|---|",
        f"| kwctl | `{info['kwctl']}` |",
        f"| machine | {info['machine']} |",
        f"| date | {info['date']}, run took {info['elapsed']:.0f} s |",
        f"| load average (1/5/15 min) | {info['load_start']} at start, {info['load_end']} at end |",
        f"| flags | `kwctl bench {info['flags']}` |",
    ]
    if rounds > 1:
        lines.append(f"| rounds | {rounds}: every case's kwctl bench run {rounds} times, round after "
                     "round |")
    lines += [
        f"| command | `{info['command']}` |",
        "",
    ]
    if info["load_busy"]:
        lines += [
            "> **The machine was busy** (load average at or above 1): the numbers are indicative, tails "
            "inflated by preemption; rerun on a quiet machine for reference figures.",
            "",
        ]
    if rounds == 1:
        lines += [
            "| policy | kind | request | meant to | kwctl run | `validate` min | median | mean | max | "
            "stddev | iterations | `validate_settings` median |",
            "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for row in rows:
            c, v = row["case"], row["runs"][0]["validate"]
            vs = row["runs"][0].get("validate_settings", {})
            lines.append(
                f"| {c.policy} | {c.kind} | `{c.name()}` | {c.intent or '–'} | {row['verdict']} | "
                f"{fmt_ns(v['min'])} | {fmt_ns(v['median'])} | {fmt_ns(v['mean'])} | "
                f"{fmt_ns(v['max'])} | {fmt_ns(v['stddev'])} | {v['iterations']:,} | "
                f"{fmt_ns(vs.get('median'))} |")
    else:
        lines += [
            f"| policy | kind | request | meant to | kwctl run | `validate` min (lowest of {rounds}) | "
            "median of mins | median of medians | medians' spread | iterations (sum) | "
            "`validate_settings` median of medians |",
            "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        for row in rows:
            c, a = row["case"], over_rounds(row["runs"])
            lines.append(
                f"| {c.policy} | {c.kind} | `{c.name()}` | {c.intent or '–'} | {row['verdict']} | "
                f"{fmt_ns(a['min'])} | {fmt_ns(a['median_of_mins'])} | "
                f"{fmt_ns(a['median_of_medians'])} | {fmt_range(a['medians_low'], a['medians_high'])} | "
                f"{a['iterations']:,} | {fmt_ns(a['settings_median'])} |")
        compared = comparisons(rows, info["pairs"])
        if compared:
            lines += [
                "",
                f"Ours beside Kubewarden's on the same request, on the median of the {rounds} rounds' "
                "medians (ours/theirs below 1: ours is faster; read it against the medians' spread "
                "above):",
                "",
                *compared,
            ]
    floors = floor_lines(rows, info["labels_policy"])
    if floors:
        lines += [
            "",
            "The host's floor on each request (min / median"
            + (" of medians" if rounds > 1 else "") + "), beside the policy whose settings it ran with:",
            "",
            *floors,
        ]
    lines += ["", info["labels_note"], "", info["mutating_note"], "", host_floor.note("kwctl bench"), "", END]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------
# Main
# ------------------------------------------------------------------------------------------------


def release_module(policy):
    """policies/<p>/policy.wasm, else the release build in cargo's target directory."""
    built = REPO / "policies" / policy / "policy.wasm"
    if built.is_file():
        return built
    target = target_dir() / "wasm32-wasip1" / "release" / f"{policy.replace('-', '_')}.wasm"
    if target.is_file():
        return target
    raise BenchError(f"{built} not found: run `make build` first")


def check_verdict(kwctl, case, module):
    """The case's verdict under kwctl run (which also fills the wasmtime cache), checked against
    what the case is meant to do."""
    said = verdict(kwctl.run(["run", *case_args(case), str(module)], cwd=case.cwd).stdout)
    if case.intent and said != case.intent:
        raise BenchError(f"{case.policy} {case.name()}: kwctl run says {said}, the case is meant "
                         f"to {case.intent}")
    return said


def bench_case(kwctl, case, module, opts, tmp, copies):
    """One kwctl bench run of the case: its statistics and the session copies it took (starting
    from `copies`, doubled while kwctl reports the replay session ran out)."""
    timing = ["--warm-up-time", str(opts.warm_up_time), "--measurement-time",
              str(opts.measurement_time), "--num-samples", str(opts.num_samples)]
    for _ in range(4):
        session = None
        if case.session:
            session = repeated_session(case.cwd / case.session, copies, tmp / "session.yml")
        err = tmp / "bench.err"
        proc = kwctl.run(["bench", *timing, *case_args(case, session), str(module)], cwd=case.cwd,
                         stderr_path=err)
        if not (case.session and replay_failed(err)):
            return parse_bench(proc.stdout), copies
        copies *= 2
    raise BenchError(f"{case.policy} {case.name()}: the replay session ran out even at {copies // 2:,} "
                     "copies")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(REPO / "BENCHMARKS.md"),
                        help="Markdown file to update (default: BENCHMARKS.md)")
    parser.add_argument("--print", action="store_true", help="print the table instead of writing it")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run the whole list of cases this many times, round after round, and "
                             "report each case over its rounds (default 1: one run a case)")
    parser.add_argument("--warm-up-time", type=int, default=1, help="whole seconds per function")
    parser.add_argument("--measurement-time", type=int, default=1, help="whole seconds per function")
    parser.add_argument("--num-samples", type=int, default=100, help="samples per function")
    parser.add_argument("--session-copies", type=int, default=12000,
                        help="copies of a replay session to start with (doubled when it runs out)")
    parser.add_argument("--policies", help="comma-separated subset of policies/")
    opts = parser.parse_args(argv)
    for name in ("rounds", "warm_up_time", "measurement_time", "num_samples", "session_copies"):
        if getattr(opts, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")

    exe = os.environ.get("KWCTL") or shutil.which("kwctl")
    if not exe or exe == "none" or not shutil.which(exe):
        print("kwctl_bench: SKIPPED: kwctl is not on PATH (to get it: ../shared/kubewarden/install.sh DIR, "
              "then add DIR to PATH)")
        return 0
    if not TRUST_CONFIG.is_file():
        raise BenchError(f"{TRUST_CONFIG} not found (set GPU_ADMISSION_SHARED to the shared folder)")

    cases = read_bench_cases()
    if opts.policies:
        wanted = set(opts.policies.split(","))
        unknown = wanted - {c.policy for c in cases}
        if unknown:
            raise BenchError(f"--policies: no benchmark case for {', '.join(sorted(unknown))}")
        cases = [c for c in cases if c.policy in wanted]
    try:
        labels_module = module_from_env(os.environ, LABELS_POLICY_ENV)
        mutating_module = module_from_env(os.environ, MUTATING_POLICY_ENV)
    except ValueError as e:
        raise BenchError(str(e)) from None
    kubewarden_modules = {}
    pairs = []  # (our policy, Kubewarden's beside it), compared request by request
    if labels_module:
        extra = labels_policy_cases(labels_module)
        kubewarden_modules[extra[0].policy] = labels_module.resolve()
        cases = beside(cases, "gpu-labels-policy", extra)
        pairs.append(("gpu-labels-policy", extra[0].policy))
        # The same policy on each other static policy's own requests, beside it.
        for policy, requests in LABELS_POLICY_ALSO_BESIDE.items():
            if any(c.policy == policy for c in cases):
                cases = beside(cases, policy, labels_policy_cases(labels_module, policy, requests))
                pairs.append((policy, extra[0].policy))
        labels_note = (
            f"`kubewarden/{Path(labels_module).stem}` is Kubewarden's own labels policy "
            f"(`{labels_module}`) on the labels policy's Pod and Deployment requests, and on routing's "
            "and VRAM fit's GPU Pod and Deployment beside theirs, with settings "
            f"asking for the labels ours requires by default: `{json.dumps(LABELS_POLICY_SETTINGS)}`. "
            "It checks label names on the object's own `metadata.labels` (not a Deployment's pod "
            "template, not the values), so its verdicts can differ from ours.")
    else:
        labels_note = (f"Kubewarden's own labels policy was not measured in this run ({LABELS_POLICY_ENV} "
                       "was not set to its module).")
    if mutating_module:
        extra = mutating_policy_cases(mutating_module)
        if extra[0].policy in kubewarden_modules:
            raise BenchError(f"{LABELS_POLICY_ENV} and {MUTATING_POLICY_ENV} name modules of the same "
                             f"file name ({mutating_module.name}); rename one")
        kubewarden_modules[extra[0].policy] = mutating_module.resolve()
        cases = beside(cases, "gpu-pool-routing-policy", extra)
        pairs.append(("gpu-pool-routing-policy", extra[0].policy))
        mutating_note = mutating_policy_note(extra[0].policy, mutating_module)
    else:
        mutating_note = (f"No Kubewarden mutating policy was measured in this run ({MUTATING_POLICY_ENV} "
                         "was not set to its module).")

    cases = floor_cases(cases)

    flags = (f"--warm-up-time {opts.warm_up_time} --measurement-time {opts.measurement_time} "
             f"--num-samples {opts.num_samples}")
    started, load_start = time.monotonic(), load()
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    verdicts = [None] * len(cases)
    runs = [[] for _ in cases]  # per case, kwctl bench's statistics of each round
    copies = [opts.session_copies] * len(cases)
    with tempfile.TemporaryDirectory(prefix="kwctl-bench-") as tmp:
        tmp = Path(tmp)
        kwctl = Kwctl(exe, tmp)
        version = kwctl.version()
        modules = {}
        floor = None
        for policy in sorted({c.policy for c in cases}):
            if policy.startswith(host_floor.NAME):
                floor = floor or host_floor.module(kwctl.run, tmp / "host-floor.wasm")
                modules[policy] = floor
                continue
            if policy in kubewarden_modules:
                modules[policy] = kubewarden_modules[policy]
                continue
            d = REPO / "policies" / policy
            out = tmp / f"{policy}.wasm"
            proc = kwctl.run(["annotate", "-m", str(d / "metadata.yml"), "-u", str(d / "README.md"),
                              "-o", str(out), str(release_module(policy))])
            for line in proc.stderr.strip().splitlines():
                print(f"kwctl_bench: kwctl annotate {policy}: {ANSI.sub('', line)}", file=sys.stderr)
            modules[policy] = out
        for round_ in range(1, opts.rounds + 1):
            which = f"round {round_}/{opts.rounds}: " if opts.rounds > 1 else ""
            for i, case in enumerate(cases):
                module = modules[case.policy]
                if verdicts[i] is None:
                    verdicts[i] = check_verdict(kwctl, case, module)
                stats, copies[i] = bench_case(kwctl, case, module, opts, tmp, copies[i])
                runs[i].append(stats)
                v = stats["validate"]
                extra = f" (session x{copies[i]:,})" if case.session else ""
                print(f"kwctl_bench: {which}{case.policy} {case.kind} {case.name()}{extra}: "
                      f"{verdicts[i]}, validate median {fmt_ns(v['median'])} over "
                      f"{v['iterations']:,} iterations", file=sys.stderr)
    rows = [{"case": c, "verdict": said, "runs": r} for c, said, r in zip(cases, verdicts, runs)]
    elapsed = time.monotonic() - started
    numbers = re.search(r"(\d+)\.(\d+)", version)
    info = {
        "kwctl": version,
        "kwctl_short": f"kwctl {numbers.group(1)}.{numbers.group(2)}" if numbers else "kwctl",
        "machine": machine(),
        "date": date,
        "elapsed": elapsed,
        "load_start": load_start,
        "load_end": load(),
        "load_busy": max(os.getloadavg()) >= 1,
        "flags": flags,
        "copies": opts.session_copies,
        "samples": opts.num_samples,
        "rounds": opts.rounds,
        "pairs": pairs,
        "labels_policy": f"kubewarden/{Path(labels_module).stem}" if labels_module else None,
        "command": " ".join([f"{LABELS_POLICY_ENV}={labels_module}"] * bool(labels_module)
                            + [f"{MUTATING_POLICY_ENV}={mutating_module}"] * bool(mutating_module)
                            + ["bench/kubewarden/kwctl_bench.py", *argv]),
        "labels_note": labels_note,
        "mutating_note": mutating_note,
    }
    section = markdown(rows, info)
    if opts.print:
        print(section, end="")
        return 0
    out = Path(opts.out)
    try:
        marked_section.write(out, BEGIN, END, section)
    except ValueError as e:
        raise BenchError(str(e)) from None
    rounds = f" ({opts.rounds} rounds)" if opts.rounds > 1 else ""
    print(f"kwctl_bench: {len(rows)} requests measured{rounds} in {elapsed:.0f} s; wrote {out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print(f"kwctl_bench: error: {e}", file=sys.stderr)
        sys.exit(1)
