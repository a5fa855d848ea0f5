//! Kubernetes resource quantities (`2`, `500m`, `1k`, `16Gi`, `1e3`, `0.5`), parsed exactly.
//!
//! A [`Quantity`] holds its value as a whole number of *nano-units* in an `i128`, the
//! finest precision Kubernetes keeps. Parsing uses integer arithmetic only: no
//! floating-point rounding, and digits finer than a nano-unit round up (away from zero),
//! as the API server does. Anything that is not a quantity, or whose magnitude is beyond
//! what any real resource could be (more than 2^63 base units), is an error, never a panic.

use std::fmt;

/// Nano-units per base unit.
const NANO: i128 = 1_000_000_000;
/// The largest magnitude accepted, in base units. Kubernetes itself stores int64 values.
const MAX_BASE_UNITS: i128 = i64::MAX as i128;
/// Significant digits beyond this cannot be meaningful for a resource amount.
const MAX_DIGITS: usize = 30;
/// A quantity string longer than this is rejected before parsing.
const MAX_LEN: usize = 64;

/// Why a string is not a usable quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("'{0}' is not a Kubernetes quantity (expected e.g. 1, 500m, 16Gi, 1e3)")]
    Malformed(String),
    #[error("'{0}' is too large to be a resource amount")]
    TooLarge(String),
    #[error("'{0}' must be a whole number")]
    NotWhole(String),
    #[error("'{0}' must not be negative")]
    Negative(String),
}

/// An exact Kubernetes quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Quantity {
    nanos: i128,
}

impl Quantity {
    /// Zero.
    pub const ZERO: Quantity = Quantity { nanos: 0 };

    /// A quantity of `n` whole units.
    pub fn from_units(n: i64) -> Quantity {
        Quantity {
            nanos: i128::from(n) * NANO,
        }
    }

    /// Parses a quantity string following Kubernetes' grammar:
    /// `<sign><digits>[.<digits>]<suffix>` where the suffix is a binary SI suffix
    /// (`Ki`..`Ei`), a decimal SI suffix (`n u m k M G T P E`) or an exponent (`e3`, `E-2`).
    pub fn parse(text: &str) -> Result<Quantity, QuantityError> {
        let malformed = || QuantityError::Malformed(shorten(text));
        if text.is_empty() || text.len() > MAX_LEN {
            return Err(malformed());
        }
        let (negative, rest) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text.strip_prefix('+').unwrap_or(text)),
        };
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_len);
        let (int_part, frac_part) = match number.split_once('.') {
            Some((i, f)) => (i, f),
            None => (number, ""),
        };
        if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
            return Err(malformed());
        }
        // Trailing zeros of the fraction carry no value ("1.50" == "1.5").
        let frac_part = frac_part.trim_end_matches('0');
        let (binary_shift, decimal_exp) = parse_suffix(suffix).ok_or_else(malformed)?;

        // value = mantissa * 10^(decimal_exp - frac_len) * 2^binary_shift, in base units.
        let too_large = || QuantityError::TooLarge(shorten(text));
        let significant = int_part
            .bytes()
            .chain(frac_part.bytes())
            .skip_while(|&d| d == b'0');
        let mut mantissa: i128 = 0;
        for (n, d) in significant.enumerate() {
            if n == MAX_DIGITS {
                return Err(too_large());
            }
            mantissa = mantissa * 10 + i128::from(d - b'0');
        }
        // Scale to nano-units: exponent of ten relative to nanos.
        let frac_len = i64::try_from(frac_part.len()).map_err(|_| malformed())?;
        let exp10 = decimal_exp - frac_len + 9;
        let mut value = mantissa
            .checked_mul(1i128 << binary_shift)
            .ok_or_else(too_large)?;
        if value != 0 {
            if exp10 >= 0 {
                let factor = pow10(exp10).ok_or_else(too_large)?;
                value = value.checked_mul(factor).ok_or_else(too_large)?;
            } else {
                // Finer than a nano-unit: round up, as Kubernetes does.
                value = match pow10(-exp10) {
                    Some(divisor) => div_ceil(value, divisor),
                    None => 1,
                };
            }
        }
        if value > MAX_BASE_UNITS * NANO {
            return Err(too_large());
        }
        Ok(Quantity {
            nanos: if negative { -value } else { value },
        })
    }

    /// Parses a quantity that must be a non-negative whole number (GPU counts).
    pub fn parse_count(text: &str) -> Result<u64, QuantityError> {
        let q = Quantity::parse(text)?;
        if q.is_negative() {
            return Err(QuantityError::Negative(shorten(text)));
        }
        q.whole()
            .ok_or_else(|| QuantityError::NotWhole(shorten(text)))
    }

    /// The value in nano-units.
    pub fn nanos(self) -> i128 {
        self.nanos
    }

    /// True below zero.
    pub fn is_negative(self) -> bool {
        self.nanos < 0
    }

    /// True at exactly zero.
    pub fn is_zero(self) -> bool {
        self.nanos == 0
    }

    /// The value as a whole number of units, or `None` if it has a fractional part or is negative.
    pub fn whole(self) -> Option<u64> {
        if self.nanos < 0 || self.nanos % NANO != 0 {
            return None;
        }
        u64::try_from(self.nanos / NANO).ok()
    }

    /// The value in whole units, rounded up (0 for negative amounts).
    pub fn units_ceil(self) -> u64 {
        if self.nanos <= 0 {
            return 0;
        }
        u64::try_from(div_ceil(self.nanos, NANO)).unwrap_or(u64::MAX)
    }

    /// The value in milli-units, rounded up.
    pub fn milli_ceil(self) -> i128 {
        div_ceil(self.nanos, 1_000_000)
    }

    /// A byte amount in MiB, rounded up (0 for negative amounts).
    pub fn mib_ceil(self) -> u64 {
        if self.nanos <= 0 {
            return 0;
        }
        let mib = div_ceil(self.nanos, NANO * 1024 * 1024);
        u64::try_from(mib).unwrap_or(u64::MAX)
    }

    /// The largest of two quantities.
    pub fn max(self, other: Quantity) -> Quantity {
        if other > self { other } else { self }
    }
}

impl std::ops::Add for Quantity {
    type Output = Quantity;
    /// Saturating: sums of bounded quantities cannot overflow i128 in practice.
    fn add(self, rhs: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_add(rhs.nanos),
        }
    }
}

impl std::iter::Sum for Quantity {
    fn sum<I: Iterator<Item = Quantity>>(iter: I) -> Quantity {
        iter.fold(Quantity::ZERO, |a, b| a + b)
    }
}

impl fmt::Display for Quantity {
    /// Canonical-ish decimal form: whole units when exact, else milli-units (`500m`),
    /// else nano-units (`5n`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos % NANO == 0 {
            write!(f, "{}", self.nanos / NANO)
        } else if self.nanos % 1_000_000 == 0 {
            write!(f, "{}m", self.nanos / 1_000_000)
        } else {
            write!(f, "{}n", self.nanos)
        }
    }
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

/// (binary shift, decimal exponent) of a suffix, `None` if it is not one.
fn parse_suffix(suffix: &str) -> Option<(u32, i64)> {
    Some(match suffix {
        "" => (0, 0),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        _ => {
            let exp = suffix.strip_prefix(['e', 'E'])?;
            let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| b.is_ascii_digit())
            {
                return None;
            }
            (0, exp.parse().ok()?)
        }
    })
}

fn pow10(exp: i64) -> Option<i128> {
    let exp = u32::try_from(exp).ok()?;
    10i128.checked_pow(exp)
}

/// Ceiling division for a non-negative numerator or any sign (rounds towards +infinity).
fn div_ceil(n: i128, d: i128) -> i128 {
    let q = n / d;
    if n % d > 0 { q + 1 } else { q }
}

/// Keeps error messages short when a hostile object carries a huge string.
fn shorten(text: &str) -> String {
    if text.len() <= MAX_LEN {
        return text.to_string();
    }
    let mut end = MAX_LEN;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn nanos(s: &str) -> i128 {
        Quantity::parse(s).unwrap().nanos()
    }

    #[rstest]
    #[case::integer("2", 2 * NANO)]
    #[case::zero("0", 0)]
    #[case::milli("500m", 500_000_000)]
    #[case::kilo("1k", 1000 * NANO)]
    #[case::kibi("1Ki", 1024 * NANO)]
    #[case::gibi("16Gi", 16 * (1 << 30) * NANO)]
    #[case::exponent("1e3", 1000 * NANO)]
    #[case::upper_exponent("1E3", 1000 * NANO)]
    #[case::negative_exponent("15e-1", 1_500_000_000)]
    #[case::fraction("0.5", 500_000_000)]
    #[case::leading_dot(".5", 500_000_000)]
    #[case::trailing_dot("5.", 5 * NANO)]
    #[case::fractional_binary("1.5Gi", 3 * (1 << 29) * NANO)]
    #[case::plus_sign("+3", 3 * NANO)]
    #[case::negative("-1", -NANO)]
    #[case::nano("1n", 1)]
    #[case::micro("3u", 3000)]
    #[case::mega("2M", 2_000_000 * NANO)]
    #[case::exa("1E", 1_000_000_000_000_000_000 * NANO)]
    #[case::exbi("2Ei", (1i128 << 61) * NANO)]
    #[case::sub_nano_rounds_up("0.1n", 1)]
    #[case::tiny_exponent_rounds_up("1e-30", 1)]
    #[case::leading_zeros("000000000000000000000000000000000000000000000000007", 7 * NANO)]
    #[case::trailing_fraction_zeros("1.000000000000000000000000000000000000000", NANO)]
    #[case::zero_huge_exponent("0e999", 0)]
    fn parses_known_quantities(#[case] text: &str, #[case] expected: i128) {
        assert_eq!(nanos(text), expected, "{text}");
    }

    #[rstest]
    #[case::empty("", QuantityError::Malformed)]
    #[case::sign_only("-", QuantityError::Malformed)]
    #[case::dot_only(".", QuantityError::Malformed)]
    #[case::two_dots("1.2.3", QuantityError::Malformed)]
    #[case::unknown_suffix("1Gb", QuantityError::Malformed)]
    #[case::lowercase_binary("1gi", QuantityError::Malformed)]
    #[case::space(" 1", QuantityError::Malformed)]
    #[case::inner_space("1 Gi", QuantityError::Malformed)]
    #[case::letters("abc", QuantityError::Malformed)]
    #[case::exponent_without_digits("1e", QuantityError::Malformed)]
    #[case::exponent_after_binary("1Kie3", QuantityError::Malformed)]
    #[case::double_sign("--1", QuantityError::Malformed)]
    #[case::unicode("１", QuantityError::Malformed)]
    #[case::nan("NaN", QuantityError::Malformed)]
    #[case::inf("inf", QuantityError::Malformed)]
    // Absurdly large.
    #[case::huge_exponent("1e999", QuantityError::TooLarge)]
    #[case::beyond_int64("9223372036854775808", QuantityError::TooLarge)]
    #[case::many_digits("1234567890123456789012345678901", QuantityError::TooLarge)]
    #[case::big_binary("9000000Ei", QuantityError::TooLarge)]
    fn rejects_malformed_and_absurdly_large(
        #[case] text: &str,
        #[case] error: fn(String) -> QuantityError,
    ) {
        assert_eq!(Quantity::parse(text), Err(error(text.into())));
    }

    #[test]
    fn largest_int64_is_accepted() {
        assert_eq!(
            Quantity::parse("9223372036854775807").unwrap().whole(),
            Some(i64::MAX as u64)
        );
    }

    #[test]
    fn overlong_text_is_malformed_and_message_is_short() {
        let long = "1".repeat(10_000);
        let err = Quantity::parse(&long).unwrap_err();
        assert!(err.to_string().len() < 200, "{err}");
    }

    #[rstest]
    #[case("2", Ok(2))]
    #[case("2000m", Ok(2))]
    #[case("1e1", Ok(10))]
    #[case("0", Ok(0))]
    #[case("500m", Err(QuantityError::NotWhole("500m".into())))]
    #[case("0.5", Err(QuantityError::NotWhole("0.5".into())))]
    #[case("-1", Err(QuantityError::Negative("-1".into())))]
    #[case("1x", Err(QuantityError::Malformed("1x".into())))]
    fn counts_must_be_whole(#[case] text: &str, #[case] expected: Result<u64, QuantityError>) {
        assert_eq!(Quantity::parse_count(text), expected);
    }

    #[test]
    fn equal_values_in_different_forms_compare_equal() {
        assert_eq!(
            Quantity::parse("1").unwrap(),
            Quantity::parse("1000m").unwrap()
        );
        assert_eq!(
            Quantity::parse("1k").unwrap(),
            Quantity::parse("1e3").unwrap()
        );
        assert_eq!(
            Quantity::parse("1Ki").unwrap(),
            Quantity::parse("1024").unwrap()
        );
        assert!(Quantity::parse("1Gi").unwrap() > Quantity::parse("1G").unwrap());
    }

    #[test]
    fn mib_and_milli_round_up() {
        assert_eq!(Quantity::parse("16Gi").unwrap().mib_ceil(), 16 * 1024);
        assert_eq!(Quantity::parse("1").unwrap().mib_ceil(), 1);
        assert_eq!(Quantity::parse("-1Gi").unwrap().mib_ceil(), 0);
        assert_eq!(Quantity::parse("1n").unwrap().milli_ceil(), 1);
        assert_eq!(Quantity::parse("1.5").unwrap().milli_ceil(), 1500);
    }

    #[rstest]
    #[case("2", "2")]
    #[case("500m", "500m")]
    #[case("0.5", "500m")]
    #[case("1k", "1000")]
    #[case("3n", "3n")]
    fn displays_canonical_decimal(#[case] text: &str, #[case] shown: &str) {
        let q = Quantity::parse(text).unwrap();
        assert_eq!(q.to_string(), shown);
        assert_eq!(Quantity::parse(shown).unwrap(), q, "round trip");
    }

    #[test]
    fn sums_and_max() {
        let total: Quantity = ["1", "500m", "1.5"]
            .iter()
            .map(|s| Quantity::parse(s).unwrap())
            .sum();
        assert_eq!(total, Quantity::from_units(3));
        assert_eq!(
            Quantity::from_units(2).max(Quantity::from_units(5)),
            Quantity::from_units(5)
        );
    }
}
