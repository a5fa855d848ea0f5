//! The real kwctl beside the harness. For every policy under `policies/`:
//!
//! - its release module (`<crate>.wasm` in [`gpu_e2e::wasm_dir`], the file `make build`
//!   copies to `policies/<p>/policy.wasm`; `make e2e` builds it first) annotated by
//!   `kwctl annotate -m metadata.yml -u README.md` and by the project's own annotate code
//!   ([`gpu_e2e::annotate`], behind `gpu-kwctl annotate`) carries the same
//!   `io.kubewarden.metadata` (as JSON, but for kwctl's own `io.kubewarden.kwctl`
//!   annotation), and neither warns;
//! - `kwctl inspect` reads back what `metadata.yml` says;
//! - every case of `policies/<p>/test_data/cases.yml` gives the same AdmissionResponse
//!   (allowed, status, decoded JSONPatch, warnings, audit annotations), or the same
//!   settings rejection, under `kwctl run` and under [`Policy`], from the same module and
//!   the same replay session.
//!
//! Needs `kwctl` on PATH (or `KWCTL=/path/to/kwctl`); without it the kwctl test prints
//! one `SKIPPED:` line and passes. The case lists are checked either way. kwctl is run by
//! [`gpu_e2e::kwctl`] (shared with the manifest checker's comparison): the offline Sigstore
//! trust root of the project's shared folder (`$REPO/../shared`, or `GPU_ADMISSION_SHARED`)
//! and its caches in a temporary directory shared by the run, so each module is compiled
//! once.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod common;

use anyhow::{Context, Result, anyhow, bail};
use common::cases::{Case, parse_cases, policies, policies_dir, read_cases};
use gpu_e2e::annotate::annotate_module;
use gpu_e2e::kwctl::{
    Kwctl, Outcome, first_of_each_policy_first, in_parallel, kwctl_outcome, notice,
    response_fields, shorten, text,
};
use gpu_e2e::metadata::{ANNOTATION_KWCTL_VERSION, ANNOTATION_TITLE, ANNOTATION_VERSION};
use gpu_e2e::{
    ContextAwareAccess, KUBEWARDEN_METADATA_SECTION, Policy, ReplaySession, module_path,
    read_admission_request, read_kubewarden_metadata, read_settings, wasm_custom_section,
};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------
// The case lists
// ---------------------------------------------------------------------------------------

/// What is wrong with a policy's case list: files that do not exist, and files of
/// `test_data/` no case uses (every request, settings file and replay session must be
/// run, so the list cannot fall behind the directory).
fn case_list_problems(policy: &str, cases: &[Case]) -> Vec<String> {
    let dir = policies_dir().join(policy);
    let mut problems = Vec::new();
    let mut listed = BTreeSet::new();
    for case in cases {
        let files = [
            Some(&case.request),
            case.settings.as_ref(),
            case.session.as_ref(),
        ];
        for file in files.into_iter().flatten() {
            if !dir.join(file).is_file() {
                problems.push(format!(
                    "{}: {file} does not exist in {}",
                    case.label(),
                    dir.display()
                ));
            }
            listed.insert(Path::new(file).to_path_buf());
        }
        if !case.request.ends_with(".json") {
            problems.push(format!(
                "{}: the request must be a .json file",
                case.label()
            ));
        }
    }
    let entries = std::fs::read_dir(dir.join("test_data")).expect("cannot list test_data/");
    let mut unlisted: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".json") || f.ends_with(".yml") || f.ends_with(".yaml"))
        .filter(|f| f != "cases.yml")
        .filter(|f| !listed.contains(&Path::new("test_data").join(f)))
        .collect();
    unlisted.sort();
    for file in unlisted {
        let hint = if file.ends_with(".json") {
            "a request no case runs: add `- request: test_data/<it>` with its settings and session"
        } else {
            "a settings file or replay session no case uses"
        };
        problems.push(format!(
            "{policy}/test_data/cases.yml does not list test_data/{file} ({hint})"
        ));
    }
    problems
}

#[test]
fn every_case_list_is_well_formed_and_covers_test_data() {
    let mut problems = Vec::new();
    for policy in policies() {
        match read_cases(&policy) {
            Ok(cases) => problems.extend(case_list_problems(&policy, &cases)),
            Err(e) => problems.push(format!("{e:#}")),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn case_list_checks_catch_rot() {
    // A malformed entry, a missing file and an unlisted request are each reported.
    for malformed in [
        "- settings: test_data/s.yml\n",
        "- request: test_data/a.json\n  sesion: test_data/s.yml\n",
        "- request: test_data/a.json\n  allowed: true\n  denied: no\n",
        "- request: test_data/a.json\n  readme: true\n",
        "[]\n",
    ] {
        assert!(parse_cases("p", malformed).is_err(), "{malformed}");
    }
    let policy = "gpu-labels-policy";
    let mut cases = read_cases(policy).unwrap();
    let once = cases
        .iter()
        .position(|c| cases.iter().filter(|d| d.request == c.request).count() == 1)
        .expect("a request listed once");
    let dropped = cases.remove(once).request;
    cases.push(Case {
        request: "test_data/no_such_request.json".into(),
        ..cases[0].clone()
    });
    let problems = case_list_problems(policy, &cases);
    for expected in [
        "test_data/no_such_request.json does not exist".to_string(),
        format!("does not list {dropped}"),
    ] {
        assert!(
            problems.iter().any(|p| p.contains(&expected)),
            "{expected:?} not reported: {problems:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// kwctl
// ---------------------------------------------------------------------------------------

/// Lines of kwctl's stderr that are warnings (its log lines carry the level).
fn warning_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| {
            let lower = l.to_ascii_lowercase();
            lower.contains("warn") || lower.contains("error")
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Annotate and inspect
// ---------------------------------------------------------------------------------------

/// A policy's module annotated by kwctl, with what the checks found wrong.
struct Annotated {
    policy: String,
    path: PathBuf,
    bytes: Vec<u8>,
}

/// The metadata a module carries, without kwctl's `io.kubewarden.kwctl` annotation.
fn metadata_without_kwctl_version(module: &[u8]) -> Option<Value> {
    let mut metadata = read_kubewarden_metadata(module)?;
    if let Some(annotations) = metadata
        .get_mut("annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(ANNOTATION_KWCTL_VERSION);
    }
    Some(metadata)
}

/// The top-level keys (and annotation keys) whose values differ, with both values.
fn differences(kwctl: &Value, ours: &Value) -> Vec<String> {
    let empty = serde_json::Map::new();
    let (a, b) = (
        kwctl.as_object().unwrap_or(&empty),
        ours.as_object().unwrap_or(&empty),
    );
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let mut out = Vec::new();
    for key in keys {
        let (x, y) = (a.get(key), b.get(key));
        if x == y {
            continue;
        }
        match (x, y) {
            (Some(x @ Value::Object(_)), Some(y @ Value::Object(_))) if key == "annotations" => {
                out.extend(
                    differences(x, y)
                        .into_iter()
                        .map(|d| format!("annotations.{d}")),
                );
            }
            _ => out.push(format!("{key}: kwctl {}, ours {}", shorten(x), shorten(y))),
        }
    }
    out
}

/// Annotates `policy`'s release module with kwctl and with our code, and compares.
fn annotate_and_compare(
    kwctl: &Kwctl,
    policy: &str,
    out_dir: &Path,
    problems: &mut Vec<String>,
) -> Result<Annotated> {
    let dir = policies_dir().join(policy);
    let module = module_path(policy)?;
    let output = out_dir.join(format!("{policy}.wasm"));
    let (metadata_path, readme_path) = (dir.join("metadata.yml"), dir.join("README.md"));
    let result = kwctl.output(&[
        "annotate",
        "-m",
        &metadata_path.to_string_lossy(),
        "-u",
        &readme_path.to_string_lossy(),
        "-o",
        &output.to_string_lossy(),
        &module.to_string_lossy(),
    ])?;
    let stderr = text(&result.stderr);
    if !result.status.success() {
        bail!("kwctl annotate failed ({}): {stderr}", result.status);
    }
    for line in warning_lines(&stderr) {
        problems.push(format!("{policy}: kwctl annotate warned: {line}"));
    }
    let bytes = std::fs::read(&output)?;

    let raw = std::fs::read(&module)?;
    let metadata_text = std::fs::read_to_string(&metadata_path)?;
    let readme = std::fs::read_to_string(&readme_path)?;
    let ours = annotate_module(policy, &raw, &metadata_text, Some(&readme))?;
    for warning in ours.warnings() {
        problems.push(format!("{policy}: our annotate warns: {warning}"));
    }
    let ours_json = read_kubewarden_metadata(&ours.module)
        .context("our annotated module has no readable io.kubewarden.metadata")?;
    let Some(section) = wasm_custom_section(&bytes, KUBEWARDEN_METADATA_SECTION) else {
        bail!("kwctl's annotated module has no {KUBEWARDEN_METADATA_SECTION} section");
    };
    let kwctl_json: Value =
        serde_json::from_slice(&section).context("kwctl's io.kubewarden.metadata is not JSON")?;
    if kwctl_json["annotations"][ANNOTATION_KWCTL_VERSION]
        .as_str()
        .is_none()
    {
        problems.push(format!(
            "{policy}: kwctl's metadata has no {ANNOTATION_KWCTL_VERSION} annotation: {}",
            shorten(Some(&kwctl_json["annotations"]))
        ));
    }
    let kwctl_json = metadata_without_kwctl_version(&bytes).unwrap_or(Value::Null);
    for difference in differences(&kwctl_json, &ours_json) {
        problems.push(format!(
            "{policy}: io.kubewarden.metadata differs between kwctl annotate and ours: {difference}"
        ));
    }
    Ok(Annotated {
        policy: policy.to_string(),
        path: output,
        bytes,
    })
}

/// `kwctl inspect` (and `-o yaml`) of an annotated module against metadata.yml.
fn inspect_and_compare(kwctl: &Kwctl, annotated: &Annotated, problems: &mut Vec<String>) {
    let policy = &annotated.policy;
    let result = (|| -> Result<()> {
        let metadata_path = policies_dir().join(policy).join("metadata.yml");
        let expected = read_settings(&metadata_path)?;
        let path = annotated.path.to_string_lossy();

        let yaml = kwctl.output(&["inspect", "-o", "yaml", &path])?;
        if !yaml.status.success() {
            bail!("kwctl inspect -o yaml failed: {}", text(&yaml.stderr));
        }
        let read_back: Value = yaml_serde::from_slice(&yaml.stdout)
            .context("kwctl inspect -o yaml printed no YAML")?;
        let read_back = inspected_metadata(&read_back)?;
        let fields: &[(&str, &[&str])] = &[
            ("title", &["annotations", ANNOTATION_TITLE]),
            ("version", &["annotations", ANNOTATION_VERSION]),
            ("mutating", &["mutating"]),
            ("rules", &["rules"]),
            ("contextAwareResources", &["contextAwareResources"]),
            ("hostCapabilities", &["hostCapabilities"]),
        ];
        for (name, path) in fields {
            let want = normalized(pointer(&expected, path), name);
            let got = normalized(pointer(read_back, path), name);
            if want != got {
                problems.push(format!(
                    "{policy}: kwctl inspect -o yaml reads back {name} {}, metadata.yml says {}",
                    shorten(Some(&got)),
                    shorten(Some(&want))
                ));
            }
        }

        let plain = kwctl.output(&["inspect", &path])?;
        if !plain.status.success() {
            bail!("kwctl inspect failed: {}", text(&plain.stderr));
        }
        let shown = text(&plain.stdout);
        let context_aware = pointer(&expected, &["contextAwareResources"])
            .and_then(Value::as_array)
            .is_some_and(|r| !r.is_empty());
        let lines = [
            (
                "title",
                pointer(&expected, &["annotations", ANNOTATION_TITLE]).cloned(),
            ),
            (
                ANNOTATION_VERSION,
                pointer(&expected, &["annotations", ANNOTATION_VERSION]).cloned(),
            ),
            ("mutating", expected.get("mutating").cloned()),
            ("context aware", Some(Value::Bool(context_aware))),
        ];
        for (label, want) in lines {
            let want = match want {
                Some(Value::String(s)) => s,
                Some(other) => other.to_string(),
                None => {
                    problems.push(format!("{policy}: metadata.yml has no {label}"));
                    continue;
                }
            };
            let got = shown_value(&shown, label);
            if got.as_deref() != Some(want.as_str()) {
                problems.push(format!(
                    "{policy}: kwctl inspect shows {label} {got:?}, metadata.yml says {want:?}"
                ));
            }
        }
        Ok(())
    })();
    if let Err(e) = result {
        problems.push(format!("{policy}: {e:#}"));
    }
}

/// The value kwctl inspect shows on the line `label: value` (or `label   value`).
fn shown_value(shown: &str, label: &str) -> Option<String> {
    shown.lines().find_map(|line| {
        let rest = line.trim_start().strip_prefix(label)?;
        let rest = rest.strip_prefix(':').unwrap_or(rest);
        (rest.is_empty() || rest.starts_with(char::is_whitespace)).then(|| rest.trim().to_string())
    })
}

/// The metadata in `kwctl inspect -o yaml`'s document (the whole document, or under a
/// `metadata` key).
fn inspected_metadata(doc: &Value) -> Result<&Value> {
    if doc.get("rules").is_some() {
        return Ok(doc);
    }
    match doc.get("metadata") {
        Some(m) if m.get("rules").is_some() => Ok(m),
        _ => Err(anyhow!(
            "kwctl inspect -o yaml printed no policy metadata: {}",
            shorten(Some(doc))
        )),
    }
}

fn pointer<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, key| v.get(*key))
}

/// Values as policy-evaluator holds them: absent context-aware resources are an empty
/// list, and the sets (context-aware resources, host capabilities) are sorted.
fn normalized(v: Option<&Value>, name: &str) -> Value {
    match (name, v) {
        ("contextAwareResources", None | Some(Value::Null)) => json!([]),
        ("contextAwareResources" | "hostCapabilities", Some(Value::Array(items))) => {
            let mut items = items.clone();
            items.sort_by_key(Value::to_string);
            items.dedup();
            Value::Array(items)
        }
        (_, Some(v)) => v.clone(),
        (_, None) => Value::Null,
    }
}

// ---------------------------------------------------------------------------------------
// kwctl run against the harness
// ---------------------------------------------------------------------------------------

/// The harness on the same module, request, settings and session, with kwctl's grants:
/// `--allow-context-aware` (with a session) gives the module's contextAwareResources,
/// no flag gives nothing.
fn harness_outcome(policy: &Policy, case: &Case) -> Result<Outcome> {
    let dir = policies_dir().join(&case.policy);
    let request = read_admission_request(dir.join(&case.request))?;
    let settings = match &case.settings {
        Some(file) => read_settings(dir.join(file))?,
        None => json!({}),
    };
    let session = case
        .session
        .as_ref()
        .map(|file| ReplaySession::from_file(dir.join(file)))
        .transpose()?;
    let access = match session {
        Some(_) => ContextAwareAccess::from_metadata(policy.metadata()),
        None => ContextAwareAccess::none(),
    };
    let policy = policy.clone().with_context_aware_access(access);
    let validation = policy.validate_settings(&settings)?;
    if !validation.valid {
        return Ok(Outcome::InvalidSettings(
            validation.message.unwrap_or_default(),
        ));
    }
    let response = policy.validate(&request, &settings, session)?;
    Ok(Outcome::Response(response_fields(&serde_json::to_value(
        &response,
    )?)?))
}

/// Every way the two outcomes differ, one line each.
fn outcome_mismatches(case: &Case, kwctl: &Outcome, ours: &Outcome) -> Vec<String> {
    let label = case.label();
    match (kwctl, ours) {
        (Outcome::Response(k), Outcome::Response(o)) => k
            .iter()
            .filter(|(field, value)| o.get(*field) != Some(*value))
            .map(|(field, value)| {
                format!(
                    "{label}: {field}: kwctl {}, harness {}",
                    shorten(Some(value)),
                    shorten(o.get(field))
                )
            })
            .collect(),
        (Outcome::InvalidSettings(k), Outcome::InvalidSettings(o)) if k == o => Vec::new(),
        _ => vec![format!(
            "{label}:\n    kwctl   {}\n    harness {}",
            describe(kwctl),
            describe(ours)
        )],
    }
}

fn describe(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Response(fields) => format!(
            "ran: {}",
            shorten(Some(&serde_json::to_value(fields).unwrap_or_default()))
        ),
        Outcome::InvalidSettings(m) => format!("invalid settings: {m}"),
    }
}

#[test]
fn kwctl_agrees_with_the_harness_on_every_policy() {
    let Some((kwctl, temp)) = Kwctl::for_test(
        "kwctl",
        "the policies were not checked against the real kwctl",
    ) else {
        return;
    };
    let mut problems = Vec::new();

    // Annotate and inspect, policy by policy.
    let mut modules = BTreeMap::new();
    let mut cases = Vec::new();
    for policy in policies() {
        match annotate_and_compare(&kwctl, &policy, &temp.0, &mut problems) {
            Ok(annotated) => {
                inspect_and_compare(&kwctl, &annotated, &mut problems);
                modules.insert(policy.clone(), annotated);
            }
            Err(e) => {
                problems.push(format!("{policy}: {e:#}"));
                continue;
            }
        }
        match read_cases(&policy) {
            Ok(list) => cases.extend(list),
            Err(e) => problems.push(format!("{e:#}")),
        }
    }

    // Every case under kwctl, a few at a time, then under the harness.
    let cases = first_of_each_policy_first(cases);
    let kwctl_outcomes = in_parallel(&cases, |case| {
        kwctl
            .run_case(&modules[&case.policy].path, case)
            .and_then(|output| kwctl_outcome(&output))
    });
    let mut harness_policies = BTreeMap::new();
    let mut compared = 0;
    for (case, kwctl_outcome) in cases.iter().zip(kwctl_outcomes) {
        let annotated = &modules[&case.policy];
        let policy = harness_policies
            .entry(case.policy.clone())
            .or_insert_with(|| Policy::from_bytes(&annotated.path, &annotated.bytes));
        let outcomes = policy
            .as_ref()
            .map_err(|e| anyhow!("the harness cannot load kwctl's annotated module: {e:#}"))
            .and_then(|policy| Ok((kwctl_outcome?, harness_outcome(policy, case)?)));
        match outcomes {
            Ok((kwctl, ours)) => {
                problems.extend(outcome_mismatches(case, &kwctl, &ours));
                compared += 1;
            }
            Err(e) => problems.push(format!("{}: {e:#}", case.label())),
        }
    }
    notice(&format!(
        "kwctl ({}): {} policies annotated and inspected, {compared} of {} cases compared with the harness, {} problems",
        kwctl.exe.display(),
        modules.len(),
        cases.len(),
        problems.len()
    ));
    assert!(
        problems.is_empty(),
        "kwctl and the harness disagree ({} problems):\n{}",
        problems.len(),
        problems.join("\n")
    );
}
