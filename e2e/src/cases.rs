//! The case lists: `policies/<p>/test_data/cases.txt`, every request each policy's tests
//! run, with its settings and replay session (the kwctl parity tests and the kept-instance
//! test run them all).

use std::path::PathBuf;

use crate::modules::workspace_root;
use anyhow::{Context, Result, bail};

/// One line of `test_data/cases.txt`; paths relative to the policy directory.
#[derive(Debug, Clone)]
pub struct Case {
    /// The policy (directory name under `policies/`).
    pub policy: String,
    /// The line in `cases.txt`.
    pub line: usize,
    /// The request file.
    pub request: String,
    /// The settings file (`None`: no settings).
    pub settings: Option<String>,
    /// The replay session file, if any.
    pub session: Option<String>,
}

impl Case {
    /// `<policy> cases.txt:<line>: <request> <settings> [<session>]`.
    pub fn label(&self) -> String {
        format!(
            "{} cases.txt:{}: {} {}{}",
            self.policy,
            self.line,
            self.request,
            self.settings.as_deref().unwrap_or("-"),
            self.session
                .as_deref()
                .map(|s| format!(" {s}"))
                .unwrap_or_default()
        )
    }
}

/// `<workspace>/policies`.
pub fn policies_dir() -> PathBuf {
    workspace_root().join("policies")
}

/// The policies (directories of `policies/` with a Cargo.toml), sorted.
pub fn policies() -> Vec<String> {
    crate::modules::policy_names(&workspace_root()).unwrap_or_else(|e| panic!("{e:#}"))
}

/// Parses `policies/<policy>/test_data/cases.txt`; a malformed line is an error naming it.
pub fn parse_cases(policy: &str, text: &str) -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (request, settings, session) = match fields[..] {
            [request, settings] => (request, settings, None),
            [request, settings, session] => (request, settings, Some(session)),
            _ => bail!(
                "{policy}/test_data/cases.txt:{}: expected `<request.json> <settings file or -> [<replay session.yml>]`, got {line:?}",
                i + 1
            ),
        };
        cases.push(Case {
            policy: policy.to_string(),
            line: i + 1,
            request: request.to_string(),
            settings: (settings != "-").then(|| settings.to_string()),
            session: session.map(str::to_string),
        });
    }
    if cases.is_empty() {
        bail!("{policy}/test_data/cases.txt lists no case");
    }
    Ok(cases)
}

/// The cases of `policy`.
pub fn read_cases(policy: &str) -> Result<Vec<Case>> {
    let path = policies_dir().join(policy).join("test_data/cases.txt");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read {} (every policy lists its cases)",
            path.display()
        )
    })?;
    parse_cases(policy, &text)
}
