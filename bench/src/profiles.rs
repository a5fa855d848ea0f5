//! Module sizes, and the release-profile experiment: every policy built with other
//! `opt-level`, LTO, codegen-units, panic and strip settings (cargo profiles defined on
//! the command line with `--config`, each in its own `<target dir>/wasm32-wasip1/<profile>`,
//! so the shipped `release` outputs are never touched), and the shipped modules passed
//! through `wasm-opt` (Debian's binaryen). For each: size, compile time, and `validate`
//! latency on one representative request per policy, with a check that the answers are
//! the same as the shipped module's.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// What a variant's modules are built from.
#[derive(Debug, Clone, Copy)]
pub enum Base {
    /// The shipped modules (`make build`, the root `[profile.release]`).
    Shipped,
    /// `cargo build --profile <name>` with `[profile.<name>]` = release + these settings.
    Profile {
        name: &'static str,
        settings: &'static [(&'static str, &'static str)],
    },
}

/// One variant of the experiment: a base build, optionally passed through wasm-opt.
#[derive(Debug, Clone, Copy)]
pub struct Variant {
    pub label: &'static str,
    pub base: Base,
    pub wasm_opt: Option<&'static [&'static str]>,
}

/// wasm-opt needs the features rustc's wasm32-wasip1 output uses (toolchain.md);
/// `--all-features` produces modules wasmtime 48 rejects.
pub const WASM_OPT_FEATURES: &[&str] = &[
    "--enable-bulk-memory",
    "--enable-sign-ext",
    "--enable-mutable-globals",
    "--enable-nontrapping-float-to-int",
    "--enable-multivalue",
    "--enable-reference-types",
];

const fn profile(
    label: &'static str,
    name: &'static str,
    settings: &'static [(&'static str, &'static str)],
) -> Variant {
    Variant {
        label,
        base: Base::Profile { name, settings },
        wasm_opt: None,
    }
}

const fn wasm_opt_of_shipped(label: &'static str, flags: &'static [&'static str]) -> Variant {
    Variant {
        label,
        base: Base::Shipped,
        wasm_opt: Some(flags),
    }
}

const Z: &[(&str, &str)] = &[("opt-level", "\"z\"")];
const O3: &[(&str, &str)] = &[("opt-level", "3")];

/// The variants, the shipped `[profile.release]` first. The opt-level variants set it
/// explicitly (one of them equals the shipped profile: a check of the noise); the others
/// change one setting of the shipped profile.
pub const VARIANTS: &[Variant] = &[
    Variant {
        label: "shipped",
        base: Base::Shipped,
        wasm_opt: None,
    },
    profile("opt-level s", "gpu-bench-s", &[("opt-level", "\"s\"")]),
    profile("opt-level z", "gpu-bench-z", Z),
    profile("opt-level 2", "gpu-bench-o2", &[("opt-level", "2")]),
    profile("opt-level 3", "gpu-bench-o3", O3),
    profile("LTO off", "gpu-bench-nolto", &[("lto", "false")]),
    profile("thin LTO", "gpu-bench-thinlto", &[("lto", "\"thin\"")]),
    profile(
        "codegen-units 16",
        "gpu-bench-cgu16",
        &[("codegen-units", "16")],
    ),
    profile(
        "panic unwind",
        "gpu-bench-unwind",
        &[("panic", "\"unwind\"")],
    ),
    profile("strip off", "gpu-bench-nostrip", &[("strip", "false")]),
    wasm_opt_of_shipped("shipped + wasm-opt -Oz", &["-Oz"]),
    wasm_opt_of_shipped("shipped + wasm-opt -O3", &["-O3"]),
    Variant {
        label: "opt-level z + wasm-opt -Oz",
        base: Base::Profile {
            name: "gpu-bench-z",
            settings: Z,
        },
        wasm_opt: Some(&["-Oz"]),
    },
    Variant {
        label: "opt-level 3 + wasm-opt -O3",
        base: Base::Profile {
            name: "gpu-bench-o3",
            settings: O3,
        },
        wasm_opt: Some(&["-O3"]),
    },
];

/// The settings of `[profile.release]` in the root Cargo.toml, as `key = value` items
/// (comments dropped), for the label of the shipped variant.
pub fn release_profile(cargo_toml: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut inside = false;
    for line in cargo_toml.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.starts_with('[') {
            inside = line == "[profile.release]";
            continue;
        }
        if inside && let Some((key, value)) = line.split_once('=') {
            items.push(format!("{} {}", key.trim(), value.trim().trim_matches('"')));
        }
    }
    items
}

/// `crate-name` -> `crate_name.wasm`.
pub fn wasm_file(crate_name: &str) -> String {
    format!("{}.wasm", crate_name.replace('-', "_"))
}

/// The `--config` arguments defining profile `name`.
pub fn profile_config(name: &str, settings: &[(&str, &str)]) -> Vec<String> {
    let mut args = vec![
        "--config".to_string(),
        format!("profile.{name}.inherits=\"release\""),
    ];
    for (key, value) in settings {
        args.push("--config".into());
        args.push(format!("profile.{name}.{key}={value}"));
    }
    args
}

/// What building a variant produced.
#[derive(Debug, Clone)]
pub struct Built {
    /// Per policy: the module, or why there is none.
    pub modules: Vec<(String, Result<PathBuf, String>)>,
    /// Wall time of the build (near zero when cargo found everything fresh).
    pub build_time: Duration,
}

/// Builds `policies` as `variant` says. Failures are reported per policy (a setting
/// wasm32 does not support fails its build), not as an error.
pub fn build(root: &Path, cargo: &str, variant: &Variant, policies: &[String]) -> Result<Built> {
    let started = Instant::now();
    let mut modules = Vec::new();
    let dir_name = match variant.base {
        Base::Shipped => {
            for p in policies {
                let path = gpu_e2e::wasm_dir().join(wasm_file(p));
                let m = if path.is_file() {
                    Ok(path)
                } else {
                    Err(format!("{} is missing: run make build", path.display()))
                };
                modules.push((p.clone(), m));
            }
            "release"
        }
        Base::Profile { name, settings } => {
            for p in policies {
                let out = Command::new(cargo)
                    .current_dir(root)
                    .args(["build", "--locked", "--quiet", "--target", "wasm32-wasip1"])
                    .args(["--profile", name, "-p", p])
                    .args(profile_config(name, settings))
                    .output()
                    .with_context(|| format!("cannot run {cargo}"))?;
                let path = gpu_e2e::target_dir()
                    .join("wasm32-wasip1")
                    .join(name)
                    .join(wasm_file(p));
                let m = if out.status.success() && path.is_file() {
                    Ok(path)
                } else {
                    Err(first_error(&String::from_utf8_lossy(&out.stderr)))
                };
                modules.push((p.clone(), m));
            }
            name
        }
    };
    if let Some(flags) = variant.wasm_opt {
        let dir = gpu_e2e::target_dir()
            .join("gpu-bench/wasm-opt")
            .join(format!("{dir_name}{}", flags.join("")));
        modules = wasm_opt_all(&dir, flags, modules)?;
    }
    Ok(Built {
        modules,
        build_time: started.elapsed(),
    })
}

/// Runs `wasm-opt <flags>` over each module into `dir`.
pub fn wasm_opt_all(
    dir: &Path,
    flags: &[&str],
    modules: Vec<(String, Result<PathBuf, String>)>,
) -> Result<Vec<(String, Result<PathBuf, String>)>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(modules
        .into_iter()
        .map(|(p, m)| {
            let m = m.and_then(|input| {
                let output = dir.join(wasm_file(&p));
                wasm_opt(&input, &output, flags).map(|()| output)
            });
            (p, m)
        })
        .collect())
}

/// `wasm-opt <features> <flags> input -o output`.
pub fn wasm_opt(input: &Path, output: &Path, flags: &[&str]) -> Result<(), String> {
    let out = Command::new("wasm-opt")
        .args(WASM_OPT_FEATURES)
        .args(flags)
        .arg(input)
        .arg("-o")
        .arg(output)
        .output()
        .map_err(|e| format!("cannot run wasm-opt ({e}): apt-get install binaryen"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(first_error(&String::from_utf8_lossy(&out.stderr)))
    }
}

/// The first `error` line of a tool's output (or its first line), shortened.
pub fn first_error(stderr: &str) -> String {
    let line = stderr
        .lines()
        .find(|l| l.contains("error"))
        .or_else(|| stderr.lines().find(|l| !l.trim().is_empty()))
        .unwrap_or("failed without a message")
        .trim();
    let mut short: String = line.chars().take(160).collect();
    if short.len() < line.len() {
        short.push_str("...");
    }
    short
}

/// Whether `wasm-opt` is installed.
pub fn have_wasm_opt() -> bool {
    Command::new("wasm-opt")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_are_defined_on_the_command_line() {
        assert_eq!(
            profile_config("p", &[("opt-level", "\"z\""), ("lto", "false")]),
            [
                "--config",
                "profile.p.inherits=\"release\"",
                "--config",
                "profile.p.opt-level=\"z\"",
                "--config",
                "profile.p.lto=false"
            ]
        );
        assert_eq!(wasm_file("gpu-labels-policy"), "gpu_labels_policy.wasm");
    }

    #[test]
    fn tool_errors_are_short() {
        assert_eq!(
            first_error("   Compiling x\nerror: the crate `std` is compiled with abort\nmore"),
            "error: the crate `std` is compiled with abort"
        );
        assert_eq!(first_error(""), "failed without a message");
        assert!(first_error(&"error ".repeat(100)).ends_with("..."));
    }

    #[test]
    fn the_release_profile_is_read_from_cargo_toml() {
        let toml = "[profile.dev]\nopt-level = 1\n[profile.release]\nopt-level = \"s\"  # small\nlto = true\n\n[profile.bench]\ndebug = true\n";
        assert_eq!(release_profile(toml), ["opt-level s", "lto true"]);
    }

    #[test]
    fn the_shipped_variant_comes_first_and_names_are_unique_per_recipe() {
        assert!(matches!(VARIANTS[0].base, Base::Shipped) && VARIANTS[0].wasm_opt.is_none());
        let mut labels: Vec<&str> = VARIANTS.iter().map(|v| v.label).collect();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), VARIANTS.len());
    }
}
