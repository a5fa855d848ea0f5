//! `gpu-dist`: publish the gpu-admission policies without kwctl.
//!
//! ```text
//! gpu-dist push [-o json|text] [--force] [--plain-http|--https] <annotated.wasm> <[registry://]host/path/name:tag>
//! gpu-dist pull [--plain-http|--https] [-o <file>] <[registry://]host/path/name(:tag|@digest)>
//! gpu-dist artifacthub [--check] [--root <dir>] [--output-dir <dir>]
//! gpu-dist check [--root <dir>]
//! gpu-dist keygen | sign | verify | verification-config ...   (sign_cli.rs)
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail};
use gpu_dist::oci::{self, Transport};
use gpu_dist::policies::{PolicyDir, policy_license, workspace_policies};
use gpu_dist::{artifacthub, checks};
use gpu_e2e::flags::{FlagError, read_flags};
use gpu_e2e::wasm_scanner::scan_host_capabilities;

mod sign_cli;

const USAGE: &str = "\
Usage: gpu-dist push [-o json|text] [--force] [--plain-http|--https] <annotated.wasm> <uri>
       gpu-dist pull [--plain-http|--https] [-o <file>] <uri>
       gpu-dist artifacthub [--check] [--root <dir>] [--output-dir <dir>]
       gpu-dist check [--root <dir>]

push         publish an annotated policy module as a Kubewarden OCI artifact (like
             `kwctl push`) and print its immutable reference (registry/repo@sha256:...);
             -o json prints {\"immutable_ref\": ...} like `kwctl push -o json`
pull         fetch a policy by tag or digest (like `kwctl pull`), write the module
             to -o <file> (default: <name>.wasm) and print its manifest digest
artifacthub  write artifacthub/artifacthub-repo.yml and
             artifacthub/<policy>/<version>/{artifacthub-pkg.yml,README.md} from each
             policy's metadata.yml (like `kwctl scaffold artifacthub`); --check only
             reports files that are missing or out of date (exit 1)
check        check every policy's metadata.yml against Cargo.toml, kwctl and Artifact
             Hub, and against the host calls of its built module when it is built

<uri> is [registry://]host[:port]/path/name(:tag|@digest). Loopback registries
(localhost, 127.0.0.1, [::1]) use plain HTTP, others HTTPS, unless --plain-http or
--https is given. Credentials: OCI_REGISTRY_USERNAME and OCI_REGISTRY_PASSWORD
(HTTP basic auth), anonymous otherwise.";

/// Flags and positionals of one subcommand.
#[derive(Default)]
struct Args {
    positionals: Vec<String>,
    output: Option<String>,
    root: Option<PathBuf>,
    output_dir: Option<PathBuf>,
    transport: Transport,
    force: bool,
    check: bool,
}

fn parse(rest: &[String]) -> Result<Args> {
    let mut args = Args::default();
    read_flags(rest, &mut args.positionals, |flag, value| {
        match flag {
            "-o" | "--output" | "--output-path" => args.output = Some(value.get()?),
            "--root" => args.root = Some(value.get()?.into()),
            "--output-dir" => args.output_dir = Some(value.get()?.into()),
            "--force" => args.force = true,
            "--check" => args.check = true,
            other => args.transport = transport(other)?,
        }
        Ok(())
    })?;
    Ok(args)
}

/// `--plain-http` or `--https`; any other flag is unknown.
fn transport(flag: &str) -> Result<Transport, FlagError> {
    match flag {
        "--plain-http" => Ok(Transport::Http),
        "--https" => Ok(Transport::Https),
        other => Err(FlagError::unknown(other)),
    }
}

fn root(args: &Args) -> PathBuf {
    args.root.clone().unwrap_or_else(gpu_e2e::workspace_root)
}

fn push(args: Args) -> Result<()> {
    let [module, uri] = <[String; 2]>::try_from(args.positionals)
        .map_err(|_| anyhow!("push needs <annotated.wasm> and <uri>"))?;
    let json = match args.output.as_deref() {
        None | Some("text") => false,
        Some("json") => true,
        Some(other) => bail!("-o must be json or text, not {other}"),
    };
    let bytes = std::fs::read(&module).with_context(|| format!("cannot read {module}"))?;
    let started = Instant::now();
    let pushed = oci::block_on(oci::push(&bytes, &uri, args.transport, args.force))??;
    eprintln!(
        "pushed {module} ({} bytes) to {uri} in {} ms",
        bytes.len(),
        started.elapsed().as_millis()
    );
    if json {
        println!(
            "{}",
            serde_json::json!({ "immutable_ref": pushed.immutable_ref })
        );
    } else {
        println!("{}", pushed.immutable_ref);
    }
    Ok(())
}

fn pull(args: Args) -> Result<()> {
    let [uri] = <[String; 1]>::try_from(args.positionals)
        .map_err(|_| anyhow!("pull needs exactly one <uri>"))?;
    let started = Instant::now();
    let pulled = oci::block_on(oci::pull(&uri, args.transport))??;
    let output = match args.output {
        Some(o) => PathBuf::from(o),
        None => {
            let reference = oci::parse_reference(&uri)?;
            let name = reference
                .repository()
                .rsplit('/')
                .next()
                .unwrap_or("policy");
            PathBuf::from(format!("{name}.wasm"))
        }
    };
    std::fs::write(&output, &pulled.module)
        .with_context(|| format!("cannot write {}", output.display()))?;
    eprintln!(
        "pulled {uri} ({} bytes) to {} in {} ms",
        pulled.module.len(),
        output.display(),
        started.elapsed().as_millis()
    );
    println!("{}", pulled.manifest_digest);
    Ok(())
}

fn artifacthub_command(args: Args) -> Result<bool> {
    let root = root(&args);
    let dir = args.output_dir.unwrap_or_else(|| root.join("artifacthub"));
    let policies = workspace_policies(&root)?;
    let files = artifacthub::generate(&policies, &dir, &artifacthub::now_rfc3339()?)?;
    if args.check {
        let differences = artifacthub::differences(&dir, &files)?;
        for d in &differences {
            eprintln!("{d}");
        }
        if !differences.is_empty() {
            eprintln!("run `make artifacthub` and commit the result");
        }
        return Ok(differences.is_empty());
    }
    artifacthub::write(&dir, &files)?;
    for rel in files.keys() {
        println!("{}", dir.join(rel).display());
    }
    Ok(true)
}

fn check_policy(root: &std::path::Path, policy: &PolicyDir) -> Result<Vec<String>> {
    let package = policy.package()?;
    let license = policy_license(root, &package)?;
    let text = policy.metadata_text()?;
    let metadata = policy.metadata()?;
    let mut problems =
        checks::metadata_problems(&policy.name, &package, license.as_deref(), &text, &metadata);
    let module = gpu_e2e::wasm_dir().join(policy.module_file_name()?);
    if let Ok(bytes) = std::fs::read(&module) {
        let detected = scan_host_capabilities(&bytes)?;
        // What the module calls at run time and its protocol version need the
        // runtime: `make test` checks them.
        let findings = checks::module_problems(&metadata, &detected, &Default::default(), "v1");
        problems.extend(findings.problems);
    } else {
        eprintln!(
            "{}: {} is not built, host calls not checked",
            policy.name,
            module.display()
        );
    }
    Ok(problems)
}

fn check(args: Args) -> Result<bool> {
    let root = root(&args);
    let mut ok = true;
    for policy in workspace_policies(&root)? {
        match check_policy(&root, &policy) {
            Ok(problems) if problems.is_empty() => println!("ok    {}", policy.name),
            Ok(problems) => {
                ok = false;
                println!("FAIL  {}", policy.name);
                for p in problems {
                    println!("      {p}");
                }
            }
            Err(e) => {
                ok = false;
                println!("FAIL  {}: {e:#}", policy.name);
            }
        }
    }
    Ok(ok)
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, rest)) = argv.split_first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    if matches!(command.as_str(), "-h" | "--help" | "help") {
        println!("{USAGE}\n\n{}", sign_cli::USAGE);
        return ExitCode::SUCCESS;
    }
    if matches!(
        command.as_str(),
        "keygen" | "sign" | "verify" | "verification-config"
    ) {
        return sign_cli::main(command, rest);
    }
    let args = match parse(rest) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e:#}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let outcome = match command.as_str() {
        "push" => push(args).map(|()| true),
        "pull" => pull(args).map(|()| true),
        "artifacthub" => artifacthub_command(args),
        "check" => check(args),
        other => {
            eprintln!("error: unknown subcommand {other:?}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    exit_code(outcome)
}

/// The exit status of a command's outcome: 0 when it passed, 1 when it failed or could not run
/// (the error printed).
fn exit_code(outcome: Result<bool>) -> ExitCode {
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
