//! The sustained rule of a pool (`pools[].sustained: {thresholdPercent: 95, for: 2m}`):
//! deny new work while the pool has held at least that percent of its GPUs for the whole
//! of the last `for`.
//!
//! An admission policy keeps nothing between calls, so it cannot know the pool's past load;
//! one Pod list tells it only which pods exist now and when each was created. A pod that
//! exists now and was created at or before `now - for` has existed (and, not being
//! finished now, not finished) for the whole of that time, so the GPUs of those pods are a
//! lower bound of what the pool held at every moment of it ("held" as the gate counts GPUs
//! in use: requested by pods that have not finished, pending ones included). The rule
//! denies when that lower bound reaches the percent of the pool's GPUs today: it never
//! denies on a load that did not last. It cannot see pods that came and went within `for`
//! (a pool kept full by short pods looks less loaded than it was), nor whether the pool's
//! GPUs changed meanwhile (it judges against today's).

use super::decision::ResourceCheck;
use super::tally::verdict;
use super::timeline::PodTimes;
use crate::clock::{UnixSeconds, duration_text};
use crate::pools::sustained::Sustained;
use crate::settings::WindowRule;

/// The rule name exceptions give to excuse it.
pub const RULE: &str = "sustained";

/// The sustained rule judged for one resource of one pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SustainedCheck {
    pub pool: String,
    pub resource: String,
    /// GPUs of the pods created at or before `since`: held for the whole of `for`.
    pub held: u64,
    /// What the pool is judged against (as its threshold is).
    pub capacity: u64,
    pub threshold_percent: u32,
    /// `for`, in seconds.
    pub lasting: i64,
    /// `now - for`.
    pub since: UnixSeconds,
}

impl SustainedCheck {
    /// True while the pool is not proven to have held `thresholdPercent` for `for`.
    pub fn fits(&self) -> bool {
        u128::from(self.held) * 100 < u128::from(self.threshold_percent) * u128::from(self.capacity)
    }

    fn percent(&self) -> String {
        if self.capacity == 0 {
            return "-".into();
        }
        format!("{:.1}%", self.held as f64 * 100.0 / self.capacity as f64)
    }

    pub fn clause(&self) -> String {
        format!(
            "at least {} of its {} {} ({}) have been held for the whole of the last {} (by pods created before then and still there), at or above its sustained limit of {}% for {} (pools[].sustained); it takes new work once that load falls below {}%",
            self.held,
            self.capacity,
            self.resource,
            self.percent(),
            duration_text(self.lasting),
            self.threshold_percent,
            duration_text(self.lasting),
            self.threshold_percent
        )
    }

    /// `a100: sustained nvidia.com/gpu held 40 of 64 (62.5%) for 2m, limit 95%, fits`.
    pub fn audit(&self) -> String {
        format!(
            "{}: sustained {} held {} of {} ({}) for {}, limit {}%, {}",
            self.pool,
            self.resource,
            self.held,
            self.capacity,
            self.percent(),
            duration_text(self.lasting),
            self.threshold_percent,
            verdict(self.fits())
        )
    }
}

/// The rule judged for each resource of `checks` (the pool's threshold checks: the
/// resources the workload adds, and what the pool is judged against) at `now`.
pub fn check(
    times: &PodTimes,
    rule: &Sustained,
    pool: &str,
    checks: &[ResourceCheck],
    now: UnixSeconds,
) -> Vec<SustainedCheck> {
    let lasting = rule.seconds();
    let since = now.saturating_sub(lasting);
    checks
        .iter()
        .filter(|c| c.tally.incoming > 0 && c.allocatable > 0)
        .map(|c| SustainedCheck {
            pool: pool.to_string(),
            resource: c.resource.clone(),
            held: times
                .pods
                .iter()
                .filter(|p| p.created.is_some_and(|t| t <= since))
                .fold(0u64, |s, p| s.saturating_add(times.gpus(p, &c.resource))),
            capacity: c.allocatable,
            threshold_percent: rule.threshold_percent,
            lasting,
            since,
        })
        .collect()
}
