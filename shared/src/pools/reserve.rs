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
/// field, `pools[i]`): amounts that read, types that are label values, windows named, and
/// the headroom with each set of reserves leaving room ([`check_together`]). Which
/// schedules exist and where GPUs in use are counted are the capacity gate's to check.
pub fn check_form(field: &str, pool: &super::Pool) -> Result<(), FieldError> {
    let headroom = match pool.headroom() {
        Some(h) => {
            let at = format!("{field}.headroom");
            Some(h.read().map_err(|e| FieldError::new(&at, e))?)
        }
        None => None,
    };
    check_amounts(&format!("{field}.reserve"), &pool.reserve)?;
    check_together(field, pool, headroom, "reserve", &pool.reserve)?;
    for (k, w) in pool.reserve_windows.iter().enumerate() {
        let at = format!("{field}.reserveWindows[{k}]");
        if w.window.trim().is_empty() {
            return Err(FieldError::new(
                format!("{at}.window"),
                "must name a schedule of the capacity gate",
            ));
        }
        check_amounts(&format!("{at}.reserve"), &w.reserve)?;
        check_together(
            field,
            pool,
            headroom,
            &format!("reserveWindows[{k}].reserve"),
            &w.reserve,
        )?;
    }
    Ok(())
}

/// The headroom and one set of reserves (`set`, at `{field}.{name}`, amounts already read)
/// together: the headroom below the highest threshold the pool may have (at or above it,
/// no workload could ever be admitted), and the headroom with the reserves at most the
/// whole pool. Percents are checked always; GPU counts where the pool declares its
/// `capacity` (a pool measured from its Nodes has no size until it is read).
fn check_together(
    field: &str,
    pool: &super::Pool,
    headroom: Option<Amount>,
    name: &str,
    set: &BTreeMap<String, ReserveText>,
) -> Result<(), FieldError> {
    let highest = pool
        .thresholds
        .iter()
        .map(|t| t.threshold_percent)
        .fold(pool.threshold_percent, u32::max);
    let amounts: Vec<Amount> = set.values().filter_map(|a| a.read().ok()).collect();
    let sizes: Vec<(String, Option<u64>)> = match pool.declared_capacity() {
        Some(capacity) => capacity
            .iter()
            .map(|(r, n)| (format!(" of {r}"), Some(*n)))
            .collect(),
        None => vec![(String::new(), None)],
    };
    for (of, size) in sizes {
        // What an amount keeps, in GPUs of a pool of known size, else in percent (a count
        // is not comparable then); the threshold and the whole pool in the same unit.
        let kept = |a: Amount| -> Option<u128> {
            match (a, size) {
                (a, Some(s)) => Some(u128::from(a.gpus(s))),
                (Amount::Percent(p), None) => Some(u128::from(p)),
                (Amount::Gpus(_), None) => None,
            }
        };
        let (unit, whole) = match size {
            Some(s) => (" GPUs", u128::from(s)),
            None => ("%", 100),
        };
        let limit = whole * u128::from(highest) / 100;
        let free = headroom.and_then(kept).unwrap_or(0);
        if let Some(h) = headroom.filter(|_| free > 0 && free >= limit) {
            return Err(FieldError::new(
                format!("{field}.headroom"),
                format!(
                    "{h} keeps {free}{unit} of the pool{of} free, at or above what its highest threshold ({highest}%) lets it hold ({limit}{unit}): no workload could ever be admitted; keep less free (e.g. 5%)"
                ),
            ));
        }
        let reserved = amounts
            .iter()
            .filter_map(|a| kept(*a))
            .fold(0u128, u128::saturating_add);
        let together = free.saturating_add(reserved);
        if together > whole {
            let (with, lower) = match free {
                0 => (String::new(), "lower the reserves"),
                _ => (
                    format!("with the headroom ({free}{unit}), "),
                    "lower the reserves or the headroom",
                ),
            };
            return Err(FieldError::new(
                format!("{field}.{name}"),
                format!(
                    "{with}the reserves keep {together}{unit} of the pool{of}, more than the whole pool ({whole}{unit}): {lower}"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    /// (pool, the field refused and a part of its message; `None`: accepted)
    #[rstest::rstest]
    #[case::headroom_at_the_threshold(
        json!({"headroom": "90%"}),
        Some(("pools[0].headroom", "90% keeps 90% of the pool free, at or above what its highest threshold (90%) lets it hold (90%)"))
    )]
    #[case::headroom_under_a_window_threshold_above_it(
        json!({"headroom": "90%", "thresholdPercent": 80,
               "thresholds": [{"window": "night", "thresholdPercent": 95}]}),
        None
    )]
    #[case::headroom_and_reserve_over_the_pool(
        json!({"headroom": "10%", "reserve": {"interactive": "95%"}}),
        Some(("pools[0].reserve", "with the headroom (10%), the reserves keep 105% of the pool"))
    )]
    #[case::headroom_and_a_window_reserve_over_the_pool(
        json!({"headroom": "10%", "reserve": {"interactive": "10%"},
               "reserveWindows": [{"window": "peak", "reserve": {"interactive": "50%", "serving": "45%"}}]}),
        Some(("pools[0].reserveWindows[0].reserve", "keep 105% of the pool"))
    )]
    #[case::headroom_and_reserve_within_the_pool(
        json!({"headroom": "10%", "reserve": {"interactive": "80%"}}),
        None
    )]
    #[case::reserves_alone_are_checked_by_their_percents(
        json!({"reserve": {"interactive": "100%"}}),
        None
    )]
    #[case::counts_against_a_declared_capacity(
        json!({"capacity": {"nvidia.com/gpu": 64}, "headroom": 58}),
        Some(("pools[0].headroom", "58 keeps 58 GPUs of the pool of nvidia.com/gpu free, at or above what its highest threshold (90%) lets it hold (57 GPUs)"))
    )]
    #[case::counts_and_reserves_over_a_declared_capacity(
        json!({"capacity": {"nvidia.com/gpu": 64}, "headroom": 8, "reserve": {"interactive": 60}}),
        Some(("pools[0].reserve", "(8 GPUs), the reserves keep 68 GPUs of the pool of nvidia.com/gpu, more than the whole pool (64 GPUs)"))
    )]
    #[case::counts_within_a_declared_capacity(
        json!({"capacity": {"nvidia.com/gpu": 64}, "headroom": 8, "reserve": {"interactive": "50%"}}),
        None
    )]
    #[case::reserve_counts_over_a_declared_capacity(
        json!({"capacity": {"nvidia.com/gpu": 64}, "reserve": {"interactive": 40, "serving": 30}}),
        Some(("pools[0].reserve", "the reserves keep 70 GPUs of the pool of nvidia.com/gpu, more than the whole pool (64 GPUs): lower the reserves"))
    )]
    #[case::counts_without_a_size_are_not_comparable(
        json!({"headroom": 1000, "reserve": {"interactive": 1000}}),
        None
    )]
    fn headroom_and_reserves_leave_room(
        #[case] pool: serde_json::Value,
        #[case] refused: Option<(&str, &str)>,
    ) {
        let pool: super::super::Pool = serde_json::from_value(pool).unwrap();
        match (check_form("pools[0]", &pool), refused) {
            (Ok(()), None) => {}
            (Err(e), Some((field, text))) => {
                assert_eq!(e.path, field, "{e:?}");
                assert!(e.reason.contains(text), "{e:?}");
            }
            (got, want) => panic!("got {got:?}, want {want:?}"),
        }
    }
}
