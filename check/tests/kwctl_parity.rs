//! `gpu-admission check` against the real kwctl on every case of every policy's
//! `test_data/cases.yml`.
//!
//! Both run the policy's release module annotated by the project's `annotate` (the metadata
//! `kwctl annotate` embeds, checked in `e2e/tests/kwctl.rs`): kwctl's `--allow-context-aware`
//! grants its `contextAwareResources`, the checker's ClusterAdmissionPolicy the same list.
//!
//! For each case the checker gets what a user would give it: the request's object as a
//! manifest (and its oldObject as the old version for an UPDATE), a ClusterAdmissionPolicy
//! with the case's settings and the policy's `contextAwareResources`, and as the cluster
//! the snapshot the case's replay session shows (the objects its gets and lists returned)
//! or, when the session holds answers a snapshot cannot give (permission errors, image
//! registries), the session itself. kwctl runs the request the checker built, with the
//! same settings and the replay session. Verdict, message, patch and warnings must agree.
//!
//! Requests the checker never sends (DELETE, subresources such as `scale`) are counted and
//! named, not compared. Needs kwctl (see [`gpu_e2e::kwctl::find_kwctl`]); without it the
//! test prints `SKIPPED:` and passes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use gpu_admission::cluster::{Replay, Snapshot};
use gpu_admission::evaluate::{Checker, Cluster, Verdict};
use gpu_admission::input::Manifest;
use gpu_admission::policies::{Modules, read_policy_manifests};
use gpu_admission::request::{UserInfo, admission_request};
use gpu_e2e::cases::{Case, policies, policies_dir, read_cases};
use gpu_e2e::kwctl::{
    Kwctl, Outcome, first_of_each_policy_first, in_parallel, kwctl_outcome, notice, shorten,
};
use gpu_e2e::{ReplaySession, read_admission_request, read_settings};
use serde_json::{Value, json};

/// The uid the checker gives the request of the first object.
const UID: &str = "gpu-admission-check-0";

/// A case as the checker takes it.
struct Prepared {
    case: Case,
    /// The request the checker sends (and kwctl gets).
    request_file: PathBuf,
    /// The policy manifest.
    policy_file: PathBuf,
    object: Value,
    old: Option<Value>,
    namespace: String,
    user: UserInfo,
    /// The snapshot made from the session, or the session when none can be made.
    cluster: Cluster,
    through: &'static str,
}

/// Why a case is not something the checker sends, if it is not.
fn not_a_manifest(request: &Value) -> Option<String> {
    let operation = request["operation"].as_str().unwrap_or_default();
    if operation != "CREATE" && operation != "UPDATE" {
        return Some(format!("a {operation} request"));
    }
    if let Some(sub) = request["subResource"].as_str().filter(|s| !s.is_empty()) {
        return Some(format!("the {sub} subresource"));
    }
    let object = &request["object"];
    if !object["apiVersion"].is_string() || !object["kind"].is_string() {
        return Some("an object without apiVersion and kind".into());
    }
    if operation == "UPDATE" && !request["oldObject"].is_object() {
        return Some("an UPDATE without oldObject".into());
    }
    None
}

fn prepare(case: &Case, module: &Path, tmp: &Path, index: usize) -> Result<Prepared, String> {
    let dir = policies_dir().join(&case.policy);
    let original = read_admission_request(dir.join(&case.request)).map_err(|e| format!("{e:#}"))?;
    if let Some(reason) = not_a_manifest(&original) {
        return Err(reason);
    }
    let settings = match &case.settings {
        Some(f) => read_settings(dir.join(f)).map_err(|e| format!("{e:#}"))?,
        None => json!({}),
    };
    let metadata = gpu_dist::policies::PolicyDir {
        name: case.policy.clone(),
        dir: dir.clone(),
    }
    .metadata()
    .map_err(|e| format!("{e:#}"))?;
    // kwctl's --allow-context-aware (given with a session) grants the metadata's resources.
    let granted: Vec<Value> = match &case.session {
        Some(_) => metadata
            .context_aware_resources
            .iter()
            .map(|r| json!({"apiVersion": r.api_version, "kind": r.kind}))
            .collect(),
        None => vec![],
    };
    let policy = json!({
        "apiVersion": "policies.kubewarden.io/v1",
        "kind": "ClusterAdmissionPolicy",
        "metadata": {"name": case.policy},
        "spec": {
            "module": format!("file://{}", module.display()),
            "mutating": metadata.mutating,
            "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "operations": ["CREATE", "UPDATE"]}],
            "contextAwareResources": granted,
            "settings": settings,
        },
    });
    let policy_file = tmp.join(format!("policy-{index}.json"));
    std::fs::write(&policy_file, policy.to_string()).map_err(|e| e.to_string())?;
    let namespace = original["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    let user = UserInfo {
        username: original["userInfo"]["username"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        groups: original["userInfo"]["groups"]
            .as_array()
            .map(|g| {
                g.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
    };
    let object = original["object"].clone();
    let old = (original["operation"] == "UPDATE").then(|| original["oldObject"].clone());
    let request = admission_request(UID, &object, old.as_ref(), &namespace, &user);
    let request_file = tmp.join(format!("request-{index}.json"));
    std::fs::write(&request_file, request.to_string()).map_err(|e| e.to_string())?;
    let (cluster, through) = match &case.session {
        None => (Cluster::None, "no cluster"),
        Some(file) => {
            let session = ReplaySession::from_file(dir.join(file)).map_err(|e| format!("{e:#}"))?;
            match Snapshot::from_session(&session) {
                Some(snapshot) => (Cluster::Snapshot(Arc::new(snapshot)), "snapshot"),
                None => (Cluster::Replay(Arc::new(Replay::new(session))), "replay"),
            }
        }
    };
    Ok(Prepared {
        case: case.clone(),
        request_file,
        policy_file,
        object,
        old,
        namespace,
        user,
        cluster,
        through,
    })
}

/// What the checker says, in kwctl's terms (or why it refused the settings).
fn checker_outcome(
    p: &Prepared,
    modules: &mut Modules,
) -> Result<(bool, String, Vec<String>, Vec<String>), String> {
    let policies =
        read_policy_manifests(std::slice::from_ref(&p.policy_file), modules).map_err(|errors| {
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        })?;
    let checker = Checker {
        policies,
        cluster: p.cluster.clone(),
        default_namespace: p.namespace.clone(),
        user: p.user.clone(),
    };
    let manifest = Manifest {
        file: p.case.request.clone(),
        line: 1,
        object: p.object.clone(),
    };
    let rows = checker.check(&manifest, p.old.as_ref(), 0);
    let [row] = rows.as_slice() else {
        return Ok((
            false,
            format!("{} rows: {rows:?}", rows.len()),
            vec![],
            vec![],
        ));
    };
    if row.verdict == Verdict::Skipped {
        return Ok((false, format!("skipped: {}", row.message), vec![], vec![]));
    }
    Ok((
        row.verdict == Verdict::Admitted,
        row.message.clone(),
        row.patch.clone(),
        row.warnings.clone(),
    ))
}

fn kwctl_terms(
    fields: &std::collections::BTreeMap<&'static str, Value>,
) -> (bool, String, Vec<String>, Vec<String>) {
    let patch = fields["patch"]
        .as_array()
        .map(|ops| {
            ops.iter()
                .map(|op| {
                    format!(
                        "{} {}",
                        op["op"].as_str().unwrap_or("?"),
                        op["path"].as_str().unwrap_or("?")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let warnings = fields["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    (
        fields["allowed"] == true,
        fields["status.message"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        patch,
        warnings,
    )
}

/// The release module of `policy` annotated with its metadata.yml, written under `dir`.
fn annotate(policy: &str, dir: &Path) -> PathBuf {
    let raw =
        std::fs::read(gpu_e2e::module_path(policy).unwrap_or_else(|e| panic!("{e:#}"))).unwrap();
    let metadata =
        std::fs::read_to_string(policies_dir().join(policy).join("metadata.yml")).unwrap();
    let annotated = gpu_e2e::annotate::annotate_module(policy, &raw, &metadata, None)
        .unwrap_or_else(|e| panic!("{policy}: {e:#}"));
    let path = dir.join(format!("{policy}.wasm"));
    std::fs::write(&path, annotated.module).unwrap();
    path
}

#[test]
fn the_checker_agrees_with_kwctl_on_every_case() {
    let Some((kwctl, tmp)) = Kwctl::for_test(
        "check-kwctl",
        "gpu-admission check was not compared with the real kwctl",
    ) else {
        return;
    };
    let mut cases = Vec::new();
    for policy in policies() {
        cases.extend(read_cases(&policy).unwrap_or_else(|e| panic!("{e:#}")));
    }
    let cases = first_of_each_policy_first(cases);
    let mut prepared = Vec::new();
    let mut not_sent = Vec::new();
    let mut problems = Vec::new();
    let mut annotated = std::collections::BTreeMap::new();
    for (i, case) in cases.iter().enumerate() {
        let module = annotated
            .entry(case.policy.clone())
            .or_insert_with(|| annotate(&case.policy, &tmp.0))
            .clone();
        match prepare(case, &module, &tmp.0, i) {
            Ok(p) => prepared.push((p, module)),
            Err(reason) => not_sent.push(format!("{}: {reason}", case.label())),
        }
    }
    let kwctl_outcomes = in_parallel(&prepared, |(p, module)| {
        let dir = policies_dir().join(&p.case.policy);
        kwctl
            .run(
                module,
                &dir,
                &p.request_file,
                p.case.settings.as_deref().map(Path::new),
                p.case.session.as_deref().map(Path::new),
            )
            .and_then(|o| kwctl_outcome(&o))
    });
    let mut modules = Modules::new(&gpu_e2e::workspace_root(), None, false);
    let mut through = std::collections::BTreeMap::<&str, usize>::new();
    for ((p, _), kwctl) in prepared.iter().zip(kwctl_outcomes) {
        let label = format!("{} (checker cluster: {})", p.case.label(), p.through);
        let kwctl = match kwctl {
            Ok(k) => k,
            Err(e) => {
                problems.push(format!("{label}: kwctl: {e:#}"));
                continue;
            }
        };
        let ours = checker_outcome(p, &mut modules);
        *through.entry(p.through).or_default() += 1;
        match (&kwctl, ours) {
            (Outcome::InvalidSettings(message), Err(error)) => {
                if !error.contains(message.as_str()) {
                    problems.push(format!(
                        "{label}: settings refused, kwctl {message:?}, checker {error:?}"
                    ));
                }
            }
            (Outcome::Response(fields), Ok(ours)) => {
                let theirs = kwctl_terms(fields);
                let (allowed, message, patch, warnings) = &ours;
                let mut differs = Vec::new();
                if *allowed != theirs.0 {
                    differs.push("verdict");
                }
                // The checker's message for an admission is its first warning, if any.
                if !theirs.0 && *message != theirs.1 {
                    differs.push("message");
                }
                if *patch != theirs.2 {
                    differs.push("patch");
                }
                if *warnings != theirs.3 {
                    differs.push("warnings");
                }
                if !differs.is_empty() {
                    problems.push(format!(
                        "{label}: {} differ:\n    kwctl   {}\n    checker {ours:?}",
                        differs.join(", "),
                        shorten(Some(&serde_json::to_value(fields).unwrap_or_default()))
                    ));
                }
            }
            (kwctl, ours) => problems.push(format!(
                "{label}:\n    kwctl   {kwctl:?}\n    checker {ours:?}"
            )),
        }
    }
    notice(&format!(
        "gpu-admission check vs kwctl ({}): {} cases compared ({through:?}), {} not requests the checker sends:\n  {}",
        kwctl.exe.display(),
        prepared.len(),
        not_sent.len(),
        not_sent.join("\n  ")
    ));
    assert!(
        prepared.len() > not_sent.len(),
        "most cases are manifests the checker can send"
    );
    assert!(
        problems.is_empty(),
        "gpu-admission check and kwctl disagree ({} problems):\n{}",
        problems.len(),
        problems.join("\n")
    );
}
