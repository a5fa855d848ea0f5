"""Kubewarden's real host on this machine: a local OCI registry (Debian's docker-registry),
fakeapi as the cluster, and policy-server, each in its own process group, stopped whatever
happens to the caller (test failure, exception, SIGINT/SIGTERM/SIGHUP, parent death).

Used by e2e/kubewarden/test_policy_server.py and bench/kubewarden/policy_server_bench.py.
Python 3 stdlib only.

    with Host("name") as host:
        registry = host.start_registry()
        uri = host.push(module_path, registry.reference("gpu-admission/x:v1"))
        api = host.start_fakeapi(objects)
        server = host.start_policy_server({"x": PolicyEntry(uri, ...)})
        review = server.validate("x", admission_review(request))
"""

import atexit
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import unittest
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# CI puts a copy of shared/ beside the clone; GPU_ADMISSION_SHARED overrides it.
SHARED = Path(os.environ.get("GPU_ADMISSION_SHARED", REPO.parent / "shared")).resolve()
FAKEAPI = SHARED / "tools" / "fakeapi" / "fakeapi.py"
TRUST_CONFIG = SHARED / "kubewarden" / "offline-sigstore-trust-config.json"
POLICIES_DIR = REPO / "policies"

METADATA_SECTION = "io.kubewarden.metadata"
# Seconds a test waits for policy-server's answer to one request. Generous: policy-server
# answers a first list of a kind only when its reflector has the list, and its reflectors can
# stall for tens of seconds when a first list fails (kubewarden/adm-controller#1320); two runs
# out of about ten here and in CI waited more than 30 s once.
REQUEST_TIMEOUT = 120.0


class HostError(Exception):
    """A host process could not be started, or did not become ready."""


# --------------------------------------------------------------------------------------
# What is needed, and where things are
# --------------------------------------------------------------------------------------


def missing_tools():
    """Why the real host cannot run here (one line), or None when everything is present."""
    missing = [t for t in ("kwctl", "policy-server", "docker-registry") if shutil.which(t) is None]
    problems = []
    if missing:
        problems.append(f"{', '.join(missing)} not on PATH")
    if not FAKEAPI.is_file():
        problems.append(f"{FAKEAPI} not found (set GPU_ADMISSION_SHARED to the shared folder)")
    if not TRUST_CONFIG.is_file():
        problems.append(f"{TRUST_CONFIG} not found")
    if not problems:
        return None
    how = ("kwctl and policy-server: ../shared/kubewarden/install.sh DIR and add DIR to PATH; "
           "docker-registry: apt-get install docker-registry (scripts/setup.sh)")
    return f"{'; '.join(problems)} ({how})"


def said_skipped(reason, who=None):
    """For a script's main(): when `reason` (what is missing) is set, prints `who: SKIPPED:
    reason` (`SKIPPED: reason` without `who`) and returns True; False otherwise."""
    if reason:
        print(f"{who}: SKIPPED: {reason}" if who else f"SKIPPED: {reason}")
    return bool(reason)


def skip_unless_ready(target, reason):
    """Skips the test class when `reason` (what is missing) is set, saying so on stderr with the
    make target that runs it."""
    if reason:
        sys.stderr.write(f"{target}: SKIPPED: {reason}\n")
        raise unittest.SkipTest(reason)


def policy_version(policy):
    """`version` of policies/<policy>/Cargo.toml's [package]."""
    text = (POLICIES_DIR / policy / "Cargo.toml").read_text()
    package = re.search(r"^\[package\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    found = package and re.search(r'^version\s*=\s*"([^"]+)"', package.group(1), re.M)
    if not found:
        raise HostError(f"policies/{policy}/Cargo.toml: no version in [package]")
    return found.group(1)


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _leb128(data, pos):
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated LEB128")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos


def embedded_metadata(module_path):
    """The Kubewarden metadata (JSON) that `kwctl annotate` embeds in the module's custom
    section io.kubewarden.metadata; None when the module has none."""
    data = Path(module_path).read_bytes()
    if data[:4] != b"\0asm":
        raise HostError(f"{module_path} is not a WebAssembly module")
    pos = 8
    while pos < len(data):
        section_id = data[pos]
        size, pos = _leb128(data, pos + 1)
        end = pos + size
        if section_id == 0:
            name_len, name_pos = _leb128(data, pos)
            name = data[name_pos:name_pos + name_len].decode("utf-8", "replace")
            if name == METADATA_SECTION:
                return json.loads(data[name_pos + name_len:end])
        pos = end
    return None


def admission_review(request):
    """An AdmissionReview (admission.k8s.io/v1) around an AdmissionRequest."""
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, timeout=30.0, content_type="application/json"):
    """(status, body bytes); connection errors raise OSError."""
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def poll(check, tries, interval, what, alive=None):
    """Calls check() up to `tries` times, `interval` s apart, until it returns a true value,
    which is returned. alive() (optional) is asked before each try: a dead process ends the
    wait at once. Raises HostError naming `what` when the tries run out."""
    last = None
    for attempt in range(tries):
        if alive is not None:
            alive()
        try:
            result = check()
            if result:
                return result
        except OSError as e:
            last = e
        if attempt + 1 < tries:
            time.sleep(interval)
    detail = f" (last error: {last})" if last else ""
    raise HostError(f"{what}: not after {tries} tries {interval} s apart{detail}")


# --------------------------------------------------------------------------------------
# Processes: one process group each, all stopped on exit or signal
# --------------------------------------------------------------------------------------

_LIVE = []
_TEMP_DIRS = []


def _die_with_parent():
    """In the child before exec: get SIGTERM when the parent dies, even by SIGKILL."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


class Process:
    """A child in its own process group (start_new_session), output to `log_path`."""

    def __init__(self, name, argv, log_path, env=None):
        self.name = name
        self.argv = [str(a) for a in argv]
        self.log_path = Path(log_path)
        self._log = open(self.log_path, "wb")
        try:
            self.popen = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self._log,
                                          stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                          preexec_fn=_die_with_parent)
        except OSError as e:
            self._log.close()
            raise HostError(f"cannot start {name} ({self.argv[0]}): {e}") from e
        _LIVE.append(self)

    @property
    def pid(self):
        return self.popen.pid

    def alive(self):
        return self.popen.poll() is None

    def check_alive(self):
        """Raises HostError with the end of the log when the process has exited."""
        code = self.popen.poll()
        if code is not None:
            raise HostError(f"{self.name} exited with status {code}:\n{self.log_tail()}")

    def log_tail(self, lines=30):
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace=5.0):
        """SIGTERM to the whole group, SIGKILL after `grace` s. The leader is reaped only after
        the group is gone: until then it is a zombie, so the group id cannot be reused."""
        pid = self.popen.pid
        if self.popen.returncode is None:
            try:
                os.killpg(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + grace
            while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                if time.monotonic() > deadline:
                    os.killpg(pid, signal.SIGKILL)
                    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
                    break
                time.sleep(0.02)
            try:
                os.killpg(pid, signal.SIGKILL)  # what is left of the group
            except (ProcessLookupError, PermissionError):
                pass
            self.popen.wait()
        if not self._log.closed:
            self._log.close()
        if self in _LIVE:
            _LIVE.remove(self)


def stop_all():
    """Stops every process started here (latest first) and removes the temporary folders."""
    for proc in list(reversed(_LIVE)):
        try:
            proc.stop()
        except Exception as e:  # noqa: BLE001 - keep stopping the others
            sys.stderr.write(f"hosts: stopping {proc.name}: {e}\n")
    keep = os.environ.get("POLICY_SERVER_KEEP_TMP") == "1"
    for d in list(_TEMP_DIRS):
        if keep:
            (d / OWNER_FILE).unlink(missing_ok=True)
            sys.stderr.write(f"hosts: kept {d} (POLICY_SERVER_KEEP_TMP=1)\n")
        else:
            shutil.rmtree(d, ignore_errors=True)
        _TEMP_DIRS.remove(d)


def _on_signal(signum, _frame):
    stop_all()
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


def install_signal_handlers():
    """SIGINT, SIGTERM and SIGHUP stop every host process before the program ends."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)


atexit.register(stop_all)


# --------------------------------------------------------------------------------------
# The three hosts
# --------------------------------------------------------------------------------------


class Registry:
    """Debian's docker-registry (CNCF distribution) on a free 127.0.0.1 port, storage in `root`."""

    def __init__(self, root, env):
        last = None
        for attempt in range(3):
            port = free_port()
            self.addr = f"127.0.0.1:{port}"
            config = root / f"registry-{attempt}.yml"
            config.write_text(
                "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n"
                f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
                f"http:\n  addr: {self.addr}\n")
            self.process = Process("docker-registry", ["docker-registry", "serve", config],
                                   root / f"registry-{attempt}.log", env)
            try:
                poll(lambda: http("GET", f"http://{self.addr}/v2/", timeout=2)[0] == 200, 200, 0.05,
                     f"docker-registry on {self.addr}", self.process.check_alive)
                return
            except HostError as e:  # the port may have been taken meanwhile: another one
                last = e
                self.process.stop()
        raise HostError(f"cannot start docker-registry: {last}")

    def reference(self, repository_and_tag):
        return f"registry://{self.addr}/{repository_and_tag}"


class FakeApi:
    """fakeapi serving `snapshot` (a JSON file this object rewrites on request)."""

    def __init__(self, root, objects, env, poll_interval=0.2):
        self.snapshot = root / "snapshot.json"
        self.kubeconfig = root / "fakeapi.kubeconfig"
        port_file = root / "fakeapi.port"
        self.write(objects)
        self.process = Process("fakeapi", [sys.executable, FAKEAPI, "--snapshot", self.snapshot, "--port", "0",
                                           "--port-file", port_file, "--kubeconfig-out", self.kubeconfig,
                                           "--poll-interval", poll_interval],
                               root / "fakeapi.log", env)
        # Large snapshots take a few seconds to load before the port file is written.
        port = poll(lambda: port_file.is_file() and port_file.read_text().strip(), 1200, 0.05,
                    "fakeapi port file", self.process.check_alive)
        self.url = f"http://127.0.0.1:{port}"
        poll(lambda: http("GET", f"{self.url}/healthz", timeout=5)[0] == 200, 100, 0.05,
             f"fakeapi on {self.url}", self.process.check_alive)

    def write(self, objects):
        """Replaces the snapshot atomically (fakeapi reloads on the new mtime)."""
        tmp = self.snapshot.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"apiVersion": "v1", "kind": "List", "items": objects}, f, separators=(",", ":"))
        os.replace(tmp, self.snapshot)

    def state(self):
        status, body = http("GET", f"{self.url}/fakeapi/state", timeout=5)
        if status != 200:
            raise HostError(f"fakeapi /fakeapi/state: HTTP {status}")
        return json.loads(body)


@dataclass
class PolicyEntry:
    """One policy of policies.yml. settings: a dict (written as JSON) or the path of a YAML
    settings file (its text is embedded, indented, so no YAML library is needed)."""

    module: str
    settings: object = None
    allowed_to_mutate: bool = False
    context_aware_resources: list = field(default_factory=list)
    host_capabilities: list = None
    timeout_eval_seconds: int = None

    def yaml(self, policy_id):
        lines = [f"{json.dumps(policy_id)}:",
                 f"  module: {json.dumps(self.module)}",
                 f"  allowedToMutate: {json.dumps(self.allowed_to_mutate)}"]
        if self.context_aware_resources:
            lines.append(f"  contextAwareResources: {json.dumps(self.context_aware_resources)}")
        if self.host_capabilities is not None:
            lines.append(f"  hostCapabilities: {json.dumps(self.host_capabilities)}")
        if self.timeout_eval_seconds is not None:
            lines.append(f"  timeoutEvalSeconds: {int(self.timeout_eval_seconds)}")
        if isinstance(self.settings, (str, Path)):
            text = Path(self.settings).read_text()
            body = [l for l in text.splitlines() if l.strip() and not l.lstrip().startswith("#")]
            if any(l.startswith(("---", "...")) for l in body):
                raise HostError(f"{self.settings}: several YAML documents; give one")
            if body:
                lines.append("  settings:")
                lines.extend(f"    {l}" if l.strip() else "" for l in text.splitlines())
            else:
                lines.append("  settings: {}")
        else:
            lines.append(f"  settings: {json.dumps(self.settings or {})}")
        return "\n".join(lines) + "\n"


def context_aware_resources(module_path):
    """contextAwareResources of the module's embedded metadata, as policies.yml takes them."""
    metadata = embedded_metadata(module_path)
    if metadata is None:
        raise HostError(f"{module_path} has no {METADATA_SECTION} section: run make annotate")
    return [{"apiVersion": r["apiVersion"], "kind": r["kind"]}
            for r in metadata.get("contextAwareResources") or []]


def kwctl_context_aware_resources(module_path, env=None):
    """contextAwareResources as `kwctl scaffold manifest --allow-context-aware` writes them
    into a ClusterAdmissionPolicy for the module (from its embedded metadata)."""
    out = subprocess.run(["kwctl", "scaffold", "manifest", "--sigstore-trust-config", str(TRUST_CONFIG),
                          "-t", "ClusterAdmissionPolicy", "--allow-context-aware", str(module_path)],
                         env=env, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise HostError(f"kwctl scaffold manifest {module_path} failed ({out.returncode}): {out.stderr.strip()}")
    resources, indent, item = [], None, None
    for line in out.stdout.splitlines():
        stripped = line.strip()
        depth = len(line) - len(line.lstrip())
        if indent is None:
            if stripped.startswith("contextAwareResources:"):
                if stripped.endswith("[]"):
                    return []
                indent = depth
            continue
        if stripped and depth <= indent and not stripped.startswith("- "):
            break
        if stripped.startswith("- "):
            item = {}
            resources.append(item)
            stripped = stripped[2:]
        key, _, value = stripped.partition(":")
        if item is not None and key in ("apiVersion", "kind"):
            item[key] = value.strip().strip("'\"")
    if any(set(r) != {"apiVersion", "kind"} for r in resources):
        raise HostError(f"kwctl scaffold manifest {module_path}: cannot read contextAwareResources:\n{out.stdout}")
    return resources


class PolicyServer:
    """policy-server on free ports (plain HTTP), its cluster fakeapi's kubeconfig."""

    def __init__(self, root, policies, env, kubeconfig=None, sources_path=None, workers=None,
                 log_level="info", ready_tries=1200, ready_interval=0.1, ports=None,
                 verification_path=None, cluster=None, restart_on_hang=False):
        # cluster: fakeapi's Process, whose log ends a request's timeout error (did the host's call reach it?)
        self.cluster = cluster
        # restart_on_hang: a request without an answer in its timeout restarts policy-server (same
        # ports, same policies) and is sent once more (see validate_raw).
        self.restart_on_hang = restart_on_hang
        self.restarts = 0
        # on_restart(old, new): told of the new Process (a Host stops it when it closes).
        self.on_restart = None
        self._root = root
        self.policies_file = root / "policies.yml"
        self.policies_file.write_text("".join(p.yaml(pid) for pid, p in policies.items()))
        self.download_dir = root / "policy-server-download"
        self.download_dir.mkdir(exist_ok=True)
        env = dict(env)
        if kubeconfig is not None:
            env["KUBECONFIG"] = str(kubeconfig)
        last = None
        for attempt in range(3):
            # ports: (API, readiness) to listen on again after a restart; else free ones.
            self.port, self.readiness_port = ports or (free_port(), free_port())
            argv = ["policy-server", "--addr", "127.0.0.1", "--port", self.port,
                    "--readiness-probe-port", self.readiness_port, "--policies", self.policies_file,
                    "--policies-download-dir", self.download_dir,
                    "--sigstore-cache-dir", root / "sigstore-cache",
                    "--sigstore-trust-config", TRUST_CONFIG, "--log-no-color", "--log-level", log_level]
            if sources_path is not None:
                argv += ["--sources-path", sources_path]
            if workers is not None:
                argv += ["--workers", workers]
            if verification_path is not None:
                argv += ["--verification-path", verification_path]
            self.started = time.monotonic()
            self._argv, self._env = argv, env
            self.process = Process("policy-server", argv, root / f"policy-server-{attempt}.log", env)
            self.url = f"http://127.0.0.1:{self.port}"
            try:
                poll(self._ready, ready_tries, ready_interval,
                     f"policy-server readiness on 127.0.0.1:{self.readiness_port}", self.process.check_alive)
                self.startup_seconds = time.monotonic() - self.started
                return
            except HostError as e:
                last = e
                in_use = "Address already in use" in self.process.log_tail(200)
                self.process.stop()
                if not in_use or ports:
                    break
        raise HostError(f"policy-server did not become ready: {last}")

    def _ready(self):
        return http("GET", f"http://127.0.0.1:{self.readiness_port}/readiness", timeout=2)[0] == 200

    def validate_raw(self, policy_id, review, timeout=None):
        """(HTTP status, body bytes) of POST /validate/<policy_id>; no answer in `timeout`
        seconds (default REQUEST_TIMEOUT) is a HostError with the end of policy-server's and
        fakeapi's logs. With `restart_on_hang`, the first request without an answer restarts
        policy-server and is sent again: policy-server's callback handler can stay stuck on a
        reflector whose first list never came back (kubewarden/adm-controller#1320), a fault of
        the host that the verdicts under test do not depend on; the restart is printed."""
        timeout = REQUEST_TIMEOUT if timeout is None else timeout
        try:
            return http("POST", f"{self.url}/validate/{policy_id}", review, timeout=timeout)
        except TimeoutError as e:
            cluster = (f"\nfakeapi's log ends:\n{self.cluster.log_tail(30)}" if self.cluster else "")
            error = HostError(f"POST /validate/{policy_id}: no answer in {timeout} s; policy-server's log ends:\n"
                              f"{self.process.log_tail(60)}{cluster}")
            if not self.restart_on_hang or self.restarts > 0:
                raise error from e
            sys.stderr.write(f"hosts: {error}\nhosts: policy-server restarted, {policy_id} sent again\n")
            self.restart()
            return self.validate_raw(policy_id, review, timeout)

    def restart(self):
        """Stops policy-server and starts it again on the same ports with the same policies."""
        self.restarts += 1
        self.process.stop()
        self.started = time.monotonic()
        old = self.process
        self.process = Process("policy-server", self._argv, self._root / f"policy-server-restart-{self.restarts}.log",
                               self._env)
        if self.on_restart:
            self.on_restart(old, self.process)
        poll(self._ready, 1200, 0.1, f"policy-server readiness on 127.0.0.1:{self.readiness_port} after a restart",
             self.process.check_alive)

    def validate(self, policy_id, review, timeout=None):
        """The AdmissionResponse policy-server returns for `review` (an AdmissionReview)."""
        status, body = self.validate_raw(policy_id, review, timeout)
        if status != 200:
            raise HostError(f"POST /validate/{policy_id}: HTTP {status}: {body[:2000]!r}")
        answer = json.loads(body)
        if "response" not in answer:
            raise HostError(f"POST /validate/{policy_id}: no response in {answer}")
        return answer["response"]

    def downloaded_modules(self):
        """sha256 of every file policy-server downloaded."""
        return {hashlib.sha256(p.read_bytes()).hexdigest(): p
                for p in self.download_dir.rglob("*") if p.is_file()}


OWNER_FILE = "owner.pid"


def _remove_orphans(name):
    """Removes temporary folders of earlier runs whose process is gone (killed by SIGKILL,
    which leaves no chance to clean up; their host processes died with them)."""
    for d in Path(tempfile.gettempdir()).glob(f"{name}-*"):
        try:
            pid = int((d / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except PermissionError:
            pass


class Host:
    """A temporary folder and the host processes started in it; stopped and removed on exit."""

    def __init__(self, name):
        _remove_orphans(name)
        self.root = Path(tempfile.mkdtemp(prefix=f"{name}-"))
        _TEMP_DIRS.append(self.root)
        (self.root / OWNER_FILE).write_text(f"{os.getpid()}\n")
        for sub in ("cache", "config", "data"):
            (self.root / sub).mkdir()
        env = {k: v for k, v in os.environ.items() if k not in ("RUST_BACKTRACE", "KUBECONFIG")}
        env.update(XDG_CACHE_HOME=str(self.root / "cache"), XDG_CONFIG_HOME=str(self.root / "config"),
                   XDG_DATA_HOME=str(self.root / "data"))
        self.env = env
        self.processes = []
        self.sources_path = None

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self.close()

    def close(self):
        for proc in reversed(self.processes):
            proc.stop()
        self.processes.clear()
        if self.root in _TEMP_DIRS:
            if os.environ.get("POLICY_SERVER_KEEP_TMP") == "1":
                (self.root / OWNER_FILE).unlink(missing_ok=True)
                sys.stderr.write(f"hosts: kept {self.root} (POLICY_SERVER_KEEP_TMP=1)\n")
            else:
                shutil.rmtree(self.root, ignore_errors=True)
            _TEMP_DIRS.remove(self.root)

    def start_registry(self):
        root = self.root / "registry"
        root.mkdir()
        registry = Registry(root, self.env)
        self.processes.append(registry.process)
        self.sources_path = self.root / "sources.yml"
        self.sources_path.write_text(f"insecure_sources: [{json.dumps(registry.addr)}]\n")
        return registry

    def push(self, module_path, uri):
        """kwctl push of an annotated module to `uri` (registry://...); the immutable reference."""
        argv = ["kwctl", "push", "-o", "json"]
        if self.sources_path is not None:
            argv += ["--sources-path", str(self.sources_path)]
        out = subprocess.run(argv + [str(module_path), uri], env=self.env, capture_output=True, text=True,
                             timeout=120)
        if out.returncode != 0:
            raise HostError(f"kwctl push {module_path} {uri} failed ({out.returncode}): {out.stderr.strip()}")
        try:
            return json.loads(out.stdout)["immutable_ref"]
        except (ValueError, KeyError) as e:
            raise HostError(f"kwctl push printed no immutable_ref: {out.stdout!r}") from e

    def start_fakeapi(self, objects, poll_interval=0.2):
        fakeapi = FakeApi(self.root, objects, self.env, poll_interval)
        self.processes.append(fakeapi.process)
        return fakeapi

    def start_policy_server(self, policies, fakeapi=None, **kwargs):
        server = PolicyServer(self.root, policies, self.env,
                              kubeconfig=fakeapi.kubeconfig if fakeapi else None,
                              sources_path=self.sources_path, cluster=fakeapi.process if fakeapi else None,
                              **{"restart_on_hang": True, **kwargs})
        self.processes.append(server.process)
        server.on_restart = self._replaced
        return server

    def _replaced(self, old, new):
        self.processes = [new if p is old else p for p in self.processes]

    def stop(self, proc):
        proc.stop()
        if proc in self.processes:
            self.processes.remove(proc)


class HostTestCase(unittest.TestCase):
    """Tests that share one Host: skipped with `TARGET: SKIPPED: why` when a tool is missing,
    else `_start` (the subclass's) builds what they share, and the host is closed if it fails."""

    TARGET = "policy-server-e2e"
    HOST_NAME = "policy-server-e2e"

    @classmethod
    def missing_tools(cls):
        return missing_tools()

    @classmethod
    def check_inputs(cls):
        """Raises HostError when something the tests need before the host starts is missing."""

    @classmethod
    def setUpClass(cls):
        skip_unless_ready(cls.TARGET, cls.missing_tools())
        cls.check_inputs()
        cls.host = Host(cls.HOST_NAME)
        try:
            cls._start()
        except BaseException:
            cls.host.close()
            raise
