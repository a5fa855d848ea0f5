//! A pool's reserves: GPUs kept for named workload types (the value of the pods'
//! `workload-type` label). Other types are denied once they would eat into a reserve the
//! reserved type does not fill; the reserved type may use its own. By schedule window
//! ([`WindowReserve`]: reserves kept at peak only). The same amounts say a pool's
//! `headroom`, kept free for no one.

use crate::settings::{FieldError, validate_label_value};
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

/// A pool's reserves inside a time window.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct WindowReserve {
    /// A name in `schedules`.
    pub window: String,
    /// Replaces the pool's `reserve` while the window holds "now": per workload type, a
    /// count or a percent.
    pub reserve: BTreeMap<String, ReserveText>,
}

/// The reserves in force for a pool: (workload type, amount), the schedule window that set
/// them (`None`: `reserve`), and the pool's headroom.
#[derive(Debug, Clone, Copy, Default)]
pub struct InForce<'a> {
    pub reserve: &'a [(String, Amount)],
    pub window: Option<&'a str>,
    pub headroom: Option<Amount>,
}

impl InForce<'_> {
    /// True when nothing is kept (no reserve in force, no headroom).
    pub fn is_empty(&self) -> bool {
        self.reserve.is_empty() && self.headroom.is_none()
    }
}

/// How much of a pool a reserve keeps, as written: a GPU count (`16`) or a percent of the
/// pool's GPUs of each resource (`"25%"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ReserveText(pub String);

impl<'de> Deserialize<'de> for ReserveText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        crate::podspec::QuantityText::deserialize(deserializer).map(|q| ReserveText(q.0))
    }
}

/// A reserve read: GPUs of each resource, or a percent of the pool's GPUs of each resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    Gpus(u64),
    Percent(u32),
}

impl ReserveText {
    /// The amount, or what is wrong with the text.
    pub fn read(&self) -> Result<Amount, String> {
        let text = self.0.trim();
        if let Some(p) = text.strip_suffix('%') {
            return match p.trim().parse::<u32>() {
                Ok(p) if (1..=100).contains(&p) => Ok(Amount::Percent(p)),
                _ => Err(format!(
                    "'{text}' must be a whole percent from 1% to 100%, e.g. 25%"
                )),
            };
        }
        match text.parse::<u64>() {
            Ok(n) if n > 0 => Ok(Amount::Gpus(n)),
            _ => Err(format!(
                "'{text}' must be a whole number of GPUs above 0 (e.g. 16) or a percent (e.g. 25%)"
            )),
        }
    }
}

impl Amount {
    /// The GPUs kept of a resource of which the pool has `allocatable`.
    pub fn gpus(self, allocatable: u64) -> u64 {
        match self {
            Amount::Gpus(n) => n,
            Amount::Percent(p) => {
                let n = u128::from(p) * u128::from(allocatable) / 100;
                u64::try_from(n).unwrap_or(u64::MAX)
            }
        }
    }
}

impl std::fmt::Display for Amount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Amount::Gpus(n) => write!(f, "{n}"),
            Amount::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// One set of reserves (`field`: where it is): types that are label values, amounts that
/// read, percents at most 100 together.
pub fn check_amounts(
    field: &str,
    reserve: &BTreeMap<String, ReserveText>,
) -> Result<(), FieldError> {
    let mut percents = 0u32;
    for (workload_type, amount) in reserve {
        let at = format!("{field}.{workload_type}");
        if workload_type.is_empty() {
            return Err(FieldError::new(
                at,
                "name a workload type (a value of the workload-type label), e.g. interactive",
            ));
        }
        validate_label_value(&at, workload_type)?;
        match amount.read().map_err(|e| FieldError::new(&at, e))? {
            Amount::Percent(p) => percents += p,
            Amount::Gpus(_) => {}
        }
    }
    if percents > 100 {
        return Err(FieldError::new(
            field,
            format!("the percents reserved add up to {percents}%, more than the pool"),
        ));
    }
    Ok(())
}

/// The form of a pool's `reserve`, `reserveWindows` and `headroom` (`field`: the pool's
/// field, `pools[i]`): amounts that read, types that are label values, windows named. Which
/// schedules exist and where GPUs in use are counted are the capacity gate's to check.
pub fn check_form(field: &str, pool: &super::Pool) -> Result<(), FieldError> {
    if let Some(headroom) = pool.headroom() {
        let at = format!("{field}.headroom");
        headroom.read().map_err(|e| FieldError::new(&at, e))?;
    }
    check_amounts(&format!("{field}.reserve"), &pool.reserve)?;
    for (k, w) in pool.reserve_windows.iter().enumerate() {
        let at = format!("{field}.reserveWindows[{k}]");
        if w.window.trim().is_empty() {
            return Err(FieldError::new(
                format!("{at}.window"),
                "must name a schedule of the capacity gate",
            ));
        }
        check_amounts(&format!("{at}.reserve"), &w.reserve)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_percents_read_and_the_rest_is_refused() {
        let read = |t: &str| ReserveText(t.into()).read();
        assert_eq!(read("16"), Ok(Amount::Gpus(16)));
        assert_eq!(read("25%"), Ok(Amount::Percent(25)));
        assert!(read("0").unwrap_err().contains("above 0"));
        assert!(read("120%").unwrap_err().contains("1% to 100%"));
        assert!(read("1.5").is_err());
        assert_eq!(Amount::Percent(25).gpus(30), 7);
        assert_eq!(Amount::Gpus(16).gpus(8), 16);
    }
}
