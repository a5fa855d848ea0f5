//! Realistic starting points, read once from `policies/*/test_data` at run time: every
//! admission request (`*.json`) of every policy, each policy's settings files, and the host
//! answers of the recorded replay sessions. Inputs pick one by index and edit it, so the
//! fuzzer starts deep inside the rules instead of at "not JSON".

use crate::replay::{Answer, Policy};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The seeds of every policy.
pub struct Seeds {
    /// Admission requests of all five policies (sorted by path): any of them is a fair
    /// input to any policy.
    pub requests: Vec<Value>,
    /// Per policy (in [`Policy::ALL`] order): its settings files, valid and invalid.
    pub settings: [Vec<Value>; 5],
    /// Host answers recorded in the replay sessions of the context-aware policies.
    pub answers: Vec<Answer>,
}

fn policies_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies")
}

fn sorted_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    files
}

fn yaml(path: &Path) -> Option<Value> {
    yaml_serde::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// The seeds, loaded on first use.
pub fn seeds() -> &'static Seeds {
    static SEEDS: OnceLock<Seeds> = OnceLock::new();
    SEEDS.get_or_init(load)
}

fn load() -> Seeds {
    let mut seeds = Seeds {
        requests: Vec::new(),
        settings: Default::default(),
        answers: Vec::new(),
    };
    for (i, policy) in Policy::ALL.iter().enumerate() {
        let dir = policies_dir().join(policy.crate_name()).join("test_data");
        for path in sorted_files(&dir) {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.ends_with(".json") {
                if let Some(v) = std::fs::read(&path)
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok())
                {
                    seeds.requests.push(v);
                }
            } else if name.starts_with("settings") {
                seeds.settings[i].extend(yaml(&path));
            } else if name.starts_with("session") {
                seeds.answers.extend(session_answers(&path));
            }
        }
        // An empty settings object: every default.
        seeds.settings[i].push(Value::Object(Default::default()));
    }
    assert!(
        !seeds.requests.is_empty(),
        "no seed requests under {}",
        policies_dir().display()
    );
    seeds
}

/// The responses of a replay session (`[{type: Exchange, request, response}]`).
fn session_answers(path: &Path) -> Vec<Answer> {
    let Some(Value::Array(exchanges)) = yaml(path) else {
        return Vec::new();
    };
    exchanges
        .iter()
        .filter_map(|e| {
            let r = e.get("response")?;
            match r.get("type")?.as_str()? {
                "Success" => Some(Answer::Ok(r.get("payload")?.as_str()?.as_bytes().to_vec())),
                _ => Some(Answer::Err(r.get("message")?.as_str()?.to_string())),
            }
        })
        .collect()
}

/// Item `i` (modulo the length) of a non-empty list.
pub fn pick<T>(items: &[T], i: impl Into<usize>) -> &T {
    &items[i.into() % items.len()]
}
