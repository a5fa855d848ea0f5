//! Numbers as settings give them and as messages show them.
//!
//! Settings numbers are read as text ([`NumText`]: a JSON number or a string) and checked
//! by the rules, so a wrong value is reported with its field path (`models[x].layers: ...`)
//! instead of serde's position-only message. Every comparison is on integers: memory in
//! MiB, parameters in millions, percentages as whole numbers.

use crate::settings::FieldError;
use serde::{Deserialize, Deserializer};
use std::fmt;

/// Bytes in one MiB.
pub const MIB: u128 = 1024 * 1024;

/// A number from settings, kept as its text until the rules check it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumText(pub String);

impl<'de> Deserialize<'de> for NumText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = NumText;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number or a string")
            }
            // The text serde_json gives a number (`80`, `70.6`, `1e+21`), which errors quote.
            fn visit_u64<E>(self, v: u64) -> Result<NumText, E> {
                Ok(NumText(itoa::Buffer::new().format(v).to_string()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<NumText, E> {
                Ok(NumText(itoa::Buffer::new().format(v).to_string()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<NumText, E> {
                Ok(NumText(if v.is_finite() {
                    zmij::Buffer::new().format_finite(v).to_string()
                } else {
                    v.to_string()
                }))
            }
            fn visit_str<E>(self, v: &str) -> Result<NumText, E> {
                Ok(NumText(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<NumText, E> {
                Ok(NumText(v))
            }
        }
        deserializer.deserialize_any(Text)
    }
}

impl From<u64> for NumText {
    fn from(n: u64) -> Self {
        NumText(n.to_string())
    }
}

impl From<&str> for NumText {
    fn from(s: &str) -> Self {
        NumText(s.to_string())
    }
}

impl fmt::Display for NumText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl NumText {
    /// A whole number in `min..=max`; the error names `field`.
    pub fn whole(&self, field: &str, min: u64, max: u64) -> Result<u64, FieldError> {
        let text = self.0.trim();
        let value = (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
            .then(|| text.parse::<u64>().ok())
            .flatten();
        match value {
            Some(v) if (min..=max).contains(&v) => Ok(v),
            _ => Err(FieldError::new(
                field,
                format!(
                    "must be a whole number from {min} to {max}, got {}",
                    shown(text)
                ),
            )),
        }
    }

    /// A decimal with at most three decimals, in thousandths, in `min..=max` thousandths.
    pub fn thousandths(&self, field: &str, min: u64, max: u64) -> Result<u64, FieldError> {
        let text = self.0.trim();
        match parse_thousandths(text) {
            Some(v) if (min..=max).contains(&v) => Ok(v),
            _ => Err(FieldError::new(
                field,
                format!(
                    "must be a number from {} to {} with at most 3 decimals, got {}",
                    Thousandths(min),
                    Thousandths(max),
                    shown(text)
                ),
            )),
        }
    }
}

fn shown(text: &str) -> String {
    if text.is_empty() {
        "nothing".into()
    } else {
        format!("'{text}'")
    }
}

/// `70.6` -> 70600. No sign, no exponent, at most three decimals.
pub fn parse_thousandths(text: &str) -> Option<u64> {
    let (whole, frac) = match text.split_once('.') {
        Some((w, f)) => (w, f),
        None => (text, ""),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || whole.len() > 15 || !digits(whole) || frac.len() > 3 || !digits(frac) {
        return None;
    }
    if text.ends_with('.') {
        return None;
    }
    let mut value = whole.parse::<u64>().ok()?.checked_mul(1000)?;
    let mut scale = 100;
    for b in frac.bytes() {
        value = value.checked_add(u64::from(b - b'0') * scale)?;
        scale /= 10;
    }
    Some(value)
}

/// A count of thousandths shown as a decimal: 70600 -> `70.6`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thousandths(pub u64);

impl fmt::Display for Thousandths {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (whole, frac) = (self.0 / 1000, self.0 % 1000);
        if frac == 0 {
            write!(f, "{whole}")
        } else {
            let frac = format!("{frac:03}");
            write!(f, "{whole}.{}", frac.trim_end_matches('0'))
        }
    }
}

/// `ceil(a / b)` for `b > 0` (0 when `b == 0`, which callers never pass).
pub fn div_ceil(a: u128, b: u128) -> u128 {
    if b == 0 { 0 } else { a.div_ceil(b) }
}

/// Bytes to MiB, rounded up.
pub fn bytes_to_mib_ceil(bytes: u128) -> u64 {
    u64::try_from(div_ceil(bytes, MIB)).unwrap_or(u64::MAX)
}

/// Which way a shown figure is rounded: needs up, what a workload gets down, so a
/// message never shows "needs 41 GiB, gets 41 GiB" for a rejection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Round {
    Up,
    Down,
}

/// MiB as GiB for messages: one decimal below 10 GiB, whole GiB above.
pub fn gib(mib: u64, round: Round) -> String {
    let mib = u128::from(mib);
    if mib < 10 * 1024 {
        let tenths = match round {
            Round::Up => div_ceil(mib * 10, 1024),
            Round::Down => mib * 10 / 1024,
        };
        if tenths % 10 == 0 {
            format!("{} GiB", tenths / 10)
        } else {
            format!("{}.{} GiB", tenths / 10, tenths % 10)
        }
    } else {
        let whole = match round {
            Round::Up => div_ceil(mib, 1024),
            Round::Down => mib / 1024,
        };
        format!("{whole} GiB")
    }
}

/// `part * percent / 100`, rounded down (what a workload may use of `part`).
pub fn percent_of(part: u64, percent: u64) -> u64 {
    u64::try_from(u128::from(part) * u128::from(percent) / 100).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    #[rstest]
    #[case::whole("8", Some(8000))]
    #[case::one_decimal("70.6", Some(70600))]
    #[case::three_decimals("8.031", Some(8031))]
    #[case::zero("0", Some(0))]
    #[case::four_decimals("1.2345", None)]
    #[case::negative("-1", None)]
    #[case::exponent("1e3", None)]
    #[case::trailing_dot("7.", None)]
    #[case::leading_dot(".5", None)]
    #[case::empty("", None)]
    #[case::words("seven", None)]
    #[case::huge("99999999999999999999", None)]
    fn thousandths_are_exact(#[case] text: &str, #[case] expected: Option<u64>) {
        assert_eq!(parse_thousandths(text), expected);
    }

    #[test]
    fn numbers_and_strings_are_both_read() {
        let n: NumText = serde_json::from_value(json!(70.6)).unwrap();
        assert_eq!(n.thousandths("p", 1, u64::MAX).unwrap(), 70600);
        let s: NumText = serde_json::from_value(json!("46.7")).unwrap();
        assert_eq!(s.thousandths("p", 1, u64::MAX).unwrap(), 46700);
        let i: NumText = serde_json::from_value(json!(80)).unwrap();
        assert_eq!(i.whole("layers", 1, 1000).unwrap(), 80);
        assert!(serde_json::from_value::<NumText>(json!(true)).is_err());
    }

    #[rstest]
    #[case::float("70.6", "70.6")]
    #[case::exponent("1e21", "1e+21")]
    #[case::negative("-3", "-3")]
    #[case::whole("80", "80")]
    #[case::text("\" 8 \"", " 8 ")]
    fn numbers_keep_the_text_json_gives_them(#[case] json: &str, #[case] text: &str) {
        assert_eq!(serde_json::from_str::<NumText>(json).unwrap().0, text);
    }

    #[rstest]
    #[case::null("null")]
    #[case::list("[1]")]
    #[case::object("{}")]
    fn other_values_are_not_numbers(#[case] json: &str) {
        let e = serde_json::from_str::<NumText>(json)
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected a number or a string"), "{e}");
    }

    #[rstest]
    #[case::zero("0", "layers: must be a whole number from 1 to 1000, got '0'")]
    #[case::negative("-3", "layers: must be a whole number from 1 to 1000, got '-3'")]
    #[case::fraction("1.5", "layers: must be a whole number from 1 to 1000, got '1.5'")]
    #[case::too_big("1001", "layers: must be a whole number from 1 to 1000, got '1001'")]
    #[case::empty("", "layers: must be a whole number from 1 to 1000, got nothing")]
    fn whole_numbers_name_the_field(#[case] text: &str, #[case] message: &str) {
        assert_eq!(
            NumText::from(text)
                .whole("layers", 1, 1000)
                .unwrap_err()
                .to_string(),
            message
        );
    }

    #[test]
    fn thousandths_errors_show_the_range() {
        assert_eq!(
            NumText::from("0")
                .thousandths("vramGiB", 1, 1_000_000)
                .unwrap_err()
                .to_string(),
            "vramGiB: must be a number from 0.001 to 1000 with at most 3 decimals, got '0'"
        );
        assert_eq!(Thousandths(70600).to_string(), "70.6");
        assert_eq!(Thousandths(8031).to_string(), "8.031");
        assert_eq!(Thousandths(8000).to_string(), "8");
    }

    #[rstest]
    #[case::small_up(9 * 1024 + 1, Round::Up, "9.1 GiB")]
    #[case::small_down(9 * 1024 + 1, Round::Down, "9 GiB")]
    #[case::exact(4096, Round::Up, "4 GiB")]
    #[case::large_up(40 * 1024 + 1, Round::Up, "41 GiB")]
    #[case::large_down(41 * 1024 - 1, Round::Down, "40 GiB")]
    #[case::zero(0, Round::Up, "0 GiB")]
    fn gib_rounds_needs_up_and_offers_down(
        #[case] mib: u64,
        #[case] round: Round,
        #[case] shown: &str,
    ) {
        assert_eq!(gib(mib, round), shown);
    }

    #[test]
    fn integer_helpers() {
        assert_eq!(bytes_to_mib_ceil(1), 1);
        assert_eq!(bytes_to_mib_ceil(MIB), 1);
        assert_eq!(bytes_to_mib_ceil(MIB + 1), 2);
        assert_eq!(percent_of(23028 * 2, 90), 41450);
        assert_eq!(div_ceil(7, 0), 0);
    }
}
