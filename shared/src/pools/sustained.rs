//! A pool's sustained rule (`pools[].sustained`): new work is denied while the pool has
//! held at least `thresholdPercent` of its GPUs for the whole of the last `for` (judged by
//! the capacity gate from when the pool's pods were created,
//! [`crate::capacity::sustained`]).
//!
//! ```yaml
//! sustained: {thresholdPercent: 95, for: 2m}
//! ```

use crate::settings::{FieldError, WindowRule};
use serde::{Deserialize, Serialize};

/// The longest `for` (an hour: pods older than that prove little about today's load).
pub const MAX_SUSTAINED_SECONDS: i64 = 3_600;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Sustained {
    /// Percent of the pool's GPUs (1..=100).
    pub threshold_percent: u32,
    /// How long the pool must have held them: `2m`, `90s`.
    #[serde(rename = "for")]
    pub lasting: String,
}

impl WindowRule for Sustained {
    fn amount_and_window(&self) -> (u64, &str) {
        (u64::from(self.threshold_percent), &self.lasting)
    }
}

impl Sustained {
    /// The percent and the duration, naming the field (`pools[0].sustained.for`).
    pub fn validate(&self, field: &str) -> Result<(), FieldError> {
        if !(1..=100).contains(&self.threshold_percent) {
            return Err(FieldError::new(
                format!("{field}.thresholdPercent"),
                format!("must be between 1 and 100 (got {})", self.threshold_percent),
            ));
        }
        self.check_window(
            format!("{field}.for"),
            "duration",
            MAX_SUSTAINED_SECONDS,
            "2m",
        )
    }
}
