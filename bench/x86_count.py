#!/usr/bin/env python3
"""x86 instructions per `validate` of each static policy and of Kubewarden's comparison policies,
counted by callgrind on the code wasmtime compiles the modules to (host included).

A deterministic count that ranks modules the way `kwctl bench` does, where wasmi's fuel (gpu-bench
guest-work) does not: Cranelift gives every small wasm function a prologue, a stack check and an
epoch check, which an interpreter's instruction count hardly sees. Each case runs
`gpu-bench wasm-loop` under `valgrind --tool=callgrind`, counting only its two loops
(`--toggle-collect`): CALLS calls on one kept wasmtime instance (as kwctl bench), then FRESH
calls each on a fresh instance (as policy-server, instantiation included).

    bench/x86_count.py [--calls N] [--fresh-calls FRESH] [--functions] [--out BENCHMARKS.md]

With --out, the table replaces the file's section between `<!-- x86-count:begin -->` and
`<!-- x86-count:end -->` (appended when it has none); without it, it is printed.

Needs valgrind (Debian: valgrind) and gpu-bench built with the bench-harness profile
(`cargo build --locked --profile bench-harness -p gpu-bench`: the host is counted too, so it must
be optimized). Kubewarden's modules come from the environment as for the other benchmarks
(KUBEWARDEN_LABELS_POLICY, KUBEWARDEN_MUTATING_POLICY; bench/kubewarden/kubewarden_policies.json);
a missing one is left out, and said so. --functions adds, per case, the wasm functions that
executed the most instructions (gpu-e2e asks wasmtime for a perf map when GPU_E2E_PERFMAP is set;
a module built without `strip = true` gives them their Rust names).
"""
import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent / "kubewarden"))
import host_floor  # noqa: E402
import marked_section  # noqa: E402
from cargo_target import target_dir  # noqa: E402
from policy_server_bench import STATIC_CASES  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BENCH = target_dir() / "bench-harness" / "gpu-bench"
SHARED = json.loads((ROOT / "bench" / "kubewarden" / "kubewarden_policies.json").read_text())
LOOP = "gpu_bench::calls_on"
FRESH_LOOP = "gpu_bench::fresh_calls_on"
BEGIN, END = "<!-- x86-count:begin -->", "<!-- x86-count:end -->"

# (policy, kind, request, settings): the GPU Pod and Deployment of each static policy, the
# requests the policy-server section measures.
OURS = [(policy, kind, request, settings) for _, policy, kind, request, settings, _ in STATIC_CASES]


def count(module, request, settings, calls, fresh_calls, functions):
    """Instructions per call on the kept instance, per call on a fresh instance (None when
    fresh_calls is 0), and the costliest functions of the kept calls (name, instructions) when
    asked (the fresh calls are then not made, so that the functions are the kept calls')."""
    fresh_calls = 0 if functions else fresh_calls
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        env = dict(os.environ, GPU_E2E_PERFMAP="1") if functions else os.environ
        proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--collect-atstart=no", f"--toggle-collect={LOOP}",
             f"--toggle-collect={FRESH_LOOP}", f"--callgrind-out-file={out}", str(BENCH), "wasm-loop",
             str(module), str(request), str(settings), str(calls), str(fresh_calls)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        _, stderr = proc.communicate()
        perf_map = Path(f"/tmp/perf-{proc.pid}.map")
        try:
            if proc.returncode != 0:
                raise SystemExit(f"x86_count: {module} on {request}: gpu-bench failed:\n{stderr[-2000:]}")
            loops = loop_totals(out)
            for loop in [LOOP] + [FRESH_LOOP] * bool(fresh_calls):
                if loop not in loops:
                    raise SystemExit(f"x86_count: no callgrind count of {loop} for {module}:\n{stderr[-2000:]}")
            top = top_functions(out, perf_map) if functions else []
        finally:
            perf_map.unlink(missing_ok=True)
        fresh = loops[FRESH_LOOP] / fresh_calls if fresh_calls else None
        return loops[LOOP] / calls, fresh, top


def loop_totals(out):
    """{loop function: its inclusive instructions} from a callgrind output."""
    annotate = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(out)],
                              capture_output=True, text=True).stdout
    totals = {}
    for line in annotate.splitlines():
        m = re.match(r"\s*([\d,]+) \([ \d.]+%\)\s+\?\?\?:(\S+)", line)
        if m and m.group(2) in (LOOP, FRESH_LOOP):
            totals.setdefault(m.group(2), int(m.group(1).replace(",", "")))
    return totals


def top_functions(out, perf_map):
    """The functions with the most instructions, wasm ones named by wasmtime's perf map."""
    ranges = []
    if perf_map.exists():
        for line in perf_map.read_text().splitlines():
            start, size, name = line.split(" ", 2)
            ranges.append((int(start, 16), int(size, 16), name))
    annotate = subprocess.run(["callgrind_annotate", "--threshold=100", str(out)],
                              capture_output=True, text=True).stdout
    costs = collections.Counter()
    for line in annotate.splitlines():
        m = re.match(r"\s*([\d,]+) \([ \d.]+%\)\s+(.*)", line)
        if not m or "PROGRAM TOTALS" in m.group(2):
            continue
        n, what = int(m.group(1).replace(",", "")), m.group(2)
        jit = re.match(r"\?\?\?:0x([0-9a-f]+)", what)
        if jit:
            addr = int(jit.group(1), 16)
            name = next((r[2] for r in ranges if r[0] <= addr < r[0] + r[1]), "(wasm, unnamed)")
        else:
            if re.search(r"\(\d[\d,]*x\)", what):
                continue  # a caller's inclusive line, not a function's own cost
            name = "host: " + re.sub(r"\s*\[.*", "", what.split(":", 1)[-1])
        costs[name] += n
    return costs.most_common(8)


def cases(settings_dir):
    """(policy, kind, request name, module, request file, settings file or "-") of every case, and
    the Kubewarden policies left out for want of their module."""
    found, missing = [], []
    floor = host_floor.build()
    for policy, kind, request, settings in OURS:
        folder = ROOT / "policies" / policy
        found.append((policy, kind, request, folder / "policy.wasm", folder / request,
                      folder / settings if settings else "-"))
        found.append((host_floor.row_name(policy), kind, request, floor, folder / request,
                      folder / settings if settings else "-"))
    for entry in ("labels", "mutating"):
        spec = SHARED[entry]
        module = os.environ.get(spec["env"])
        if not module:
            missing.append(f"{spec['policy']} (set {spec['env']}; bench/kubewarden/build-kubewarden-policies.sh)")
            continue
        settings = Path(settings_dir) / f"{spec['policy']}-settings.json"
        settings.write_text(json.dumps(spec["settings"]))
        ours = {request for policy, _, request, _ in OURS if policy == spec["beside"]}
        for kind, request in spec["requests"]:
            if request in ours:
                found.append((f"kubewarden/{spec['policy']}", kind, request, Path(module),
                              ROOT / "policies" / spec["beside"] / request, settings))
    return found, missing


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=1000, help="calls counted per case (default 1000)")
    ap.add_argument("--fresh-calls", type=int, default=200,
                    help="calls counted per case on a fresh instance each (default 200; 0: none)")
    ap.add_argument("--functions", action="store_true",
                    help="also list each case's costliest functions (kept calls only: no fresh calls)")
    ap.add_argument("--out", help="Markdown file whose x86-count section to replace (default: print)")
    args = ap.parse_args()
    for tool in ("valgrind", "callgrind_annotate"):
        if not shutil.which(tool):
            print(f"x86_count: SKIPPED: {tool} not found (Debian: apt-get install valgrind)")
            return 0
    if not BENCH.exists():
        print(f"x86_count: {BENCH} not found: cargo build --locked --profile bench-harness -p gpu-bench",
              file=sys.stderr)
        return 1
    settings_dir = tempfile.mkdtemp(prefix="x86-count-")
    found, missing = cases(settings_dir)
    fresh_calls = 0 if args.functions else args.fresh_calls
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"],
                          capture_output=True, text=True).stdout.strip() or "?"
    lines = [BEGIN, "## x86 instructions per validate (callgrind on wasmtime)", "",
             f"Written by `bench/x86_count.py` at `{head}`; rerun it, do not edit by hand. Each module runs in "
             f"`gpu-bench wasm-loop` (wasmtime 48 through gpu-e2e) under callgrind, which counts the x86 "
             f"instructions of {args.calls:,} `validate` calls on one kept instance, as `kwctl bench` makes them, "
             + (f"then of {fresh_calls:,} calls each on a fresh instance, as policy-server makes them (instantiating "
                "the module included: wasmtime's share of that is the same for every module)" if fresh_calls
                else "(no fresh-instance calls in this run)")
             + ": the code wasmtime "
             "compiled the module to, its builtins and the host's side of each call. Deterministic, like the "
             "guest-work count, but it ranks modules as kwctl does: see \"Which count to trust\" in the section "
             "read by hand. Ours are `policies/<name>/policy.wasm`; Kubewarden's as for the other sections. "
             f"*{host_floor.NAME}* is `bench/host-floor`, which accepts without reading the request or the settings, "
             "on the request and with the settings of the row above it: what the host and instantiation cost "
             "before any policy code runs.", "",
             "| policy | kind | request | x86 instructions per call, kept instance | per call, fresh instance |",
             "|---|---|---|---:|---:|"]
    tops = []
    for policy, kind, request, module, request_path, settings in found:
        per_call, fresh, top = count(module, request_path, settings, args.calls, args.fresh_calls, args.functions)
        fresh_text = f"{fresh:,.0f}" if fresh is not None else "-"
        lines.append(f"| {policy} | {kind} | `{Path(request).stem}` | {per_call:,.0f} | {fresh_text} |")
        print(lines[-1], file=sys.stderr, flush=True)
        tops.append((policy, request, top))
    for policy, request, top in tops if args.functions else []:
        lines += ["", f"{policy} on `{Path(request).stem}`, the costliest functions (instructions per call):", ""]
        lines += [f"- {n / args.calls:,.0f}: `{name[:140]}`" for name, n in top]
    lines += [""] + [f"Not counted: {m}." for m in missing] + ([""] if missing else []) + [END]
    shutil.rmtree(settings_dir, ignore_errors=True)
    section = "\n".join(lines) + "\n"
    if not args.out:
        print(section)
        return 0
    out = Path(args.out)
    try:
        marked_section.write(out, BEGIN, END, section)
    except ValueError as e:
        raise SystemExit(f"x86_count: {e}") from None
    print(f"=== wrote the x86-count section into {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
