//! `bench/kubewarden/kwctl_bench.py` reads its requests from the text of `bench/src/cases.rs`:
//! it must read every case there, as gpu-bench has it (a changed row shape once left it reading
//! none).

use gpu_bench::cases::CASES;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

const READ: &str = "import json, kwctl_bench
print(json.dumps([[c.policy, c.kind, c.request, c.settings, c.session, c.intent]
                  for c in kwctl_bench.read_bench_cases()]))";

#[test]
fn kwctl_bench_reads_every_case_of_gpu_bench() {
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("kubewarden");
    let out = Command::new("python3")
        .args(["-c", READ])
        .env("PYTHONPATH", &scripts)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "kwctl_bench.read_bench_cases failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read: Value = serde_json::from_slice(&out.stdout).expect("a JSON list");
    let expected: Vec<Value> = CASES
        .iter()
        .map(|c| {
            json!([
                c.policy,
                c.kind,
                c.request,
                c.settings,
                c.session,
                c.intent.as_str()
            ])
        })
        .collect();
    assert_eq!(read, Value::Array(expected));
}
