//! The one wildcard dialect of the settings: `*` matches any run of characters (also an
//! empty one), `?` exactly one character, every other character only itself, and the whole
//! value must match (`team-*` matches `team-a`, not `my-team-a`).
//!
//! Fields say which part of the dialect they take: namespace lists (`exemptNamespaces`,
//! `namespaces`) and GPU resource names (`extraGpuResources`) are exact names or a prefix
//! ending in `*` (`kube-*`, `amd.com/cpx_*`); label value patterns (`requiredLabels[].pattern`)
//! take `*` and `?` anywhere (`cc-????`).
//!
//! Why not a regular expression: the patterns people need for names and label values are
//! prefixes, suffixes and fixed shapes. A glob says that without a regex engine in every
//! module (and without a way to write a catastrophic pattern): matching is a loop over two
//! short strings, at most `pattern length x value length` steps, and allocates nothing.

use super::FieldError;

/// True when the whole of `value` matches `pattern`.
pub fn matches(pattern: &str, value: &str) -> bool {
    let (mut p, mut v) = (0usize, 0usize);
    // After a `*`: where the pattern resumes, and the value position that star has
    // swallowed up to. On a mismatch the star takes one more character and we retry.
    let mut star: Option<(usize, usize)> = None;
    while let Some(c) = value[v..].chars().next() {
        match pattern[p..].chars().next() {
            Some('*') => {
                star = Some((p + 1, v));
                p += 1;
            }
            Some(q) if q == '?' || q == c => {
                p += q.len_utf8();
                v += c.len_utf8();
            }
            _ => match star {
                Some((resume, swallowed)) => {
                    let next =
                        swallowed + value[swallowed..].chars().next().map_or(1, char::len_utf8);
                    p = resume;
                    v = next;
                    star = Some((resume, next));
                }
                None => return false,
            },
        }
    }
    pattern[p..].bytes().all(|c| c == b'*')
}

/// Characters a label value pattern may contain besides `*` and `?`: those of label values.
fn is_value_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// Checks a label value pattern from settings.
pub fn validate_pattern(field: &str, pattern: &str) -> Result<(), FieldError> {
    let fail = |reason: String| Err(FieldError::new(field, reason));
    if pattern.is_empty() {
        return fail("must not be empty (drop pattern to accept any non-empty value)".into());
    }
    if let Some(bad) = pattern
        .chars()
        .find(|c| !is_value_char(*c) && *c != '*' && *c != '?')
    {
        return fail(format!(
            "'{pattern}' contains '{bad}'; a pattern is letters, digits, '-', '_', '.' plus the wildcards '*' (any characters) and '?' (one character)"
        ));
    }
    let literal_or_one = pattern.chars().filter(|c| *c != '*').count();
    if literal_or_one > 63 {
        return fail(format!(
            "'{pattern}' needs more than 63 characters, longer than any label value"
        ));
    }
    let ends = [pattern.chars().next(), pattern.chars().last()];
    if ends
        .iter()
        .flatten()
        .any(|c| is_value_char(*c) && !c.is_ascii_alphanumeric())
    {
        return fail(format!(
            "'{pattern}' can never match: label values start and end with a letter or digit"
        ));
    }
    Ok(())
}

/// A name or a prefix: `(name, true)` for `name*`, `(name, false)` for an exact name.
pub fn prefix_of(pattern: &str) -> (&str, bool) {
    match pattern.strip_suffix('*') {
        Some(prefix) => (prefix, true),
        None => (pattern, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::exact("batch", "batch", true)]
    #[case::exact_other("batch", "batches", false)]
    #[case::anchored_start("team-*", "my-team-a", false)]
    #[case::prefix("team-*", "team-a", true)]
    #[case::prefix_empty_rest("team-*", "team-", true)]
    #[case::suffix("*-prod", "api-prod", true)]
    #[case::suffix_miss("*-prod", "api-production", false)]
    #[case::middle("a*z", "abcz", true)]
    #[case::middle_backtracks("a*bc", "abcbc", true)]
    #[case::question("cc-????", "cc-1234", true)]
    #[case::question_short("cc-????", "cc-123", false)]
    #[case::question_long("cc-????", "cc-12345", false)]
    #[case::star_only("*", "anything", true)]
    #[case::star_matches_empty("*", "", true)]
    #[case::empty_value("a*", "", false)]
    #[case::many_stars("**a**b**", "xaybz", true)]
    #[case::stars_then_question("*?", "", false)]
    #[case::case_sensitive("Team-*", "team-a", false)]
    #[case::unicode_value("t?m", "t\u{e9}m", true)]
    fn matching(#[case] pattern: &str, #[case] value: &str, #[case] expected: bool) {
        assert_eq!(matches(pattern, value), expected);
    }

    #[test]
    fn pathological_patterns_stay_cheap() {
        // Classic exponential case for backtracking matchers; here it is a bounded loop.
        let pattern = "*a".repeat(30) + "b";
        let value = "a".repeat(63);
        assert!(!matches(&pattern, &value));
    }

    #[rstest]
    #[case::plain("team-*")]
    #[case::question("cc-????")]
    #[case::star("*")]
    #[case::dots("v1.*")]
    fn good_patterns(#[case] p: &str) {
        validate_pattern("requiredLabels[0].pattern", p).unwrap();
    }

    #[rstest]
    #[case::empty("")]
    #[case::regex("team-.+")]
    #[case::slash("a/b")]
    #[case::space("a b")]
    #[case::too_long(&"a".repeat(64))]
    #[case::starts_with_dash("-x*")]
    #[case::ends_with_dot("x*.")]
    fn bad_patterns_name_the_field(#[case] p: &str) {
        let err = validate_pattern("requiredLabels[0].pattern", p).unwrap_err();
        assert_eq!(err.path, "requiredLabels[0].pattern", "{err}");
    }
}
