//! Assertions the unit tests share: a verdict's message says what it should, and a failure
//! shows the whole verdict.

use crate::admission::Verdict;

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
