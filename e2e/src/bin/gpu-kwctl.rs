//! `gpu-kwctl`: `kwctl run` (and a minimal `kwctl annotate`) for local modules,
//! on the gpu-e2e harness.
//!
//! ```text
//! gpu-kwctl run [--request-path FILE|-] [--settings-path FILE] [--settings-json JSON]
//!               [--replay-host-capabilities-interactions FILE] [--allow-context-aware]
//!               <module.wasm>
//! gpu-kwctl annotate --metadata-path metadata.yml [--usage-path README.md]
//!                    --output-path OUT <module.wasm>   (output = kwctl annotate's)
//! ```
//!
//! `run` exit status: 0 when the policy ran (accepted or rejected; one JSON
//! `AdmissionResponse` line on stdout), 1 for invalid settings
//! (`Provided settings are not valid: <message>` on stderr), 2 for usage errors,
//! unreadable inputs and modules that cannot be loaded.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use gpu_e2e::annotate;
use gpu_e2e::flags::{FlagError, Value as FlagValue, read_flags};
use gpu_e2e::{
    ContextAwareAccess, Policy, ReplaySession, admission_request_from_str, read_settings,
};
use serde_json::Value;

const USAGE: &str = "\
Usage: gpu-kwctl run [OPTIONS] <module.wasm>
       gpu-kwctl annotate -m <metadata.yml> [-u <README.md>] -o <output.wasm> <module.wasm>

Evaluates an admission request against a local Kubewarden policy module,
like `kwctl run`, and prints the AdmissionResponse as one JSON line.

Options:
  -r, --request-path <FILE>      AdmissionRequest or AdmissionReview, JSON or YAML ('-' = stdin)
  -s, --settings-path <FILE>     policy settings, YAML or JSON
      --settings-json <JSON>     policy settings as a JSON string
      --replay-host-capabilities-interactions <FILE>
                                 serve host capabilities from a kwctl session file
      --allow-context-aware      grant the resources listed in the module's
                                 io.kubewarden.metadata contextAwareResources
                                 (an unannotated module gets every resource,
                                 with a warning; kwctl would grant none)
  -h, --help                     print this help

annotate embeds metadata.yml in the io.kubewarden.metadata custom section as
`kwctl annotate` does: policy-evaluator's Metadata as JSON, with protocolVersion
and the usage file as annotation io.kubewarden.policy.usage, after the same
validation (and warnings about undeclared host capabilities).

Exit status: 0 accepted or rejected, 1 invalid settings, 2 usage or input errors.";

/// Parsed `run` arguments.
#[derive(Debug, Default)]
struct RunArgs {
    request_path: Option<String>,
    settings_path: Option<PathBuf>,
    settings_json: Option<String>,
    replay_path: Option<PathBuf>,
    allow_context_aware: bool,
    module: Option<PathBuf>,
}

/// Parsed `annotate` arguments.
#[derive(Debug, Default)]
struct AnnotateArgs {
    metadata_path: Option<PathBuf>,
    usage_path: Option<PathBuf>,
    output_path: Option<PathBuf>,
    module: Option<PathBuf>,
}

enum Command {
    Help,
    Run(RunArgs),
    Annotate(AnnotateArgs),
}

/// The one module of a command line: the last of `positionals`; any before it is an error.
fn one_module(mut positionals: Vec<String>) -> Result<Option<PathBuf>> {
    let module = positionals.pop();
    if let Some(extra) = positionals.first() {
        bail!("unexpected argument {extra:?}: only one module can be given");
    }
    Ok(module.map(PathBuf::from))
}

/// A subcommand's arguments: its flags, taken one at a time, and its one module.
trait Subcommand: Default {
    /// Takes `flag` and its value; a flag the subcommand does not have is an error.
    fn flag(&mut self, flag: &str, value: FlagValue<'_>) -> Result<(), FlagError>;
    /// Where the module goes.
    fn module(&mut self) -> &mut Option<PathBuf>;
}

impl Subcommand for RunArgs {
    fn flag(&mut self, flag: &str, value: FlagValue<'_>) -> Result<(), FlagError> {
        match flag {
            "-r" | "--request-path" => self.request_path = Some(value.get()?),
            "-s" | "--settings-path" => self.settings_path = Some(value.get()?.into()),
            "--settings-json" => self.settings_json = Some(value.get()?),
            "--replay-host-capabilities-interactions" => {
                self.replay_path = Some(value.get()?.into());
            }
            "--allow-context-aware" => self.allow_context_aware = true,
            other => return Err(FlagError::unknown(other)),
        }
        Ok(())
    }

    fn module(&mut self) -> &mut Option<PathBuf> {
        &mut self.module
    }
}

impl Subcommand for AnnotateArgs {
    fn flag(&mut self, flag: &str, value: FlagValue<'_>) -> Result<(), FlagError> {
        let path = match flag {
            "-m" | "--metadata-path" => &mut self.metadata_path,
            "-u" | "--usage-path" => &mut self.usage_path,
            "-o" | "--output-path" => &mut self.output_path,
            other => return Err(FlagError::unknown(other)),
        };
        *path = Some(value.get()?.into());
        Ok(())
    }

    fn module(&mut self) -> &mut Option<PathBuf> {
        &mut self.module
    }
}

/// A subcommand's flags (`-h`/`--help` aside) and its one module; `None` when help is asked
/// for.
fn read_subcommand<A: Subcommand>(args: &[String]) -> Result<Option<A>> {
    let mut parsed = A::default();
    let mut modules = Vec::new();
    let mut help = false;
    read_flags(args, &mut modules, |flag, value| match flag {
        "-h" | "--help" => {
            help = true;
            Ok(())
        }
        _ => parsed.flag(flag, value),
    })?;
    if help {
        return Ok(None);
    }
    *parsed.module() = one_module(modules)?;
    Ok(Some(parsed))
}

fn parse_args(args: &[String]) -> Result<Command> {
    let Some((subcommand, rest)) = args.split_first() else {
        bail!("missing subcommand");
    };
    match subcommand.as_str() {
        "-h" | "--help" | "help" => Ok(Command::Help),
        "run" => {
            let Some(run) = read_subcommand::<RunArgs>(rest)? else {
                return Ok(Command::Help);
            };
            if run.module.is_none() {
                bail!("missing <module.wasm>");
            }
            if run.settings_path.is_some() && run.settings_json.is_some() {
                bail!("--settings-path and --settings-json cannot be used together");
            }
            Ok(Command::Run(run))
        }
        "annotate" => Ok(read_subcommand(rest)?.map_or(Command::Help, Command::Annotate)),
        other => bail!("unknown subcommand {other:?} (only `run` and `annotate` are supported)"),
    }
}

/// Outcome of `run` that is not an input error.
enum RunOutcome {
    Evaluated,
    InvalidSettings(String),
}

fn run(args: RunArgs) -> Result<RunOutcome> {
    let module = args.module.context("missing <module.wasm>")?;

    let request_text = match args.request_path.as_deref() {
        None => bail!("--request-path is required"),
        Some("-") => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("cannot read the request from stdin")?;
            text
        }
        Some(path) => {
            std::fs::read_to_string(path).with_context(|| format!("cannot read request {path}"))?
        }
    };
    let request = admission_request_from_str(&request_text).context("invalid request")?;

    let settings = match (&args.settings_path, &args.settings_json) {
        (Some(path), _) => read_settings(path)?,
        (None, Some(json)) => serde_json::from_str(json).context("cannot parse --settings-json")?,
        (None, None) => Value::Object(Default::default()),
    };

    let replay = args
        .replay_path
        .as_ref()
        .map(ReplaySession::from_file)
        .transpose()?;

    let policy = Policy::load(&module)?;
    // Like kwctl: no access without --allow-context-aware, and with it the
    // contextAwareResources of the embedded metadata. Unlike kwctl, an unannotated
    // module (what `make build` produces) is granted everything: there is no list
    // to check it against, and kwctl would simply deny every call.
    let access = match (args.allow_context_aware, policy.metadata()) {
        (false, _) => ContextAwareAccess::none(),
        (true, Some(metadata)) => ContextAwareAccess::from_metadata(Some(metadata)),
        (true, None) => {
            eprintln!(
                "WARN {} has no io.kubewarden.metadata section: granting access to every Kubernetes resource (kwctl would grant none; annotate the module to check its contextAwareResources)",
                module.display()
            );
            ContextAwareAccess::Unrestricted
        }
    };
    let policy = policy.with_context_aware_access(access);

    let validation = policy.validate_settings(&settings)?;
    if !validation.valid {
        return Ok(RunOutcome::InvalidSettings(
            validation.message.unwrap_or_default(),
        ));
    }

    let evaluation = policy.evaluate(&request, &settings, replay)?;
    if !evaluation.unconsumed_exchanges.is_empty() {
        eprintln!(
            "WARN Some of the recorded exchanges have not been replayed: {:?}",
            evaluation
                .unconsumed_exchanges
                .iter()
                .map(|e| &e.request)
                .collect::<Vec<_>>()
        );
    }
    println!("{}", serde_json::to_string(&evaluation.response)?);
    Ok(RunOutcome::Evaluated)
}

/// `annotate`, like `kwctl annotate` ([`gpu_e2e::annotate`]): the warnings kwctl
/// prints go to stderr, the annotated module to `--output-path`.
fn annotate_module(args: AnnotateArgs) -> Result<()> {
    let module = args.module.context("missing <module.wasm>")?;
    let metadata_path = args.metadata_path.context("--metadata-path is required")?;
    let output = args.output_path.context("--output-path is required")?;
    let bytes = std::fs::read(&module)
        .with_context(|| format!("cannot read module {}", module.display()))?;
    let text = std::fs::read_to_string(&metadata_path)
        .with_context(|| format!("cannot read metadata {}", metadata_path.display()))?;
    let usage = args
        .usage_path
        .as_ref()
        .map(|path| {
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read usage file {}", path.display()))
        })
        .transpose()?;
    let annotated = annotate::annotate_module(
        &module.display().to_string(),
        &bytes,
        &text,
        usage.as_deref(),
    )
    .with_context(|| format!("cannot annotate with {}", metadata_path.display()))?;
    for warning in annotated.warnings() {
        eprintln!("WARN {warning}");
    }
    std::fs::write(&output, annotated.module)
        .with_context(|| format!("cannot write {}", output.display()))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = match parse_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e:#}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match command {
        Command::Help => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Command::Run(args) => match run(args) {
            Ok(RunOutcome::Evaluated) => ExitCode::SUCCESS,
            Ok(RunOutcome::InvalidSettings(message)) => {
                eprintln!("Provided settings are not valid: {message}");
                ExitCode::from(1)
            }
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::from(2)
            }
        },
        Command::Annotate(args) => match annotate_module(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::from(2)
            }
        },
    }
}
