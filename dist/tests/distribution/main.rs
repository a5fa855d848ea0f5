//! The distribution checks, over every `policies/*/`, on the built
//! modules (`make build`) and the annotated ones (`make annotate`). One test
//! binary, so the harness and its modules are loaded once.
//!
//! Every test name starts with `dist::`: `make e2e` runs the gpu-e2e and gpu-dist
//! tests in one cargo invocation (so their shared dependencies, wasmtime among
//! them, are compiled once) and skips these with `--skip dist::`; `make dist-test`
//! runs them after `make annotate`.

mod common;

mod dist {
    mod annotate;
    mod artifacthub;
    mod deploy;
    mod examples;
    mod kinds;
    mod metadata;
    mod registry;
    mod security;
    mod signatures;
}
