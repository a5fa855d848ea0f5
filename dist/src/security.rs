//! SECURITY.md names, for every way around the rules, the test that proves it closed or
//! accepted. This module reads its tables (those whose last column is `proof`) and checks
//! each row's proof against the repository: a row that names no existing test, or names a
//! test that does not exist, is a problem.
//!
//! A proof cell names tests in backticks: a test function (`file::tests::name`, or just
//! `name`; an rstest case `case_fn::case_name`; a Python `test_*` of the policy-server
//! tests; a fuzz target), or a fixture of `policies/*/test_data/` (`pod_x.json`,
//! `session_y.yml`), which each policy's e2e test runs. `a{b, c}` stands for `ab` and `ac`;
//! names with `*` are patterns and prove nothing by themselves. Other backticked text
//! (settings, values) is ignored, unless it looks like a test name (it has `::`, or is a
//! snake_case word of three or more parts) and names nothing: then it is reported.

use std::collections::BTreeSet;
use std::path::Path;

/// What the repository holds that a proof may name.
#[derive(Debug, Default)]
pub struct Known {
    /// Names of Rust `fn`s and rstest `case::` names, Python `def`s.
    pub functions: BTreeSet<String>,
    /// File names under `policies/*/test_data/`.
    pub fixtures: BTreeSet<String>,
    /// Fuzz target names (`fuzz/fuzz_targets/<name>.rs`).
    pub fuzz_targets: BTreeSet<String>,
}

impl Known {
    /// Adds the functions and case names of a Rust or Python source text.
    pub fn add_source(&mut self, text: &str) {
        for (marker, end) in [("fn ", '('), ("case::", '('), ("def ", '(')] {
            let mut rest = text;
            while let Some(i) = rest.find(marker) {
                let before = rest[..i].chars().next_back();
                rest = &rest[i + marker.len()..];
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let after = rest[name.len()..].trim_start().chars().next();
                if !name.is_empty() && (after == Some(end) || after == Some('<')) {
                    self.functions.insert(name);
                }
            }
        }
    }

    /// Reads every `.rs` and `.py` file under `dirs` of `root` (skipping `target`), the
    /// fixtures of `policies/*/test_data/` and the fuzz targets.
    pub fn of_repository(root: &Path, dirs: &[&str]) -> std::io::Result<Known> {
        let mut known = Known::default();
        for dir in dirs {
            known.walk(&root.join(dir))?;
        }
        for policy in std::fs::read_dir(root.join("policies"))? {
            let data = policy?.path().join("test_data");
            if let Ok(entries) = std::fs::read_dir(&data) {
                for e in entries {
                    known
                        .fixtures
                        .insert(e?.file_name().to_string_lossy().into_owned());
                }
            }
        }
        if let Ok(entries) = std::fs::read_dir(root.join("fuzz/fuzz_targets")) {
            for e in entries {
                let name = e?.file_name().to_string_lossy().into_owned();
                if let Some(stem) = name.strip_suffix(".rs") {
                    known.fuzz_targets.insert(stem.to_string());
                }
            }
        }
        Ok(known)
    }

    fn walk(&mut self, dir: &Path) -> std::io::Result<()> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Ok(());
        };
        for e in entries {
            let path = e?.path();
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if path.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    self.walk(&path)?;
                }
            } else if name.ends_with(".rs") || name.ends_with(".py") {
                self.add_source(&std::fs::read_to_string(&path).unwrap_or_default());
            }
        }
        Ok(())
    }
}

/// One row of a proof table: its first cell (the way around the rules) and its proof.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The way around the rules (the first cell).
    pub path: String,
    /// The tests that prove it closed or accepted (the last cell).
    pub proof: String,
}

/// The rows of every table in `markdown` whose header's last column is `proof`.
pub fn rows(markdown: &str) -> Vec<Row> {
    let mut out = Vec::new();
    let mut in_table = false;
    for line in markdown.lines() {
        if !line.starts_with('|') {
            in_table = false;
            continue;
        }
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        if cells
            .iter()
            .all(|c| c.chars().all(|ch| ch == '-' || ch == ':'))
        {
            continue;
        }
        if !in_table {
            // A header row starts a table.
            in_table = cells.last() == Some(&"proof");
            continue;
        }
        out.push(Row {
            path: cells.first().copied().unwrap_or_default().to_string(),
            proof: cells.last().copied().unwrap_or_default().to_string(),
        });
    }
    out
}

/// The backticked names of a proof cell, braces expanded.
pub fn named(proof: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, part) in proof.split('`').enumerate() {
        if i % 2 == 0 {
            continue;
        }
        match (part.find('{'), part.rfind('}')) {
            (Some(open), Some(close)) if open < close => {
                let (head, tail) = (&part[..open], &part[close + 1..]);
                for alt in part[open + 1..close].split(',') {
                    out.push(format!("{head}{}{tail}", alt.trim()));
                }
            }
            _ => out.push(part.to_string()),
        }
    }
    out
}

fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

/// What a row's proof comes to: the tests it names that exist, and the names that look
/// like tests but name nothing.
pub fn check(row: &Row, known: &Known) -> (Vec<String>, Vec<String>) {
    let (mut found, mut missing) = (Vec::new(), Vec::new());
    for name in named(&row.proof) {
        if name.contains('*') {
            continue;
        }
        let is_file = [".json", ".yml", ".yaml"].iter().any(|e| name.ends_with(e));
        if is_file {
            if !name.contains('/') && !name.contains(' ') {
                if known.fixtures.contains(&name) {
                    found.push(name);
                } else {
                    missing.push(name);
                }
            }
            continue;
        }
        let last = name.rsplit("::").next().unwrap_or_default().trim();
        if !is_identifier(last) {
            continue;
        }
        if known.functions.contains(last) || known.fuzz_targets.contains(last) {
            found.push(name);
        } else if name.contains("::") && last.contains('_') || last.matches('_').count() >= 2 {
            missing.push(name);
        }
    }
    (found, missing)
}

/// Every row of `markdown` that names no existing test, or names one that does not exist.
pub fn problems(markdown: &str, known: &Known) -> Vec<String> {
    let mut out = Vec::new();
    for row in rows(markdown) {
        let (found, missing) = check(&row, known);
        let path: String = row.path.chars().take(100).collect();
        if !missing.is_empty() {
            out.push(format!(
                "{path}: names {} that no source or test_data has",
                missing.join(", ")
            ));
        } else if found.is_empty() {
            out.push(format!("{path}: names no existing test"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> Known {
        let mut k = Known::default();
        k.add_source(
            "#[test]\nfn a_real_test() {}\n#[rstest]\n#[case::pool_label_other_pool(1)]\nfn contradictions_are_denied(x: u8) {}\ndef test_policy_server_answers():\n",
        );
        k.fixtures.insert("pod_x.json".into());
        k.fuzz_targets.insert("dra_claim".into());
        k
    }

    const DOC: &str = "# S\n\n| path | status | proof |\n|---|---|---|\n| a | closed | `mod::tests::a_real_test`; `pod_x.json` |\n| b | open | README |\n| c | closed | `gone_test_name_here` and `a_real_test` |\n\n| limit | value | beyond | proof |\n|---|---|---|---|\n| d | 1 | - | `contradictions_are_denied::{pool_label_other_pool, a_real_test}`, `*dra*.json` |\n| e | 1 | - | fuzz target `dra_claim`; `test_policy_server_answers` |\n\n| other | table |\n|---|---|\n| f | g |\n";

    #[test]
    fn rows_of_proof_tables_only() {
        let r = rows(DOC);
        assert_eq!(
            r.iter().map(|r| r.path.as_str()).collect::<Vec<_>>(),
            ["a", "b", "c", "d", "e"]
        );
    }

    #[test]
    fn braces_expand_and_plain_text_is_kept() {
        assert_eq!(named("x `a::{b, c}` y `d`"), ["a::b", "a::c", "d"]);
    }

    #[test]
    fn rows_without_a_test_or_naming_a_missing_one_are_reported() {
        assert_eq!(
            problems(DOC, &known()),
            [
                "b: names no existing test",
                "c: names gone_test_name_here that no source or test_data has",
            ]
        );
    }

    #[test]
    fn functions_are_found_by_definition_not_by_mention() {
        let mut k = Known::default();
        k.add_source("// calls other_fn(1)\nlet x = prefix_fn (2);\npub fn defined<T>() {}\nasync fn run_it() {}\n");
        assert!(k.functions.contains("defined"));
        assert!(k.functions.contains("run_it"));
        assert!(!k.functions.contains("other_fn"));
    }
}
