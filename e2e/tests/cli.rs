//! `gpu-kwctl run` on the fixture's files: output and exit codes like kwctl.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::{fixture_metadata, test_data};
use gpu_e2e::module_path;
use gpu_e2e::wasm_sections::annotate;
use serde_json::{Value, json};

fn built_module() -> String {
    module_path("fixture-policy").unwrap().display().to_string()
}

/// The fixture annotated with its metadata.yml, as `kwctl annotate` would.
fn annotated_module() -> String {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let bytes = std::fs::read(module_path("fixture-policy").unwrap()).unwrap();
        let annotated = annotate(&bytes, &fixture_metadata()).unwrap();
        let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "fixture-policy-annotated-{}.wasm",
            std::process::id()
        ));
        std::fs::write(&path, annotated).unwrap();
        path
    })
    .display()
    .to_string()
}

fn data(name: &str) -> String {
    test_data(name).display().to_string()
}

fn gpu_kwctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpu-kwctl"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout_json(out: &Output) -> Value {
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    assert_eq!(text.lines().count(), 1, "one JSON line expected: {text:?}");
    serde_json::from_str(&text).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Fails unless gpu-kwctl's stderr says `text`.
fn assert_stderr_has(out: &Output, text: &str) {
    let err = stderr(out);
    assert!(err.contains(text), "{err}");
}

/// `gpu-kwctl run` of the fixture on the Pod of team-a with the settings file `settings`, named
/// with `flag` (`-s` or `--settings-path`).
fn run_with_settings(flag: &str, settings: &str) -> Output {
    let (req, settings) = (data("pod_in_team_a.json"), data(settings));
    gpu_kwctl(&["run", "-r", &req, flag, &settings, &built_module()])
}

/// `gpu-kwctl run` of the Pod of team-a with `{"lookupNamespace": true}`, the Namespace read
/// from the session file (`--allow-context-aware` when `allow`); kwctl exits 0 whatever the
/// verdict.
fn run_lookup(module: &str, session: &str, allow: bool) -> Output {
    let (req, session) = (data("pod_in_team_a.json"), data(session));
    let mut args = vec![
        "run",
        "-r",
        &req,
        "--settings-json",
        r#"{"lookupNamespace": true}"#,
    ];
    if allow {
        args.push("--allow-context-aware");
    }
    args.extend(["--replay-host-capabilities-interactions", &session, module]);
    let out = gpu_kwctl(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    out
}

#[test]
fn accept_prints_the_response_and_exits_0() {
    let module = built_module();
    let req = data("pod_in_team_a.json");
    let out = gpu_kwctl(&["run", "--request-path", &req, &module]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "{\"uid\":\"1299d386-525b-4032-98ae-1949f69f9cfc\",\"allowed\":true,\"auditAnnotations\":null,\"warnings\":null}\n"
    );
}

#[test]
fn reject_exits_0_with_the_message() {
    let out = run_with_settings("--settings-path", "settings_required_label.yml");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout_json(&out),
        json!({"uid": "1299d386-525b-4032-98ae-1949f69f9cfc", "allowed": false,
               "status": {"message": "missing required label team"},
               "auditAnnotations": null, "warnings": null})
    );
}

#[test]
fn mutation_from_settings_json_and_admission_review() {
    let module = built_module();
    let req = data("admission_review.json");
    let out = gpu_kwctl(&[
        "run",
        "--request-path",
        &req,
        "--settings-json",
        r#"{"addLabel":{"key":"team","value":"ml"}}"#,
        &module,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let response: gpu_e2e::AdmissionResponse = serde_json::from_value(stdout_json(&out)).unwrap();
    assert_eq!(response.uid, "0d5d1c5e-2b7f-4c55-a3d8-6e9f0a1b2c3d");
    assert_eq!(response.patch_type.as_deref(), Some("JSONPatch"));
    assert_eq!(
        response.patch_ops().unwrap(),
        vec![json!({"op": "add", "path": "/metadata/labels", "value": {"team": "ml"}})]
    );
}

#[test]
fn request_from_stdin() {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpu-kwctl"))
        .args(["run", "--request-path", "-", &built_module()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let text = std::fs::read(test_data("pod_with_team_label.json")).unwrap();
    child.stdin.take().unwrap().write_all(&text).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout_json(&out)["uid"],
        "8c2f5b8e-3d6a-4b1e-9f2c-7a1d0e5b4c3a"
    );
    assert_eq!(stdout_json(&out)["allowed"], true);
}

#[test]
fn invalid_settings_exit_1() {
    let out = run_with_settings("-s", "settings_invalid.yml");
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert_eq!(
        stderr(&out).trim_end(),
        "Provided settings are not valid: requiredLabel: must not be empty"
    );
}

/// `gpu-kwctl run --allow-context-aware` of the annotated fixture on the Pod of team-a with
/// settings_lookup_namespace.yml, the host calls answered from `session`; `short` spells the
/// request and settings flags `-r` and `-s`. kwctl exits 0 whatever the verdict.
fn run_replayed(session: &str, short: bool) -> Output {
    let (req, settings) = (
        data("pod_in_team_a.json"),
        data("settings_lookup_namespace.yml"),
    );
    let (session, module) = (data(session), annotated_module());
    let (r, s) = match short {
        true => ("-r", "-s"),
        false => ("--request-path", "--settings-path"),
    };
    let out = gpu_kwctl(&[
        "run",
        r,
        &req,
        s,
        &settings,
        "--allow-context-aware",
        "--replay-host-capabilities-interactions",
        &session,
        &module,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    out
}

#[test]
fn replay_success_with_allow_context_aware() {
    let out = run_replayed("session_namespace_allowed.yml", false);
    assert_eq!(stdout_json(&out)["allowed"], true);
    assert!(!stderr(&out).contains("WARN"), "{}", stderr(&out));
}

#[test]
fn replay_error_exchange_rejects() {
    let out = run_replayed("session_namespace_not_found.yml", true);
    let response = stdout_json(&out);
    assert_eq!(response["allowed"], false);
    assert_eq!(
        response["status"]["message"],
        "cannot read Namespace team-a: Host error: Callback evaluation failure: Cannot find v1/Namespace named 'team-a' inside of namespace 'None'"
    );
}

#[test]
fn without_allow_context_aware_access_is_denied() {
    let module = annotated_module();
    let out = run_lookup(&module, "session_namespace_allowed.yml", false);
    let message = stdout_json(&out)["status"]["message"].clone();
    assert_eq!(
        message,
        "cannot read Namespace team-a: Host error: Policy has not been granted access to Kubernetes v1/Namespace resources. The violation has been reported."
    );
    // The exchange was not consumed: kwctl-style warning on stderr.
    assert_stderr_has(
        &out,
        "WARN Some of the recorded exchanges have not been replayed",
    );
}

#[test]
fn unannotated_module_with_allow_context_aware_gets_every_resource() {
    let module = built_module();
    let out = run_lookup(&module, "session_namespace_allowed.yml", true);
    assert_eq!(stdout_json(&out)["allowed"], true);
    assert_stderr_has(&out, "has no io.kubewarden.metadata section");
}

#[test]
fn leftover_exchanges_are_warned_about() {
    let module = annotated_module();
    let out = run_lookup(&module, "session_two_exchanges.yml", true);
    assert_eq!(stdout_json(&out)["allowed"], true);
    assert_stderr_has(
        &out,
        "WARN Some of the recorded exchanges have not been replayed",
    );
    assert_stderr_has(&out, "KubernetesListResourceAll");
}

/// Fails unless gpu-kwctl exits 2 with each of `cases`' arguments, its stderr saying the text.
fn assert_exits_2_saying(cases: &[(&[&str], &str)]) {
    for (args, says) in cases {
        let out = gpu_kwctl(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_stderr_has(&out, says);
    }
}

#[test]
fn unreadable_files_exit_2() {
    let module = built_module();
    let m = module.as_str();
    let req = data("pod_in_team_a.json");
    let r = req.as_str();
    assert_exits_2_saying(&[
        (
            &["run", "-r", "/nonexistent/request.json", m],
            "cannot read request /nonexistent/request.json",
        ),
        (
            &[
                "run",
                "-r",
                r,
                "--replay-host-capabilities-interactions",
                "/nonexistent/session.yml",
                m,
            ],
            "cannot read replay session",
        ),
        (&["run", "-r", r, "/nonexistent/policy.wasm"], "make build"),
    ]);
}

#[test]
fn usage_errors_exit_2() {
    let module = built_module();
    let m = module.as_str();
    assert_exits_2_saying(&[
        (&["run", "--bogus", m], "unknown option --bogus"),
        (&["run", m, "-r"], "-r needs a value"),
        (
            &["run", "--allow-context-aware=yes", m],
            "--allow-context-aware takes no value",
        ),
        (&["run", m, m], "only one module can be given"),
        (&["annotate", "--bogus", m], "unknown option --bogus"),
        (&["run"], "missing <module.wasm>"),
    ]);

    let out = gpu_kwctl(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("--replay-host-capabilities-interactions")
    );
}

#[test]
fn annotate_embeds_metadata_with_protocol_version() {
    let output = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cli-annotate-{}.wasm", std::process::id()));
    let metadata = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixture-policy/metadata.yml");
    let usage = data("settings_required_label.yml"); // any text file will do
    let out = gpu_kwctl(&[
        "annotate",
        "-m",
        &metadata.display().to_string(),
        "-u",
        &usage,
        "-o",
        &output.display().to_string(),
        &built_module(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let annotated = std::fs::read(&output).unwrap();
    std::fs::remove_file(&output).unwrap();
    let mut embedded = gpu_e2e::read_kubewarden_metadata(&annotated).unwrap();
    assert_eq!(embedded["protocolVersion"], "v1");
    let annotations = embedded["annotations"].as_object_mut().unwrap();
    assert_eq!(
        annotations.remove("io.kubewarden.policy.usage"),
        Some(json!("requiredLabel: team\n"))
    );
    // kwctl's shape: policy-evaluator's Metadata, defaults filled in (the fixture
    // leaves out only policyType), in its field order.
    assert_eq!(embedded["policyType"], "kubernetes");
    embedded.as_object_mut().unwrap().remove("policyType");
    assert_eq!(embedded, fixture_metadata());
    let expected =
        gpu_e2e::metadata::Metadata::from_yaml(&std::fs::read_to_string(&metadata).unwrap())
            .unwrap()
            .annotated("v1", Some("requiredLabel: team\n"));
    assert_eq!(
        gpu_e2e::wasm_custom_section(&annotated, gpu_e2e::KUBEWARDEN_METADATA_SECTION),
        Some(expected.to_section_bytes().unwrap())
    );
}
