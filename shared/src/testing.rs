//! Assertions the unit tests share: a message says what it should, and a failure shows the
//! whole message (or the whole verdict).

use crate::admission::Verdict;

/// Asserts that `text` contains `part`.
#[track_caller]
pub(crate) fn assert_contains(text: &str, part: &str) {
    assert!(text.contains(part), "{text}");
}

/// Asserts that `text` starts with `opening`.
#[track_caller]
pub(crate) fn assert_starts(text: &str, opening: &str) {
    assert!(text.starts_with(opening), "{text}");
}

/// Asserts that `text` ends with `ending`.
#[track_caller]
pub(crate) fn assert_ends(text: &str, ending: &str) {
    assert!(text.ends_with(ending), "{text}");
}

/// The message of `v` ("" without one).
pub(crate) fn message(v: &Verdict) -> &str {
    v.message.as_deref().unwrap_or("")
}

/// Asserts that the message of `v` says `part`.
#[track_caller]
pub(crate) fn says(v: &Verdict, part: &str) {
    assert!(message(v).contains(part), "{v:?}");
}

/// Asserts that the message of `v` starts with `opening`.
#[track_caller]
pub(crate) fn starts_saying(v: &Verdict, opening: &str) {
    assert!(message(v).starts_with(opening), "{v:?}");
}

/// Asserts that the message of `v` ends with `ending`.
#[track_caller]
pub(crate) fn ends_saying(v: &Verdict, ending: &str) {
    assert!(message(v).ends_with(ending), "{v:?}");
}
