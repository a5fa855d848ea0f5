//! The case lists: `policies/<p>/test_data/cases.yml`, every request each policy's tests
//! run, with its settings and replay session (the kwctl parity test and the kept-instance
//! test run them all), and for most of them what the policy must answer (each policy's
//! e2e test checks those, `PolicyUnderTest::check_cases` in e2e/tests/common/cases.rs).
//!
//! An entry:
//!
//! ```yaml
//! - request: test_data/deployment_a100_4x2.json    # paths relative to the policy directory
//!   settings: test_data/settings.yml               # absent: {}
//!   session: test_data/session_a100_over.yml       # the host calls, replayed (kwctl's format)
//!   denied: "pool a100: ..."                       # or `allowed: true`; neither: checked by a named test
//!   warnings: ["..."]                              # exactly these (absent: not checked)
//!   audit: {capacity: "...", host-error: null}     # these annotations (null: absent)
//!   calls: [get_resource, list_resources_all]      # the host calls' operations (absent: not checked)
//!   readme: true                                   # the README quotes the message and warnings
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use crate::modules::workspace_root;
use crate::{Evaluation, ReplaySession};

/// One entry of `test_data/cases.yml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    #[serde(skip)]
    /// The policy directory's name.
    pub policy: String,
    /// Its place in the list, from 1.
    #[serde(skip)]
    pub number: usize,
    /// The AdmissionRequest file.
    pub request: String,
    #[serde(default)]
    /// The settings file (none: `{}`).
    pub settings: Option<String>,
    #[serde(default)]
    /// The replay session answering the host calls.
    pub session: Option<String>,
    #[serde(default)]
    /// The policy must accept the request.
    pub allowed: bool,
    #[serde(default)]
    /// The policy must deny the request with exactly this message.
    pub denied: Option<String>,
    #[serde(default)]
    /// Exactly these warnings (none: not checked).
    pub warnings: Option<Vec<String>>,
    #[serde(default)]
    /// These audit annotations (`None`: absent).
    pub audit: BTreeMap<String, Option<String>>,
    #[serde(default)]
    /// The host calls' operations, in order (none: not checked).
    pub calls: Option<Vec<String>>,
    #[serde(default)]
    /// The policy's README quotes the message and the warnings.
    pub readme: bool,
}

impl Case {
    /// `<policy> cases.yml #<number>: <request> <settings> [<session>]`.
    pub fn label(&self) -> String {
        format!(
            "{} cases.yml #{}: {} {}{}",
            self.policy,
            self.number,
            self.request,
            self.settings.as_deref().unwrap_or("-"),
            self.session
                .as_deref()
                .map(|s| format!(" {s}"))
                .unwrap_or_default()
        )
    }

    /// Whether the list says what the policy must answer (else a named test checks it).
    pub fn expects(&self) -> bool {
        self.allowed || self.denied.is_some()
    }

    /// What the evaluation does differently from what the case says; `quoted` tells
    /// whether the README quotes a text.
    pub fn mismatches(&self, e: &Evaluation, quoted: impl Fn(&str) -> bool) -> Vec<String> {
        let label = self.label();
        let r = &e.response;
        let mut problems = Vec::new();
        if r.allowed != self.denied.is_none() || r.message() != self.denied.as_deref() {
            problems.push(format!(
                "{label}: allowed={} message={:?}",
                r.allowed,
                r.message()
            ));
        }
        let warnings: Vec<&str> = r.warnings.iter().flatten().map(String::as_str).collect();
        if let Some(expected) = &self.warnings
            && warnings != *expected
        {
            problems.push(format!("{label}: warnings {warnings:?}"));
        }
        let audit = r.audit_annotations.clone().unwrap_or_default();
        for (key, value) in &self.audit {
            if audit.get(key) != value.as_ref() {
                problems.push(format!("{label}: audit {key} = {:?}", audit.get(key)));
            }
        }
        let operations: Vec<&str> = e.host_calls.iter().map(|c| c.operation.as_str()).collect();
        if let Some(calls) = &self.calls
            && operations != *calls
        {
            problems.push(format!("{label}: host calls {operations:?}"));
        }
        let exchanges = self.session.as_ref().map_or(0, |file| {
            ReplaySession::from_file(self.path(file))
                .map(|s| s.len())
                .unwrap_or(usize::MAX)
        });
        if e.host_calls.len() != exchanges || !e.unconsumed_exchanges.is_empty() {
            problems.push(format!(
                "{label}: {} host calls for the session's {exchanges}, {} exchanges left",
                e.host_calls.len(),
                e.unconsumed_exchanges.len()
            ));
        }
        if self.readme {
            let texts = self.denied.iter().chain(self.warnings.iter().flatten());
            for text in texts.filter(|t| !quoted(t)) {
                problems.push(format!("{label}: README does not quote {text:?}"));
            }
        }
        problems
    }

    /// A file of the case, relative to its policy's directory.
    pub fn path(&self, file: &str) -> PathBuf {
        policies_dir().join(&self.policy).join(file)
    }
}

/// `<workspace>/policies`.
pub fn policies_dir() -> PathBuf {
    workspace_root().join("policies")
}

/// The policies (directories of `policies/` with a Cargo.toml), sorted.
pub fn policies() -> Vec<String> {
    crate::policy_names(&workspace_root()).unwrap_or_else(|e| panic!("{e:#}"))
}

/// Parses a policy's `test_data/cases.yml`; a malformed entry is an error naming it.
pub fn parse_cases(policy: &str, text: &str) -> Result<Vec<Case>> {
    let mut cases: Vec<Case> = yaml_serde::from_str(text)
        .with_context(|| format!("{policy}/test_data/cases.yml is not a list of cases"))?;
    for (i, case) in cases.iter_mut().enumerate() {
        case.policy = policy.to_string();
        case.number = i + 1;
        let says_more = case.warnings.is_some()
            || !case.audit.is_empty()
            || case.calls.is_some()
            || case.readme;
        if case.allowed && case.denied.is_some() {
            bail!("{}: both allowed and denied", case.label());
        }
        if says_more && !case.expects() {
            bail!(
                "{}: warnings, audit, calls or readme without `allowed: true` or `denied`",
                case.label()
            );
        }
    }
    if cases.is_empty() {
        bail!("{policy}/test_data/cases.yml lists no case");
    }
    Ok(cases)
}

/// Reads and parses `policies/<policy>/test_data/cases.yml`.
pub fn read_cases(policy: &str) -> Result<Vec<Case>> {
    let path = policies_dir().join(policy).join("test_data/cases.yml");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read {} (every policy lists its cases)",
            path.display()
        )
    })?;
    parse_cases(policy, &text)
}
