//! Helpers shared by the integration tests.
#![allow(dead_code)] // each test binary uses a different subset

use std::path::PathBuf;
use std::sync::OnceLock;

use gpu_e2e::{Policy, ReplaySession, module_path, read_admission_request, read_settings};
use serde_json::Value;

/// The built fixture policy (compiled once per test binary).
pub fn fixture() -> Policy {
    static POLICY: OnceLock<Policy> = OnceLock::new();
    POLICY
        .get_or_init(|| {
            let path = module_path("fixture-policy").unwrap_or_else(|e| panic!("{e:#}"));
            Policy::load(path).unwrap_or_else(|e| panic!("{e:#}"))
        })
        .clone()
}

/// A file under `e2e/fixture-policy/test_data/`.
pub fn test_data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixture-policy/test_data")
        .join(name)
}

pub fn request(name: &str) -> Value {
    read_admission_request(test_data(name)).unwrap()
}

pub fn settings(name: &str) -> Value {
    read_settings(test_data(name)).unwrap()
}

pub fn session(name: &str) -> ReplaySession {
    ReplaySession::from_file(test_data(name)).unwrap()
}

/// `e2e/fixture-policy/metadata.yml` as the JSON `kwctl annotate` embeds
/// (plus the `protocolVersion` kwctl fills in).
pub fn fixture_metadata() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixture-policy/metadata.yml");
    let mut metadata = read_settings(path).unwrap();
    metadata["protocolVersion"] = Value::from("v1");
    metadata
}
