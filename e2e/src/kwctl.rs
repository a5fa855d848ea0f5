//! Kubewarden's real `kwctl`, run beside the harness and the manifest checker to compare
//! their answers: finding it, running `kwctl run` on a case of `test_data/cases.yml`, and
//! reading its AdmissionResponse in the terms compared.
//!
//! kwctl runs with the offline Sigstore trust root of the project's shared folder
//! ([`shared_dir`]) and its caches in a directory of the run ([`Kwctl::home`]), so each
//! module is compiled once.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use crate::cases::{Case, policies_dir};
use crate::modules::workspace_root;

/// What kwctl prints before the message when `validate_settings` rejects the settings.
pub const INVALID_SETTINGS: &str = "Provided settings are not valid: ";

/// How to get kwctl, for the SKIPPED line.
pub const HOW_TO_GET_KWCTL: &str = "../shared/kubewarden/install.sh DIR, then add DIR to PATH";

/// At most this many kwctl processes at once (the machines are small).
pub const MAX_PARALLEL: usize = 2;

/// kwctl: `$KWCTL` if set (`none`: not used), else the first `kwctl` on PATH.
pub fn find_kwctl() -> Option<PathBuf> {
    match std::env::var_os("KWCTL") {
        Some(v) if v == "none" => return None,
        Some(v) if !v.is_empty() => {
            let p = PathBuf::from(&v);
            if p.components().count() > 1 {
                return p.is_file().then_some(p);
            }
            return search_path(&v.to_string_lossy());
        }
        _ => {}
    }
    search_path("kwctl")
}

fn search_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The project's shared folder: `$GPU_ADMISSION_SHARED`, or `../shared` beside the clone.
pub fn shared_dir() -> PathBuf {
    match std::env::var_os("GPU_ADMISSION_SHARED") {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => workspace_root().join("../shared"),
    }
}

/// Writes a line the test harness does not capture (a SKIPPED notice must be seen).
pub fn notice(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// A kwctl installation and the per-run state its processes share.
#[derive(Debug, Clone)]
pub struct Kwctl {
    /// The executable.
    pub exe: PathBuf,
    /// `--sigstore-trust-config` (offline).
    pub trust_config: PathBuf,
    /// Its XDG cache, config and data folders live here.
    pub home: PathBuf,
}

impl Kwctl {
    /// kwctl at `exe`, with the shared folder's offline trust root and `home` for its state.
    pub fn new(exe: PathBuf, home: PathBuf) -> Result<Self> {
        let trust_config = shared_dir().join("kubewarden/offline-sigstore-trust-config.json");
        if !trust_config.is_file() {
            bail!(
                "{} not found: kwctl needs the offline Sigstore trust root of the project's shared folder (set GPU_ADMISSION_SHARED to it)",
                trust_config.display()
            );
        }
        Ok(Self {
            exe,
            trust_config,
            home,
        })
    }

    /// kwctl for a test, as [`find_kwctl`] finds it, its state under `kwctl/` in a new
    /// [`TempDir::new`]`(tag)` (returned with it, for the test's own files). Without kwctl, the
    /// test's `SKIPPED: kwctl is not on PATH, so {not_done} (to get it: ...)` notice is printed
    /// and `None` returned; without the trust root, it panics.
    pub fn for_test(tag: &str, not_done: &str) -> Option<(Self, TempDir)> {
        let Some(exe) = find_kwctl() else {
            notice(&format!(
                "SKIPPED: kwctl is not on PATH, so {not_done} (to get it: {HOW_TO_GET_KWCTL})"
            ));
            return None;
        };
        let dir = TempDir::new(tag);
        let kwctl = Self::new(exe, dir.0.join("kwctl")).unwrap_or_else(|e| panic!("{e:#}"));
        Some((kwctl, dir))
    }

    /// A kwctl command with `args`, its state under [`Kwctl::home`].
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.exe);
        command
            .arg("--no-color")
            .args(args)
            .env("XDG_CACHE_HOME", self.home.join("cache"))
            .env("XDG_CONFIG_HOME", self.home.join("config"))
            .env("XDG_DATA_HOME", self.home.join("data"))
            .env_remove("KUBECONFIG")
            // As deployed: with a backtrace enabled, policy-evaluator appends it to the host
            // errors it gives the guest.
            .env_remove("RUST_BACKTRACE")
            .env_remove("RUST_LIB_BACKTRACE")
            .stdin(Stdio::null());
        command
    }

    /// Runs kwctl with `args`.
    pub fn output(&self, args: &[&str]) -> Result<Output> {
        self.command(args)
            .output()
            .with_context(|| format!("cannot run {} {}", self.exe.display(), args.join(" ")))
    }

    /// `kwctl run` of one case on `module`; the policy directory is the working directory.
    pub fn run_case(&self, module: &Path, case: &Case) -> Result<Output> {
        self.run(
            module,
            &policies_dir().join(&case.policy),
            Path::new(&case.request),
            case.settings.as_deref().map(Path::new),
            case.session.as_deref().map(Path::new),
        )
        .with_context(|| format!("cannot run kwctl for {}", case.label()))
    }

    /// `kwctl run` of `request` with `settings` on `module` in `dir`; with a replay session,
    /// `--allow-context-aware` (the module's `contextAwareResources` granted).
    pub fn run(
        &self,
        module: &Path,
        dir: &Path,
        request: &Path,
        settings: Option<&Path>,
        session: Option<&Path>,
    ) -> Result<Output> {
        let request = request.to_string_lossy();
        let mut args = vec!["run", "--request-path", &request];
        let settings = settings.map(|s| s.to_string_lossy());
        if let Some(settings) = &settings {
            args.extend(["--settings-path", settings]);
        }
        let session = session.map(|s| s.to_string_lossy());
        if let Some(session) = &session {
            args.extend([
                "--allow-context-aware",
                "--replay-host-capabilities-interactions",
                session,
            ]);
        }
        let trust = self.trust_config.to_string_lossy();
        let module = module.to_string_lossy();
        args.extend(["--sigstore-trust-config", &trust, &module]);
        self.command(&args)
            .current_dir(dir)
            .output()
            .with_context(|| format!("cannot run kwctl {}", args.join(" ")))
    }
}

/// A temporary directory removed when dropped.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// `$TMPDIR/gpu-e2e-<tag>-<pid>`, empty.
    pub fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("gpu-e2e-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("cannot create a temporary directory");
        Self(dir)
    }

    /// Writes `contents` to the file `name` in the directory and returns its path; panics when
    /// it cannot (for tests).
    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A process's output as text, without the trailing newline.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).trim_end().to_string()
}

/// A value as text for a message, cut at 2,000 characters.
pub fn shorten(v: Option<&Value>) -> String {
    let s = v.map_or("(absent)".to_string(), Value::to_string);
    if s.len() > 2000 {
        let head: String = s.chars().take(2000).collect();
        format!("{head}... ({} bytes)", s.len())
    } else {
        s
    }
}

/// What one evaluation gave, in the terms compared.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The policy ran; the response's compared fields.
    Response(BTreeMap<&'static str, Value>),
    /// `validate_settings` rejected the settings with this message.
    InvalidSettings(String),
}

/// The fields of an `AdmissionResponse` (as JSON) that must agree, the patch decoded.
pub fn response_fields(response: &Value) -> Result<BTreeMap<&'static str, Value>> {
    let patch = match response.get("patch") {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(b64)) => {
            let bytes = STANDARD.decode(b64).context("patch is not base64")?;
            serde_json::from_slice(&bytes).context("patch is not JSON")?
        }
        Some(other) => bail!("patch is not a string: {other}"),
    };
    let field = |v: Option<&Value>| v.cloned().unwrap_or(Value::Null);
    Ok(BTreeMap::from([
        ("uid", field(response.get("uid"))),
        ("allowed", field(response.get("allowed"))),
        ("status.code", field(response.pointer("/status/code"))),
        ("status.message", field(response.pointer("/status/message"))),
        ("patchType", field(response.get("patchType"))),
        ("patch", patch),
        ("warnings", field(response.get("warnings"))),
        ("auditAnnotations", field(response.get("auditAnnotations"))),
    ]))
}

/// What kwctl's process says: the response on stdout, or the settings rejection.
pub fn kwctl_outcome(output: &Output) -> Result<Outcome> {
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    if !output.status.success() {
        let all = format!("{stderr}\n{stdout}");
        if let Some(at) = all.find(INVALID_SETTINGS) {
            let message = all[at + INVALID_SETTINGS.len()..]
                .lines()
                .next()
                .unwrap_or_default()
                .trim()
                .to_string();
            return Ok(Outcome::InvalidSettings(message));
        }
        bail!("kwctl run failed ({}): {stderr}{stdout}", output.status);
    }
    let response: Value = serde_json::from_str(&stdout)
        .or_else(|_| {
            stdout
                .lines()
                .rev()
                .find(|l| l.trim_start().starts_with('{'))
                .map_or_else(
                    || serde_json::from_str::<Value>(""),
                    serde_json::from_str::<Value>,
                )
        })
        .with_context(|| format!("kwctl run printed no AdmissionResponse: {stdout}"))?;
    Ok(Outcome::Response(response_fields(&response)?))
}

/// Runs `jobs` through `work` on at most [`MAX_PARALLEL`] threads, in order of `jobs`.
pub fn in_parallel<T: Sync, R: Send>(jobs: &[T], work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    let workers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, MAX_PARALLEL);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(job) = jobs.get(i) else { break };
                    let result = work(job);
                    results
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)[i] = Some(result);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

/// The first case of each policy first: kwctl compiles a module into the shared wasmtime
/// cache on its first run, so the others find it compiled.
pub fn first_of_each_policy_first(cases: Vec<Case>) -> Vec<Case> {
    let mut seen = BTreeSet::new();
    let (first, rest): (Vec<Case>, Vec<Case>) = cases
        .into_iter()
        .partition(|c| seen.insert(c.policy.clone()));
    first.into_iter().chain(rest).collect()
}
