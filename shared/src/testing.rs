//! Assertions the unit tests share: a message says what it should, and a failure shows the
//! whole message.

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
