//! Shared pieces of the fuzz targets (`fuzz_targets/*.rs`), which are one line each.
//!
//! - [`tree`]: arbitrary JSON trees over the rules' vocabulary, and edits of documents;
//! - [`seeds`]: the requests, settings and recorded host answers of `policies/*/test_data`;
//! - [`input`]: the structure-aware inputs of the policy targets, built into fixtures;
//! - [`command_line`]: model-server containers for `vram_args`;
//! - [`replay`]: runs an input and checks the invariants (also compiled into the main
//!   workspace's regression test, `shared/tests/fuzz_regressions.rs`).
//!
//! Set `FUZZ_DUMP=<file>` to have a structure-aware target write the JSON it built (the
//! fixture the regression test reads) before running it.

pub mod command_line;
pub mod input;
pub mod replay;
pub mod seeds;
pub mod tree;

use input::{RequestInput, SettingsInput};
use replay::{Fixture, Policy};
use serde_json::Value;
use std::sync::OnceLock;

/// Panics (a crash, for libFuzzer) when an invariant broke.
fn verify(target: &str, result: Result<(), String>) {
    if let Err(e) = result {
        panic!("{target}: {e}");
    }
}

/// Writes `v` to `$FUZZ_DUMP`, when it is set.
pub fn dump(v: &Value) {
    static PATH: OnceLock<Option<String>> = OnceLock::new();
    if let Some(path) = PATH.get_or_init(|| std::env::var("FUZZ_DUMP").ok()) {
        // Indented while that stays small; long repeats are easier to read on one line.
        let pretty = serde_json::to_string_pretty(v).unwrap_or_default();
        let text = if pretty.len() <= 32 * 1024 {
            pretty
        } else {
            v.to_string()
        };
        if let Err(e) = std::fs::write(path, text + "\n") {
            eprintln!("FUZZ_DUMP={path}: {e}");
        }
    }
}

/// `<policy>_bytes`.
pub fn bytes(policy: Policy, data: &[u8]) {
    verify(policy.prefix(), replay::policy_bytes(policy, data));
}

fn fixture(policy: Policy, fixture: &Fixture) {
    dump(&fixture.to_json());
    verify(policy.prefix(), replay::run_fixture(policy, fixture));
}

/// `<policy>_request`.
pub fn request(policy: Policy, input: &RequestInput) {
    fixture(policy, &input.fixture(policy));
}

/// `<policy>_settings`.
pub fn settings(policy: Policy, input: &SettingsInput) {
    fixture(policy, &input.fixture(policy));
}

/// `vram_args`.
pub fn command_line(input: &command_line::CommandLineInput) {
    let container = input.to_json();
    dump(&container);
    verify(
        "vram_args",
        replay::vram_args(container.to_string().as_bytes()),
    );
}
