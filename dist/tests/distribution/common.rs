//! What the distribution tests share: the policies with their metadata and
//! built modules, and the inputs in their `test_data/`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use gpu_dist::manifests::{read_documents, verbs_for_operation};
use gpu_dist::policies::{PolicyDir, workspace_policies, yaml_files};
use gpu_e2e::metadata::ContextAwareResource;
use gpu_e2e::metadata::Metadata;
use gpu_e2e::{
    Evaluation, HostCall, Policy, ReplaySession, module_path, parse_json_or_yaml,
    read_admission_request,
};
use serde_json::{Value, json};

/// Environment variable pointing the tests at another copy of the repository
/// (its `policies/`, `artifacthub/`, `deploy/`, README), e.g. one with a
/// deliberately broken `metadata.yml`, to see the checks fail. The modules are
/// still the workspace's builds.
pub const ROOT_ENV: &str = "GPU_DIST_TEST_ROOT";

pub fn root() -> PathBuf {
    match std::env::var_os(ROOT_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => gpu_e2e::workspace_root(),
    }
}

/// Every policy directory (at least one, or the test fails).
pub fn policies() -> Vec<PolicyDir> {
    workspace_policies(&root()).unwrap_or_else(|e| panic!("{e:#}"))
}

/// Every policy with its metadata.yml; one whose metadata.yml is missing or invalid is
/// a failure in `failures`, and left out.
pub fn policies_with_metadata(failures: &mut Failures) -> Vec<(PolicyDir, Metadata)> {
    policies()
        .into_iter()
        .filter_map(|policy| match policy.metadata() {
            Ok(metadata) => Some((policy, metadata)),
            Err(_) => {
                failures.add(&policy.name, "metadata.yml is missing or invalid");
                None
            }
        })
        .collect()
}

/// name -> parsed metadata.yml, for the policies whose metadata parses.
pub fn all_metadata() -> BTreeMap<String, Metadata> {
    policies()
        .into_iter()
        .filter_map(|p| p.metadata().ok().map(|m| (p.name.clone(), m)))
        .collect()
}

/// The manifests of `deploy/`: each file (relative to the root) with its
/// documents, or what is wrong with reading it.
pub fn deploy_manifests() -> Vec<(String, Result<Vec<Value>, String>)> {
    manifests_under(&root().join("deploy"))
}

/// The manifests of every `policies/*/examples/`, as [`deploy_manifests`].
pub fn example_manifests() -> Vec<(String, Result<Vec<Value>, String>)> {
    policies()
        .iter()
        .flat_map(|p| manifests_under(&p.dir.join("examples")))
        .collect()
}

fn manifests_under(dir: &Path) -> Vec<(String, Result<Vec<Value>, String>)> {
    let files = yaml_files(dir).unwrap_or_else(|e| panic!("{e:#}"));
    files
        .into_iter()
        .map(|file| {
            let rel = file
                .strip_prefix(root())
                .unwrap_or(&file)
                .display()
                .to_string();
            (rel, read_documents(&file).map_err(|e| format!("{e:#}")))
        })
        .collect()
}

/// Every document of `deploy/` (files that do not parse are left out; the
/// deploy tests report them).
pub fn deploy_documents() -> Vec<Value> {
    deploy_manifests()
        .into_iter()
        .filter_map(|(_, docs)| docs.ok())
        .flatten()
        .collect()
}

/// The PolicyServer of `deploy/` every policy must run on: the one
/// PolicyServer document there.
pub fn dedicated_policy_server() -> Result<Value, String> {
    let servers: Vec<Value> = deploy_documents()
        .into_iter()
        .filter(|d| d["kind"] == "PolicyServer")
        .collect();
    match <[Value; 1]>::try_from(servers) {
        Ok([server]) => Ok(server),
        Err(servers) => Err(format!(
            "deploy/ must define exactly one PolicyServer, the one the GPU policies run on; it defines {}",
            servers.len()
        )),
    }
}

/// The built (release, unannotated) module of `policy`, compiled once per process.
pub fn module(policy: &PolicyDir) -> Result<Policy, String> {
    static MODULES: OnceLock<std::sync::Mutex<BTreeMap<String, Policy>>> = OnceLock::new();
    let cache = MODULES.get_or_init(Default::default);
    if let Some(p) = cache.lock().map_err(|e| e.to_string())?.get(&policy.name) {
        return Ok(p.clone());
    }
    let crate_name = policy.package().map_err(|e| format!("{e:#}"))?.name;
    let path = module_path(&crate_name).map_err(|e| format!("{e:#}"))?;
    let loaded = Policy::load(path).map_err(|e| format!("{e:#}"))?;
    cache
        .lock()
        .map_err(|e| e.to_string())?
        .insert(policy.name.clone(), loaded.clone());
    Ok(loaded)
}

/// The inputs of a policy's `test_data/`, by what they are.
#[derive(Debug, Default)]
pub struct TestData {
    /// Admission requests (AdmissionRequest or AdmissionReview files).
    pub requests: Vec<(PathBuf, Value)>,
    /// Settings files (any other mapping).
    pub settings: Vec<(PathBuf, Value)>,
    /// kwctl replay sessions (lists of `type: Exchange`).
    pub sessions: Vec<PathBuf>,
    /// `examples.txt` lines: request, settings (None for `-`), session.
    pub examples: Vec<(PathBuf, Option<PathBuf>, Option<PathBuf>)>,
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

pub fn test_data(policy: &PolicyDir) -> TestData {
    let mut files = Vec::new();
    files_under(&policy.dir.join("test_data"), &mut files);
    files.sort();
    let mut data = TestData::default();
    for path in files {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or_default();
        if !matches!(ext, "json" | "yml" | "yaml") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(value) = parse_json_or_yaml(&text) else {
            continue; // deliberately malformed fixtures
        };
        match &value {
            Value::Array(items) if items.iter().all(|i| i["type"] == "Exchange") => {
                data.sessions.push(path)
            }
            Value::Object(map)
                if map.get("request").is_some_and(Value::is_object)
                    || map.contains_key("operation") =>
            {
                if let Ok(request) = read_admission_request(&path) {
                    data.requests.push((path, request));
                }
            }
            Value::Object(_) => data.settings.push((path, value)),
            _ => {}
        }
    }
    if let Ok(text) = std::fs::read_to_string(policy.dir.join("examples.txt")) {
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let Some(request) = words.next().filter(|w| !w.starts_with('#')) else {
                continue;
            };
            let settings = words
                .next()
                .filter(|s| *s != "-")
                .map(|s| policy.dir.join(s));
            let session = words.next().map(|s| policy.dir.join(s));
            data.examples
                .push((policy.dir.join(request), settings, session));
        }
    }
    data
}

pub fn session(path: &Path) -> Option<ReplaySession> {
    ReplaySession::from_file(path).ok()
}

/// Collects per-policy failures and panics with all of them at the end.
#[derive(Default)]
pub struct Failures(Vec<String>);

impl Failures {
    pub fn add(&mut self, policy: &str, problem: impl std::fmt::Display) {
        self.0.push(format!("{policy}: {problem}"));
    }

    pub fn extend(&mut self, policy: &str, problems: impl IntoIterator<Item = String>) {
        for p in problems {
            self.add(policy, p);
        }
    }

    /// The value of `result`, or `None` with its error recorded against `policy`.
    pub fn ok<T>(&mut self, policy: &str, result: Result<T, impl std::fmt::Display>) -> Option<T> {
        result.map_err(|e| self.add(policy, e)).ok()
    }

    /// Runs `check` of `policy`: the problems it found, or the error that stopped it.
    pub fn record(&mut self, policy: &str, check: impl FnOnce() -> anyhow::Result<Vec<String>>) {
        match check() {
            Ok(problems) => self.extend(policy, problems),
            Err(e) => self.add(policy, format!("{e:#}")),
        }
    }

    pub fn assert_none(self, what: &str) {
        assert!(
            self.0.is_empty(),
            "{what}: {} problem(s)\n  {}",
            self.0.len(),
            self.0.join("\n  ")
        );
    }
}

/// One evaluation of a policy on its test_data: what was run, and the outcome.
pub type Runs = Vec<(String, Evaluation)>;

/// Every policy evaluated on its test_data: the examples.txt lines, and each
/// request with each valid settings file (and `{}`), without and with each
/// replay session. Computed once per policy.
pub fn runs(policy: &PolicyDir) -> Result<Arc<Runs>, String> {
    static CACHE: OnceLock<Mutex<BTreeMap<String, Arc<Runs>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(r) = cache.lock().map_err(|e| e.to_string())?.get(&policy.name) {
        return Ok(Arc::clone(r));
    }
    let module = module(policy)?;
    let data = test_data(policy);
    let rel = |p: &std::path::Path| {
        p.strip_prefix(&policy.dir)
            .unwrap_or(p)
            .display()
            .to_string()
    };
    let mut settings: Vec<(String, Value)> = vec![("{}".into(), json!({}))];
    for (path, value) in &data.settings {
        if module
            .validate_settings(value)
            .map(|v| v.valid)
            .unwrap_or(false)
        {
            settings.push((rel(path), value.clone()));
        }
    }
    let mut combos: Vec<(String, Value, Value, Option<std::path::PathBuf>)> = Vec::new();
    for (request, settings_path, session_path) in &data.examples {
        let Ok(r) = gpu_e2e::read_admission_request(request) else {
            continue;
        };
        let s = match settings_path {
            Some(p) => match gpu_e2e::read_settings(p) {
                Ok(s) => s,
                Err(_) => continue,
            },
            None => json!({}),
        };
        combos.push((
            format!("examples.txt: {}", rel(request)),
            r,
            s,
            session_path.clone(),
        ));
    }
    for (request_path, request) in &data.requests {
        for (settings_name, s) in &settings {
            let sessions = std::iter::once(None).chain(data.sessions.iter().map(Some));
            for session_path in sessions {
                combos.push((
                    format!(
                        "{} with {settings_name}{}",
                        rel(request_path),
                        session_path
                            .map(|p| format!(" and {}", rel(p)))
                            .unwrap_or_default()
                    ),
                    request.clone(),
                    s.clone(),
                    session_path.cloned(),
                ));
            }
        }
    }
    combos.truncate(4000);
    let mut out = Vec::new();
    for (label, request, s, session_path) in combos {
        if !module
            .validate_settings(&s)
            .map(|v| v.valid)
            .unwrap_or(false)
        {
            continue;
        }
        let replay = session_path.as_deref().and_then(session);
        match module.evaluate(&request, &s, replay) {
            Ok(e) => out.push((label, e)),
            Err(e) => return Err(format!("{label}: harness error {e:#}")),
        }
    }
    let out = Arc::new(out);
    cache
        .lock()
        .map_err(|e| e.to_string())?
        .insert(policy.name.clone(), Arc::clone(&out));
    Ok(out)
}

/// The Kubernetes resource a host call reads.
pub fn resource_of(call: &HostCall) -> Option<ContextAwareResource> {
    let payload: Value = serde_json::from_str(&call.payload).ok()?;
    Some(ContextAwareResource {
        api_version: payload["api_version"].as_str()?.to_string(),
        kind: payload["kind"].as_str()?.to_string(),
    })
}

/// The RBAC verbs the policy was seen to need on each resource, over its test_data runs.
pub fn observed_verbs(
    policy: &PolicyDir,
) -> Result<BTreeMap<ContextAwareResource, BTreeSet<String>>, String> {
    let mut out: BTreeMap<ContextAwareResource, BTreeSet<String>> = BTreeMap::new();
    for (_, evaluation) in runs(policy)?.iter() {
        for call in evaluation
            .host_calls
            .iter()
            .filter(|c| c.namespace == "kubernetes")
        {
            if let Some(r) = resource_of(call) {
                out.entry(r).or_default().extend(
                    verbs_for_operation(&call.operation)
                        .iter()
                        .map(|v| v.to_string()),
                );
            }
        }
    }
    Ok(out)
}
