//! Exceptions per rule ([`crate::exceptions`]): the findings of a rule that an exception
//! covers are dropped, each rule judged on its own (an exception for `requiredLabels`
//! does not excuse a GPU request without a limit). A request whose findings are all
//! excused is accepted; one with findings left is denied for those alone. Either way the
//! audit annotation [`crate::exceptions::AUDIT_KEY`] names every exception that applied
//! (`; `-separated) and [`crate::exceptions::AUDIT_EXCUSED`] holds what they excused; an
//! exception in its last [`crate::exceptions::WARN_DAYS`] days adds a warning; a finding
//! whose only exception has expired stays, and the denial says which one expired and when.

use super::problems::Finding;
use super::settings::{RULE_NAMES, Settings};
use crate::clock::UnixSeconds;
use crate::exceptions::{Exceptions, Lookup};
use crate::workload::Workload;
use std::collections::BTreeMap;

/// The findings sorted by what the exceptions say about them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Excusal {
    /// Findings no exception covers (or whose exception has expired): still problems.
    pub kept: Vec<Finding>,
    /// Findings an exception covers.
    pub excused: Vec<Finding>,
    /// `exception=<name> owner=<owner> expires=<time>` of each exception that applied,
    /// once each, in order of first use.
    pub audits: Vec<String>,
    /// The warnings of applied exceptions that end soon, once each.
    pub warnings: Vec<String>,
    /// `exception <name> (owner <owner>) expired at <time>` of each expired exception that
    /// would have covered a kept finding, once each.
    pub expired: Vec<String>,
}

impl Excusal {
    /// The denial's addition when exceptions have expired: ` (exception lab (owner
    /// alice) expired at 2026-11-21T00:00:00Z; renew it or fix the workload)`, or empty.
    pub fn expired_suffix(&self) -> String {
        match self.expired.as_slice() {
            [] => String::new(),
            [one] => format!(" ({one}; renew it or fix the workload)"),
            several => format!(" ({}; renew them or fix the workload)", several.join("; ")),
        }
    }
}

/// Sorts `findings` of `workload` in `namespace` by the exceptions of `settings` at `now`.
/// Exceptions that do not pass validation (settings validation refuses them first) are
/// ignored, as are the findings of no rule ([`super::Problem::rule`]).
pub fn sort(
    findings: Vec<Finding>,
    workload: &Workload,
    namespace: &str,
    settings: &Settings,
    now: UnixSeconds,
) -> Excusal {
    let checked = if settings.exceptions.is_empty() || findings.is_empty() {
        None
    } else {
        Exceptions::check(
            &settings.exceptions,
            settings.max_exception_days,
            &RULE_NAMES,
            now,
            "exceptions",
        )
        .ok()
    };
    let Some(exceptions) = checked else {
        return Excusal {
            kept: findings,
            ..Excusal::default()
        };
    };
    // Every pod template must match an exception's selector (the object's own labels
    // for an object without templates), as for the other policies.
    let labels: Vec<&BTreeMap<String, String>> = if workload.templates.is_empty() {
        vec![&workload.meta.labels]
    } else {
        workload.templates.iter().map(|t| &t.meta.labels).collect()
    };
    let mut out = Excusal::default();
    let once = |list: &mut Vec<String>, item: String| {
        if !list.contains(&item) {
            list.push(item);
        }
    };
    for finding in findings {
        let lookup = match finding.problem.rule() {
            Some(rule) => exceptions.lookup(namespace, &labels, rule, now),
            None => Lookup::None,
        };
        match lookup {
            Lookup::Applies { exception, warning } => {
                once(&mut out.audits, exception.audit());
                if let Some(w) = warning {
                    once(&mut out.warnings, w);
                }
                out.excused.push(finding);
            }
            expired @ Lookup::Expired(_) => {
                if let Some(note) = expired.expired_note() {
                    once(&mut out.expired, note);
                }
                out.kept.push(finding);
            }
            Lookup::None => out.kept.push(finding),
        }
    }
    out
}

#[cfg(test)]
mod tests;
