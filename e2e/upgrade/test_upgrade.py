#!/usr/bin/env python3
"""The upgrade test: the previous release's manifests and test_data with today's modules give the
verdicts the previous release gave, except the deliberate changes listed in differences.yml.

e2e/upgrade/release/ holds the previous release's files (README.md here says which release and
why); verdicts.json holds what the previous release's own modules answered in each stage below
(written by `--record`, run once on that release's annotated modules). Three stages:

- kwctl: every case of the release's policies/*/test_data/cases.yml through `kwctl run` on a
  ClusterAdmissionPolicy manifest naming today's module, with the case's settings and the
  contextAwareResources of the release's metadata.yml, the host calls answered from the case's
  replay session (an empty one when it has none, so that any new call fails; a recorded request
  whose shape changed without changing what the policy reads is given today's shape first,
  HOST_CALL_CHANGES).
- policy-server cases: the cases whose session is empty or absent (no host call in the previous
  release), through policy-server, one policy per settings file, with the same contextAwareResources;
  its cluster is fakeapi serving the release's example cluster (below).
- policy-server manifests: the release's example manifests as they were applied (the members of
  deploy/cluster-admission-policy-group.yaml and each policy's examples/cluster-admission-policy.yaml:
  settings, contextAwareResources, mutating) with only the module replaced, under policy-server with
  fakeapi serving the release's examples/cluster-snapshot.yaml and the capacity gate's
  examples/resource-quotas.yaml; every request of the release's test_data and every object of its
  examples/manifests (as a CREATE) is sent to each of them.

A verdict is: allowed or denied, the status code of a denial, the JSONPatch of a mutation, or
the settings refused. Messages, warnings and audit annotations may change between releases; the
verdicts may not, unless differences.yml lists the change with its reason. A listed change that
does not happen fails the test too.

    python3 e2e/upgrade/test_upgrade.py kwctl|policy-server   (make upgrade-test runs both)
    python3 e2e/upgrade/test_upgrade.py --record MODULES_DIR  (MODULES_DIR/<policy>/annotated-policy.wasm)

GPU_ADMISSION_MODULES_DIR: today's modules from another folder laid out like policies/.
"""

import argparse
import base64
import concurrent.futures
import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "kubewarden"))
import hosts  # noqa: E402

try:
    import yaml
except ImportError:  # scripts/setup.sh installs python3-yaml
    sys.exit("test_upgrade.py needs PyYAML (apt-get install python3-yaml; scripts/setup.sh does)")

RELEASE = HERE / "release"
PROBES = HERE / "probes"
VERDICTS = HERE / "verdicts.json"
DIFFERENCES = HERE / "differences.yml"
POLICIES = ["gpu-labels-policy", "gpu-pool-routing-policy", "gpu-vram-fit-policy", "gpu-capacity-gate-policy",
            "gpu-autoscaler-policy"]
KWCTL = "kwctl"
POLICY_SERVER_CASES = "policy-server cases"
POLICY_SERVER_MANIFESTS = "policy-server manifests"
STAGES = [KWCTL, POLICY_SERVER_CASES, POLICY_SERVER_MANIFESTS]
# Group members and example policies get every Kubernetes host capability (policy-server 1.36
# denies every capability a policy entry does not list); the OCI and network capabilities are
# left out, as no cluster of the example reaches a registry from here.
HOST_CAPABILITIES = ["kubernetes/*"]
WORKERS = 2


# --------------------------------------------------------------------------------------
# The previous release's files
# --------------------------------------------------------------------------------------


def read_yaml(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def release_path(policy, relative):
    return RELEASE / "policies" / policy / relative


def case_key(case):
    """'request | settings | session' with test_data/ left out, '-' for what the case has not."""
    return " | ".join(Path(case[k]).name if case.get(k) else "-" for k in ("request", "settings", "session"))


def release_cases(policy):
    """The release's cases of `policy`, once each (cases.yml repeats a request for other checks)."""
    cases = {}
    for case in read_yaml(release_path(policy, "test_data/cases.yml")):
        cases.setdefault(case_key(case), {**case, "dir": RELEASE / "policies" / policy})
    return cases


def all_cases():
    """[(entry, policy, key, case)]: the release's cases (entry: the policy) and the probes
    (entry: probes/<policy>), each case with `dir`, the folder its paths are relative to."""
    found = [(policy, policy, key, case) for policy in POLICIES for key, case in release_cases(policy).items()]
    probes = {}
    for case in read_yaml(PROBES / "cases.yml"):
        policy = case["policy"]
        key = case_key(case) + (" | windows closed" if case.get("closed") else "")
        key += "".join(f" | granted {r['kind']}" for r in case.get("grant", []))
        probes.setdefault(key, (f"probes/{policy}", policy, key, {**case, "dir": PROBES / policy}))
    return found + list(probes.values())


def case_file(case, field):
    return case["dir"] / case[field]


def makes_no_call(case):
    """The case's session answers no host call (absent or an empty list)."""
    if not case.get("session"):
        return True
    text = case_file(case, "session").read_text()
    return not any(line.startswith("- type:") for line in text.splitlines())


def release_metadata(policy):
    return read_yaml(release_path(policy, "metadata.yml"))


def metadata_resources(policy):
    return [{"apiVersion": r["apiVersion"], "kind": r["kind"]}
            for r in release_metadata(policy).get("contextAwareResources") or []]


def settings_of(case):
    settings = (read_yaml(case_file(case, "settings")) or {}) if case.get("settings") else {}
    if case.get("closed"):
        close_windows(settings)
    return settings


def close_windows(settings):
    """Every window of the routing settings' schedules on the weekday three days from now (UTC):
    closed whenever the test runs, in any time zone."""
    day = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=3)).strftime("%a")
    windows = [w for schedule in (settings.get("schedules") or {}).values() for w in schedule.get("windows", [])]
    if not windows:
        raise SystemExit("a probe with closed: true has settings without lending windows")
    for window in windows:
        window["days"] = [day]


def manifest_policies():
    """{entry id: (policy, spec)} of the release's example manifests: the group's members
    (group-<member>) and each policy's example (example-<policy>)."""
    entries = {}
    group = read_yaml(RELEASE / "deploy" / "cluster-admission-policy-group.yaml")
    for member, spec in group["spec"]["policies"].items():
        policy = module_policy(spec["module"])
        entries[f"group-{member}"] = (policy, {**spec, "mutating": False})
    for policy in POLICIES:
        for doc in yaml.safe_load_all(release_path(policy, "examples/cluster-admission-policy.yaml").read_text()):
            if doc and doc.get("kind") == "ClusterAdmissionPolicy":
                entries[f"example-{policy}"] = (policy, doc["spec"])
    return entries


def module_policy(module):
    name = module.rsplit("/", 1)[-1].split(":")[0].split("@")[0]
    if name not in POLICIES:
        raise SystemExit(f"{module}: not one of this project's policies")
    return name


def cluster_objects():
    """The release's example cluster: examples/cluster-snapshot.yaml's items and the capacity
    gate's examples/resource-quotas.yaml."""
    objects = list(read_yaml(RELEASE / "examples" / "cluster-snapshot.yaml")["items"])
    quotas = release_path("gpu-capacity-gate-policy", "examples/resource-quotas.yaml").read_text()
    objects += [doc for doc in yaml.safe_load_all(quotas) if doc]
    return objects


def manifest_requests():
    """{name: AdmissionRequest}: every request of the release's test_data (by file name; the same
    name in two policies is the same request or is kept under both names), every probe's
    (probes/<name>) and every object of the release's examples/manifests as a CREATE."""
    requests = {}
    for entry, policy, _, case in all_cases():
        name = Path(case["request"]).name
        if entry.startswith("probes/"):
            name = f"probes/{name}"
        request = hosts.read_json(case_file(case, "request"))
        if requests.setdefault(name, request) != request:
            requests[f"{policy}/{name}"] = request
    for path in sorted((RELEASE / "examples" / "manifests").iterdir()):
        text = path.read_text()
        docs = [json.loads(text)] if path.suffix == ".json" else list(yaml.safe_load_all(text))
        for i, obj in enumerate(d for d in docs if d):
            requests[f"manifests/{path.name}#{i}"] = create_request(obj, f"{path.name}#{i}")
    return requests


def create_request(obj, name):
    group, _, version = obj["apiVersion"].rpartition("/")
    kind = obj["kind"]
    plural = kind.lower() + ("es" if kind.lower().endswith("s") else "s")
    gvk = {"group": group, "version": version, "kind": kind}
    gvr = {"group": group, "version": version, "resource": plural}
    meta = obj.get("metadata", {})
    request = {"uid": hashlib.sha256(name.encode()).hexdigest()[:32], "kind": gvk, "resource": gvr,
               "requestKind": gvk, "requestResource": gvr, "name": meta.get("name", ""),
               "operation": "CREATE",
               "userInfo": {"username": "alice@example.com", "groups": ["system:authenticated"]},
               "object": obj, "oldObject": None, "dryRun": False,
               "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}
    if meta.get("namespace"):
        request["namespace"] = meta["namespace"]
    return request


# --------------------------------------------------------------------------------------
# Verdicts
# --------------------------------------------------------------------------------------


def verdict(response):
    """What the test compares of an AdmissionResponse, and under `text` (not compared, not
    recorded) its message and warnings, which differences.yml's `says` is checked against."""
    allowed = bool(response.get("allowed"))
    found = {"allowed": allowed}
    found["text"] = " | ".join([(response.get("status") or {}).get("message") or ""] + (response.get("warnings") or []))
    if not allowed:
        code = (response.get("status") or {}).get("code")
        if code is not None:
            found["code"] = code
    if response.get("patch"):
        found["patch"] = json.loads(base64.b64decode(response["patch"]))
    return found


def comparable(found):
    return None if found is None else {k: v for k, v in found.items() if k != "text"}


def summary(found):
    """One line for a verdict: 'allowed', 'denied (400)', 'allowed, patch 1a2b3c4d', 'error: ...'."""
    if found is None:
        return "not run"
    if "error" in found:
        return f"error: {found['error']}"
    text = "allowed" if found["allowed"] else "denied"
    if "code" in found:
        text += f" ({found['code']})"
    if "patch" in found:
        digest = hashlib.sha256(json.dumps(found["patch"], sort_keys=True).encode()).hexdigest()[:8]
        text += f", patch {digest}"
    return text


# --------------------------------------------------------------------------------------
# kwctl
# --------------------------------------------------------------------------------------


def module_uri(modules, policy):
    path = Path(modules) / policy / "annotated-policy.wasm"
    if not path.is_file():
        raise SystemExit(f"{path} not found: run `make annotate`")
    return f"file://{path.resolve()}"


# Host calls today's modules make in another shape than the previous release's did, with an answer
# the policy reads the same: kwctl's replay matches a request exactly, so before a session is
# replayed each recorded request of the old shape gets today's. Only a change that cannot change
# what the policy reads belongs here (a field mask that keeps every field it reads: the host
# answers a subset of the recorded object). (policy, old request, today's request, why)
HOST_CALL_CHANGES = [
    ("gpu-capacity-gate-policy",
     re.compile(r"(kind: Namespace\n(\s+)name: [^\n]+\n\s+namespace: null\n\s+disable_cache: false\n)"
                r"\s+field_masks: null\n"),
     lambda m: f"{m.group(1)}{m.group(2)}field_masks:\n{m.group(2)}- metadata.labels\n",
     "the gate's Namespace get (a namespace's team) is masked to metadata.labels, as routing's and "
     "labels' are; the labels it reads are in every recorded answer"),
]


def replayed_session(policy, session, tmp, index):
    """`session`, with its recorded requests in today's shape (HOST_CALL_CHANGES)."""
    text = original = session.read_text()
    for changed_policy, old, now, _ in HOST_CALL_CHANGES:
        if changed_policy == policy:
            text = old.sub(now, text)
    if text == original:
        return session
    rewritten = tmp / f"session-{index}-{session.name}"
    rewritten.write_text(text)
    return rewritten


def kwctl_case(modules, policy, case, tmp, index):
    manifest = tmp / f"{policy}-{index}.yaml"
    spec = {"module": module_uri(modules, policy), "settings": settings_of(case), "rules": [],
            "mutating": bool(release_metadata(policy).get("mutating")),
            "contextAwareResources": metadata_resources(policy) + case.get("grant", [])}
    manifest.write_text(json.dumps({"apiVersion": "policies.kubewarden.io/v1", "kind": "ClusterAdmissionPolicy",
                                    "metadata": {"name": f"upgrade-{index}"}, "spec": spec}))
    session = (replayed_session(policy, case_file(case, "session"), tmp, index) if case.get("session")
               else tmp / "no-calls.yml")
    argv = [KWCTL, "run", "--sigstore-trust-config", str(hosts.TRUST_CONFIG),
            "--request-path", str(case_file(case, "request")),
            "--replay-host-capabilities-interactions", str(session), str(manifest)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    lines = [l for l in out.stdout.splitlines() if l.startswith("{")]
    if out.returncode == 0 and lines:
        return verdict(json.loads(lines[-1]))
    text = out.stdout + out.stderr
    if "settings" in text.lower() and "not valid" in text.lower():
        return {"error": "settings refused"}
    raise RuntimeError(f"kwctl run {policy} {case_key(case)} failed ({out.returncode}):\n{text[-3000:]}")


def run_kwctl(modules):
    """{entry: {case key: verdict}} of every release case and probe."""
    found = {}
    with tempfile.TemporaryDirectory(prefix="upgrade-kwctl-") as tmp:
        tmp = Path(tmp)
        (tmp / "no-calls.yml").write_text("[]\n")
        jobs = list(enumerate(all_cases()))
        with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
            results = pool.map(lambda job: kwctl_case(modules, job[1][1], job[1][3], tmp, job[0]), jobs)
            for (_, (entry, _, key, _)), result in zip(jobs, results):
                found.setdefault(entry, {})[key] = result
    return found


# --------------------------------------------------------------------------------------
# policy-server
# --------------------------------------------------------------------------------------


def entry_id(entry, case):
    settings = Path(case["settings"]).stem if case.get("settings") else "no-settings"
    return f"{entry.replace('/', '-')}--{settings}" + ("-closed" if case.get("closed") else "")


def run_policy_server(modules, recorded_kwctl):
    """{stage: {entry: {case: verdict}}} for the two policy-server stages. `recorded_kwctl` (the
    previous release's kwctl verdicts) says which settings it refused: those are left out, as
    policy-server would not start with them."""
    entries, case_runs = {}, []
    for entry, policy, key, case in all_cases():
        if not makes_no_call(case) or "error" in recorded_kwctl.get(entry, {}).get(key, {}):
            continue
        pid = entry_id(entry, case)
        entries.setdefault(pid, hosts.PolicyEntry(
            module_uri(modules, policy), settings=settings_of(case),
            allowed_to_mutate=bool(release_metadata(policy).get("mutating")),
            context_aware_resources=metadata_resources(policy) + case.get("grant", []),
            host_capabilities=HOST_CAPABILITIES))
        case_runs.append((pid, entry, key, hosts.read_json(case_file(case, "request"))))
    manifests = manifest_policies()
    for pid, (policy, spec) in manifests.items():
        entries[pid] = hosts.PolicyEntry(
            module_uri(modules, policy), settings=spec.get("settings") or {},
            allowed_to_mutate=bool(spec.get("mutating")),
            context_aware_resources=[{"apiVersion": r["apiVersion"], "kind": r["kind"]}
                                     for r in spec.get("contextAwareResources") or []],
            host_capabilities=HOST_CAPABILITIES)
    requests = manifest_requests()
    found = {POLICY_SERVER_CASES: {}, POLICY_SERVER_MANIFESTS: {}}
    with hosts.Host("upgrade-test") as host:
        fakeapi = host.start_fakeapi(cluster_objects())
        started = time.monotonic()
        server = host.start_policy_server(entries, fakeapi)
        sys.stderr.write(f"policy-server: {len(entries)} policies ready in {time.monotonic() - started:.1f} s\n")

        def ask(pid, request):
            return verdict(server.validate(pid, hosts.admission_review(request)))

        for pid, entry, key, request in case_runs:
            found[POLICY_SERVER_CASES].setdefault(entry, {})[key] = ask(pid, request)
        for pid in manifests:
            found[POLICY_SERVER_MANIFESTS][pid] = {name: ask(pid, request) for name, request in requests.items()}
    return found


# --------------------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------------------


def differences():
    """{(stage, entry, case): entry of differences.yml}; `stage` and `entry` may be lists."""
    listed = {}
    for d in read_yaml(DIFFERENCES) or []:
        for field in ("stage", "entry", "case", "was", "now", "why"):
            if not d.get(field):
                raise SystemExit(f"{DIFFERENCES}: an entry without {field}: {d}")
        stages = d["stage"] if isinstance(d["stage"], list) else [d["stage"]]
        entries = d["entry"] if isinstance(d["entry"], list) else [d["entry"]]
        for stage in stages:
            if stage not in STAGES:
                raise SystemExit(f"{DIFFERENCES}: unknown stage {stage!r} (one of {STAGES})")
            for entry in entries:
                if (stage, entry, d["case"]) in listed:
                    raise SystemExit(f"{DIFFERENCES}: {stage}: {entry}: {d['case']} listed twice")
                listed[(stage, entry, d["case"])] = d
    return listed


def compare(stage, recorded, found, listed):
    """Problems (lines) of one stage: every verdict the same as recorded, or changed as listed;
    every listed change of the stage seen."""
    problems, changed, same = [], 0, 0
    for entry in sorted(set(recorded) | set(found)):
        for case in sorted(set(recorded.get(entry, {})) | set(found.get(entry, {}))):
            was, now = recorded.get(entry, {}).get(case), found.get(entry, {}).get(case)
            text, now = (now or {}).get("text", ""), comparable(now)
            item = listed.pop((stage, entry, case), None)
            if was == now:
                same += 1
                if item:
                    problems.append(f"{stage}: {entry}: {case}: listed as {item['was']} -> {item['now']}, "
                                    f"but the verdict is {summary(now)} as before (remove it from differences.yml)")
            elif item is None:
                problems.append(f"{stage}: {entry}: {case}: {summary(was)} in the previous release, now "
                                f"{summary(now)}" + (f"\n    now: {json.dumps(now)}" if now and "patch" in now else ""))
            elif (item["was"], item["now"]) != (summary(was), summary(now)):
                problems.append(f"{stage}: {entry}: {case}: listed as {item['was']} -> {item['now']}, "
                                f"but it is {summary(was)} -> {summary(now)}")
            elif any(said not in text for said in item.get("says", [])):
                problems.append(f"{stage}: {entry}: {case}: {summary(now)} as listed, but the answer does not say "
                                f"all of {item['says']}: {text}")
            else:
                changed += 1
    for (s, entry, case), item in list(listed.items()):
        if s == stage:
            problems.append(f"{stage}: {entry}: {case}: listed in differences.yml, but no such verdict")
            del listed[(s, entry, case)]
    print(f"{stage}: {same} verdicts as in the previous release, {changed} changed as differences.yml lists")
    return problems


def check(stages):
    recorded = json.loads(VERDICTS.read_text())
    modules = Path(os.environ.get("GPU_ADMISSION_MODULES_DIR", hosts.POLICIES_DIR))
    listed = differences()
    found = {}
    if KWCTL in stages:
        found[KWCTL] = run_kwctl(modules)
    if POLICY_SERVER_CASES in stages:
        found.update(run_policy_server(modules, recorded[KWCTL]))
    problems = []
    for stage in stages:
        problems += compare(stage, recorded[stage], found[stage], {k: v for k, v in listed.items() if k[0] == stage})
    if problems:
        print("\n".join(problems))
        print(f"upgrade-test: FAILED: {len(problems)} problems above: verdicts that differ from the previous "
              f"release's ({VERDICTS.relative_to(hosts.REPO)}) without an entry in "
              f"{DIFFERENCES.relative_to(hosts.REPO)}, or entries there that do not hold")
        return 1
    return 0


def record(modules):
    """verdicts.json from the previous release's modules; each verdict a case states in its
    cases.yml (allowed / denied) checked on the way."""
    found = {KWCTL: run_kwctl(modules)}
    for entry, policy, key, case in all_cases():
        got = found[KWCTL][entry][key]
        stated = True if case.get("allowed") else False if case.get("denied") else None
        if stated is not None and got.get("allowed") != stated:
            raise SystemExit(f"{entry}: {key}: cases.yml says allowed={stated}, the module {got}")
    found.update(run_policy_server(modules, found[KWCTL]))
    VERDICTS.write_text(dump_verdicts(found))
    print(f"wrote {VERDICTS}: " + ", ".join(f"{s}: {sum(len(v) for v in found[s].values())}" for s in STAGES))


def dump_verdicts(found):
    """verdicts.json with one line per verdict (reviewable diffs when it is recorded again)."""
    stages = []
    for stage in STAGES:
        entries = []
        for entry in sorted(found[stage]):
            cases = ",\n".join(f"   {json.dumps(case)}: {json.dumps(comparable(v), sort_keys=True, separators=(',', ':'))}"
                               for case, v in sorted(found[stage][entry].items()))
            entries.append(f"  {json.dumps(entry)}: {{\n{cases}\n  }}")
        stages.append(f" {json.dumps(stage)}: {{\n" + ",\n".join(entries) + "\n }")
    return "{\n" + ",\n".join(stages) + "\n}\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage", nargs="?", choices=["kwctl", "policy-server"])
    parser.add_argument("--record", metavar="MODULES_DIR", help="write verdicts.json from these modules")
    args = parser.parse_args()
    if args.record:
        record(args.record)
        return 0
    if args.stage == "kwctl":
        if shutil.which(KWCTL) is None:
            print("upgrade-test kwctl: SKIPPED: kwctl is not on PATH (../shared/kubewarden/install.sh DIR)")
            return 0
        return check([KWCTL])
    if args.stage == "policy-server":
        if hosts.said_skipped(hosts.missing_tools(), "upgrade-test policy-server"):
            return 0
        return check([POLICY_SERVER_CASES, POLICY_SERVER_MANIFESTS])
    parser.error("name a stage (kwctl or policy-server) or --record MODULES_DIR")
    return 2


if __name__ == "__main__":
    hosts.install_signal_handlers()
    sys.exit(main())
