#!/usr/bin/env python3
"""gpu-admission check beside kwctl run: cold start and cost per manifest on 100 manifests.

Both run the same policies (the default policy manifests: the group in deploy/ and routing's
example, each member with its settings and contextAwareResources) on the same annotated modules
(policies/<name>/annotated-policy.wasm, `make annotate`), against the same cluster state
(examples/cluster-snapshot.yaml: the checker reads it with --snapshot, kwctl through fakeapi
serving it, as policy-server would read a cluster).

- gpu-admission check: one process for all the manifests; `cold` is one manifest (process start,
  the policy manifests read, five modules compiled, their settings validated, one object checked).
- kwctl run: what a user does without the checker, one process per manifest and policy, each
  given a ClusterAdmissionPolicy file of one policy (kwctl reads module, settings and
  contextAwareResources from it) and the AdmissionRequest of the manifest. kwctl keeps its
  compiled modules in its wasmtime cache: `cold` is the first manifest with an empty cache.

Writes the section between <!-- check-bench:begin --> and <!-- check-bench:end --> of --out.

  bench/kubewarden/check_bench.py --checker <target dir>/bench-harness/gpu-admission --kwctl kwctl \
      --rounds 3 --out BENCHMARKS.md
"""

import argparse
import copy
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from host_info import cpu_model  # noqa: E402
from marked_section import markers, write as write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = markers("check-bench")
GROUP = ROOT / "deploy/cluster-admission-policy-group.yaml"
ROUTING = ROOT / "policies/gpu-pool-routing-policy/examples/cluster-admission-policy.yaml"
SNAPSHOT = ROOT / "examples/cluster-snapshot.yaml"
FAKEAPI = ROOT / "../shared/tools/fakeapi/fakeapi.py"
TRUST = ROOT / "../shared/kubewarden/offline-sigstore-trust-config.json"


def templates():
    """The example manifests that policies judge (one object each)."""
    out = []
    for path in sorted((ROOT / "examples/manifests").iterdir()):
        text = path.read_text()
        docs = [json.loads(text)] if path.suffix == ".json" else list(yaml.safe_load_all(text))
        for doc in docs:
            if doc and doc.get("kind") in ("Deployment", "Pod", "Job", "HorizontalPodAutoscaler"):
                out.append(doc)
    return out


def manifests(n):
    """n objects: the templates in turn, each renamed -<i>."""
    base = templates()
    out = []
    for i in range(n):
        doc = copy.deepcopy(base[i % len(base)])
        doc["metadata"]["name"] = f"{doc['metadata']['name']}-{i}"
        out.append(doc)
    return out


PLURALS = {"Deployment": "deployments", "Pod": "pods", "Job": "jobs",
           "HorizontalPodAutoscaler": "horizontalpodautoscalers"}


def admission_request(i, obj):
    """The CREATE request gpu-admission check sends for obj (check/src/request.rs)."""
    group, _, version = obj["apiVersion"].rpartition("/")
    gvk = {"group": group, "version": version, "kind": obj["kind"]}
    gvr = {"group": group, "version": version, "resource": PLURALS[obj["kind"]]}
    ns = obj["metadata"].get("namespace", "default")
    o = copy.deepcopy(obj)
    o["metadata"]["namespace"] = ns
    return {"uid": f"gpu-admission-check-{i}", "kind": gvk, "resource": gvr, "requestKind": gvk,
            "requestResource": gvr, "name": obj["metadata"]["name"], "namespace": ns,
            "operation": "CREATE",
            "userInfo": {"username": "gpu-admission-check", "groups": ["system:authenticated"]},
            "object": o, "oldObject": None, "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}


def one_policy_files(tmp):
    """One ClusterAdmissionPolicy file per policy: routing, and each member of the group, on the
    annotated modules. (name, file) pairs."""
    group = yaml.safe_load(GROUP.read_text())
    routing = [d for d in yaml.safe_load_all(ROUTING.read_text())
               if d and d["kind"] == "ClusterAdmissionPolicy"][0]
    out = []

    def module(ref):
        name = ref.rsplit("/", 1)[1].split(":")[0]
        return f"file://{ROOT / 'policies' / name / 'annotated-policy.wasm'}"

    routing = copy.deepcopy(routing)
    routing["spec"]["module"] = module(routing["spec"]["module"])
    entries = [("gpu-pool-routing", routing)]
    for member, spec in group["spec"]["policies"].items():
        entries.append((f"gpu-admission/{member}", {
            "apiVersion": "policies.kubewarden.io/v1", "kind": "ClusterAdmissionPolicy",
            "metadata": {"name": member},
            "spec": {"module": module(spec["module"]), "mutating": False,
                     "rules": group["spec"]["rules"], "settings": spec.get("settings", {}),
                     "contextAwareResources": spec.get("contextAwareResources", [])}}))
    for name, doc in entries:
        path = tmp / f"policy-{name.replace('/', '-')}.yaml"
        path.write_text(yaml.safe_dump(doc))
        out.append((name, path))
    return out


def timed(cmd, env=None):
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return time.perf_counter() - start, proc


def start_fakeapi(tmp):
    port_file, kubeconfig = tmp / "fa.port", tmp / "fa.kubeconfig"
    proc = subprocess.Popen([sys.executable, str(FAKEAPI), "--snapshot", str(SNAPSHOT), "--port", "0",
                             "--port-file", str(port_file), "--kubeconfig-out", str(kubeconfig)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        if port_file.exists() and port_file.read_text().strip() and kubeconfig.exists():
            port = int(port_file.read_text())
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc, kubeconfig
        if proc.poll() is not None:
            sys.exit("fakeapi exited before listening")
        time.sleep(0.05)
    proc.kill()
    sys.exit("fakeapi did not start")


def fmt(s):
    return f"{s * 1000:.0f} ms" if s < 10 else f"{s:.1f} s"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checker", required=True, help="the gpu-admission binary")
    ap.add_argument("--kwctl", default="kwctl")
    ap.add_argument("--manifests", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    args = ap.parse_args()
    kwctl = shutil.which(args.kwctl) or sys.exit(f"kwctl not found: {args.kwctl}")
    checker = str(Path(args.checker).resolve())
    started, load_start = time.time(), os.getloadavg()
    tmp = Path(tempfile.mkdtemp(prefix="check-bench-"))
    fakeapi = None
    try:
        objs = manifests(args.manifests)
        (tmp / "all.yaml").write_text(yaml.safe_dump_all(objs))
        (tmp / "one.yaml").write_text(yaml.safe_dump_all(objs[:1]))
        requests = []
        for i, obj in enumerate(objs):
            path = tmp / f"request-{i}.json"
            path.write_text(json.dumps(admission_request(i, obj)))
            requests.append(path)
        fakeapi, kubeconfig = start_fakeapi(tmp)

        base = [checker, "check", "--root", str(ROOT), "-o", "json"]
        snapshot = ["--snapshot", str(SNAPSHOT)]
        cold, full, live = [], [], []
        verdicts = {}
        for _ in range(args.rounds):
            t, _ = timed(base + snapshot + [str(tmp / "one.yaml")])
            cold.append(t)
            t, proc = timed(base + snapshot + [str(tmp / "all.yaml")])
            if proc.returncode not in (0, 1):
                sys.exit(f"gpu-admission check failed: {proc.stderr}")
            full.append(t)
            for row in json.loads(proc.stdout)["results"]:
                name = row["object"].split("/")[-1]
                verdicts[(name, row["policy"])] = row["verdict"]
        t, proc = timed(base + ["--kubeconfig", str(kubeconfig), str(tmp / "all.yaml")])
        live.append(t)
        live_rows = json.loads(proc.stdout)["results"] if proc.returncode in (0, 1) else []
        live_same = sum(1 for r in live_rows
                        if verdicts.get((r["object"].split("/")[-1], r["policy"])) == r["verdict"])

        env = dict(os.environ, KUBECONFIG=str(kubeconfig), XDG_CACHE_HOME=str(tmp / "kw-cache"),
                   XDG_CONFIG_HOME=str(tmp / "kw-config"), XDG_DATA_HOME=str(tmp / "kw-data"))
        env.pop("RUST_BACKTRACE", None)
        policies = one_policy_files(tmp)
        kw_times, agree, compared, kw_cold = [], 0, 0, None
        for i, (obj, request) in enumerate(zip(objs, requests)):
            per_manifest = 0.0
            for name, policy in policies:
                t, proc = timed([kwctl, "--no-color", "run", "--sigstore-trust-config", str(TRUST),
                                 "--request-path", str(request), str(policy)], env)
                per_manifest += t
                if proc.returncode != 0:
                    sys.exit(f"kwctl run {policy} {request}: {proc.stderr}")
                line = [x for x in proc.stdout.splitlines() if x.startswith("{")][-1]
                allowed = json.loads(line)["allowed"]
                ours = verdicts.get((obj["metadata"]["name"], name))
                if ours is not None:
                    compared += 1
                    agree += (ours == "admitted") == allowed
            if i == 0:
                kw_cold = per_manifest
            else:
                kw_times.append(per_manifest)

        per_manifest = (statistics.median(full) - statistics.median(cold)) / (len(objs) - 1)
        load_end = os.getloadavg()
        busy = load_start[0] >= 1 or load_end[0] >= 1
        lines = [
            BEGIN,
            "## gpu-admission check beside kwctl run",
            "",
            "Written by `bench/kubewarden/check_bench.py`; rerun it, do not edit by hand. The same "
            f"{len(objs)} manifests (the Deployments, Pod, Job and HPA of `examples/manifests` in turn, "
            "renamed), the same five policies (the group in `deploy/` and routing's example, with "
            "their settings and grants) on the same annotated modules, against the same cluster "
            "(`examples/cluster-snapshot.yaml`: `--snapshot` for the checker; for kwctl, and for the "
            "checker's `--kubeconfig` row, fakeapi serving it).",
            "",
            "| | |",
            "|---|---|",
            f"| checker | `{Path(args.checker).name}` built `{Path(args.checker).parent.name}` (wasmtime through gpu-e2e) |",
            f"| kwctl | `{subprocess.run([kwctl, '--version'], capture_output=True, text=True).stdout.strip().splitlines()[0]}` (policy-evaluator on wasmtime) |",
            f"| machine | {os.cpu_count()} cores, {cpu_model()} |",
            f"| date | {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, run took {time.time() - started:.0f} s |",
            f"| load average (1/5/15 min) | {' / '.join(f'{x:.2f}' for x in load_start)} at start, "
            f"{' / '.join(f'{x:.2f}' for x in load_end)} at end |",
            f"| rounds | checker: {args.rounds} (medians); kwctl: 1 ({len(objs)} manifests x {len(policies)} policies = {len(objs) * len(policies)} processes) |",
            "",
        ]
        if busy:
            lines += ["> **The machine was busy** (load average at or above 1): the numbers are "
                      "indicative; rerun on a quiet machine for reference figures.", ""]
        lines += [
            "| | cold start (1 manifest) | 100 manifests | per manifest after the first |",
            "|---|---:|---:|---:|",
            f"| `gpu-admission check --snapshot` (one process) | {fmt(statistics.median(cold))} | "
            f"{fmt(statistics.median(full))} | {per_manifest * 1000:.1f} ms |",
            f"| `gpu-admission check --kubeconfig` (fakeapi) | – | {fmt(live[0])} | – |",
            f"| `kwctl run`, one process per manifest and policy | {fmt(kw_cold)} (empty module cache) | "
            f"{fmt(kw_cold + sum(kw_times))} | {statistics.mean(kw_times) * 1000:.0f} ms "
            f"({len(policies)} runs; median {statistics.median(kw_times) * 1000:.0f} ms) |",
            "",
            f"Verdicts: kwctl and the checker agree on {agree} of {compared} (manifest, policy) "
            f"pairs; the checker through fakeapi gives the snapshot's verdict on {live_same} of "
            f"{len(live_rows)} rows.",
            END,
        ]
        write_section(Path(args.out), BEGIN, END, "\n".join(lines) + "\n")
        print("\n".join(lines))
    finally:
        if fakeapi:
            fakeapi.terminate()
            fakeapi.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
