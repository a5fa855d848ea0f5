//! Every input kept under `fuzz/regressions/<target>/` (the crash inputs the fuzz targets
//! found, and seeds worth keeping) through the same entry points and invariants as its fuzz
//! target: `fuzz/src/replay.rs` is compiled in here, so a file fails this test exactly as it
//! failed under the fuzzer. See `fuzz/README.md` for how to add one.
#![cfg(not(target_arch = "wasm32"))]

// The fuzz targets use the rest of it (fixture writing, seeds).
#[allow(dead_code)]
#[path = "../../fuzz/src/replay.rs"]
mod replay;

use serde_json::Value;
use std::path::{Path, PathBuf};

/// Every fuzz target; each has a non-empty directory of kept inputs.
const TARGETS: &[&str] = &[
    "dra_claim",
    "quantity",
    "workload_bytes",
    "workload_structured",
    "labels_bytes",
    "labels_request",
    "labels_settings",
    "routing_bytes",
    "routing_request",
    "routing_settings",
    "vram_bytes",
    "vram_request",
    "vram_settings",
    "vram_args",
    "capacity_bytes",
    "capacity_request",
    "capacity_settings",
    "autoscaler_bytes",
    "autoscaler_request",
    "autoscaler_settings",
];

fn regressions() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions")
}

fn files(target: &str) -> Vec<PathBuf> {
    let dir = regressions().join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Runs one input on a thread with libFuzzer's stack (the main thread's 8 MiB), so deep
/// recursion fails here only where it failed there; a panic is a failure, not an abort.
fn run(target: &'static str, path: &Path) -> Result<(), String> {
    let data = std::fs::read(path).map_err(|e| e.to_string())?;
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || replay::run(target, &data))
        .map_err(|e| e.to_string())?
        .join()
        .unwrap_or_else(|panic| {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("panicked: {text}"))
        })
}

#[test]
fn every_kept_input_passes_its_target() {
    let mut failures = Vec::new();
    for target in TARGETS {
        let files = files(target);
        assert!(!files.is_empty(), "fuzz/regressions/{target} has no input");
        for path in files {
            if let Err(e) = run(target, &path) {
                failures.push(format!("{}: {e}", path.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_target_directory_is_known() {
    for entry in std::fs::read_dir(regressions()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            TARGETS.contains(&name.as_str()),
            "fuzz/regressions/{name} is no fuzz target"
        );
    }
}

/// Structure-aware fixtures are the readable JSON the target built (`FUZZ_DUMP`), not
/// libFuzzer's raw bytes, and hold nothing the replay ignores.
#[test]
fn structured_fixtures_are_readable_json() {
    for target in TARGETS
        .iter()
        .filter(|t| t.ends_with("_request") || t.ends_with("_settings"))
    {
        for path in files(target) {
            let v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap())
                .unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()));
            let fixture = replay::Fixture::from_json(&v)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let mut expected = v.clone();
            if let Some(map) = expected.as_object_mut() {
                map.entry("answers").or_insert(Value::Array(Vec::new()));
            }
            assert_eq!(fixture.to_json(), expected, "{}", path.display());
        }
    }
}
