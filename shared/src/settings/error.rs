//! The one error type behind every settings message, and where in a JSON text or value
//! serde failed.

use serde::Deserialize;
use serde::de::{DeserializeOwned, Deserializer};
use serde_json::Value;
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

    /// `T` read from `text`, the JSON of the settings field at `path`: an error names the
    /// field inside it (`models[m].layers: invalid type: ...`) without serde_json's line
    /// and column, which would count from the start of `text` rather than of the settings.
    pub fn read_json<T: DeserializeOwned>(
        path: impl FnOnce() -> String,
        text: &str,
    ) -> Result<T, FieldError> {
        serde_json::from_str(text).map_err(|e| {
            let (inner, reason) = located::<T>(text).unwrap_or((String::new(), e));
            FieldError::new(format!("{}{inner}", path()), without_position(&reason))
        })
    }

    /// [`FieldError::read_json`] of a value already read (a registry ConfigMap's entry).
    pub fn read_value<T: DeserializeOwned>(
        path: impl FnOnce() -> String,
        value: &Value,
    ) -> Result<T, FieldError> {
        T::deserialize(value).map_err(|e| {
            let (inner, reason) = located_in::<_, T>(value).unwrap_or((String::new(), e));
            FieldError::new(format!("{}{inner}", path()), reason.to_string())
        })
    }
}

/// Where reading `T` from `text` fails, found by reading it again with
/// serde_path_to_error (so only on an error path: serde_json itself gives a line and
/// column), as a path from `text`'s value (`.field` and a map's `.key`, `[0]`), with the
/// error. The path is where an unknown field was found, not the field itself (serde's
/// message names it). `None` when the second reading does not fail.
pub(crate) fn located<T: DeserializeOwned>(text: &str) -> Option<(String, serde_json::Error)> {
    located_in::<_, T>(&mut serde_json::Deserializer::from_str(text))
}

/// [`located`] for any deserializer.
fn located_in<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Option<(String, D::Error)> {
    let Err(e) = serde_path_to_error::deserialize::<_, T>(deserializer) else {
        return None;
    };
    let unknown_field = e.inner().to_string().starts_with("unknown field");
    let mut segments: Vec<_> = e.path().iter().collect();
    if unknown_field {
        segments.pop();
    }
    let mut path = String::new();
    for segment in segments {
        if !matches!(segment, serde_path_to_error::Segment::Seq { .. }) {
            path.push('.');
        }
        path.push_str(&segment.to_string());
    }
    Some((path, e.into_inner()))
}

/// serde_json's message without its ` at line L column C`.
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let position = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&position) {
        Some(message) => message.to_string(),
        None => text,
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

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Entry {
        layers: u32,
        #[serde(default)]
        aliases: Vec<String>,
    }

    #[test]
    fn json_errors_name_the_field_inside_without_position() {
        let e = FieldError::read_json::<Entry>(|| "models[m]".into(), r#"{"layers": [1]}"#)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "models[m].layers: invalid type: sequence, expected u32"
        );
        let e =
            FieldError::read_json::<Entry>(|| "models[m]".into(), r#"{"layer": 1}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "models[m]: unknown field `layer`, expected `layers` or `aliases`"
        );
        let e = FieldError::read_json::<Entry>(
            || "models[m]".into(),
            r#"{"layers": 1, "aliases": [2]}"#,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "models[m].aliases[0]: invalid type: integer `2`, expected a string"
        );
        let e = FieldError::read_json::<Entry>(|| "models[m]".into(), "7").unwrap_err();
        assert_eq!(
            e.to_string(),
            "models[m]: invalid type: integer `7`, expected struct Entry"
        );
        assert!(FieldError::read_json::<Entry>(|| unreachable!(), r#"{"layers": 1}"#).is_ok());
    }

    #[test]
    fn reads_path_colon_reason() {
        let e = FieldError::new("pools[1].name", "must not be empty");
        assert_eq!(e.to_string(), "pools[1].name: must not be empty");
    }
}
