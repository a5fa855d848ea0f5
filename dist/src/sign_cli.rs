//! `gpu-dist keygen | sign | verify`: cosign signatures of pushed policies ([`gpu_dist::sign`]).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use gpu_dist::oci::{self, Transport};
use gpu_dist::sign;
use gpu_e2e::flags::read_flags;

pub const USAGE: &str = "\
       gpu-dist keygen [--output-key cosign.key] [--output-pub cosign.pub]
       gpu-dist sign --key <private key> [-a key=value]... [--plain-http|--https] <uri>...
       gpu-dist verify --key <public key> [-a key=value]... [--plain-http|--https] <uri>...
       gpu-dist verification-config --key <public key> [--owner <name>] [-a key=value]... [--config-map <namespace>]

keygen       a new ECDSA P-256 key pair: the private key in cosign's encrypted format
             (password from COSIGN_PASSWORD, empty when unset; file mode 0600), the
             public key as PEM (what kwctl verify -k and kind: pubKey take). Refuses to
             overwrite a file.
sign         sign each pushed policy by its manifest digest (a tag is resolved to the
             digest it points to now) in cosign's layout: the signature image
             <repo>:sha256-<hex>.sig; -a adds annotations to the signed payload. Keys:
             PKCS#8 or SEC1 PEM, or cosign's encrypted format (COSIGN_PASSWORD)
verify       check each policy has a signature by the public key over the digest it
             names (as kwctl verify -k does), with the -a annotations
verification-config
             print the verification config (policy-server --verification-path, kwctl
             verify --verification-config-path) requiring a signature by the key, with
             the -a annotations; --config-map wraps it in the ConfigMap
             gpu-admission-verification of that namespace (PolicyServer
             spec.verificationConfig)";

#[derive(Default)]
struct Args {
    positionals: Vec<String>,
    key: Option<PathBuf>,
    annotations: Vec<String>,
    output_key: Option<PathBuf>,
    output_pub: Option<PathBuf>,
    owner: Option<String>,
    config_map: Option<String>,
    transport: Transport,
}

fn parse(rest: &[String]) -> Result<Args> {
    let mut args = Args::default();
    read_flags(rest, &mut args.positionals, |flag, value| {
        match flag {
            "-k" | "--key" => args.key = Some(value.get()?.into()),
            "-a" | "--annotation" => args.annotations.push(value.get()?),
            "--output-key" => args.output_key = Some(value.get()?.into()),
            "--output-pub" => args.output_pub = Some(value.get()?.into()),
            "--owner" => args.owner = Some(value.get()?),
            "--config-map" => args.config_map = Some(value.get()?),
            other => args.transport = crate::transport(other)?,
        }
        Ok(())
    })?;
    Ok(args)
}

fn write_new(path: &PathBuf, text: &str, private: bool) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    if private {
        options.mode(0o600);
    }
    let mut file = options.open(path).with_context(|| {
        format!(
            "cannot create {} (an existing key is never overwritten)",
            path.display()
        )
    })?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

fn keygen(args: Args) -> Result<()> {
    if !args.positionals.is_empty() {
        bail!("keygen takes no arguments");
    }
    let key_path = args.output_key.unwrap_or_else(|| "cosign.key".into());
    let pub_path = args.output_pub.unwrap_or_else(|| "cosign.pub".into());
    let key = sign::generate_key();
    let password = std::env::var(sign::PASSWORD_ENV).unwrap_or_default();
    let encrypted = sign::encrypt_cosign_key(&key, password.as_bytes())?;
    let public = sign::public_key_pem(&key)?;
    write_new(&key_path, &encrypted, true)?;
    write_new(&pub_path, &public, false)?;
    eprintln!(
        "private key written to {} ({}), public key to {}",
        key_path.display(),
        if password.is_empty() {
            format!("no password: set {} to encrypt it", sign::PASSWORD_ENV)
        } else {
            format!("encrypted with {}", sign::PASSWORD_ENV)
        },
        pub_path.display()
    );
    Ok(())
}

fn annotations(args: &Args) -> Result<BTreeMap<String, String>> {
    sign::parse_annotations(&args.annotations)
}

fn sign_command(args: Args) -> Result<()> {
    let key_path = args.key.clone().context("sign needs --key <private key>")?;
    if args.positionals.is_empty() {
        bail!("sign needs at least one <uri>");
    }
    let key = sign::load_private_key(&key_path)?;
    let annotations = annotations(&args)?;
    for uri in &args.positionals {
        let signed = oci::block_on(sign::sign(&key, uri, &annotations, args.transport))??;
        eprintln!(
            "{} {} -> {}",
            if signed.already_signed {
                "already signed"
            } else {
                "signed"
            },
            signed.immutable_ref,
            signed.signature_ref
        );
        println!("{}", signed.immutable_ref);
    }
    Ok(())
}

fn verify_command(args: Args) -> Result<bool> {
    let key_path = args
        .key
        .clone()
        .context("verify needs --key <public key>")?;
    if args.positionals.is_empty() {
        bail!("verify needs at least one <uri>");
    }
    let text = std::fs::read_to_string(&key_path)
        .with_context(|| format!("cannot read {}", key_path.display()))?;
    let key = sign::read_public_key(&text).with_context(|| key_path.display().to_string())?;
    let required = annotations(&args)?;
    let mut ok = true;
    for uri in &args.positionals {
        match oci::block_on(sign::verify(&key, uri, &required, args.transport))? {
            Ok(v) => println!("verified {}", v.immutable_ref),
            Err(e) => {
                ok = false;
                println!("FAILED {e:#}");
            }
        }
    }
    Ok(ok)
}

fn verification_config_command(args: Args) -> Result<()> {
    let key_path = args
        .key
        .clone()
        .context("verification-config needs --key <public key>")?;
    if !args.positionals.is_empty() {
        bail!("verification-config takes no arguments");
    }
    let text = std::fs::read_to_string(&key_path)
        .with_context(|| format!("cannot read {}", key_path.display()))?;
    let owner = args.owner.as_deref().unwrap_or("gpu-admission");
    let config = sign::verification_config(&text, owner, &annotations(&args)?)
        .with_context(|| key_path.display().to_string())?;
    match args.config_map.as_deref() {
        Some(namespace) => print!("{}", sign::verification_config_map(&config, namespace)),
        None => print!("{config}"),
    }
    Ok(())
}

/// Runs `command` (keygen, sign, verify or verification-config) on `rest`.
pub fn main(command: &str, rest: &[String]) -> ExitCode {
    let args = match parse(rest) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e:#}\n\nUsage:\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let outcome = match command {
        "keygen" => keygen(args).map(|()| true),
        "sign" => sign_command(args).map(|()| true),
        "verification-config" => verification_config_command(args).map(|()| true),
        _ => verify_command(args),
    };
    crate::exit_code(outcome)
}
