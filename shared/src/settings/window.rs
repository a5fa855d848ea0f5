//! A rule over a window of time, as settings write it: an amount (`gpus: 32`,
//! `thresholdPercent: 95`) within a duration (`per: 10m`, `for: 2m`). The capacity gate's
//! burst brakes (`burstBrakes`) and sustained rules (`pools[].sustained`) are such rules.

use super::FieldError;
use crate::clock::{duration_text, parse_duration};

/// An amount within a window; forms send both empty (`0`, `""`) for no rule.
pub trait WindowRule {
    /// The window's field (`per`, `for`).
    const WINDOW_FIELD: &'static str;
    /// What an error calls the window (`window`, `duration`).
    const WINDOW_NOUN: &'static str;
    /// The longest window, in seconds.
    const MAX_SECONDS: i64;
    /// Windows an error gives as examples (`10m or 1h30m`).
    const EXAMPLES: &'static str;

    /// The amount; 0 when left out.
    fn amount(&self) -> u64;

    /// The window as written: `10m`, `90s`, `1h`.
    fn window(&self) -> &str;

    /// False for the empty form forms send (no amount, no window): no rule.
    fn is_set(&self) -> bool {
        self.amount() != 0 || !self.window().trim().is_empty()
    }

    /// The window in seconds (settings are checked: it reads).
    fn seconds(&self) -> i64 {
        parse_duration(self.window()).unwrap_or(0)
    }

    /// The window reads and lasts from 1s to [`WindowRule::MAX_SECONDS`]; the error names
    /// `{field}.{WINDOW_FIELD}`.
    fn check_window(&self, field: &str) -> Result<(), FieldError> {
        match parse_duration(self.window()) {
            Some(s) if (1..=Self::MAX_SECONDS).contains(&s) => Ok(()),
            _ => Err(FieldError::new(
                format!("{field}.{}", Self::WINDOW_FIELD),
                format!(
                    "'{}' is not a {} from 1s to {} (a whole number with s, m or h, e.g. {})",
                    self.window(),
                    Self::WINDOW_NOUN,
                    duration_text(Self::MAX_SECONDS),
                    Self::EXAMPLES
                ),
            )),
        }
    }
}
