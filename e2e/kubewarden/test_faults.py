"""What the policies decide when the cluster misbehaves, through Kubewarden's real policy-server.

policy-server's cluster is fakeapi behind a FaultProxy (faultproxy.py), which refuses
connections, delays, answers 429 and 500, ends watches with 410 Gone, cuts watches mid-stream
and serves old lists on the test's command. Each test sets a fault, sends AdmissionReviews and
checks the verdicts, then clears the fault and waits (polling, bounded) for the next right
decision; how long that took is printed (`right again ... after the fault ended`), never
asserted.

Cold and warm caches. policy-server answers `get_resource` from a 5-second cache and every
list from a watch-fed cache (one reflector per kind and selectors, for the life of the
process). A fault therefore reaches a policy only through a call the cache cannot answer: a
first list of a kind and selectors, or a get of an object not read in the last 5 s. Each fault
below has its own objects and selectors (named `fx<fault>`: a capacity pool selector, an
autoscaler target, a VRAM registry ConfigMap, a routing namespace), so its calls are cold;
the warm policies ("capacity", "autoscaler") show what a fault does to a cache that was
filled before it (the stale cases).

    python3 e2e/kubewarden/test_faults.py [-k PATTERN]   # make policy-server-faults

Skipped, saying why, without policy-server on PATH or the annotated modules. Every policy's
denials must name the class of the failure (loadrig.HOST_ERROR_CLASSES);
GPU_ADMISSION_HOST_ERROR_CLASSES=0 checks only that they are about a failed call (modules from
before the classes, through GPU_ADMISSION_MODULES_DIR).
"""

import json
import sys
import threading
import time
import unittest
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import hosts  # noqa: E402
import loadrig  # noqa: E402
import test_policy_server as base  # noqa: E402
from faultproxy import Fault, FaultProxy  # noqa: E402

CAPACITY, AUTOSCALER, VRAM, ROUTING = base.CAPACITY, base.AUTOSCALER, base.VRAM, base.ROUTING

# Faults with cold gets of their own (an autoscaler target, a registry ConfigMap, a namespace),
# and faults with a cold list of their own (a capacity pool selector).
GET_FAULTS = ("refused", "e500", "e429", "slow", "fast")
LIST_FAULTS = ("refused-list", "e500-list", "slow", "fast", "stall-0", "stall-1")
# policy-server's worker threads (--workers; its default is the number of CPUs).
WORKERS = 2

# policy-server's default --policy-timeout (seconds); the delays are on either side of it.
POLICY_TIMEOUT = 2
DELAY_BELOW = 0.3
DELAY_ABOVE = 2 * POLICY_TIMEOUT + 1
POLICY_TIMEOUT_MESSAGE = "Policy execution interrupted because it exceeded the allowed execution time"

RECOVERY_TRIES = 150
RECOVERY_INTERVAL = 0.2


def fx(fault):
    return f"fx{fault}"


def cold_settings(fault):
    """Capacity gate settings with pool a100 selected through a selector of this fault's own
    (an always-true `fault-case notin (fx<fault>)`): a reflector no other test has filled."""
    return {"poolLabelKey": "gpu-admission/pool",
            "pools": [{"name": "a100", "thresholdPercent": 90,
                       "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"},
                                        "matchExpressions": [{"key": "fault-case", "operator": "NotIn",
                                                              "values": [fx(fault)]}]}}],
            "unreadableCluster": "deny", "checkNamespaceQuotas": False}


def cluster_with_fault_objects(**kwargs):
    """test_policy_server's cluster, plus for each fault a copy of the autoscalers' target
    Deployment, of the VRAM model registry ConfigMap and of the routing namespace."""
    objects = base.cluster(**kwargs)
    by_name = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objects}
    deployment = by_name[("Deployment", "ml-serving", "llm-a100")]
    registry = by_name[("ConfigMap", "gpu-system", "gpu-models")]
    namespace = by_name[("Namespace", None, "team-a")]
    for fault in GET_FAULTS:
        for original, name in ((deployment, f"llm-a100-{fx(fault)}"), (registry, f"gpu-models-{fx(fault)}"),
                               (namespace, f"team-{fx(fault)}")):
            copy = json.loads(json.dumps(original))
            copy["metadata"]["name"] = name
            objects.append(copy)
    return objects


def cold_gets(fault):
    """(policy id, request) for each policy's cold get_resource under `fault`; each is allowed
    when the cluster answers."""
    hpa = base.request(AUTOSCALER, "hpa_external_gpu_deployment.json")
    hpa["object"]["spec"]["scaleTargetRef"]["name"] = f"llm-a100-{fx(fault)}"
    team = base.request(ROUTING, "deployment_interactive.json")
    team["namespace"] = team["object"]["metadata"]["namespace"] = f"team-{fx(fault)}"
    return [
        (f"autoscaler-{fx(fault)}", hpa),
        (f"vram-registry-{fx(fault)}", base.request(VRAM, "deployment_registry_model.json")),
        (f"routing-team-{fx(fault)}", team),
    ]


def cold_list(fault):
    """(policy id, request) of the capacity gate's first list of pool a100's Nodes through
    this fault's own selector; allowed when the cluster answers."""
    return f"capacity-{fx(fault)}", base.request(CAPACITY, "deployment_a100_4x2.json")


def cold_requests(fault):
    return cold_gets(fault) + [cold_list(fault)]


class FaultsE2E(hosts.HostTestCase):
    """One fakeapi, one FaultProxy in front of it and one policy-server for every test."""

    TARGET = HOST_NAME = "policy-server-faults"
    maxDiff = None

    @classmethod
    def missing_tools(cls):
        return loadrig.missing_tools()

    @classmethod
    def _start(cls):
        host = cls.host
        cls.fakeapi = host.start_fakeapi(cluster_with_fault_objects())
        cls.proxy = FaultProxy(cls.fakeapi.url, log=lambda m: sys.stderr.write(f"    {m}\n"))
        kubeconfig = loadrig.proxy_kubeconfig(cls.fakeapi, cls.proxy.url, host.root / "proxy.kubeconfig")
        policies = loadrig.policies()
        registry_text = base.test_data(VRAM, "settings_registry.yml").read_text()
        for fault in LIST_FAULTS:
            policies[f"capacity-{fx(fault)}"] = loadrig.entry(CAPACITY, settings=cold_settings(fault))
        for fault in GET_FAULTS:
            policies[f"autoscaler-{fx(fault)}"] = policies["autoscaler"]
            registry = host.root / f"settings_registry_{fx(fault)}.yml"
            registry.write_text(registry_text.replace("name: gpu-models", f"name: gpu-models-{fx(fault)}"))
            policies[f"vram-registry-{fx(fault)}"] = loadrig.entry(VRAM, settings=registry)
            policies[f"routing-team-{fx(fault)}"] = policies["routing-team"]
        (host.root / "server").mkdir()
        # restart_on_hang for the warm-up only: policy-server's first list of a kind can stay stuck
        # (kubewarden/adm-controller#1320, hosts.PolicyServer.validate_raw), which the other
        # policy-server tests meet the same way (Host.start_policy_server).
        cls.server = hosts.PolicyServer(host.root / "server", policies, host.env, kubeconfig=kubeconfig,
                                        workers=WORKERS, cluster=cls.fakeapi.process, restart_on_hang=True)
        host.processes.append(cls.server.process)
        cls.server.on_restart = host._replaced
        sys.stderr.write(f"policy-server ready in {cls.server.startup_seconds:.1f} s, cluster {cls.fakeapi.url} "
                         f"behind {cls.proxy.url}\n")
        # Warm caches for the stale cases: the gate's Node and Pod lists of pool a100, the
        # autoscaler's Node list.
        for policy_id, name, allowed in (("capacity", "deployment_a100_4x2.json", True),
                                         ("autoscaler", "hpa_external_gpu_deployment.json", True)):
            policy = CAPACITY if policy_id == "capacity" else AUTOSCALER
            try:
                response = cls.review(policy_id, base.request(policy, name))
            except hosts.HostError as e:
                raise hosts.HostError(f"warm-up {policy_id} {name}: {e}\n{cls.proxy_log()}") from e
            if response.get("allowed") is not allowed:
                raise hosts.HostError(f"warm-up {policy_id} {name}: {response}")
        # From here on a request without an answer fails its test.
        cls.server.restart_on_hang = False

    @classmethod
    def tearDownClass(cls):
        cls.proxy.close()
        cls.host.close()

    def setUp(self):
        self.proxy.up()
        self.proxy.clear()

    def tearDown(self):
        self.proxy.up()
        self.proxy.clear()

    # -- helpers ---------------------------------------------------------------------

    @classmethod
    def proxy_log(cls):
        """What faultproxy forwarded so far and what came back, for a failure's message."""
        lines = [f"  {s.method} {s.target}: {s.status or 'no answer from fakeapi'} ({s.action}"
                 f"{f', {s.events} events' if s.watch else ''})" for s in cls.proxy.requests()]
        return "faultproxy saw:\n" + ("\n".join(lines) or "  nothing")

    @classmethod
    def review(cls, policy_id, req, timeout=60.0):
        return cls.server.validate(policy_id, hosts.admission_review(req), timeout=timeout)

    def timed_review(self, policy_id, req):
        """`req` sent to `policy_id`: (the answer, the seconds it took)."""
        start = time.monotonic()
        response = self.review(policy_id, req)
        return response, time.monotonic() - start

    def assert_host_failure(self, response, host_class, label):
        problem = loadrig.host_failure_problem(response, host_class)
        self.assertIsNone(problem, f"{label}: {problem}: {response}")

    def wait_until_right(self, policy_id, req, allowed, what, says=None):
        """Sends `req` until it is answered `allowed` (and `says`), bounded; returns (seconds
        it took, the answer)."""
        start, response = time.monotonic(), None
        for _ in range(RECOVERY_TRIES):
            response = self.review(policy_id, req)
            message = (response.get("status") or {}).get("message", "")
            if response.get("allowed") is allowed and (says is None or says in message):
                return time.monotonic() - start, response
            time.sleep(RECOVERY_INTERVAL)
        self.fail(f"{what}: {policy_id} not answered allowed={allowed} after {RECOVERY_TRIES} tries "
                  f"{RECOVERY_INTERVAL} s apart; last: {json.dumps(response)[:2000]}")

    def report(self, text):
        sys.stderr.write(f"    {self.id().rsplit('.', 1)[-1]}: {text}\n")

    def gets_fail_closed(self, fault, host_class):
        """Every cold get under `fault` is denied at once, naming `host_class`."""
        for policy_id, req in cold_gets(fault):
            with self.subTest(policy_id):
                response = self.review(policy_id, req)
                self.report(f"{policy_id}: denied: {(response.get('status') or {}).get('message', '')[:240]}")
                self.assert_host_failure(response, host_class, policy_id)

    def first_list_is_held(self, fault, failed_attempts, clear_fault):
        """The gate's first list under `fault` gets no answer while policy-server's reflector
        retries it (`failed_attempts()` true once it failed twice), and requests without host
        calls are still answered meanwhile. Once the fault is cleared the held request is
        answered: allowed with the pool's counts read from the cluster when it was held for
        less than the policy timeout, else denied by policy-server's timeout; the next request
        is right. In a cluster the API server may give up first, at the webhook's
        timeoutSeconds, and failurePolicy: Fail rejects the request."""
        policy_id, req = cold_list(fault)
        held, answer = time.monotonic(), {}

        def send():
            try:
                answer["response"] = self.review(policy_id, req, timeout=120)
            except hosts.HostError as e:
                answer["error"] = e
            answer["at"] = time.monotonic()

        thread = threading.Thread(target=send, daemon=True)
        thread.start()
        hosts.poll(failed_attempts, 300, 0.1, f"policy-server failing to list under {fault}")
        labels = loadrig.good_cases()[0]
        self.assertEqual(loadrig.judge(labels, *loadrig.post(self.server.url, labels))[0], "right")
        self.assertTrue(thread.is_alive(), f"{policy_id} answered while its list failed: {answer}")
        ended = time.monotonic()
        clear_fault()
        thread.join(120)
        self.assertNotIn("error", answer, answer)
        response = answer["response"]
        if response.get("allowed"):
            self.assertEqual(response["auditAnnotations"]["capacity"], base.A100_FITS, response)
            outcome = "allowed, with the pool read"
        else:
            self.assertEqual(response["status"], {"message": POLICY_TIMEOUT_MESSAGE, "code": 500}, response)
            outcome = "denied by policy-server's timeout"
        self.report(f"{policy_id}: held {ended - held:.2f} s while the list failed; {outcome} "
                    f"{answer['at'] - ended:.2f} s after the fault ended")
        right = self.review(policy_id, req)
        self.assertEqual(right["auditAnnotations"]["capacity"], base.A100_FITS, right)

    def gets_recover(self, fault, ended):
        for policy_id, req in cold_gets(fault):
            self.wait_until_right(policy_id, req, True, f"after {fault}")
            self.report(f"{policy_id}: right again {time.monotonic() - ended:.2f} s after the fault ended")

    def proxy_failed(self, fault, times=2):
        return lambda: sum(1 for s in self.proxy.requests() if fx(fault) in s.target and s.action == "status") >= times

    def log_failed(self, fault, times=2):
        """policy-server's log shows its reflector for this fault's selector failed `times` times."""
        selector = f"fault-case notin ({fx(fault)})"
        return lambda: sum(1 for line in self.server.process.log_path.read_text(errors="replace").splitlines()
                           if "InitialListFailed" in line and selector in line) >= times

    # -- faults the policies cannot see past: denied, or held ---------------------------

    def test_connection_refused_fails_closed_then_recovers(self):
        self.proxy.down()
        try:
            self.gets_fail_closed("refused", "unreachable")
        finally:
            ended = time.monotonic()
            self.proxy.up()
        self.gets_recover("refused", ended)

    def test_connection_refused_holds_a_first_list_until_the_api_answers(self):
        self.proxy.down()
        self.first_list_is_held("refused-list", self.log_failed("refused-list", 3), self.proxy.up)

    def test_http_500_fails_closed_then_recovers(self):
        self.proxy.add(Fault("status", code=500, path=fx("e500")))
        self.gets_fail_closed("e500", "error")
        ended = time.monotonic()
        self.proxy.clear()
        self.gets_recover("e500", ended)

    def test_http_500_holds_a_first_list_until_the_api_answers(self):
        self.proxy.add(Fault("status", code=500, path=fx("e500-list")))
        self.first_list_is_held("e500-list", self.proxy_failed("e500-list", 3), self.proxy.clear)

    def test_http_429_with_retry_after_fails_closed_then_recovers(self):
        # kube-rs does not retry a 429, whatever its Retry-After: the call fails at once.
        self.proxy.add(Fault("status", code=429, retry_after=1, path=fx("e429")))
        self.gets_fail_closed("e429", "error")
        ended = time.monotonic()
        self.proxy.clear()
        self.gets_recover("e429", ended)
        self.assertTrue(all(s.status == 429 for s in self.proxy.requests() if fx("e429") in s.target
                            and s.action == "status"))

    def test_delay_above_the_policy_timeout_is_denied_by_policy_server(self):
        # The host call returns after the delay; policy-server then stops the policy (its
        # execution deadline has passed) and denies with its own message, code 500.
        self.proxy.add(Fault("delay", seconds=DELAY_ABOVE, path=fx("slow")))
        for policy_id, req in cold_requests("slow"):
            with self.subTest(policy_id):
                response, took = self.timed_review(policy_id, req)
                self.assertIs(response.get("allowed"), False, response)
                self.assertEqual(response["status"].get("message"), POLICY_TIMEOUT_MESSAGE, response)
                self.assertEqual(response["status"].get("code"), 500, response)
                self.report(f"{policy_id}: denied by policy-server after {took:.2f} s")
        ended = time.monotonic()
        self.proxy.clear()
        for policy_id, req in cold_requests("slow"):
            self.wait_until_right(policy_id, req, True, "after the delay")
            self.report(f"{policy_id}: right again {time.monotonic() - ended:.2f} s after the delay ended")

    def test_delay_below_the_policy_timeout_is_answered_right(self):
        self.proxy.add(Fault("delay", seconds=DELAY_BELOW, path=fx("fast")))
        for policy_id, req in cold_requests("fast"):
            with self.subTest(policy_id):
                response, took = self.timed_review(policy_id, req)
                self.assertIs(response.get("allowed"), True, response)
                self.report(f"{policy_id}: right in {took:.2f} s with a {DELAY_BELOW} s delay")
        self.assertTrue(any(s.action == "delay" for s in self.proxy.requests()), "the proxy delayed nothing")

    def test_first_lists_held_on_every_worker_stall_every_policy(self):
        # As many held first lists as policy-server has workers: nothing else is answered,
        # not even a policy that makes no host call, until the API server answers again.
        faults = [f"stall-{i}" for i in range(WORKERS)]
        for fault in faults:
            self.proxy.add(Fault("status", code=500, path=fx(fault)))
        held = [threading.Thread(target=self.review, args=cold_list(fault), kwargs={"timeout": 120}, daemon=True)
                for fault in faults]
        for thread in held:
            thread.start()
        for fault in faults:
            hosts.poll(self.proxy_failed(fault, 2), 300, 0.1, f"policy-server failing to list under {fault}")
        labels, answer = loadrig.good_cases()[0], {}

        def send():
            answer["outcome"] = loadrig.judge(labels, *loadrig.post(self.server.url, labels, timeout=120))
            answer["at"] = time.monotonic()

        waiting = threading.Thread(target=send, daemon=True)
        waiting.start()
        # The held lists fail twice more while the labels request waits.
        for fault in faults:
            hosts.poll(self.proxy_failed(fault, 4), 300, 0.1, f"policy-server failing to list under {fault}")
        self.assertTrue(waiting.is_alive(), f"labels answered while every worker was held: {answer}")
        ended = time.monotonic()
        self.proxy.clear()
        waiting.join(120)
        for thread in held:
            thread.join(120)
        self.assertEqual(answer.get("outcome", ("no answer",))[0], "right", answer)
        self.report(f"labels (no host call) answered {answer['at'] - ended:.2f} s after the API server answered "
                    f"the {WORKERS} held lists")

    # -- policies without host calls ---------------------------------------------------

    def test_policies_without_host_calls_are_unaffected_by_an_outage(self):
        self.proxy.down()
        for case in loadrig.good_cases():
            if case.policy_id not in ("labels", "routing", "vram"):
                continue
            with self.subTest(f"{case.policy_id} {case.name}"):
                outcome, detail = loadrig.judge(case, *loadrig.post(self.server.url, case))
                self.assertEqual(outcome, "right", detail)

    # -- what a filled cache does under a fault: stale, then caught up -----------------

    def change_cluster_and_wait_for_fakeapi(self, **kwargs):
        before = self.fakeapi.state()
        self.fakeapi.write(cluster_with_fault_objects(**kwargs))
        hosts.poll(lambda: self.fakeapi.state() != before, 100, 0.1, "fakeapi reloading the snapshot")
        return time.monotonic()

    def restore_cluster(self):
        """The cluster back as it was, and the warm gate seeing it again."""
        self.proxy.up()
        self.proxy.clear()
        self.change_cluster_and_wait_for_fakeapi()
        self.wait_until_right("capacity", base.request(CAPACITY, "deployment_a100_4x2.json"), True,
                              "the cluster restored")

    def test_outage_serves_the_filled_cache_then_catches_up(self):
        req = base.request(CAPACITY, "deployment_a100_4x2.json")
        self.assertIs(self.review("capacity", req)["allowed"], True)
        self.proxy.down()
        try:
            # One more 8-GPU pod in pool a100 while policy-server cannot see it: 48 + 8 of 56.
            self.change_cluster_and_wait_for_fakeapi(extra_a100_pods=1)
            stale = self.review("capacity", req)
            # The host answers from the cache it filled before the outage, and says nothing of
            # its age: the gate decides on the pool as it was, and its audit shows the counts.
            self.assertIs(stale.get("allowed"), True, stale)
            self.assertEqual(stale["auditAnnotations"]["capacity"], base.A100_FITS, stale)
            self.report(f"during the outage (stale): allowed, capacity audit {stale['auditAnnotations']['capacity']!r}")
            ended = time.monotonic()
            self.proxy.up()
            took, denied = self.wait_until_right("capacity", req, False, "after the outage", says="pool a100")
            self.assertEqual(denied["status"]["message"], base.A100_FULL, denied)
            self.report(f"the pod policy-server missed is counted {time.monotonic() - ended:.2f} s after the API "
                        f"server answers again")
        finally:
            self.restore_cluster()

    def watch_fault_then_change(self, fault_setup, what):
        """Warm gate; `fault_setup()` disturbs its watches; one more pod in pool a100; the
        gate must come to deny. Returns the seconds from the change to the first denial."""
        req = base.request(CAPACITY, "deployment_a100_4x2.json")
        self.assertIs(self.review("capacity", req)["allowed"], True)
        hosts.poll(lambda: self.proxy.open_watches() > 0, 100, 0.1, "policy-server's watches through the proxy")
        since = time.monotonic()
        try:
            fault_setup()
            changed = self.change_cluster_and_wait_for_fakeapi(extra_a100_pods=1)
            _, denied = self.wait_until_right("capacity", req, False, what, says="pool a100")
            self.assertEqual(denied["status"]["message"], base.A100_FULL, denied)
            took = time.monotonic() - changed
            self.report(f"{what}: the new pod counted {took:.2f} s after fakeapi had it")
            return since
        finally:
            self.restore_cluster()

    def test_watch_cut_mid_stream_is_resumed(self):
        def cut():
            # Every open watch is cut now; the next pod watch is cut again after its first event.
            self.proxy.add(Fault("cut", path=r"/pods\?", after_events=1, times=1))
            self.assertGreater(self.proxy.cut_watches(), 0)

        since = self.watch_fault_then_change(cut, "watches cut")
        seen = self.proxy.requests(since)
        self.assertTrue([s for s in seen if s.action == "cut after 1 events"], "no watch was cut after an event")
        rewatched = [s for s in seen if s.watch and "resourceVersion=" in s.target]
        self.assertGreater(len(rewatched), 1, "policy-server did not watch again after the cuts")

    def test_watch_410_gone_relists(self):
        def gone():
            self.proxy.add(Fault("gone", path=r"/pods\?", times=1))
            self.proxy.cut_watches()

        since = self.watch_fault_then_change(gone, "watch answered 410 Gone")
        seen = self.proxy.requests(since)
        gone_at = [s.at for s in seen if s.action == "gone"]
        self.assertTrue(gone_at, "the proxy answered no watch with 410")
        relists = [s for s in seen if not s.watch and "/pods" in s.target and s.at > gone_at[0]]
        self.assertTrue(relists, "policy-server did not list the pods again after 410 Gone")

    def test_old_resource_version_served_on_relist_is_caught_up(self):
        req = base.request(CAPACITY, "deployment_a100_4x2.json")
        self.assertIs(self.review("capacity", req)["allowed"], True)
        self.assertGreater(self.proxy.remember_lists(), 0)
        old_versions = {json.loads(body)["metadata"]["resourceVersion"]
                        for key, body in self.proxy.remembered.items() if "/pods?" in key}
        self.assertTrue(old_versions, f"no pod list seen: {sorted(self.proxy.remembered)}")
        try:
            self.change_cluster_and_wait_for_fakeapi(extra_a100_pods=1)
            self.wait_until_right("capacity", req, False, "the new pod", says="pool a100")
            # An API server whose cache lags: the relist gets the list from before the pod,
            # with its old resourceVersion; policy-server then watches from that version.
            since = time.monotonic()
            self.proxy.add(Fault("stale", path=r"/pods\?"))
            self.proxy.add(Fault("gone", path=r"/pods\?", times=1))
            self.proxy.cut_watches()
            hosts.poll(lambda: any(s.action == "stale" for s in self.proxy.requests(since)), 150, 0.1,
                       "policy-server relisting the pods (answered with the old list)")
            answers, denied = [], None
            for _ in range(RECOVERY_TRIES):
                response = self.review("capacity", req)
                answers.append("allowed" if response.get("allowed") else "denied")
                if response.get("allowed") is False:
                    took, denied = time.monotonic() - since, response
                    break
                time.sleep(RECOVERY_INTERVAL)
            self.assertIsNotNone(denied, f"never denied again after the old list: {answers}")
            # It caught up by watching from the old version: the API server replayed the pod.
            self.assertTrue(any(s.watch and any(f"resourceVersion={v}" in s.target for v in old_versions)
                                for s in self.proxy.requests(since)),
                            f"no watch from the old resourceVersions {old_versions}")
            self.assertEqual(denied["status"]["message"], base.A100_FULL, denied)
            self.report(f"old list served; answers while catching up: {answers}; right {took:.2f} s after the relist")
        finally:
            self.restore_cluster()

    # -- bad input at the HTTP door ------------------------------------------------------

    def test_bad_input_is_denied_or_4xx_and_the_server_stays_up(self):
        for case in loadrig.bad_cases():
            with self.subTest(f"{case.policy_id} {case.name}"):
                status, body = loadrig.post(self.server.url, case)
                outcome, detail = loadrig.judge(case, status, body)
                self.report(f"{case.policy_id} {case.name} ({len(case.body)} bytes): HTTP {status} "
                            f"{detail} {body[:160]!r}")
                self.assertEqual(outcome, "right", detail)
        self.assertTrue(self.server.process.alive())
        self.assertTrue(self.server._ready())
        for case in loadrig.good_cases()[:3]:
            self.assertEqual(loadrig.judge(case, *loadrig.post(self.server.url, case))[0], "right")


if __name__ == "__main__":
    hosts.install_signal_handlers()
    unittest.main(verbosity=2)
