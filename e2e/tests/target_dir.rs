//! Everything that reads what cargo built finds it in cargo's target directory, wherever
//! `CARGO_TARGET_DIR` (or a cargo config) puts it: `make`'s recipes, the scripts and the
//! harness. A path to `target/` written into one of them fails here.

use std::path::Path;
use std::process::Command;

use gpu_e2e::{target_dir, workspace_root};

/// A target directory that does not exist: nothing may be built there by these tests.
const ELSEWHERE: &str = "/nonexistent/gpu-admission-target";

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(workspace_root())
        .env("CARGO_TARGET_DIR", ELSEWHERE)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn make_copies_and_runs_what_cargo_built_from_cargo_target_dir() {
    // `make -n` prints the recipes without running them (scripts/target-dir.sh asks cargo).
    let recipes = run(
        "make",
        &[
            "-n",
            "build",
            "annotate",
            "artifacthub",
            "bench",
            "KWCTL=none",
        ],
    );
    for built in [
        "/wasm32-wasip1/release/${p//-/_}.wasm policies/$p/policy.wasm",
        "/debug/gpu-kwctl annotate",
        "/debug/gpu-dist artifacthub",
        "/bench-harness/gpu-bench guest-work",
    ] {
        assert!(
            recipes.contains(&format!("{ELSEWHERE}{built}")),
            "make does not use {ELSEWHERE}{built}:\n{recipes}"
        );
    }
    assert!(
        !recipes.split_whitespace().any(|w| w.starts_with("target/")),
        "make reads target/ whatever CARGO_TARGET_DIR says:\n{recipes}"
    );
}

#[test]
fn the_scripts_ask_cargo_for_the_target_directory() {
    assert_eq!(run("scripts/target-dir.sh", &[]).trim(), ELSEWHERE);
    assert_eq!(
        run("python3", &["bench/kubewarden/cargo_target.py"]).trim(),
        ELSEWHERE
    );
}

#[test]
fn the_harness_finds_the_target_directory_it_was_built_in() {
    let dir = target_dir();
    assert!(dir.join("CACHEDIR.TAG").is_file(), "{}", dir.display());
    let exe = std::env::current_exe().unwrap();
    assert!(
        exe.starts_with(&dir),
        "{} is not in {}",
        exe.display(),
        dir.display()
    );
    assert_eq!(gpu_e2e::wasm_dir(), dir.join("wasm32-wasip1/release"));
}

/// No script, recipe or test names a directory under `target/` itself (comments aside).
#[test]
fn no_script_hard_codes_target() {
    let root = workspace_root();
    let mut files = vec![root.join("Makefile")];
    for dir in ["scripts", "bench", "e2e", "fuzz", "policies", "dist"] {
        collect(&root.join(dir), &mut files);
    }
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for (i, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with('#') || code.starts_with("//") {
                continue;
            }
            let hard_coded = [
                "debug",
                "release",
                "wasm32-wasip1",
                "bench-harness",
                "kubewarden",
            ]
            .iter()
            .any(|sub| {
                [" ", "\"", "'", "/", "("]
                    .iter()
                    .any(|before| line.contains(&format!("{before}target/{sub}")))
                    || line.starts_with(&format!("target/{sub}"))
            }) || line.contains("\"target\" /");
            if hard_coded {
                found.push(format!("{}:{}: {line}", file.display(), i + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "hard-coded target/:\n{}",
        found.join("\n")
    );
}

fn collect(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !["target", "corpus", "regressions", "artifacts", "test_data"]
                .contains(&name.as_str())
            {
                collect(&path, files);
            }
        } else if [".sh", ".py", ".bash", ".bats", ".mjs", ".rs"]
            .iter()
            .any(|e| name.ends_with(e))
        {
            files.push(path);
        }
    }
}
