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

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
