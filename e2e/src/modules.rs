//! Where the built policy modules are.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// Environment variable overriding the directory of built `.wasm` modules.
pub const WASM_DIR_ENV: &str = "GPU_ADMISSION_WASM_DIR";

/// The directory holding built modules: `$GPU_ADMISSION_WASM_DIR`, or
/// `<target dir>/wasm32-wasip1/release` (see [`target_dir`]).
pub fn wasm_dir() -> PathBuf {
    match std::env::var_os(WASM_DIR_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => target_dir().join("wasm32-wasip1/release"),
    }
}

/// Cargo's target directory, where `make build` leaves the modules: the one this program was
/// built into (the nearest directory above it holding the `CACHEDIR.TAG` cargo writes at the top
/// of a target directory: a test is `<target>/debug/deps/<test>`, gpu-bench
/// `<target>/bench-harness/gpu-bench`), so `CARGO_TARGET_DIR` and cargo's `build.target-dir`
/// are followed; for a program moved out of it, an absolute `$CARGO_TARGET_DIR`, else
/// `<workspace root>/target`.
pub fn target_dir() -> PathBuf {
    let built_in = std::env::current_exe().ok().and_then(|exe| {
        exe.ancestors()
            .skip(1)
            .find(|dir| dir.join("CACHEDIR.TAG").is_file())
            .map(Path::to_path_buf)
    });
    let from_env = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute());
    built_in
        .or(from_env)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// The workspace root (the parent of this crate's directory).
pub fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(PathBuf::from)
        .unwrap_or(manifest_dir)
}

/// Path of the built module of crate `crate_name` (`-` becomes `_`, as cargo names
/// cdylib outputs). Missing modules are an error that says how to build them:
/// tests must fail, not skip, when a module was not built.
pub fn module_path(crate_name: &str) -> Result<PathBuf> {
    let file = format!("{}.wasm", crate_name.replace('-', "_"));
    let path = wasm_dir().join(file);
    if !path.is_file() {
        bail!(
            "policy module {} not found: run `make build` first (`make build-test-modules` also builds the e2e fixture; or `cargo build --locked --release --target wasm32-wasip1 -p {crate_name}`; or set {WASM_DIR_ENV})",
            path.display()
        );
    }
    Ok(path)
}

/// The policies of the workspace rooted at `root`: the directories of `policies/` that hold
/// a `Cargo.toml`, sorted by name. None is an error.
pub fn policy_names(root: &Path) -> Result<Vec<String>> {
    let dir = root.join("policies");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    names.sort();
    if names.is_empty() {
        bail!("no policy crate under {}", dir.display());
    }
    Ok(names)
}
