//! The command line: `gpu-admission check [OPTIONS] PATH...`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use gpu_e2e::flags::{FlagError, read_flags};
use serde_json::Value;

use crate::cluster::Snapshot;
use crate::evaluate::{Checker, Cluster, Row, Verdict};
use crate::input::{InputError, read_manifests};
use crate::policies::{Modules, default_policy_files, read_policy_manifests};
use crate::report::{Summary, json, junit, table};
use crate::request::{UserInfo, identity};
use crate::{EXIT_ADMITTED, EXIT_BAD_INPUT, EXIT_DENIED};

/// The help text.
pub const USAGE: &str = "\
Usage: gpu-admission check [OPTIONS] PATH...

Checks Kubernetes manifests against the gpu-admission policies before they reach a cluster:
each object is sent to the policies that judge it, as the API server would (a CREATE, or an
UPDATE when --old has its previous version), mutating policies first with their patch applied.

PATH is a YAML or JSON file (several documents, Lists), a folder of them (recursively), or -
for standard input (helm template ... | gpu-admission check -).

Options:
  -p, --policies FILE     ClusterAdmissionPolicy / ClusterAdmissionPolicyGroup manifest to run
                          (repeatable; default: deploy/cluster-admission-policy-group.yaml and
                          policies/gpu-pool-routing-policy/examples/cluster-admission-policy.yaml
                          under --root)
      --root DIR          the gpu-admission repository: default policy manifests and the modules
                          built there (policies/<name>/annotated-policy.wasm or policy.wasm) for
                          registry:// references to its policies (default: .)
      --modules DIR       built modules to use first for the repository's policies, named as cargo
                          names them (target/wasm32-wasip1/release: <crate>.wasm)
      --pull              pull every registry:// module, the repository's own policies too
      --old PATH          previous versions of the manifests: objects found there (same kind,
                          namespace and name) are checked as UPDATEs (repeatable)
      --snapshot FILE     the cluster for context-aware policies: objects as `kubectl get -o yaml`
                          writes them (repeatable)
      --kubeconfig FILE   the cluster for context-aware policies: a live cluster, read-only
                          (the get and list calls policy-server makes)
      --replay-host-capabilities-interactions FILE
                          the cluster for context-aware policies: a kwctl session (recorded host
                          calls, replayed in order from the start for each object)
  -n, --namespace NS      namespace of objects that name none (default: default)
      --user NAME         userInfo.username of the requests (default: gpu-admission-check)
  -o, --output FORMAT     table (default), json or junit
      --warnings-as-errors
                          a policy warning fails like a denial (exit status 1)
  -h, --help              print this help

Without --snapshot or --kubeconfig, a policy that reads the cluster for an object is not
evaluated: its line says `skipped` and which call it needed.

Exit status: 0 everything admitted, 1 a denial, 2 bad input (the file and line are named).";

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Output {
    /// For people.
    #[default]
    Table,
    /// `{"results", "summary"}`.
    Json,
    /// JUnit XML.
    Junit,
}

/// Parsed options of `check`.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Manifests to check.
    pub paths: Vec<String>,
    /// Policy manifests (empty: the defaults).
    pub policies: Vec<PathBuf>,
    /// The repository.
    pub root: Option<PathBuf>,
    /// Built modules (`<crate>.wasm`).
    pub modules: Option<PathBuf>,
    /// Pull every registry module.
    pub pull: bool,
    /// Previous versions.
    pub old: Vec<String>,
    /// Snapshot files.
    pub snapshots: Vec<String>,
    /// A kubeconfig.
    pub kubeconfig: Option<PathBuf>,
    /// A kwctl session.
    pub replay: Option<PathBuf>,
    /// Default namespace.
    pub namespace: Option<String>,
    /// userInfo.username.
    pub user: Option<String>,
    /// Output format.
    pub output: Output,
    /// Warnings fail.
    pub warnings_as_errors: bool,
}

/// Parses `args` (without the program name). `Ok(None)` is a request for help.
pub fn parse(args: &[String]) -> Result<Option<Options>, String> {
    let mut args = args.iter();
    match args.next().map(String::as_str) {
        Some("check") => {}
        Some("-h" | "--help" | "help") | None => return Ok(None),
        Some(other) => return Err(format!("unknown command {other:?}: the command is `check`")),
    }
    let mut o = Options::default();
    let mut help = false;
    read_flags(args.as_slice(), &mut o.paths, |flag, value| {
        match flag {
            "-h" | "--help" => help = true,
            "-p" | "--policies" => o.policies.push(value.get()?.into()),
            "--root" => o.root = Some(value.get()?.into()),
            "--modules" => o.modules = Some(value.get()?.into()),
            "--pull" => o.pull = true,
            "--old" => o.old.push(value.get()?),
            "--snapshot" => o.snapshots.push(value.get()?),
            "--kubeconfig" => o.kubeconfig = Some(value.get()?.into()),
            "--replay-host-capabilities-interactions" => o.replay = Some(value.get()?.into()),
            "-n" | "--namespace" => o.namespace = Some(value.get()?),
            "--user" => o.user = Some(value.get()?),
            "-o" | "--output" => {
                o.output = match value.get()?.as_str() {
                    "table" => Output::Table,
                    "json" => Output::Json,
                    "junit" => Output::Junit,
                    other => {
                        return Err(FlagError::new(format!(
                            "--output {other:?}: expected table, json or junit"
                        )));
                    }
                }
            }
            "--warnings-as-errors" => o.warnings_as_errors = true,
            other => return Err(FlagError::unknown(other)),
        }
        Ok(())
    })?;
    if help {
        return Ok(None);
    }
    if o.paths.is_empty() {
        return Err("no PATH to check (a file, a folder, or - for standard input)".into());
    }
    let clusters = usize::from(!o.snapshots.is_empty())
        + usize::from(o.kubeconfig.is_some())
        + usize::from(o.replay.is_some());
    if clusters > 1 {
        return Err(
            "--snapshot, --kubeconfig and --replay-host-capabilities-interactions are exclusive: give one cluster"
                .into(),
        );
    }
    Ok(Some(o))
}

fn bad_input(err: &mut dyn Write, errors: &[InputError]) -> i32 {
    for e in errors {
        let _ = writeln!(err, "error: {e}");
    }
    EXIT_BAD_INPUT
}

/// Runs the command: the exit status.
pub fn run(args: &[String], stdin: &mut dyn Read, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let options = match parse(args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            let _ = writeln!(out, "{USAGE}");
            return EXIT_ADMITTED;
        }
        Err(e) => {
            let _ = writeln!(err, "error: {e}\n\n{USAGE}");
            return EXIT_BAD_INPUT;
        }
    };
    check(&options, stdin, out, err)
}

/// `check` with parsed options.
pub fn check(o: &Options, stdin: &mut dyn Read, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let manifests = match read_manifests(&o.paths, stdin) {
        Ok(m) => m,
        Err(errors) => return bad_input(err, &errors),
    };
    let default_namespace = o.namespace.clone().unwrap_or_else(|| "default".into());
    let old_objects: BTreeMap<(String, String, String, String), Value> = if o.old.is_empty() {
        BTreeMap::new()
    } else {
        match read_manifests(&o.old, &mut std::io::empty()) {
            Ok(old) => old
                .into_iter()
                .map(|m| (identity(&m.object, &default_namespace), m.object))
                .collect(),
            Err(errors) => return bad_input(err, &errors),
        }
    };
    let cluster = if !o.snapshots.is_empty() {
        match Snapshot::from_files(&o.snapshots) {
            Ok(s) => Cluster::Snapshot(Arc::new(s)),
            Err(errors) => return bad_input(err, &errors),
        }
    } else if let Some(kubeconfig) = &o.kubeconfig {
        match crate::kube::LiveCluster::from_kubeconfig(kubeconfig) {
            Ok(live) => Cluster::Live(Arc::new(live)),
            Err(e) => {
                return bad_input(
                    err,
                    &[InputError::whole_file(kubeconfig.display().to_string(), e)],
                );
            }
        }
    } else if let Some(session) = &o.replay {
        match gpu_e2e::ReplaySession::from_file(session) {
            Ok(s) => Cluster::Replay(Arc::new(crate::cluster::Replay::new(s))),
            Err(e) => {
                return bad_input(
                    err,
                    &[InputError::whole_file(
                        session.display().to_string(),
                        format!("{e:#}"),
                    )],
                );
            }
        }
    } else {
        Cluster::None
    };
    let root = o.root.clone().unwrap_or_else(|| PathBuf::from("."));
    let policy_files = if o.policies.is_empty() {
        default_policy_files(&root)
    } else {
        o.policies.clone()
    };
    let mut modules = Modules::new(&root, o.modules.as_deref(), o.pull);
    let policies = match read_policy_manifests(&policy_files, &mut modules) {
        Ok(p) => p,
        Err(errors) => return bad_input(err, &errors),
    };
    let monitor: Vec<String> = policies
        .iter()
        .filter(|p| p.mode == "monitor")
        .map(|p| p.name.clone())
        .collect();
    let checker = Checker {
        policies,
        cluster,
        default_namespace: default_namespace.clone(),
        user: UserInfo {
            username: o
                .user
                .clone()
                .unwrap_or_else(|| UserInfo::default().username),
            ..UserInfo::default()
        },
    };
    let mut rows: Vec<Row> = Vec::new();
    for (i, manifest) in manifests.iter().enumerate() {
        let old = old_objects.get(&identity(&manifest.object, &default_namespace));
        rows.extend(checker.check(manifest, old, i));
    }
    let summary = Summary::of(&rows, manifests.len());
    let text = match o.output {
        Output::Table => {
            let mut text = String::new();
            if matches!(checker.cluster, Cluster::None) {
                text.push_str("No cluster given (--snapshot or --kubeconfig): policies that read the cluster are skipped where they need it.\n");
            }
            if !monitor.is_empty() {
                text.push_str(&format!(
                    "{} in monitor mode: checked as protect mode would decide.\n",
                    monitor.join(", ")
                ));
            }
            text + &table(&rows, &summary)
        }
        Output::Json => json(&rows, &summary),
        Output::Junit => junit(&rows, &summary, o.warnings_as_errors),
    };
    let _ = out.write_all(text.as_bytes());
    let denied = rows.iter().any(|r| r.verdict == Verdict::Denied);
    let warned = o.warnings_as_errors && rows.iter().any(|r| !r.warnings.is_empty());
    if denied || warned {
        EXIT_DENIED
    } else {
        EXIT_ADMITTED
    }
}
