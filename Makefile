# gpu-admission: one Makefile for every policy under policies/*.
#
#   make run     build the policies, then evaluate each one on its example requests
#   make test    fmt check, clippy -D warnings, unit tests (native and wasm32-wasip1), e2e on the built modules
#
# Both install what a fresh machine lacks (`make setup`). kwctl-based targets
# (annotate, push, e2e-kwctl) say so and stop when kwctl is not installed.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
CARGO ?= cargo
CARGO_FLAGS ?= --locked
WASM_TARGET := wasm32-wasip1
RELEASE_DIR := target/$(WASM_TARGET)/release
POLICIES := $(patsubst policies/%/Cargo.toml,%,$(wildcard policies/*/Cargo.toml))
# Modules the e2e tests load: every policy plus the harness's own fixture policy.
TEST_MODULES := $(POLICIES) fixture-policy
KWCTL ?= kwctl
REGISTRY ?=

.PHONY: all setup build build-test-modules run test fmt-check lint unit-test wasm-unit-test e2e \
        annotate push e2e-kwctl bench clean help

all: build

help:
	@echo "make run | test | build | annotate | push REGISTRY=host:port/path | e2e-kwctl | clean"

## setup: what a fresh machine needs (idempotent, quick when already done)
setup:
	@scripts/setup.sh

## build: every policy as a release wasm module, copied to policies/<name>/policy.wasm
build: setup
	@for p in $(POLICIES); do \
	  echo "=== build $$p"; \
	  $(CARGO) build $(CARGO_FLAGS) --release --target $(WASM_TARGET) -p $$p; \
	  cp $(RELEASE_DIR)/$${p//-/_}.wasm policies/$$p/policy.wasm; \
	  printf '    %s: %s bytes\n' "policies/$$p/policy.wasm" "$$(stat -c %s policies/$$p/policy.wasm)"; \
	done

build-test-modules: setup
	$(CARGO) build $(CARGO_FLAGS) --release --target $(WASM_TARGET) $(addprefix -p ,$(TEST_MODULES))

## run: build, then evaluate every policy on the examples listed in policies/<name>/examples.txt
run: build
	$(CARGO) build $(CARGO_FLAGS) -p gpu-e2e --bin gpu-kwctl
	@scripts/run-examples.sh target/debug/gpu-kwctl $(POLICIES)

## test: everything CI runs
test: setup fmt-check lint unit-test wasm-unit-test e2e
	@echo "=== all checks passed"

fmt-check:
	$(CARGO) fmt --all -- --check

lint:
	$(CARGO) clippy $(CARGO_FLAGS) --workspace --all-targets --all-features -- -D warnings

unit-test:
	$(CARGO) test $(CARGO_FLAGS) --workspace --exclude gpu-e2e

## wasm-unit-test: the rules crate's own tests, compiled to wasm32-wasip1 and run under node:wasi
wasm-unit-test:
	$(CARGO) test $(CARGO_FLAGS) -p gpu-rules --target $(WASM_TARGET)

## e2e: the built modules in wapc + wasmtime, as Kubewarden runs them
e2e: build-test-modules
	$(CARGO) test $(CARGO_FLAGS) -p gpu-e2e

## annotate: annotated-policy.wasm per policy (metadata + README embedded)
annotate: build
	@if ! command -v $(KWCTL) >/dev/null; then \
	  echo "kwctl is not installed: using the project's own annotate (gpu-kwctl annotate)"; \
	  $(CARGO) build $(CARGO_FLAGS) -p gpu-e2e --bin gpu-kwctl; \
	fi
	@for p in $(POLICIES); do \
	  d=policies/$$p; \
	  if command -v $(KWCTL) >/dev/null; then \
	    $(KWCTL) annotate -m $$d/metadata.yml -u $$d/README.md -o $$d/annotated-policy.wasm $$d/policy.wasm; \
	  else \
	    target/debug/gpu-kwctl annotate -m $$d/metadata.yml -u $$d/README.md -o $$d/annotated-policy.wasm $$d/policy.wasm; \
	  fi; \
	  echo "    $$d/annotated-policy.wasm"; \
	done

## push: publish each annotated module (needs kwctl): make push REGISTRY=host:port/path
push: annotate
	@test -n "$(REGISTRY)" || { echo "usage: make push REGISTRY=host:port/path"; exit 2; }
	@command -v $(KWCTL) >/dev/null || { echo "kwctl is not installed: 'make push' needs kwctl (https://github.com/kubewarden/kwctl)"; exit 2; }
	@for p in $(POLICIES); do \
	  v=$$(grep -m1 '^version' policies/$$p/Cargo.toml | cut -d'"' -f2); \
	  $(KWCTL) push -o json policies/$$p/annotated-policy.wasm registry://$(REGISTRY)/$$p:v$$v; \
	done

## e2e-kwctl: each policy's e2e.bats through kwctl (skipped cleanly without kwctl or bats)
e2e-kwctl: annotate
	@if ! command -v $(KWCTL) >/dev/null; then echo "kwctl is not installed: skipping the kwctl e2e tests (make e2e runs the same requests without it)"; exit 0; fi
	@command -v bats >/dev/null || { echo "bats is not installed: apt-get install bats"; exit 2; }
	@for p in $(POLICIES); do (cd policies/$$p && POLICY_WASM=annotated-policy.wasm bats e2e.bats); done

clean:
	$(CARGO) clean
	rm -f policies/*/policy.wasm policies/*/annotated-policy.wasm
