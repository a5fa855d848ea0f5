//! The one error type behind every settings message.

use std::fmt;

/// A settings value found wrong: where (`pools[1].nodeSelector`, the path of the field as
/// the settings spell it) and why. It reads `<path>: <reason>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub path: String,
    pub reason: String,
}

impl FieldError {
    pub fn new(path: impl Into<String>, reason: impl Into<String>) -> FieldError {
        FieldError {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.reason)
    }
}

impl std::error::Error for FieldError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_path_colon_reason() {
        let e = FieldError::new("pools[1].name", "must not be empty");
        assert_eq!(e.to_string(), "pools[1].name: must not be empty");
    }
}
