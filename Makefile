# gpu-admission: one Makefile for every policy under policies/*.
#
#   make run     build the policies, then evaluate each one on its example requests
#   make test    fmt check, clippy -D warnings, unit tests (native and wasm32-wasip1), e2e on the built modules,
#                distribution checks (metadata, annotated modules, push/pull through a real OCI registry,
#                Artifact Hub files, deploy manifests)
#
# Both install what a fresh machine lacks (`make setup`). annotate and push use kwctl when it is
# installed and the project's own tools otherwise (gpu-kwctl annotate, gpu-dist push); set KWCTL=none
# to use the project's tools anyway. e2e-kwctl needs kwctl and bats and says so when they are missing.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
CARGO ?= cargo
CARGO_FLAGS ?= --locked
WASM_TARGET := wasm32-wasip1
# A CI run builds once from a clean clone: incremental caches (1-2 GB) would only fill its disk.
ifeq ($(CI),true)
export CARGO_INCREMENTAL ?= 0
endif
# Cargo's target directory as cargo resolves it ($CARGO_TARGET_DIR, build.target-dir in a cargo
# config, else target/): where the recipes below find what cargo built. Asked once, when first
# used (after setup has installed cargo).
TARGET_DIR = $(eval TARGET_DIR := $(shell CARGO=$(CARGO) scripts/target-dir.sh))$(TARGET_DIR)
RELEASE_DIR = $(TARGET_DIR)/$(WASM_TARGET)/release
POLICIES := $(patsubst policies/%/Cargo.toml,%,$(wildcard policies/*/Cargo.toml))
# Modules the e2e tests load: every policy plus the harness's own fixture policy.
TEST_MODULES := $(POLICIES) fixture-policy
KWCTL ?= kwctl
# make push REGISTRY=host:port/path; extra flags for `kwctl push` (e.g. --sources-path sources.yml
# for a plain-HTTP registry) or `gpu-dist push` (--plain-http / --https).
REGISTRY ?=
PUSH_FLAGS ?=
# The harness (gpu-e2e) and the distribution tools (gpu-dist) are always built in one cargo
# invocation: their shared dependencies (tokio, futures, ...) then resolve to one feature set and
# wasmtime is compiled once; building either package alone compiles a second copy of wasmtime.
# The manifest checker (gpu-admission, check/) is built with them for the same reason.
E2E_PACKAGES := -p gpu-e2e -p gpu-dist -p gpu-admission

.PHONY: all setup build build-test-modules run check-examples test fmt-check lint unit-test wasm-unit-test e2e \
        dist-test examples-test annotate push sign verification-config signatures-test artifacthub e2e-kwctl \
        policy-server-e2e bench fuzz clean help

all: build

help:
	@echo "make run | test | build | annotate | push REGISTRY=host:port/path SIGNING_KEY=key | sign | artifacthub | e2e-kwctl | clean"

## setup: what a fresh machine needs (idempotent, quick when already done)
setup:
	@scripts/setup.sh

## build: every policy as a release wasm module, through wasm-opt -O3 (scripts/optimize-modules.sh),
## copied to policies/<name>/policy.wasm. One cargo
## invocation: the policies share every dependency and feature, and their link-time optimisation runs
## in parallel.
build: setup
	$(CARGO) build $(CARGO_FLAGS) --release --target $(WASM_TARGET) $(addprefix -p ,$(POLICIES))
	@scripts/optimize-modules.sh $(foreach p,$(POLICIES),$(RELEASE_DIR)/$(subst -,_,$(p)).wasm)
	@for p in $(POLICIES); do \
	  cp $(RELEASE_DIR)/$${p//-/_}.wasm policies/$$p/policy.wasm; \
	  printf '    %s: %s bytes\n' "policies/$$p/policy.wasm" "$$(stat -c %s policies/$$p/policy.wasm)"; \
	done

build-test-modules: setup
	$(CARGO) build $(CARGO_FLAGS) --release --target $(WASM_TARGET) $(addprefix -p ,$(TEST_MODULES))
	@scripts/optimize-modules.sh $(foreach p,$(POLICIES),$(RELEASE_DIR)/$(subst -,_,$(p)).wasm)

## run: build, then evaluate every policy on the examples listed in policies/<name>/examples.txt, with
## Kubewarden's kwctl (on PATH, or unpacked from ../shared/kubewarden into <target dir>/kubewarden) on the
## annotated modules; without kwctl, with the project's harness (gpu-kwctl, a longer first build).
SIGSTORE_TRUST ?= ../shared/kubewarden/offline-sigstore-trust-config.json
run: build
	@if kwdir=$$(scripts/kubewarden-tools.sh); then \
	  $(MAKE) --no-print-directory annotate KWCTL=$$kwdir/kwctl; \
	  trust=(); [ -f $(SIGSTORE_TRUST) ] && trust=(--sigstore-trust-config $(SIGSTORE_TRUST)); \
	  echo "=== examples through $$kwdir/kwctl"; \
	  scripts/run-examples.py --kwctl $$kwdir/kwctl "$${trust[@]}" $(POLICIES); \
	  kwctl=$$kwdir/kwctl; \
	else \
	  echo "=== kwctl not found (no ../shared/kubewarden): examples through the project's harness"; \
	  $(CARGO) build $(CARGO_FLAGS) $(E2E_PACKAGES) --bin gpu-kwctl; \
	  scripts/run-examples.py --gpu-kwctl $(TARGET_DIR)/debug/gpu-kwctl $(POLICIES); \
	  kwctl=kwctl; \
	fi; \
	trust=""; [ -f $(SIGSTORE_TRUST) ] && trust=" --sigstore-trust-config $(SIGSTORE_TRUST)"; \
	echo; \
	echo "Next, your own request (an AdmissionRequest as JSON: copy a test_data file and change it):"; \
	echo "  $$kwctl run$$trust --request-path policies/gpu-labels-policy/test_data/pod_gpu_missing_labels.json \\"; \
	echo "    --settings-path policies/gpu-labels-policy/test_data/settings_max_gpus.yml policies/gpu-labels-policy/annotated-policy.wasm"; \
	echo "Then in a cluster, watch before you block: kubectl apply -f deploy/policy-server.yaml, then"; \
	echo "  deploy/cluster-admission-policy-group.yaml (monitor mode; README: Installing with Kubewarden)."
	@$(MAKE) --no-print-directory check-examples

## check-examples: gpu-admission check (check/) on the example manifests (examples/manifests: a Helm-rendered
## chart, a notebook, a fine-tuning Job, a 70B model on small GPUs...) against the example cluster snapshot,
## with the default policy manifests (the group in deploy/ and routing's example). Denials are expected (exit 1).
check-examples: build
	@$(CARGO) build $(CARGO_FLAGS) -q $(E2E_PACKAGES) --bin gpu-admission
	@echo
	@echo "=== gpu-admission check: the example manifests before they reach a cluster (cargo install --path check)"
	@echo "$$ gpu-admission check --snapshot examples/cluster-snapshot.yaml examples/manifests"
	@status=0; $(TARGET_DIR)/debug/gpu-admission check --modules $(RELEASE_DIR) \
	  --snapshot examples/cluster-snapshot.yaml examples/manifests || status=$$?; \
	case $$status in \
	  1) echo "(exit status 1: a denial, as these examples are meant to show; 0 = all admitted, 2 = bad input)";; \
	  *) echo "gpu-admission check exited with $$status, expected 1 (the examples include denials)"; exit 1;; \
	esac

## test: everything CI runs
## Kubewarden's own kwctl and policy-server, when on PATH (.ci/run puts them there), check the modules
## too: e2e-kwctl (every e2e.bats), the kwctl-vs-harness comparison (e2e/tests/kwctl.rs, in e2e),
## examples-test (make run's verdicts), policy-server-e2e, upgrade-test and signatures-test; each says SKIPPED without them.
test: setup fmt-check lint unit-test wasm-unit-test e2e dist-test examples-test e2e-kwctl policy-server-e2e \
       upgrade-test policy-server-faults signatures-test
	@echo "=== all checks passed"

## examples-test: make run's examples give the verdicts examples.txt expects (kwctl on the annotated
## modules when on PATH, else the harness's gpu-kwctl, built by e2e)
examples-test: annotate
	@if [ -n "$(kwctl_found)" ]; then \
	  scripts/run-examples.py --kwctl $(kwctl_found) --sigstore-trust-config $(SIGSTORE_TRUST) $(POLICIES); \
	else \
	  echo "examples-test: kwctl is not on PATH: through the harness's gpu-kwctl"; \
	  $(CARGO) build $(CARGO_FLAGS) $(E2E_PACKAGES) --bin gpu-kwctl; \
	  scripts/run-examples.py --gpu-kwctl $(TARGET_DIR)/debug/gpu-kwctl $(POLICIES); \
	fi

fmt-check:
	$(CARGO) fmt --all -- --check

lint:
	$(CARGO) clippy $(CARGO_FLAGS) --workspace --all-targets --all-features -- -D warnings

unit-test:
	$(CARGO) test $(CARGO_FLAGS) --workspace --exclude gpu-e2e --exclude gpu-dist --exclude gpu-admission

## wasm-unit-test: the rules crate's own tests, compiled to wasm32-wasip1 and run under node:wasi
wasm-unit-test:
	$(CARGO) test $(CARGO_FLAGS) -p gpu-rules --target $(WASM_TARGET)

## e2e: the built modules in wapc + wasmtime, as Kubewarden runs them (the distribution checks,
## named dist::*, need the annotated modules and run in dist-test)
e2e: build-test-modules
	$(CARGO) test $(CARGO_FLAGS) $(E2E_PACKAGES) -- --skip dist::

## dist-test: the distribution checks: metadata.yml against Cargo.toml and the modules, the annotated
## modules, push and pull of every policy through a real OCI registry (docker-registry on 127.0.0.1),
## the committed artifacthub/ files, and the settings of every deploy manifest
dist-test: annotate
	$(CARGO) test $(CARGO_FLAGS) $(E2E_PACKAGES) --test distribution

# kwctl when installed (and not KWCTL=none), else "" (the project's own tools).
kwctl_found = $(shell command -v $(KWCTL) 2>/dev/null)

## annotate: policies/<name>/annotated-policy.wasm = policy.wasm + metadata.yml + README.md
## (custom section io.kubewarden.metadata), with kwctl annotate or else gpu-kwctl annotate
annotate: build
	@if [ -z "$(kwctl_found)" ]; then \
	  echo "=== annotate with gpu-kwctl annotate (kwctl is not installed)"; \
	  $(CARGO) build $(CARGO_FLAGS) $(E2E_PACKAGES) --bin gpu-kwctl; \
	else echo "=== annotate with $(kwctl_found)"; fi
	@for p in $(POLICIES); do \
	  d=policies/$$p; \
	  if [ -n "$(kwctl_found)" ]; then \
	    $(KWCTL) annotate -m $$d/metadata.yml -u $$d/README.md -o $$d/annotated-policy.wasm $$d/policy.wasm; \
	  else \
	    $(TARGET_DIR)/debug/gpu-kwctl annotate -m $$d/metadata.yml -u $$d/README.md -o $$d/annotated-policy.wasm $$d/policy.wasm; \
	  fi; \
	  printf '    %s: %s bytes\n' "$$d/annotated-policy.wasm" "$$(stat -c %s $$d/annotated-policy.wasm)"; \
	done

## push: publish each annotated module as a Kubewarden OCI artifact, tagged v<version>, and sign it by the
## immutable digest the push printed: make push REGISTRY=host:port/path SIGNING_KEY=cosign.key (kwctl push,
## or else gpu-dist push; gpu-dist sign). UNSIGNED=1 pushes without signing.
push: annotate
	@test -n "$(REGISTRY)" || { echo "usage: make push REGISTRY=host:port/path SIGNING_KEY=<private key>"; exit 2; }
	@test -n "$(SIGNING_KEY)$(UNSIGNED)" || { echo "make push signs what it pushes: SIGNING_KEY=<private key> (README: Signing), or UNSIGNED=1"; exit 2; }
	@$(CARGO) build $(CARGO_FLAGS) -q $(E2E_PACKAGES) --bin gpu-dist
	@if [ -n "$(kwctl_found)" ]; then pusher="$(KWCTL)"; else pusher=$(TARGET_DIR)/debug/gpu-dist; fi; \
	for p in $(POLICIES); do \
	  v=$$(grep -m1 '^version' policies/$$p/Cargo.toml | cut -d'"' -f2); \
	  out=$$($$pusher push $(PUSH_FLAGS) -o json policies/$$p/annotated-policy.wasm registry://$(REGISTRY)/$$p:v$$v); \
	  echo "$$out"; \
	  ref=$$(printf '%s' "$$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["immutable_ref"])'); \
	  if [ -z "$(UNSIGNED)" ]; then $(TARGET_DIR)/debug/gpu-dist sign --key "$(SIGNING_KEY)" $(SIGN_FLAGS) "$$ref" >/dev/null; fi; \
	done

## sign: sign the policies pushed at REGISTRY (tag v<version>, resolved to the digest it names now) with
## SIGNING_KEY, in cosign's format (README: Signing): make sign REGISTRY=host:port/path SIGNING_KEY=cosign.key
## (COSIGN_PASSWORD for an encrypted key; SIGN_FLAGS, e.g. -a env=prod)
SIGNING_KEY ?=
SIGN_FLAGS ?=
UNSIGNED ?=
sign:
	@test -n "$(REGISTRY)" -a -n "$(SIGNING_KEY)" || { echo "usage: make sign REGISTRY=host:port/path SIGNING_KEY=<private key>"; exit 2; }
	@$(CARGO) build $(CARGO_FLAGS) -q $(E2E_PACKAGES) --bin gpu-dist
	@for p in $(POLICIES); do \
	  v=$$(grep -m1 '^version' policies/$$p/Cargo.toml | cut -d'"' -f2); \
	  $(TARGET_DIR)/debug/gpu-dist sign --key "$(SIGNING_KEY)" $(SIGN_FLAGS) registry://$(REGISTRY)/$$p:v$$v; \
	done

## verification-config: deploy/verification-config.yaml (the PolicyServer's verificationConfig ConfigMap) from
## the project's public key deploy/signing-key.pub (SIGNING_PUB=<file> for another one)
SIGNING_PUB ?= deploy/signing-key.pub
verification-config:
	@$(CARGO) build $(CARGO_FLAGS) -q $(E2E_PACKAGES) --bin gpu-dist
	$(TARGET_DIR)/debug/gpu-dist verification-config --key $(SIGNING_PUB) --config-map kubewarden > deploy/verification-config.yaml.tmp
	mv deploy/verification-config.yaml.tmp deploy/verification-config.yaml

## signatures-test: every module pushed to a local docker-registry and signed with a key made for the test,
## then Kubewarden's kwctl verify and policy-server with a verification config: signed modules load,
## unsigned, other-key and changed-after-signing ones are refused (e2e/kubewarden/test_signatures.py;
## skipped without kwctl and policy-server on PATH)
signatures-test: annotate
	@if ! command -v kwctl >/dev/null || ! command -v policy-server >/dev/null; then \
	  echo "signatures-test: SKIPPED: kwctl and policy-server must both be on PATH (../shared/kubewarden/install.sh DIR, then PATH=DIR:\$$PATH)"; \
	  exit 0; fi; \
	$(CARGO) build $(CARGO_FLAGS) -q $(E2E_PACKAGES) --bin gpu-dist; \
	GPU_DIST=$(TARGET_DIR)/debug/gpu-dist python3 e2e/kubewarden/test_signatures.py

## artifacthub: artifacthub/artifacthub-repo.yml and artifacthub/<policy>/<version>/{artifacthub-pkg.yml,
## README.md} from metadata.yml, questions-ui.yml and README.md (the fields of kwctl scaffold artifacthub;
## createdAt is kept while a package is otherwise unchanged). make test checks they are current.
artifacthub: setup
	$(CARGO) build $(CARGO_FLAGS) -q $(E2E_PACKAGES) --bin gpu-dist
	$(TARGET_DIR)/debug/gpu-dist artifacthub

## e2e-kwctl: each policy's e2e.bats through kwctl on annotated-policy.wasm (skipped without kwctl or bats)
e2e-kwctl:
	@if [ -z "$(kwctl_found)" ]; then \
	  echo "e2e-kwctl: SKIPPED: kwctl is not installed (make e2e runs the same requests without it)"; exit 0; fi; \
	if ! command -v bats >/dev/null; then \
	  echo "e2e-kwctl: SKIPPED: bats is not installed (apt-get install bats)"; exit 0; fi; \
	$(MAKE) --no-print-directory annotate; \
	if [ -f $(SIGSTORE_TRUST) ]; then export KWCTL_SIGSTORE_TRUST=$$(realpath $(SIGSTORE_TRUST)); fi; \
	failed=""; \
	for p in $(POLICIES); do \
	  echo "=== e2e-kwctl $$p"; \
	  if [ ! -f policies/$$p/e2e.bats ]; then echo "    no e2e.bats"; failed="$$failed $$p"; continue; fi; \
	  (cd policies/$$p && POLICY_WASM=annotated-policy.wasm bats e2e.bats) || failed="$$failed $$p"; \
	done; \
	if [ -n "$$failed" ]; then echo "e2e-kwctl: FAILED:$$failed"; exit 1; fi; \
	echo "e2e-kwctl: all policies passed"

## policy-server-e2e: every policy under Kubewarden's policy-server, pulled from a local docker-registry,
## with fakeapi as the cluster (e2e/kubewarden/; skipped without kwctl and policy-server on PATH)
.PHONY: policy-server-e2e
policy-server-e2e: annotate
	@if ! command -v kwctl >/dev/null || ! command -v policy-server >/dev/null; then \
	  echo "policy-server-e2e: SKIPPED: kwctl and policy-server must both be on PATH (../shared/kubewarden/install.sh DIR, then PATH=DIR:\$$PATH)"; \
	  exit 0; fi; \
	python3 e2e/kubewarden/test_policy_server.py

## upgrade-test: the previous release's manifests and test_data (e2e/upgrade/release/, README there) with today's
## modules give the previous release's verdicts (e2e/upgrade/verdicts.json), but for the changes listed with their
## reasons in e2e/upgrade/differences.yml: through kwctl (replay sessions) and through policy-server with fakeapi
## (each stage skipped without its tools on PATH)
.PHONY: upgrade-test
upgrade-test: annotate
	@python3 e2e/upgrade/test_upgrade.py kwctl
	@python3 e2e/upgrade/test_upgrade.py policy-server

## policy-server-faults: the policies under Kubewarden's policy-server when its cluster misbehaves
## (e2e/kubewarden/test_faults.py: fakeapi behind faultproxy.py refusing, slow, 429, 500, 410 Gone, cut watches,
## old lists; bad input at the HTTP door), policy-server restarted under load and three replicas behind one
## address (test_restart_scale.py), and a 25-second soak (soak.py). README: Reliability. Skipped without
## policy-server on PATH.
.PHONY: policy-server-faults soak
policy-server-faults: annotate
	@if ! command -v policy-server >/dev/null; then \
	  echo "policy-server-faults: SKIPPED: policy-server must be on PATH (../shared/kubewarden/install.sh DIR, then PATH=DIR:\$$PATH)"; \
	  exit 0; fi; \
	python3 e2e/kubewarden/test_faults.py; \
	python3 e2e/kubewarden/test_restart_scale.py; \
	python3 e2e/kubewarden/soak.py --seconds 25 --no-rss-bound

## soak: SOAK_SECONDS (10 minutes) of mixed load on policy-server while fakeapi's cluster changes under it
## (e2e/kubewarden/soak.py): fails on any 5xx, wrong verdict, lost request or RSS growth over 64 MiB, and writes
## the figures (p50/p99 per minute, RSS, errors) into BENCHMARKS.md. Not part of `make test`.
SOAK_SECONDS ?= 600
soak: annotate
	@command -v policy-server >/dev/null || { \
	  echo "soak: policy-server must be on PATH (../shared/kubewarden/install.sh DIR, then PATH=DIR:\$$PATH)"; exit 1; }
	python3 e2e/kubewarden/soak.py --seconds $(SOAK_SECONDS) --out BENCHMARKS.md

## bench: how fast and how small, writes BENCHMARKS.md. First the project's harness (gpu-bench: the built
## modules in wapc + wasmtime, kept and fresh instances, the rules natively, the capacity gate over
## synthetic pools of 100 to 50,000 GPU pods, module sizes, the release-profile experiment), the guest's work
## per request in wasm instructions (gpu-bench guest-work: wasmi's fuel, deterministic) and in x86 instructions
## under wasmtime (bench/x86_count.py: callgrind, deterministic, ranks modules as kwctl does), then the real
## host when kwctl and policy-server are found (on PATH or unpacked from ../shared/kubewarden): `kwctl bench`
## of every policy in 5 interleaved rounds (bench/kubewarden/kwctl_bench.py --rounds 5: one run on a 2-core VM
## moves by 20-60%, so ours and Kubewarden's are compared over rounds run in the same minutes) and the policies through policy-server over HTTP with
## `hey` (bench/kubewarden/policy_server_bench.py), and what guest work costs there (bench/kubewarden/host_cost.py),
## and how far a pool ends above its threshold when 16 admissions race for its last 8 GPUs, with and without
## pools[].headroom (bench/kubewarden/overshoot_bench.py), each in its own section. Kubewarden's own policies beside
## ours (no Kubewarden code is kept here; in guest-work, kwctl_bench and policy_server_bench alike):
## KUBEWARDEN_LABELS_POLICY=<module> adds labels-policy next to the labels
## policy, KUBEWARDEN_MUTATING_POLICY=<module> capabilities-psp next to routing; build both (labels-policy.wasm,
## capabilities-psp.wasm) from kubewarden/policies at 6a01a242a770dbb168767a986ad0bc57cb3b61fb with
## bench/kubewarden/build-kubewarden-policies.sh <checkout> [/work/kw-policies].
## Not part of `make test`. BENCH_FLAGS=--quick (a tenth of the calls), --skip-profiles, --skip-pools.
BENCH_FLAGS ?=
bench: annotate
	@command -v hey >/dev/null || { echo "=== bench: installing hey (load generator)"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO="sudo"; $$SUDO apt-get update -qq; \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq hey >/dev/null; }
	$(CARGO) build $(CARGO_FLAGS) --release --target $(WASM_TARGET) -p naive-capacity-gate
	$(CARGO) build $(CARGO_FLAGS) --profile bench-harness -p gpu-bench
	CARGO=$(CARGO) $(TARGET_DIR)/bench-harness/gpu-bench --out BENCHMARKS.md $(BENCH_FLAGS)
	$(TARGET_DIR)/bench-harness/gpu-bench teams --out BENCHMARKS.md
	$(TARGET_DIR)/bench-harness/gpu-bench guest-work --out BENCHMARKS.md
	@command -v valgrind >/dev/null || { echo "=== bench: installing valgrind (bench/x86_count.py)"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO="sudo"; $$SUDO apt-get update -qq; \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq valgrind >/dev/null; }
	python3 bench/x86_count.py --out BENCHMARKS.md
	@if kwdir=$$(scripts/kubewarden-tools.sh); then \
	  export PATH="$$kwdir:$$PATH"; \
	  python3 bench/kubewarden/kwctl_bench.py --rounds 5 --out BENCHMARKS.md; \
	  python3 bench/kubewarden/policy_server_bench.py --out BENCHMARKS.md; \
	  python3 bench/kubewarden/host_cost.py --out BENCHMARKS.md; \
	  python3 bench/kubewarden/overshoot_bench.py --rounds 5 --out BENCHMARKS.md; \
	else echo "bench: SKIPPED the real-host figures: no kwctl and policy-server (../shared/kubewarden/install.sh DIR)"; fi

## fuzz: every cargo-fuzz target in fuzz/ (fuzz/README.md), one at a time, FUZZ_SECONDS each
## (FUZZ_REQUEST_SECONDS for the <policy>_request targets). Not in CI. Each starts from the seeds and
## kept crash inputs in fuzz/regressions/<target>/ (in git; `make test` replays them) and grows
## fuzz/corpus/<target>/ (not in git). cargo-fuzz needs nightly features: with only a stable
## toolchain, RUSTC_BOOTSTRAP=1 enables them. Crashes land in fuzz/artifacts/<target>/.
FUZZ_SECONDS ?= 60
FUZZ_REQUEST_SECONDS ?= $(FUZZ_SECONDS)
FUZZ_TARGETS ?= $(sort $(patsubst fuzz/fuzz_targets/%.rs,%,$(wildcard fuzz/fuzz_targets/*.rs)))
# No sanitizer: the rules are safe Rust and ASan halves the executions (FUZZ_FLAGS= for ASan).
FUZZ_FLAGS ?= --sanitizer none
fuzz:
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	@failed=""; for t in $(FUZZ_TARGETS); do \
	  case $$t in *_request) s=$(FUZZ_REQUEST_SECONDS);; *) s=$(FUZZ_SECONDS);; esac; \
	  echo "=== fuzz $$t ($$s s)"; \
	  mkdir -p fuzz/corpus/$$t fuzz/regressions/$$t; \
	  (cd fuzz && RUSTC_BOOTSTRAP=1 $(CARGO) fuzz run $(FUZZ_FLAGS) $$t corpus/$$t regressions/$$t -- \
	    -max_total_time=$$s -rss_limit_mb=2048 -max_len=65536 -timeout=30 -print_final_stats=1) \
	    || failed="$$failed $$t"; \
	done; \
	if [ -n "$$failed" ]; then \
	  echo "fuzz: FAILED:$$failed (inputs in fuzz/artifacts/; fuzz/README.md says how to keep them)"; exit 1; fi

clean:
	$(CARGO) clean
	rm -f policies/*/policy.wasm policies/*/annotated-policy.wasm
