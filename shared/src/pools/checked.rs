//! A pool in the form the rules take: what its settings say, read once when the settings
//! are checked ([`PoolForm`]: declared GPUs as counts, the ceiling the settings give, the
//! node selector as a query, each threshold with its window's schedule read), and a view of
//! the pool as written together with that form ([`CheckedPool`]). A request reads these;
//! nothing in a pool's settings is parsed again per request.

use super::ceiling::{Ceiling, settings_ceiling};
use super::pool::Pool;
use super::reserve::{Amount, InForce};
use crate::clock::UnixSeconds;
use crate::gpu::GpuCounts;
use crate::schedule::{self, Schedules};
use crate::settings::FieldError;
use std::collections::BTreeMap;

/// What a request reads of one pool's settings, read once.
#[derive(Debug, Clone)]
pub struct PoolForm {
    /// `capacity` as counts (`None`: measured from the pool's Nodes).
    capacity: Option<GpuCounts>,
    /// The ceiling the settings give (`maxAllocatable`, `clusterAutoscaler`); a Karpenter
    /// NodePool's is read from the cluster per request.
    ceiling: Option<Ceiling>,
    /// The node selector as a label selector query (empty: capacity declared).
    selector_query: String,
    /// `thresholds` whose window names a schedule: (index in `thresholds`, the schedule
    /// read). A window that names no schedule never holds, so it is left out.
    thresholds: Vec<(usize, schedule::Checked)>,
    /// `reserve` read: (workload type, amount); entries that do not read are left out
    /// (the gate's settings check refuses them).
    reserve: Vec<(String, Amount)>,
    /// `reserveWindows` whose window names a schedule.
    reserve_windows: Vec<ReserveWindow>,
    /// `headroom` read (`None`: none, or it does not read).
    headroom: Option<Amount>,
}

/// A `reserveWindows` entry read: (window, its schedule read, the reserve read).
type ReserveWindow = (String, schedule::Checked, Reserve);

/// A set of reserves read: (workload type, amount).
type Reserve = Vec<(String, Amount)>;

/// A map of reserves read: (workload type, amount), entries that do not read left out.
fn read_reserve(reserve: &BTreeMap<String, super::reserve::ReserveText>) -> Vec<(String, Amount)> {
    reserve
        .iter()
        .filter_map(|(t, a)| Some((t.clone(), a.read().ok()?)))
        .collect()
}

impl PoolForm {
    /// The form of `pool` for a policy without thresholds (the autoscaler policy).
    pub fn new(pool: &Pool) -> PoolForm {
        PoolForm {
            capacity: pool.declared_capacity(),
            ceiling: settings_ceiling(pool),
            selector_query: pool.node_selector.to_query(),
            thresholds: Vec::new(),
            reserve: read_reserve(&pool.reserve),
            reserve_windows: Vec::new(),
            headroom: pool.headroom().and_then(|h| h.read().ok()),
        }
    }

    /// The form of `pool` with its thresholds, their windows among `schedules` (read).
    pub fn with_thresholds(
        pool: &Pool,
        schedules: &BTreeMap<String, schedule::Checked>,
    ) -> PoolForm {
        let thresholds = pool
            .thresholds
            .iter()
            .enumerate()
            .filter_map(|(i, t)| schedules.get(&t.window).map(|s| (i, s.clone())))
            .collect();
        let reserve_windows = pool
            .reserve_windows
            .iter()
            .filter_map(|w| {
                let schedule = schedules.get(&w.window)?.clone();
                Some((w.window.clone(), schedule, read_reserve(&w.reserve)))
            })
            .collect();
        PoolForm {
            thresholds,
            reserve_windows,
            ..PoolForm::new(pool)
        }
    }
}

/// The schedules `pools`' thresholds and reserve windows name, read (a name no schedule has is left out: its
/// window never holds). The error names the schedule's field (`schedules.peak.timeZone`).
pub fn named_schedules(
    pools: &[Pool],
    schedules: &Schedules,
) -> Result<BTreeMap<String, schedule::Checked>, FieldError> {
    let mut read = BTreeMap::new();
    let windows = pools.iter().flat_map(|p| {
        let thresholds = p.thresholds.iter().map(|t| &t.window);
        thresholds.chain(p.reserve_windows.iter().map(|w| &w.window))
    });
    for window in windows {
        if read.contains_key(window) {
            continue;
        }
        if let Some(s) = schedules.get(window) {
            let checked = s.check(&format!("schedules.{window}"))?;
            read.insert(window.clone(), checked);
        }
    }
    Ok(read)
}

/// The forms of `pools` with their thresholds, in the same order.
pub fn forms_with_thresholds(
    pools: &[Pool],
    schedules: &BTreeMap<String, schedule::Checked>,
) -> Vec<PoolForm> {
    pools
        .iter()
        .map(|p| PoolForm::with_thresholds(p, schedules))
        .collect()
}

/// One pool as the rules take it: its settings as written (through `Deref`) and their form.
#[derive(Debug, Clone, Copy)]
pub struct CheckedPool<'a> {
    pool: &'a Pool,
    form: &'a PoolForm,
}

impl<'a> CheckedPool<'a> {
    /// `pool` with `form`, which must be `pool`'s.
    pub fn new(pool: &'a Pool, form: &'a PoolForm) -> CheckedPool<'a> {
        CheckedPool { pool, form }
    }

    /// The `i`th of `pools` with its form (`forms` in the same order).
    pub fn at(pools: &'a [Pool], forms: &'a [PoolForm], i: usize) -> Option<CheckedPool<'a>> {
        Some(CheckedPool::new(pools.get(i)?, forms.get(i)?))
    }

    /// The pool as written.
    pub fn pool(&self) -> &'a Pool {
        self.pool
    }

    /// The declared `capacity` as counts (`None`: measured from the Nodes).
    pub fn capacity(&self) -> Option<&'a GpuCounts> {
        self.form.capacity.as_ref()
    }

    /// The ceiling the settings give (`maxAllocatable`, `clusterAutoscaler`).
    pub fn settings_ceiling(&self) -> Option<&'a Ceiling> {
        self.form.ceiling.as_ref()
    }

    /// The node selector as a label selector query.
    pub fn selector_query(&self) -> &'a str {
        &self.form.selector_query
    }

    /// The threshold at `now`, and the window that set it (`None`: `thresholdPercent`):
    /// the first of `thresholds` whose window holds `now`.
    pub fn threshold_at(&self, now: UnixSeconds) -> (u32, Option<&'a str>) {
        self.form
            .thresholds
            .iter()
            .find(|(_, schedule)| schedule.contains(now))
            .map(|(i, _)| {
                let t = &self.pool.thresholds[*i];
                (t.threshold_percent, Some(t.window.as_str()))
            })
            .unwrap_or((self.pool.threshold_percent, None))
    }

    /// The reserves in force at `now`: those of the first of `reserveWindows` whose
    /// window holds `now` (with its name), else `reserve`; and the headroom.
    pub fn reserve_at(&self, now: UnixSeconds) -> InForce<'a> {
        let (reserve, window) = self
            .form
            .reserve_windows
            .iter()
            .find(|(_, schedule, _)| schedule.contains(now))
            .map(|(w, _, r)| (r.as_slice(), Some(w.as_str())))
            .unwrap_or((self.form.reserve.as_slice(), None));
        InForce {
            reserve,
            window,
            headroom: self.form.headroom,
        }
    }
}

impl std::ops::Deref for CheckedPool<'_> {
    type Target = Pool;
    fn deref(&self) -> &Pool {
        self.pool
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Pools `a100` (thresholds in windows `peak`, `always` and `night`, which no schedule
    /// defines) and `h100` (none), with the schedules `peak` and `always`.
    fn pools_and_schedules() -> (Vec<Pool>, Schedules) {
        let pools = serde_json::from_value(json!([
            {"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}},
             "thresholds": [
                {"window": "night", "thresholdPercent": 50},
                {"window": "peak", "thresholdPercent": 80},
                {"window": "always", "thresholdPercent": 95}]},
            {"name": "h100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "h100"}},
             "thresholdPercent": 80}
        ]))
        .unwrap();
        let schedules = serde_json::from_value(json!({
            "peak": {"timeZone": "Europe/Berlin",
                "windows": [{"days": ["Mon", "Tue", "Wed", "Thu", "Fri"], "from": "08:00", "to": "20:00"}]},
            "always": {"timeZone": "UTC",
                "windows": [{"days": ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"], "from": "00:00", "to": "24:00"}]},
            "unused": {"timeZone": "Mars/Olympus", "windows": []}
        }))
        .unwrap();
        (pools, schedules)
    }

    #[test]
    fn the_first_window_that_holds_now_sets_the_threshold() {
        let (pools, schedules) = pools_and_schedules();
        // Only the schedules a threshold names are read (`unused` would not read).
        let read = named_schedules(&pools, &schedules).unwrap();
        assert_eq!(read.keys().collect::<Vec<_>>(), ["always", "peak"]);
        let forms = forms_with_thresholds(&pools, &read);
        let pool = |i| CheckedPool::at(&pools, &forms, i).unwrap();
        // Tuesday 2026-12-01 10:00 Berlin (09:00 UTC): peak; 22:00 Berlin: always.
        let tuesday = 1_796_083_200;
        assert_eq!(pool(0).threshold_at(tuesday + 9 * 3600), (80, Some("peak")));
        assert_eq!(
            pool(0).threshold_at(tuesday + 21 * 3600),
            (95, Some("always"))
        );
        assert_eq!(pool(1).threshold_at(tuesday), (80, None));
        assert!(CheckedPool::at(&pools, &forms, 2).is_none());
    }

    #[test]
    fn a_named_schedule_that_does_not_read_names_its_field() {
        let (mut pools, schedules) = pools_and_schedules();
        pools[1].thresholds =
            serde_json::from_value(json!([{"window": "unused", "thresholdPercent": 70}])).unwrap();
        let err = named_schedules(&pools, &schedules).unwrap_err().to_string();
        assert!(
            err.starts_with("schedules.unused.timeZone: 'Mars/Olympus'"),
            "{err}"
        );
    }

    #[test]
    fn declared_gpus_ceilings_and_the_selector_are_read_once() {
        let pool: Pool = serde_json::from_value(json!({"name": "batch",
            "nodeSelector": {"matchLabels": {"gpu-admission/pool": "batch"}},
            "capacity": {"nvidia.com/gpu": "16"},
            "clusterAutoscaler": {"maxNodes": 4, "gpusPerNode": {"nvidia.com/gpu": 8}}}))
        .unwrap();
        let form = PoolForm::new(&pool);
        let checked = CheckedPool::new(&pool, &form);
        let counts = |n| GpuCounts::from([("nvidia.com/gpu".to_string(), n)]);
        assert_eq!(checked.capacity(), Some(&counts(16)));
        let ceiling = checked.settings_ceiling().unwrap();
        assert_eq!(
            (&ceiling.gpus, &ceiling.node_shape),
            (&counts(32), &Some(counts(8)))
        );
        assert_eq!(checked.selector_query(), "gpu-admission/pool=batch");
        assert_eq!(checked.name, "batch");
    }
}
