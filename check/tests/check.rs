//! `gpu-admission check` as a user runs it, with the repository's default policy manifests
//! (deploy/cluster-admission-policy-group.yaml and routing's example) on the release modules
//! (`make build-test-modules`, as `make e2e`). Most runs go through the command's own entry
//! point in this process (each module is then compiled once for all the tests); the
//! standard-input, exit-status and bad-input tests run the built binary.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn data(file: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file)
        .display()
        .to_string()
}

fn example(file: &str) -> String {
    root().join("examples").join(file).display().to_string()
}

/// What a run printed, and its exit status.
struct Output {
    status: Option<i32>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

fn args_with_defaults(args: &[&str]) -> Vec<String> {
    let mut all = vec![
        "check".to_string(),
        "--root".into(),
        root().display().to_string(),
        "--modules".into(),
        gpu_e2e::wasm_dir().display().to_string(),
    ];
    all.extend(args.iter().map(|a| a.to_string()));
    all
}

/// `gpu-admission check <args>` in this process, with the release modules.
fn check(args: &[&str]) -> Output {
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let status = gpu_admission::cli::run(
        &args_with_defaults(args),
        &mut std::io::empty(),
        &mut stdout,
        &mut stderr,
    );
    Output {
        status: Some(status),
        stdout,
        stderr,
    }
}

/// The built binary, `stdin` on its standard input.
fn binary(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpu-admission"))
        .args(args_with_defaults(args))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run gpu-admission");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    let status: ExitStatus = out.status;
    Output {
        status: status.code(),
        stdout: out.stdout,
        stderr: out.stderr,
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The command exits 2 (bad input) on `args` and `stdin`, saying `says` on standard error.
fn assert_bad_input(args: &[&str], stdin: &[u8], says: &str) {
    let o = binary(args, stdin);
    assert_eq!(o.status, Some(2), "{args:?}: {}", stderr(&o));
    assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
}

/// `--output json`'s results.
fn results(o: &Output) -> Vec<Value> {
    let report: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}): {}{}", stdout(o), stderr(o)));
    report["results"].as_array().unwrap().clone()
}

/// The rows about `object` (`Kind ns/name`) and `policy`.
fn rows<'a>(results: &'a [Value], object: &str, policy: &str) -> Vec<&'a Value> {
    results
        .iter()
        .filter(|r| r["object"] == object && r["policy"] == policy)
        .collect()
}

fn verdict(results: &[Value], object: &str, policy: &str) -> String {
    let found = rows(results, object, policy);
    assert_eq!(found.len(), 1, "{object} / {policy}: {results:#?}");
    found[0]["verdict"].as_str().unwrap().to_string()
}

#[test]
fn multi_document_file() {
    let o = check(&[&data("multi.yaml"), "-o", "json"]);
    assert_eq!(o.status, Some(1), "{}{}", stdout(&o), stderr(&o));
    let r = results(&o);
    let objects: Vec<&str> = r.iter().map(|r| r["object"].as_str().unwrap()).collect();
    for object in [
        "ConfigMap ml-research/settings",
        "Pod ml-research/unlabelled-gpu-pod",
        "Service ml-research/web",
    ] {
        assert!(
            objects.contains(&object),
            "{object} not checked: {objects:?}"
        );
    }
    let pod = "Pod ml-research/unlabelled-gpu-pod";
    assert_eq!(verdict(&r, pod, "gpu-admission/labels"), "denied");
    let message = rows(&r, pod, "gpu-admission/labels")[0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("workload-type"), "{message}");
    // Each object's rows name the line its document starts on.
    let lines: Vec<&str> = r
        .iter()
        .filter(|x| x["object"] == pod)
        .map(|x| x["file"].as_str().unwrap())
        .collect();
    assert!(
        lines.iter().all(|f| f.ends_with("multi.yaml:11")),
        "{lines:?}"
    );
}

#[test]
fn a_kind_no_policy_judges_is_admitted_and_said_so() {
    let o = check(&[&example("manifests/namespace-and-config.yaml")]);
    assert_eq!(o.status, Some(0), "{}{}", stdout(&o), stderr(&o));
    let table = stdout(&o);
    assert!(
        table.contains("no policy judges ConfigMap (v1 configmaps, CREATE): not in any policy's rules or selectors"),
        "{table}"
    );
    assert!(table.contains("no policy judges Namespace"), "{table}");
    assert!(table.contains("2 objects: 2 admitted, 0 denied"), "{table}");
}

#[test]
fn helm_rendered_file() {
    let o = check(&[&example("manifests/llm-serving.helm.yaml"), "-o", "json"]);
    let r = results(&o);
    for object in [
        "ServiceAccount ml-serving/chat-llm-serving",
        "Service ml-serving/chat-llm-serving",
        "Deployment ml-serving/chat-llm-serving",
        "HorizontalPodAutoscaler ml-serving/chat-llm-serving",
    ] {
        assert!(
            r.iter().any(|x| x["object"] == object),
            "{object} not checked: {r:#?}"
        );
    }
    let deployment = "Deployment ml-serving/chat-llm-serving";
    for member in ["labels", "vram_fit"] {
        assert_eq!(
            verdict(&r, deployment, &format!("gpu-admission/{member}")),
            "admitted",
            "{r:#?}"
        );
    }
    // Without a cluster, routing (the namespace's team label) is skipped, and says why.
    let routing = rows(&r, deployment, "gpu-pool-routing");
    assert_eq!(routing[0]["verdict"], "skipped", "{routing:#?}");
    assert!(
        routing[0]["message"]
            .as_str()
            .unwrap()
            .contains("get v1/Namespace ml-serving"),
        "{routing:#?}"
    );
}

#[test]
fn stdin_reads_like_a_file() {
    let file = example("manifests/llm-serving.helm.yaml");
    let text = std::fs::read(&file).unwrap();
    let from_stdin = binary(&["-", "-o", "json"], &text);
    let from_file = check(&[&file, "-o", "json"]);
    assert_eq!(from_stdin.status, from_file.status);
    let strip = |rows: Vec<Value>| -> Vec<Value> {
        rows.into_iter()
            .map(|mut r| {
                let line = r["file"]
                    .as_str()
                    .unwrap()
                    .rsplit(':')
                    .next()
                    .unwrap()
                    .to_string();
                r["file"] = Value::String(line);
                r
            })
            .collect()
    };
    let (a, b) = (results(&from_stdin), results(&from_file));
    assert!(
        a.iter()
            .all(|r| r["file"].as_str().unwrap().starts_with("<stdin>:"))
    );
    assert_eq!(strip(a), strip(b));
}

#[test]
fn a_folder_is_read_recursively() {
    let o = check(&[&example("manifests"), "-o", "json"]);
    let r = results(&o);
    let files: std::collections::BTreeSet<String> = r
        .iter()
        .map(|x| {
            let f = x["file"].as_str().unwrap();
            let name = f.rsplit_once(':').unwrap().0;
            Path::new(name)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let expected: std::collections::BTreeSet<String> = std::fs::read_dir(example("manifests"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files, expected);
    // A denial anywhere in the folder fails the run.
    assert_eq!(o.status, Some(1));
    assert_eq!(
        verdict(&r, "Pod ml-research/jupyter-alice", "gpu-admission/labels"),
        "denied"
    );
    assert_eq!(
        verdict(
            &r,
            "Deployment ml-serving/llama-70b",
            "gpu-admission/vram_fit"
        ),
        "denied"
    );
}

#[test]
fn the_capacity_gate_reads_a_snapshot() {
    let job = "Job ml-research/finetune-llama-8b";
    let manifest = example("manifests/finetune-job.json");
    // The run on the Job with the cluster flags `cluster`, its results and the gate's verdict.
    let judged = |cluster: &[&str]| {
        let mut args = vec![manifest.as_str()];
        args.extend_from_slice(cluster);
        args.extend(["-o", "json"]);
        let out = check(&args);
        let r = results(&out);
        let capacity = verdict(&r, job, "gpu-admission/capacity");
        (out, r, capacity)
    };
    let (busy, r, capacity) = judged(&["--snapshot", &example("cluster-snapshot.yaml")]);
    assert_eq!(capacity, "denied", "{r:#?}");
    let message = rows(&r, job, "gpu-admission/capacity")[0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("a100-batch"), "{message}");
    assert_eq!(busy.status, Some(1));

    let (_, r, capacity) = judged(&["--snapshot", &data("snapshot-idle.yaml")]);
    assert_eq!(capacity, "admitted", "{r:#?}");

    let (_, r, capacity) = judged(&[]);
    assert_eq!(capacity, "skipped", "{r:#?}");
}

#[test]
fn malformed_yaml_is_bad_input_with_file_and_line() {
    let o = binary(&[&data("malformed.yaml"), &example("manifests")], b"");
    assert_eq!(o.status, Some(2), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "error: {}:12: invalid YAML: did not find expected key, while parsing a block mapping",
            data("malformed.yaml")
        )),
        "{err}"
    );
    assert!(stdout(&o).is_empty(), "nothing is checked on bad input");

    assert_bad_input(
        &[&data("not-an-object.yaml")],
        b"",
        "not-an-object.yaml:5: a Kubernetes object (a mapping with apiVersion and kind) was expected, found a list",
    );
    assert_bad_input(
        &["no/such/file.yaml"],
        b"",
        "no/such/file.yaml: cannot read",
    );
    assert_bad_input(
        &["-"],
        b"apiVersion: v1\nkind: [\n",
        "<stdin>:3: invalid YAML",
    );
}

#[test]
fn an_old_version_makes_an_update() {
    let o = check(&[
        &example("manifests/notebook.yaml"),
        "--old",
        &data("old-notebook.yaml"),
        "-o",
        "json",
    ]);
    let r = results(&o);
    assert!(r.iter().all(|x| x["operation"] == "UPDATE"), "{r:#?}");
    let o = check(&[&example("manifests/notebook.yaml"), "-o", "json"]);
    assert!(results(&o).iter().all(|x| x["operation"] == "CREATE"));
}

#[test]
fn junit_for_ci() {
    let o = check(&[&data("multi.yaml"), "-o", "junit"]);
    assert_eq!(o.status, Some(1));
    let xml = stdout(&o);
    assert!(xml.starts_with("<?xml"), "{xml}");
    assert!(xml.contains("<testsuite name=\""), "{xml}");
    assert!(
        xml.contains("name=\"Pod ml-research/unlabelled-gpu-pod (CREATE): gpu-admission/labels\">\n      <failure message=\""),
        "{xml}"
    );
    assert_eq!(
        xml.matches("<testsuite ").count(),
        1,
        "one suite per file: {xml}"
    );
}

#[test]
fn usage_errors_are_bad_input() {
    assert_bad_input(&[], b"", "no PATH to check");
    assert_bad_input(
        &["x.yaml", "-o", "xml"],
        b"",
        "expected table, json or junit",
    );
    assert_bad_input(&["x.yaml", "--bogus"], b"", "error: unknown option --bogus");
    assert_bad_input(&["x.yaml", "--root"], b"", "error: --root needs a value");
    assert_bad_input(
        &["x.yaml", "--pull=yes"],
        b"",
        "error: --pull takes no value",
    );
}

#[test]
fn invalid_settings_in_a_policy_manifest_are_bad_input() {
    let dir = gpu_e2e::kwctl::TempDir::new("check-settings");
    let policy = dir.write(
        "policy.yaml",
        "apiVersion: policies.kubewarden.io/v1\nkind: ClusterAdmissionPolicy\nmetadata: {name: labels}\nspec:\n  module: registry://ghcr.io/gpu-admission/policies/gpu-labels-policy:v0.1.0\n  mutating: false\n  rules: [{apiGroups: [''], apiVersions: [v1], resources: [pods], operations: [CREATE]}]\n  settings: {maxGpusPerPod: -1}\n",
    );
    let o = check(&[
        &data("multi.yaml"),
        "--policies",
        &policy.display().to_string(),
    ]);
    assert_eq!(o.status, Some(2), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("policy.yaml:1: spec.settings are not valid for registry://ghcr.io/gpu-admission/policies/gpu-labels-policy:v0.1.0: "),
        "{}",
        stderr(&o)
    );
}

/// fakeapi (the project's fake API server, `../shared/tools/fakeapi`) serving `snapshot`
/// as JSON; stopped when dropped.
struct FakeApi {
    child: std::process::Child,
    kubeconfig: PathBuf,
    dir: PathBuf,
}

impl FakeApi {
    fn start(snapshot: &str) -> Option<Self> {
        let script = root().join("../shared/tools/fakeapi/fakeapi.py");
        if !script.is_file() {
            return None;
        }
        let dir =
            std::env::temp_dir().join(format!("gpu-admission-fakeapi-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // JSON: fakeapi reads it with Python's standard library alone.
        let objects: Vec<Value> =
            gpu_admission::input::read_manifests(&[snapshot.to_string()], &mut std::io::empty())
                .unwrap()
                .into_iter()
                .map(|m| m.object)
                .collect();
        let json = dir.join("snapshot.json");
        std::fs::write(
            &json,
            serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string(),
        )
        .unwrap();
        let kubeconfig = dir.join("kubeconfig");
        let mut child = Command::new("python3")
            .arg(&script)
            .arg("--snapshot")
            .arg(&json)
            .args(["--port", "0", "--kubeconfig-out"])
            .arg(&kubeconfig)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start fakeapi");
        // Ready when it logs that it listens (its socket is bound before); its log is then
        // drained on a thread so that it never blocks on a full pipe.
        let mut log = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut seen = String::new();
        loop {
            let mut line = String::new();
            let read = std::io::BufRead::read_line(&mut log, &mut line).unwrap();
            if read == 0 {
                let status = child.wait().unwrap();
                panic!("fakeapi exited ({status}) before listening: {seen}");
            }
            seen.push_str(&line);
            if line.contains("listening on") {
                break;
            }
        }
        std::thread::spawn(move || std::io::copy(&mut log, &mut std::io::sink()));
        Some(Self {
            child,
            kubeconfig,
            dir,
        })
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn a_live_cluster_gives_the_snapshots_verdicts() {
    let snapshot = example("cluster-snapshot.yaml");
    let Some(fakeapi) = FakeApi::start(&snapshot) else {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: ../shared/tools/fakeapi is not there, so --kubeconfig was not checked against an API server"
        );
        return;
    };
    let manifests = [
        example("manifests/finetune-job.json"),
        example("manifests/notebook.yaml"),
        example("manifests/llama-70b.yaml"),
    ];
    let mut args: Vec<&str> = manifests.iter().map(String::as_str).collect();
    args.extend(["-o", "json"]);
    let kubeconfig = fakeapi.kubeconfig.display().to_string();
    let live = check(&[&args[..], &["--kubeconfig", &kubeconfig]].concat());
    let offline = check(&[&args[..], &["--snapshot", &snapshot]].concat());
    assert_eq!(results(&live), results(&offline), "{}", stderr(&live));
    assert_eq!(live.status, Some(1));
    let r = results(&live);
    assert_eq!(
        verdict(
            &r,
            "Job ml-research/finetune-llama-8b",
            "gpu-admission/capacity"
        ),
        "denied"
    );
    // Routing read the Namespace's team label from the API server and stamped it.
    let routing = rows(&r, "Pod ml-research/jupyter-alice", "gpu-pool-routing");
    assert!(
        routing[0]["patch"]
            .as_array()
            .unwrap()
            .contains(&Value::from("add /metadata/labels/gpu-admission~1team")),
        "{routing:#?}"
    );
}
