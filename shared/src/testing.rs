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

/// Asserts that `v` denies with exactly `text`.
#[track_caller]
pub(crate) fn denies(v: &Verdict, text: &str) {
    assert!(!v.allowed, "{v:?}");
    assert_eq!(message(v), text, "{v:?}");
}

/// Asserts that `v` denies with a message that says `part`.
#[track_caller]
pub(crate) fn denies_saying(v: &Verdict, part: &str) {
    assert!(!v.allowed, "{v:?}");
    says(v, part);
}

/// Asserts that `v` denies with a message that starts with `opening`.
#[track_caller]
pub(crate) fn denies_starting(v: &Verdict, opening: &str) {
    assert!(!v.allowed, "{v:?}");
    starts_saying(v, opening);
}

/// The audit annotation `key` of `v` ("" without one).
pub(crate) fn audit<'v>(v: &'v Verdict, key: &str) -> &'v str {
    v.audit_annotations.get(key).map_or("", String::as_str)
}

/// Asserts that `v` allows, its audit annotation `key` saying `part`.
#[track_caller]
pub(crate) fn allows_noting(v: &Verdict, key: &str, part: &str) {
    assert!(v.allowed, "{v:?}");
    assert!(audit(v, key).contains(part), "{v:?}");
}

/// Asserts that the audit annotation `key` of `v` says `part`.
#[track_caller]
pub(crate) fn notes(v: &Verdict, key: &str, part: &str) {
    assert!(audit(v, key).contains(part), "{v:?}");
}

/// Asserts that the audit annotation `key` of `v` ends with `ending`.
#[track_caller]
pub(crate) fn notes_ending(v: &Verdict, key: &str, ending: &str) {
    assert!(audit(v, key).ends_with(ending), "{v:?}");
}

/// Asserts that `v` allows, its audit annotation `key` being exactly `text`.
#[track_caller]
pub(crate) fn allows_recording(v: &Verdict, key: &str, text: &str) {
    assert!(v.allowed, "{v:?}");
    assert_eq!(audit(v, key), text, "{v:?}");
}

/// Asserts that `v` allows with exactly the warnings `texts`.
#[track_caller]
pub(crate) fn allows_warning(v: &Verdict, texts: &[&str]) {
    assert!(v.allowed, "{v:?}");
    assert_eq!(v.warnings, texts, "{v:?}");
}

/// Asserts that `result` is an error whose text starts with `opening`.
#[track_caller]
pub(crate) fn fails_starting<T: std::fmt::Debug, E: std::fmt::Display>(
    result: Result<T, E>,
    opening: &str,
) {
    match result {
        Ok(value) => panic!("expected an error starting {opening:?}, got {value:?}"),
        Err(e) => assert!(e.to_string().starts_with(opening), "{e}"),
    }
}

/// Asserts that `text` says `part`.
#[track_caller]
pub(crate) fn text_says(text: &str, part: &str) {
    assert!(text.contains(part), "{text:?} does not say {part:?}");
}

/// Asserts that `text` starts with `opening`.
#[track_caller]
pub(crate) fn text_starts(text: &str, opening: &str) {
    assert!(
        text.starts_with(opening),
        "{text:?} does not start {opening:?}"
    );
}

/// Asserts that `text` ends with `ending`.
#[track_caller]
pub(crate) fn text_ends(text: &str, ending: &str) {
    assert!(text.ends_with(ending), "{text:?} does not end {ending:?}");
}
