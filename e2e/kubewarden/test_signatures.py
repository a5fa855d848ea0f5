"""Signed modules under Kubewarden's own verifiers: kwctl verify and policy-server.

Every annotated module is pushed with `kwctl push` to a local docker-registry and signed by its
immutable digest with `gpu-dist sign` (what `make push` runs), with a key pair made here by
`gpu-dist keygen` for this run only (cosign's encrypted format, a random password). Then:

- `kwctl verify -k <public key>` accepts each module, by tag and by digest, and refuses one
  never signed, one signed by another key, and one changed after it was signed (the tag
  re-pushed; also with the old signature copied to the new digest's signature tag);
- policy-server started with a verification config that requires the key (`gpu-dist
  verification-config`, the generator of deploy/verification-config.yaml) loads the signed
  modules and answers for each, and refuses to start on each of those three;
- signature annotations: a config that requires `env: prod` accepts a module signed with
  `-a env=prod` and refuses one signed without it.

All offline: --sigstore-trust-config is the shared offline trust config, and key-based
signatures need no transparency log.

    make signatures-test       # or: python3 e2e/kubewarden/test_signatures.py [-k PATTERN]

GPU_DIST: the gpu-dist binary (make signatures-test builds it and names it; default: debug/gpu-dist in the
target directory scripts/target-dir.sh names).
"""

import hashlib
import json
import os
import secrets
import subprocess
import sys
import unittest
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import hosts  # noqa: E402

POLICIES = ["gpu-labels-policy", "gpu-pool-routing-policy", "gpu-vram-fit-policy", "gpu-capacity-gate-policy",
            "gpu-autoscaler-policy"]


def _default_gpu_dist():
    out = subprocess.run([str(hosts.REPO / "scripts" / "target-dir.sh")], capture_output=True, text=True,
                         check=True).stdout.strip()
    return Path(out) / "debug" / "gpu-dist"


GPU_DIST = Path(os.environ["GPU_DIST"]) if os.environ.get("GPU_DIST") else _default_gpu_dist()
# Why kwctl verify and policy-server (1.36) refuse a module: no signature for its digest, none by the key (or
# with the annotations), or a signature whose payload names another digest.
NO_SIGNATURE = "no signatures found for image"
NOT_SATISFIED = "Image verification failed: missing signatures"
NO_VERIFIED_LAYER = "No Signature Layer passed verification"


def module_path(policy):
    path = hosts.POLICIES_DIR / policy / "annotated-policy.wasm"
    if not path.is_file():
        raise hosts.HostError(f"{path} not found: run `make annotate`")
    return path


def changed(module_bytes):
    """The module with one more (empty) custom section: the same policy, another digest."""
    return module_bytes + b"\x00\x08\x07changed"


def pod_review():
    """A CPU-only Pod: every policy answers it (allowed)."""
    return hosts.admission_review({
        "uid": "00000000-0000-4000-8000-000000000001",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "name": "web", "namespace": "default", "operation": "CREATE",
        "userInfo": {"username": "alice"},
        "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
                   "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}},
        "dryRun": False,
    })


class Signatures(hosts.HostTestCase):
    TARGET = "signatures-test"
    HOST_NAME = "gpu-admission-signatures"

    @classmethod
    def check_inputs(cls):
        if not GPU_DIST.is_file():
            raise hosts.HostError(f"{GPU_DIST} not found: build it (cargo build -p gpu-e2e -p gpu-dist) or set GPU_DIST")

    @classmethod
    def _start(cls):
        host = cls.host
        cls.registry = host.start_registry()
        cls.password = secrets.token_hex(16)
        cls.key, cls.pub = cls.keygen("project")
        cls.other_key, cls.other_pub = cls.keygen("other")
        cls.tags, cls.digests = {}, {}
        for policy in POLICIES:
            uri = cls.registry.reference(f"gpu-admission/{policy}:v{hosts.policy_version(policy)}")
            immutable = host.push(module_path(policy), uri)
            cls.sign(cls.key, immutable)
            cls.tags[policy], cls.digests[policy] = uri, f"registry://{immutable}"
        labels = module_path(POLICIES[0])
        # Never signed.
        cls.unsigned = cls.registry.reference("x/unsigned:v1")
        host.push(labels, cls.unsigned)
        # Signed by another key.
        cls.other_signed = cls.registry.reference("x/other-key:v1")
        cls.sign(cls.other_key, host.push(labels, cls.other_signed))
        # Signed, then the tag re-pushed with a changed module.
        cls.changed = cls.registry.reference("x/changed:v1")
        cls.sign(cls.key, host.push(labels, cls.changed))
        changed_path = host.root / "changed.wasm"
        changed_path.write_bytes(changed(labels.read_bytes()))
        host.push(changed_path, cls.changed)
        # The same, and the old signature copied to the new digest's signature tag.
        cls.copied = cls.registry.reference("x/copied-signature:v1")
        old = host.push(labels, cls.copied).rsplit("@", 1)[1]
        cls.sign(cls.key, f"registry://{cls.registry.addr}/x/copied-signature@{old}")
        new = host.push(changed_path, cls.copied).rsplit("@", 1)[1]
        cls.copy_manifest("x/copied-signature", cls.sig_tag(old), cls.sig_tag(new))
        # Signed with an annotation.
        cls.prod = cls.registry.reference("x/prod:v1")
        cls.sign(cls.key, host.push(labels, cls.prod), "-a", "env=prod")
        cls.fakeapi = host.start_fakeapi([])

    @classmethod
    def tearDownClass(cls):
        cls.host.close()

    # -- helpers ---------------------------------------------------------------------

    @classmethod
    def gpu_dist(cls, *args, check=True):
        env = dict(cls.host.env, COSIGN_PASSWORD=cls.password)
        out = subprocess.run([str(GPU_DIST), *map(str, args)], env=env, capture_output=True, text=True,
                             timeout=300)
        if check and out.returncode != 0:
            raise hosts.HostError(f"gpu-dist {' '.join(map(str, args))} failed ({out.returncode}): {out.stderr}")
        return out

    @classmethod
    def keygen(cls, name):
        key, pub = cls.host.root / f"{name}.key", cls.host.root / f"{name}.pub"
        cls.gpu_dist("keygen", "--output-key", key, "--output-pub", pub)
        return key, pub

    @classmethod
    def sign(cls, key, immutable_ref, *flags):
        ref = immutable_ref if immutable_ref.startswith("registry://") else f"registry://{immutable_ref}"
        cls.gpu_dist("sign", "--key", key, *flags, ref)

    @staticmethod
    def sig_tag(digest):
        return digest.replace(":", "-", 1) + ".sig"

    @classmethod
    def copy_manifest(cls, repository, from_tag, to_tag):
        base = f"http://{cls.registry.addr}/v2/{repository}/manifests"
        import urllib.request
        req = urllib.request.Request(f"{base}/{from_tag}",
                                     headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            body = resp.read()
        status, answer = hosts.http("PUT", f"{base}/{to_tag}", body,
                                    content_type="application/vnd.oci.image.manifest.v1+json")
        if status != 201:
            raise hosts.HostError(f"PUT {to_tag}: HTTP {status}: {answer!r}")

    def kwctl_verify(self, uri, key=None, *flags):
        argv = ["kwctl", "verify", "--sigstore-trust-config", str(hosts.TRUST_CONFIG),
                "--sources-path", str(self.host.sources_path), "-k", str(key or self.pub), *flags, uri]
        return subprocess.run(argv, env=self.host.env, capture_output=True, text=True, timeout=300)

    def assert_verified(self, uri, key=None, *flags):
        out = self.kwctl_verify(uri, key, *flags)
        self.assertEqual(out.returncode, 0, f"kwctl verify {uri}: {out.stderr}")

    def assert_refused(self, reason, uri, key=None, *flags):
        out = self.kwctl_verify(uri, key, *flags)
        self.assertNotEqual(out.returncode, 0, f"kwctl verify accepted {uri}: {out.stderr}")
        self.assertIn(reason, out.stderr, f"kwctl verify {uri}")

    def verification_config(self, name, key_pub, *flags):
        path = self.host.root / f"verification-{name}.yml"
        path.write_text(self.gpu_dist("verification-config", "--key", key_pub, *flags).stdout)
        return path

    def start_policy_server(self, name, modules, verification_path):
        """policy-server in a folder of its own (its own download folder: nothing cached), each
        module (policy id -> uri) with the settings of its policy's test_data/settings.yml (the
        policy's own name as id) or none."""
        root = self.host.root / f"policy-server-{name}"
        root.mkdir()
        policies = {}
        for pid, uri in modules.items():
            settings = hosts.POLICIES_DIR / pid / "test_data" / "settings.yml"
            policies[pid] = hosts.PolicyEntry(uri, settings=settings if settings.is_file() else {},
                                              allowed_to_mutate=pid == "gpu-pool-routing-policy")
        server = hosts.PolicyServer(root, policies, self.host.env, kubeconfig=self.fakeapi.kubeconfig,
                                    sources_path=self.host.sources_path, verification_path=verification_path)
        self.host.processes.append(server.process)
        return server

    def assert_policy_server_refuses(self, name, uri, verification_path, reason, good=None):
        """policy-server, asked to load a module the config accepts (`good`: id, uri; the signed
        labels policy by default) and `uri`, exits without becoming ready, saying that `uri`
        cannot be verified and why (`reason`)."""
        good_id, good_uri = good or (POLICIES[0], self.tags[POLICIES[0]])
        modules = {good_id: good_uri, "suspect": uri}
        with self.assertRaises(hosts.HostError) as refused:
            server = self.start_policy_server(name, modules, verification_path)
            self.host.stop(server.process)
        message = str(refused.exception)
        self.assertIn("exited with status 1", message, message)
        self.assertIn("Error: Policy 'suspect' cannot be verified: ", message, message)
        self.assertIn(reason, message, message)

    # -- kwctl verify ----------------------------------------------------------------

    def test_kwctl_verify_accepts_every_signed_module(self):
        for policy in POLICIES:
            with self.subTest(policy):
                self.assert_verified(self.tags[policy])
                self.assert_verified(self.digests[policy])

    def test_kwctl_verify_refuses_an_unsigned_module(self):
        self.assert_refused(NO_SIGNATURE, self.unsigned)

    def test_kwctl_verify_refuses_another_key(self):
        self.assert_refused(NOT_SATISFIED, self.other_signed)
        # The signature itself is good: its own key accepts it.
        self.assert_verified(self.other_signed, self.other_pub)

    def test_kwctl_verify_refuses_a_module_changed_after_signing(self):
        self.assert_refused(NO_SIGNATURE, self.changed)
        self.assert_refused(NO_VERIFIED_LAYER, self.copied)

    def test_kwctl_verify_checks_signature_annotations(self):
        self.assert_verified(self.prod, None, "-a", "env=prod")
        self.assert_refused(NOT_SATISFIED, self.prod, None, "-a", "env=dev")
        self.assert_refused(NOT_SATISFIED, self.tags[POLICIES[0]], None, "-a", "env=prod")

    # -- policy-server --verification-path ---------------------------------------------

    def test_policy_server_loads_the_signed_modules(self):
        config = self.verification_config("project", self.pub)
        server = self.start_policy_server("signed", {p: self.tags[p] for p in POLICIES}, config)
        try:
            downloaded = set(server.downloaded_modules())
            for policy in POLICIES:
                with self.subTest(policy):
                    self.assertIn(hashlib.sha256(module_path(policy).read_bytes()).hexdigest(), downloaded)
                    response = server.validate(policy, pod_review())
                    self.assertIs(response.get("allowed"), True, json.dumps(response))
        finally:
            self.host.stop(server.process)

    def test_policy_server_refuses_an_unsigned_module(self):
        self.assert_policy_server_refuses("unsigned", self.unsigned, self.verification_config("unsigned", self.pub),
                                          NO_SIGNATURE)

    def test_policy_server_refuses_another_key(self):
        self.assert_policy_server_refuses("other-key", self.other_signed,
                                          self.verification_config("other-key", self.pub), NOT_SATISFIED)

    def test_policy_server_refuses_a_module_changed_after_signing(self):
        config = self.verification_config("changed", self.pub)
        self.assert_policy_server_refuses("changed", self.changed, config, NO_SIGNATURE)
        self.assert_policy_server_refuses("copied", self.copied, config, NO_VERIFIED_LAYER)

    def test_policy_server_checks_signature_annotations(self):
        config = self.verification_config("prod", self.pub, "-a", "env=prod")
        server = self.start_policy_server("prod", {"prod": self.prod}, config)
        self.host.stop(server.process)
        self.assert_policy_server_refuses("not-prod", self.tags[POLICIES[0]], config, NOT_SATISFIED,
                                          good=("prod", self.prod))


if __name__ == "__main__":
    hosts.install_signal_handlers()
    unittest.main(verbosity=2)
