//! A rule over a window of time, as settings write it: an amount (`gpus: 32`,
//! `thresholdPercent: 95`) within a duration (`per: 10m`, `for: 2m`). The capacity gate's
//! burst brakes (`burstBrakes`) and sustained rules (`pools[].sustained`) are such rules.

use super::FieldError;
use crate::clock::{duration_text, parse_duration};

/// An amount within a window; forms send both empty (`0`, `""`) for no rule.
pub trait WindowRule {
    /// The amount (0 when left out) and the window as written (`10m`, `90s`, `1h`).
    fn amount_and_window(&self) -> (u64, &str);

    /// False for the empty form forms send (no amount, no window): no rule.
    fn is_set(&self) -> bool {
        let (amount, window) = self.amount_and_window();
        amount != 0 || !window.trim().is_empty()
    }

    /// The window in seconds (settings are checked: it reads).
    fn seconds(&self) -> i64 {
        parse_duration(self.amount_and_window().1).unwrap_or(0)
    }

    /// The window reads and lasts from 1s to `max_seconds`; else an error at `field` (the
    /// window's) calling it a `noun` (`window`, `duration`) and giving `examples`.
    fn check_window(
        &self,
        field: String,
        noun: &str,
        max_seconds: i64,
        examples: &str,
    ) -> Result<(), FieldError> {
        let window = self.amount_and_window().1;
        match parse_duration(window) {
            Some(s) if (1..=max_seconds).contains(&s) => Ok(()),
            _ => Err(FieldError::new(
                field,
                format!(
                    "'{window}' is not a {noun} from 1s to {} (a whole number with s, m or h, e.g. {examples})",
                    duration_text(max_seconds)
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Rule(u64, &'static str);

    impl WindowRule for Rule {
        fn amount_and_window(&self) -> (u64, &str) {
            (self.0, self.1)
        }
    }

    #[test]
    fn an_empty_form_is_no_rule_and_the_window_reads_within_its_bounds() {
        assert!(!Rule(0, " ").is_set());
        assert!(Rule(0, "10m").is_set() && Rule(4, "").is_set());
        assert_eq!(
            (Rule(4, "1h30m").seconds(), Rule(4, "x").seconds()),
            (5400, 0)
        );
        let check = |r: Rule| r.check_window("w.per".into(), "window", 86_400, "10m");
        check(Rule(4, "24h")).unwrap();
        for window in ["0s", "25h", "10"] {
            assert_eq!(
                check(Rule(4, window)).unwrap_err().to_string(),
                format!(
                    "w.per: '{window}' is not a window from 1s to 24h (a whole number with s, m or h, e.g. 10m)"
                )
            );
        }
    }
}
