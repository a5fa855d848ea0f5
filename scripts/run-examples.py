#!/usr/bin/env python3
"""Evaluates each policy on the examples of policies/<name>/examples.txt and prints one verdict a line.

Each non-comment line of examples.txt is

    <request.json> <settings file, or -> [<replay session.yml>] => <allowed|denied|patched>

with paths relative to the policy's directory. The runner is kwctl (`--kwctl PATH`: the real
Kubewarden CLI, on the annotated module) or the project's harness (`--gpu-kwctl PATH`, on the
module as built); both take the same `run` flags and print the same AdmissionResponse. A verdict
other than the one examples.txt expects, or a runner error, is printed as such and makes the exit
status 1.

usage: scripts/run-examples.py (--kwctl PATH | --gpu-kwctl PATH) [--sigstore-trust-config FILE] POLICY...
"""

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

VERDICTS = ("allowed", "denied", "patched")


def parse_examples(path):
    """[(line number, request, settings or None, session or None, expected verdict)]"""
    examples = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            case, sep, expected = line.partition("=>")
            words, expected = case.split(), expected.strip()
            if not sep or expected not in VERDICTS or not 2 <= len(words) <= 3:
                raise SystemExit(
                    f"{path}:{number}: expected `<request> <settings or -> [<session>] => "
                    f"<{'|'.join(VERDICTS)}>`, found `{line}`"
                )
            request, settings = words[0], words[1]
            session = words[2] if len(words) == 3 else None
            examples.append((number, request, None if settings == "-" else settings, session, expected))
    return examples


def verdict_of(response):
    """(verdict, detail) of an AdmissionResponse as printed by `kwctl run`."""
    if not response.get("allowed"):
        return "denied", (response.get("status") or {}).get("message") or ""
    detail = ""
    verdict = "allowed"
    if response.get("patch"):
        verdict = "patched"
        ops = json.loads(base64.b64decode(response["patch"]))
        detail = "patch: " + "; ".join(f'{o["op"]} {o["path"]}' for o in ops)
    if response.get("warnings"):
        detail += ("  " if detail else "") + "warnings: " + " | ".join(response["warnings"])
    return verdict, detail


def run_one(runner, extra, policy_dir, module, example):
    _, request, settings, session, expected = example
    args = [runner, "run", "--request-path", request]
    if settings:
        args += ["--settings-path", settings]
    if session:
        args += ["--allow-context-aware", "--replay-host-capabilities-interactions", session]
    args += extra + [module]
    proc = subprocess.run(args, cwd=policy_dir, capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return "error", (proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}")
    try:
        return verdict_of(json.loads(lines[-1]))
    except (ValueError, KeyError) as e:
        return "error", f"unreadable answer ({e}): {lines[-1][:300]}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    host = parser.add_mutually_exclusive_group(required=True)
    host.add_argument("--kwctl", help="Kubewarden's kwctl: runs policies/<p>/annotated-policy.wasm")
    host.add_argument("--gpu-kwctl", help="the project's harness CLI: runs policies/<p>/policy.wasm")
    parser.add_argument("--sigstore-trust-config", help="passed to kwctl (offline trust root)")
    parser.add_argument("policies", nargs="+")
    opts = parser.parse_args()

    # Runs happen in each policy's directory: paths are made absolute first.
    if opts.kwctl:
        runner, module = shutil.which(opts.kwctl), "annotated-policy.wasm"
        extra = []
        if opts.sigstore_trust_config:
            extra = ["--sigstore-trust-config", os.path.abspath(opts.sigstore_trust_config)]
    else:
        runner, module, extra = shutil.which(opts.gpu_kwctl), "policy.wasm", []
    if runner is None:
        parser.error(f"{opts.kwctl or opts.gpu_kwctl}: not found")
    runner = os.path.abspath(runner)

    failures = 0
    # Two at a time: each run is a process that compiles or loads the module.
    with ThreadPoolExecutor(max_workers=2) as pool:
        for policy in opts.policies:
            policy_dir = os.path.join("policies", policy)
            listing = os.path.join(policy_dir, "examples.txt")
            print(f"=== {policy}")
            if not os.path.isfile(listing):
                print("    (no examples.txt)")
                continue
            examples = parse_examples(listing)
            results = pool.map(lambda e: run_one(runner, extra, policy_dir, module, e), examples)
            for example, (verdict, detail) in zip(examples, results):
                number, request, _, session, expected = example
                label = request + (f" + {os.path.basename(session)}" if session else "")
                if verdict == expected:
                    print(f"    {verdict.upper():<8} {label:<56} {detail}")
                else:
                    failures += 1
                    print(
                        f"    {verdict.upper():<8} {label:<56} {detail}\n"
                        f"    ^^^ examples.txt:{number} expects {expected.upper()}"
                    )
    if failures:
        print(f"run-examples: {failures} example(s) did not give the verdict examples.txt expects")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
