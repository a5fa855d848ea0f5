//! The one error type behind every settings message, and where in a JSON text or value
//! serde failed.

use serde::de::DeserializeOwned;
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
            let inner = path_of(text, &e);
            FieldError::new(format!("{}{inner}", path()), without_position(&e))
        })
    }

    /// [`FieldError::read_json`] of a value already read (a registry ConfigMap's entry).
    pub fn read_value<T: DeserializeOwned>(
        path: impl FnOnce() -> String,
        value: &Value,
    ) -> Result<T, FieldError> {
        T::deserialize(value).map_err(|e| {
            // A value has no positions: its text does, and the same reading fails there.
            let text = value.to_string();
            let (inner, reason) = located::<T>(&text).unwrap_or((String::new(), e));
            FieldError::new(format!("{}{inner}", path()), without_position(&reason))
        })
    }
}

/// Where reading `T` from `text` fails, as a path from `text`'s value (`.field` and a
/// map's `.key`, `[0]`), with the error; `None` when it does not fail. The path is that of
/// the value serde_json stopped in, found from the error's line and column
/// ([`path_at`]); for an unknown field, the object it was found in (serde's message names
/// the field).
fn located<T: DeserializeOwned>(text: &str) -> Option<(String, serde_json::Error)> {
    let e = serde_json::from_str::<T>(text).err()?;
    Some((path_of(text, &e), e))
}

/// The path of the value serde_json's error `e` about `text` is about ([`path_at`] its
/// position).
pub(crate) fn path_of(text: &str, e: &serde_json::Error) -> String {
    let message = e.to_string();
    let opened_by = if message.starts_with("invalid type: sequence") {
        Some(b'[')
    } else if message.starts_with("invalid type: map") {
        Some(b'{')
    } else {
        None
    };
    path_at(text, e.line(), e.column(), opened_by)
}

/// The path of the innermost value of JSON `text` that the position `line`:`column`
/// (serde_json's: 1-based lines, 1-based byte columns of the last character read, 0 for
/// a line's start) is in, just after, or just before (serde_json stops before a value
/// whose first character shows it is of the wrong type): `.key` for a member of an
/// object, `[i]` for an element of an array. A key read without its value (where serde
/// stops on an unknown field) is not part of it. An error about an object or array as a
/// whole (a missing field, a wrong length) comes after its closing bracket: the path is
/// that of the object or array. `opened_by` (`[` or `{`) says the error is about an array
/// or object where something else was expected: serde_json stops either before it (its
/// bracket comes next) or just after its opening bracket (types read from any value).
///
/// This reads the text once, as tokens, instead of deserializing it again with path
/// tracking (serde_path_to_error), which cost the capacity gate 228 KB of module for the
/// same answer.
fn path_at(text: &str, line: usize, column: usize, opened_by: Option<u8>) -> String {
    enum Frame {
        Object { key: Option<String>, in_value: bool },
        Array { index: usize, in_element: bool },
    }
    let line_start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    let end = (line_start + column).min(text.len());
    let bytes = &text.as_bytes()[..end];
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0;
    // A value starts at the current position: mark the enclosing container.
    let start_value = |stack: &mut Vec<Frame>| {
        if let Some(Frame::Array { in_element, .. }) = stack.last_mut() {
            *in_element = true;
        }
    };
    while i < bytes.len() {
        match bytes[i] {
            b'{' => {
                start_value(&mut stack);
                stack.push(Frame::Object {
                    key: None,
                    in_value: false,
                });
            }
            b'[' => {
                start_value(&mut stack);
                stack.push(Frame::Array {
                    index: 0,
                    in_element: false,
                });
            }
            b'}' | b']' => {
                stack.pop();
            }
            b':' => {
                if let Some(Frame::Object { in_value, .. }) = stack.last_mut() {
                    *in_value = true;
                }
            }
            b',' => match stack.last_mut() {
                Some(Frame::Object { key, in_value }) => {
                    *key = None;
                    *in_value = false;
                }
                Some(Frame::Array { index, in_element }) => {
                    *index += 1;
                    *in_element = false;
                }
                None => {}
            },
            b'"' => {
                let from = i + 1;
                i = from;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                // (bytes: a position inside a character ends the text there)
                let raw = String::from_utf8_lossy(&bytes[from.min(i)..i.min(bytes.len())]);
                match stack.last_mut() {
                    Some(Frame::Object { key, in_value }) if !*in_value => {
                        *key = Some(
                            serde_json::from_str::<String>(&format!("\"{raw}\""))
                                .unwrap_or_else(|_| raw.to_string()),
                        );
                    }
                    _ => start_value(&mut stack),
                }
            }
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ => start_value(&mut stack),
        }
        i += 1;
    }
    let next = text.as_bytes()[end..]
        .iter()
        .find(|b| !b.is_ascii_whitespace());
    let last = bytes.iter().rev().find(|b| !b.is_ascii_whitespace());
    match opened_by {
        Some(open) if next != Some(&open) && last == Some(&open) => {
            stack.pop();
        }
        _ if next.is_some_and(|b| !matches!(b, b',' | b'}' | b']' | b':')) => {
            start_value(&mut stack);
        }
        _ => {}
    }
    let mut path = String::new();
    for frame in &stack {
        match frame {
            Frame::Object {
                key: Some(k),
                in_value: true,
            } => {
                path.push('.');
                path.push_str(k);
            }
            Frame::Array {
                index,
                in_element: true,
            } => path.push_str(&format!("[{index}]")),
            _ => {}
        }
    }
    path
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

    /// (text, where serde_json stops, the path there)
    #[rstest::rstest]
    #[case::a_member(r#"{"a": {"b": 7}}"#, "7", ".a.b")]
    #[case::an_element(r#"{"a": [1, {"b": [true, "x"]}]}"#, "\"x", ".a[1].b[1]")]
    #[case::a_key_without_its_value(r#"{"a": {"b": 1, "zz": 2}}"#, "\"zz\"", ".a")]
    #[case::a_closed_object_is_its_own_path(r#"{"a": [{"b": 1}]}"#, "}", ".a[0]")]
    #[case::escaped_quotes_and_keys(r#"{"a\"b": {"c": "\"],{"}}"#, "}", ".a\"b")]
    #[case::the_top(r#"  7"#, "7", "")]
    #[case::an_empty_array_is_not_an_element(r#"{"a": []}"#, "[", ".a")]
    #[case::on_a_later_line("{\n  \"a\": [\n    1,\n    2\n  ]\n}", "2", ".a[1]")]
    fn the_path_at_a_position_is_the_value_there(
        #[case] text: &str,
        #[case] through: &str,
        #[case] want: &str,
    ) {
        let end = text.find(through).unwrap() + through.len();
        let line = text[..end].matches('\n').count() + 1;
        let column = end - text[..end].rfind('\n').map_or(0, |n| n + 1);
        assert_eq!(path_at(text, line, column, None), want);
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        outer: Vec<Entry>,
        #[serde(default)]
        pair: Option<(u32, u32)>,
    }

    /// serde_json's own errors, each named where the settings spell the value.
    #[rstest::rstest]
    #[case::missing_field(
        r#"{"outer": [{"layers": 1}, {"aliases": []}]}"#,
        ".outer[1]: missing field `layers`"
    )]
    #[case::missing_field_after_an_object(
        r#"{"outer": [{"aliases": ["a"]}]}"#,
        ".outer[0]: missing field `layers`"
    )]
    #[case::a_list_where_a_number_is(
        r#"{"outer": [{"layers": [[1]]}]}"#,
        ".outer[0].layers: invalid type: sequence"
    )]
    #[case::a_list_where_a_string_is(
        r#"{"outer": [{"layers": 1, "aliases": [["x"]]}]}"#,
        ".outer[0].aliases[0]: invalid type: sequence"
    )]
    #[case::an_object_in_a_list(
        r#"{"outer": [{"layers": 1, "aliases": ["a", {}]}]}"#,
        ".outer[0].aliases[1]: invalid type: map"
    )]
    #[case::unknown_field(
        r#"{"outer": [{"layers": 1, "bad": 2}]}"#,
        ".outer[0]: unknown field `bad`"
    )]
    #[case::a_wrong_length(r#"{"outer": [], "pair": [1]}"#, ".pair: invalid length 1")]
    #[case::a_list_read_as_any_value(
        r#"{"outer": [{"layers": 1, "aliases": []}], "pair": {"a": 1}}"#,
        ".pair: invalid type: map"
    )]
    #[case::a_number_read_whole(
        r#"{"outer": [{"layers": -1}]}"#,
        ".outer[0].layers: invalid value: integer `-1`"
    )]
    fn serde_errors_name_the_value_they_are_about(#[case] text: &str, #[case] want: &str) {
        let e = serde_json::from_str::<Outer>(text).unwrap_err();
        let said = format!("{}: {e}", path_of(text, &e));
        assert!(said.starts_with(want), "{said}");
    }

    #[test]
    fn a_position_inside_a_character_or_past_the_end_is_no_panic() {
        let text = "{\"a\": \"\u{f6}x\", \"\u{e4}\": [1]}";
        for column in 0..text.len() + 3 {
            path_at(text, 1, column, None);
            path_at(text, 2, column, Some(b'['));
        }
        assert_eq!(path_at(text, 1, 8, None), ".a");
        assert_eq!(path_at("{\"a\": \"x\\", 1, 12, None), ".a");
    }

    #[test]
    fn a_value_read_again_is_named_as_its_text_is() {
        let value = serde_json::json!({"layers": 1, "aliases": ["a", 2]});
        let e = FieldError::read_value::<Entry>(|| "models[m]".into(), &value).unwrap_err();
        assert_eq!(
            e.to_string(),
            "models[m].aliases[1]: invalid type: integer `2`, expected a string"
        );
    }

    #[test]
    fn reads_path_colon_reason() {
        let e = FieldError::new("pools[1].name", "must not be empty");
        assert_eq!(e.to_string(), "pools[1].name: must not be empty");
    }
}
