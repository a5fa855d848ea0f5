//! The one failure-handling vocabulary: what a policy does about a case it is told to
//! judge (a finding, something it cannot read, something it cannot tell).

use serde::{Deserialize, Serialize};

/// `deny`, `warn` or `allow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Action {
    /// Reject, saying why.
    Deny,
    /// Accept with a warning to the client.
    Warn,
    /// Accept silently (an audit annotation may say why).
    Allow,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Deny => "deny",
            Action::Warn => "warn",
            Action::Allow => "allow",
        }
    }

    /// `Ok` when `self` is one of `offered`, for fields that take only part of the
    /// vocabulary (`fragmentation: deny | warn`).
    pub fn check_one_of(self, field: &str, offered: &[Action]) -> Result<(), super::FieldError> {
        if offered.contains(&self) {
            return Ok(());
        }
        let names: Vec<&str> = offered.iter().map(|a| a.as_str()).collect();
        Err(super::FieldError::new(
            field,
            format!("'{}' is not one of {}", self.as_str(), names.join(", ")),
        ))
    }
}

/// `unreadableCluster` (`deny | warn`): what a policy that reads cluster state does when a
/// read fails. `failOpen` is its old spelling, still read: `true` is `warn`, `false` is
/// `deny`. Both are kept as given (so that validation can name a disagreement) and read
/// through [`UnreadableCluster::action`].
pub struct UnreadableCluster {
    pub given: Option<Action>,
    pub fail_open: Option<bool>,
}

impl UnreadableCluster {
    /// The offered actions, in the order messages name them.
    pub const OFFERED: [Action; 2] = [Action::Deny, Action::Warn];

    /// The two fields as the settings give them.
    pub fn of(given: Option<Action>, fail_open: Option<bool>) -> UnreadableCluster {
        UnreadableCluster { given, fail_open }
    }

    /// What the settings say, failing closed: `warn` only when the fields given say `warn`
    /// (and agree), `deny` otherwise, when neither is given, and for a value validation
    /// refuses (`allow`, or the two fields disagreeing).
    pub fn action(&self) -> Action {
        let old = self.fail_open.map(Self::old_spelling);
        match (self.given, old) {
            (Some(Action::Warn), None | Some(Action::Warn)) | (None, Some(Action::Warn)) => {
                Action::Warn
            }
            _ => Action::Deny,
        }
    }

    /// `unreadableCluster` is `deny` or `warn`, and `failOpen`, if also given, says the same.
    pub fn check(&self) -> Result<(), super::FieldError> {
        if let Some(given) = self.given {
            given.check_one_of("unreadableCluster", &Self::OFFERED)?;
            if let Some(fail_open) = self.fail_open
                && Self::old_spelling(fail_open) != given
            {
                return Err(super::FieldError::new(
                    "failOpen",
                    format!(
                        "{fail_open} (the old spelling of unreadableCluster: {}) disagrees with unreadableCluster: {given}; remove failOpen",
                        Self::old_spelling(fail_open)
                    ),
                ));
            }
        }
        Ok(())
    }

    fn old_spelling(fail_open: bool) -> Action {
        if fail_open {
            Action::Warn
        } else {
            Action::Deny
        }
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreadable_cluster_reads_its_old_spelling_and_fails_closed() {
        let u =
            |given: Option<Action>, fail_open: Option<bool>| UnreadableCluster { given, fail_open };
        for (given, fail_open, action) in [
            (None, None, Action::Deny),
            (Some(Action::Warn), None, Action::Warn),
            (Some(Action::Deny), None, Action::Deny),
            (None, Some(true), Action::Warn),
            (None, Some(false), Action::Deny),
            (Some(Action::Warn), Some(true), Action::Warn),
            (Some(Action::Deny), Some(false), Action::Deny),
            // Refused by validation; read as deny all the same.
            (Some(Action::Warn), Some(false), Action::Deny),
            (Some(Action::Deny), Some(true), Action::Deny),
            (Some(Action::Allow), None, Action::Deny),
            (Some(Action::Allow), Some(true), Action::Deny),
        ] {
            assert_eq!(
                u(given, fail_open).action(),
                action,
                "{given:?} {fail_open:?}"
            );
        }
        u(None, Some(true)).check().unwrap();
        u(Some(Action::Warn), Some(true)).check().unwrap();
        assert_eq!(
            u(Some(Action::Allow), None)
                .check()
                .unwrap_err()
                .to_string(),
            "unreadableCluster: 'allow' is not one of deny, warn"
        );
        assert_eq!(
            u(Some(Action::Deny), Some(true))
                .check()
                .unwrap_err()
                .to_string(),
            "failOpen: true (the old spelling of unreadableCluster: warn) disagrees with unreadableCluster: deny; remove failOpen"
        );
        assert_eq!(
            u(Some(Action::Warn), Some(false))
                .check()
                .unwrap_err()
                .to_string(),
            "failOpen: false (the old spelling of unreadableCluster: deny) disagrees with unreadableCluster: warn; remove failOpen"
        );
    }

    #[test]
    fn spelled_in_lowercase_and_checked_against_a_subset() {
        let a: Action = serde_json::from_str("\"warn\"").unwrap();
        assert_eq!(a, Action::Warn);
        assert!(serde_json::from_str::<Action>("\"Warn\"").is_err());
        assert_eq!(serde_json::to_string(&Action::Allow).unwrap(), "\"allow\"");
        Action::Deny
            .check_one_of("fragmentation", &[Action::Warn, Action::Deny])
            .unwrap();
        assert_eq!(
            Action::Allow
                .check_one_of("fragmentation", &[Action::Warn, Action::Deny])
                .unwrap_err()
                .to_string(),
            "fragmentation: 'allow' is not one of warn, deny"
        );
    }
}
