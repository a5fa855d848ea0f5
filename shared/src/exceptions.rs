//! Exceptions with an owner and an end date, shared by every policy.
//!
//! ```yaml
//! exceptions:
//!   - name: ml-a-big-training
//!     namespaces: [ml-a]                 # and/or a selector on the pod template labels
//!     selector: {matchLabels: {app: trainer}}
//!     rules: [maxGpusPerPod]             # the policy's rule names; empty: all its rules
//!     owner: alice@example.com
//!     reason: "quarterly training run, ticket OPS-1234"
//!     expires: "2027-01-31"              # through the end of that day (UTC), or an RFC 3339 time
//! maxExceptionDays: 90
//! ```
//!
//! A workload an exception matches passes the rules it names, with the audit annotation
//! [`AUDIT_KEY`] `exception=<name> owner=<owner> expires=<time>`, and a warning once fewer
//! than [`WARN_DAYS`] days are left. An expired exception is ignored: the policy judges the
//! workload as if it did not exist, and its denial says which exception expired and when.
//! Settings validation refuses an exception without an owner or an end date, or one that
//! ends more than `maxExceptionDays` after the settings are loaded (so every exception is
//! renewed by someone, on purpose).

use crate::admission::{AdmissionRequest, Verdict};
use crate::clock::{Clock, UnixSeconds, parse_end, rfc3339};
use crate::selector::LabelSelector;
use crate::settings::{FieldError, NamespaceList};
use crate::workload::Workload;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Audit annotation key of an applied exception.
pub const AUDIT_KEY: &str = "exception";
/// Warn this many days before an exception ends.
pub const WARN_DAYS: i64 = 7;
/// Default for `maxExceptionDays`.
pub const DEFAULT_MAX_DAYS: u32 = 90;
/// The longest `maxExceptionDays` may be.
pub const LIMIT_MAX_DAYS: u32 = 366;
const DAY: i64 = 86_400;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Exception {
    pub name: String,
    /// Namespaces it covers (exact, or a prefix ending in `*`).
    pub namespaces: NamespaceList,
    /// Pod template labels it covers (all templates of the workload must match).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Rule names of the policy; empty: every rule of the policy.
    pub rules: Vec<String>,
    pub owner: String,
    pub reason: String,
    pub expires: String,
}

/// A checked exception.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    pub exception: Exception,
    /// The first second it no longer applies.
    pub ends: UnixSeconds,
}

/// The exceptions of one policy, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exceptions(Vec<Checked>);

/// What the exceptions say about one workload and rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup<'a> {
    None,
    /// The exception applies; `warning` when it ends within [`WARN_DAYS`].
    Applies {
        exception: &'a Checked,
        warning: Option<String>,
    },
    /// The only matching exceptions have ended: the denial should say so.
    Expired(&'a Checked),
}

impl Checked {
    /// `exception=<name> owner=<owner> expires=<time>`.
    pub fn audit(&self) -> String {
        format!(
            "exception={} owner={} expires={}",
            self.exception.name,
            self.exception.owner,
            rfc3339(self.ends)
        )
    }

    fn covers(&self, namespace: &str, labels: &[&BTreeMap<String, String>], rule: &str) -> bool {
        let e = &self.exception;
        (e.rules.is_empty() || e.rules.iter().any(|r| r == rule))
            && (e.namespaces.0.is_empty() || e.namespaces.contains(namespace))
            && e.selector
                .as_ref()
                .is_none_or(|s| !labels.is_empty() && labels.iter().all(|l| s.matches(l)))
    }
}

impl Exceptions {
    /// Checks `exceptions` (settings field `field`, e.g. `exceptions`) against the rule
    /// names the policy knows, at `now`.
    pub fn check(
        exceptions: &[Exception],
        max_days: u32,
        rule_names: &[&str],
        now: UnixSeconds,
        field: &str,
    ) -> Result<Exceptions, FieldError> {
        if max_days == 0 || max_days > LIMIT_MAX_DAYS {
            return Err(FieldError::new(
                "maxExceptionDays",
                format!("{max_days} is not from 1 to {LIMIT_MAX_DAYS}"),
            ));
        }
        let mut out = Vec::new();
        for (i, e) in exceptions.iter().enumerate() {
            let field = format!("{field}[{i}]");
            not_blank(&e.name, format!("{field}.name"), || {
                "give the exception a name".to_string()
            })?;
            if exceptions[..i].iter().any(|x| x.name == e.name) {
                return Err(FieldError::new(
                    format!("{field}.name"),
                    format!("'{}' is used twice", e.name),
                ));
            }
            not_blank(&e.owner, format!("{field}.owner"), || {
                format!(
                    "exception '{}' has no owner; say who answers for it (a person or team)",
                    e.name
                )
            })?;
            if e.namespaces.0.is_empty() && e.selector.is_none() {
                return Err(FieldError::new(
                    field,
                    format!(
                        "exception '{}' names no namespaces and no selector, so it would cover every workload; list namespaces or give a selector",
                        e.name
                    ),
                ));
            }
            e.namespaces.validate(&format!("{field}.namespaces"))?;
            for (j, r) in e.rules.iter().enumerate() {
                if !rule_names.contains(&r.as_str()) {
                    return Err(FieldError::new(
                        format!("{field}.rules[{j}]"),
                        format!(
                            "'{r}' is not a rule of this policy; use one of {}",
                            rule_names.join(", ")
                        ),
                    ));
                }
            }
            not_blank(&e.expires, format!("{field}.expires"), || {
                format!(
                    "exception '{}' has no end date; give one (YYYY-MM-DD, at most {max_days} days ahead)",
                    e.name
                )
            })?;
            let ends = parse_end(&e.expires).ok_or_else(|| {
                FieldError::new(
                    format!("{field}.expires"),
                    format!(
                        "'{}' is not a date (YYYY-MM-DD) or an RFC 3339 time (2027-01-31T18:00:00Z)",
                        e.expires
                    ),
                )
            })?;
            if ends > now.saturating_add(i64::from(max_days) * DAY) {
                return Err(FieldError::new(
                    format!("{field}.expires"),
                    format!(
                        "{} is more than {max_days} days (maxExceptionDays) from now ({}); exceptions must be renewed on purpose",
                        e.expires,
                        rfc3339(now)
                    ),
                ));
            }
            out.push(Checked {
                exception: e.clone(),
                ends,
            });
        }
        Ok(Exceptions(out))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The exception for `rule` of a workload in `namespace` whose pod templates carry
    /// `labels`, at `now`: one that applies wins over one that expired.
    pub fn lookup(
        &self,
        namespace: &str,
        labels: &[&BTreeMap<String, String>],
        rule: &str,
        now: UnixSeconds,
    ) -> Lookup<'_> {
        let mut expired = None;
        for c in self.0.iter().filter(|c| c.covers(namespace, labels, rule)) {
            if now < c.ends {
                let left = c.ends - now;
                let warning = (left < WARN_DAYS * DAY).then(|| {
                    format!(
                        "exception {} (owner {}) ends {} ({}); renew it or fix the workload before then",
                        c.exception.name,
                        c.exception.owner,
                        rfc3339(c.ends),
                        days_left(left)
                    )
                });
                return Lookup::Applies {
                    exception: c,
                    warning,
                };
            }
            expired.get_or_insert(c);
        }
        match expired {
            Some(c) => Lookup::Expired(c),
            None => Lookup::None,
        }
    }
}

impl Lookup<'_> {
    /// The sentence a denial adds when the workload's exception has ended.
    pub fn expired_note(&self) -> Option<String> {
        match self {
            Lookup::Expired(c) => Some(format!(
                "exception {} (owner {}) expired at {}",
                c.exception.name,
                c.exception.owner,
                rfc3339(c.ends)
            )),
            _ => None,
        }
    }
}

fn days_left(seconds: i64) -> String {
    let days = seconds / DAY;
    match days {
        0 => "in less than a day".into(),
        1 => "in 1 day".into(),
        n => format!("in {n} days"),
    }
}

#[cfg(test)]
mod tests;

/// The exception settings a policy with exceptions has (`exceptions`, `maxExceptionDays`),
/// and the custom kinds it reads a workload's labels with (`customKinds`).
pub trait HasExceptions {
    fn exceptions(&self) -> &[Exception];
    fn max_exception_days(&self) -> u32;
    fn custom_kinds(&self) -> &[crate::workload::CustomKind];

    /// Settings validation of the exceptions, against the policy's rule names, at the
    /// host's time.
    fn validate_exceptions(&self, rule_names: &[&str]) -> Result<(), FieldError> {
        Exceptions::check(
            self.exceptions(),
            self.max_exception_days(),
            rule_names,
            crate::clock::Clock::now(&crate::clock::SystemClock),
            "exceptions",
        )
        .map(|_| ())
    }
}

/// An error at `field` saying `message` when `value` is blank.
fn not_blank(
    value: &str,
    field: String,
    message: impl FnOnce() -> String,
) -> Result<(), FieldError> {
    if value.trim().is_empty() {
        return Err(FieldError::new(field, message()));
    }
    Ok(())
}

/// `verdict` with the policy's exceptions applied: a denial of `rule` for a workload an
/// exception covers at `now` becomes an acceptance with the audit annotation [`AUDIT_KEY`]
/// (and [`AUDIT_EXCUSED`]: what was excused) and, near its end, a warning; a denial whose
/// only exception has expired says so. Input errors (a code of 400 or more: the object
/// could not be read) are never excused.
pub fn excuse(
    verdict: Verdict,
    settings: &dyn HasExceptions,
    rule_names: &[&str],
    rule: &str,
    request: &AdmissionRequest,
    clock: &dyn Clock,
) -> Verdict {
    if verdict.allowed || verdict.code.is_some() || settings.exceptions().is_empty() {
        return verdict;
    }
    // The host's clock is read only for a denial that an exception may excuse.
    let now = clock.now();
    let Ok(exceptions) = Exceptions::check(
        settings.exceptions(),
        settings.max_exception_days(),
        rule_names,
        now,
        "exceptions",
    ) else {
        return verdict;
    };
    let Ok(workload) = Workload::from_object(&request.object, settings.custom_kinds()) else {
        return verdict;
    };
    let labels: Vec<&BTreeMap<String, String>> = if workload.templates.is_empty() {
        vec![&workload.meta.labels]
    } else {
        workload.templates.iter().map(|t| &t.meta.labels).collect()
    };
    match exceptions.lookup(&request.namespace, &labels, rule, now) {
        Lookup::Applies { exception, warning } => {
            let mut excused = Verdict::accept()
                .with_audit(AUDIT_KEY, exception.audit())
                .with_audit(AUDIT_EXCUSED, verdict.message.unwrap_or_default());
            excused.warnings = verdict.warnings;
            if let Some(w) = warning {
                excused = excused.with_warning(w);
            }
            excused
        }
        lookup @ Lookup::Expired(_) => {
            let mut denied = verdict;
            if let (Some(message), Some(note)) = (&mut denied.message, lookup.expired_note()) {
                message.push_str(&format!(" ({note}; renew it or fix the workload)"));
            }
            denied
        }
        Lookup::None => verdict,
    }
}

/// Audit annotation holding the denial an exception excused.
pub const AUDIT_EXCUSED: &str = "excused";
