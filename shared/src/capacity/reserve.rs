//! The reserve rule of a pool ([`crate::pools::reserve`]): a workload of a type is judged
//! against the pool's threshold less what the other types' reserves in force keep and
//! their pods do not hold yet, and less the pool's `headroom` (kept free for no one). The
//! reserved type is never judged against its own reserve. [`validate`] checks the settings.

use super::settings::{Settings, Usage};
use super::tally::Tally;
use crate::gpu::GpuCounts;
use crate::pools::reserve::{InForce, check_form};
use crate::schedule;
use crate::settings::{FieldError, check_window_ref};
use std::collections::BTreeMap;

/// What a pool's reserves keep from a workload, for one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReserveCheck {
    pub resource: String,
    /// The workload's type (`None`: no label, or templates of different types).
    pub workload_type: Option<String>,
    /// The other types' reserves: (type, GPUs reserved, GPUs its pods hold).
    pub kept_for: Vec<(String, u64, u64)>,
    /// The schedule window whose reserves are in force (`None`: the pool's `reserve`).
    pub window: Option<String>,
    /// GPUs kept free for no one (`headroom`).
    pub headroom: u64,
    /// GPUs held back from the workload: the headroom, and what those reserves keep beyond
    /// what their types hold.
    pub held: u64,
    /// The pool's threshold check: GPUs in use, incoming, the most it may hold.
    pub tally: Tally,
}

/// One resource of a pool as its threshold judges it (a [`super::decision::ResourceCheck`]).
#[derive(Debug, Clone, Copy)]
pub struct Judged<'a> {
    pub resource: &'a str,
    pub allocatable: u64,
    /// GPUs in use, incoming, and the most the pool may hold under its threshold.
    pub tally: Tally,
}

/// The GPUs pods of each workload type hold in a pool: (type, GPUs per resource).
pub type UseByType = [(String, GpuCounts)];

impl ReserveCheck {
    /// The check of `check` (a resource of the pool) for a workload of `workload_type`
    /// against the reserves and headroom in force; `None` when they keep nothing from it.
    pub fn of(
        check: Judged,
        in_force: InForce,
        by_type: &UseByType,
        workload_type: Option<&str>,
    ) -> Option<ReserveCheck> {
        let headroom = in_force.headroom.map_or(0, |h| h.gpus(check.allocatable));
        let kept_for: Vec<(String, u64, u64)> = in_force
            .reserve
            .iter()
            .filter(|(t, _)| Some(t.as_str()) != workload_type)
            .map(|(t, amount)| {
                let holds = by_type
                    .iter()
                    .find(|(x, _)| x == t)
                    .and_then(|(_, used)| used.get(check.resource).copied())
                    .unwrap_or(0);
                (t.clone(), amount.gpus(check.allocatable), holds)
            })
            .filter(|(_, reserved, holds)| reserved > holds)
            .collect();
        if kept_for.is_empty() && headroom == 0 {
            return None;
        }
        let held = kept_for
            .iter()
            .fold(headroom, |sum, (_, r, h)| sum.saturating_add(r - h));
        Some(ReserveCheck {
            resource: check.resource.to_string(),
            workload_type: workload_type.map(str::to_string),
            kept_for,
            window: in_force.window.map(str::to_string),
            headroom,
            held,
            tally: check.tally,
        })
    }

    /// The threshold's check with what is held back taken off its limit: the most the
    /// pool may hold with this workload is the threshold's limit less `held`.
    pub fn left(&self) -> Tally {
        Tally {
            limit: self.tally.limit.saturating_sub(self.held),
            ..self.tally
        }
    }

    /// True when the workload stays out of the reserves.
    pub fn fits(&self) -> bool {
        self.left().fits()
    }

    /// `interactive (16 reserved, 4 held by its pods)` for each reserve that keeps
    /// something (`16 reserved in window peak` for a window's).
    fn reserves_text(&self) -> String {
        let window = self
            .window
            .as_ref()
            .map(|w| format!(" in window {w}"))
            .unwrap_or_default();
        self.kept_for
            .iter()
            .map(|(t, r, h)| format!("{t} ({r} reserved{window}, {h} held by its pods)"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// What is kept, and for whom: `12 nvidia.com/gpu are kept for workload types ...`,
    /// `4 nvidia.com/gpu are kept free as headroom ...`, or both.
    fn kept_text(&self) -> String {
        const HEADROOM: &str =
            "free as headroom against admissions that race on the same snapshot of the pool";
        match (self.headroom, self.kept_for.is_empty()) {
            (0, _) => format!(
                "{} {} are kept for workload types {}",
                self.held,
                self.resource,
                self.reserves_text()
            ),
            (h, true) => format!("{h} {} are kept {HEADROOM}", self.resource),
            (h, false) => format!(
                "{} {} are kept: {h} {HEADROOM}, {} for workload types {}",
                self.held,
                self.resource,
                self.held - h,
                self.reserves_text()
            ),
        }
    }

    fn caller(&self) -> String {
        match &self.workload_type {
            Some(t) => format!("workload-type {t}"),
            None => "no single workload-type".into(),
        }
    }

    /// The denial clause: how much is reserved, for whom, in which window, and what is
    /// free for the caller.
    pub fn clause(&self) -> String {
        format!(
            "{}; this workload ({}) may use {} of the {} under the threshold, {} are in use, room for {} more, it asks for {}",
            self.kept_text(),
            self.caller(),
            self.left().limit,
            self.tally.limit,
            self.tally.used,
            self.left().room(),
            self.tally.incoming
        )
    }

    /// The audit line: `reserve nvidia.com/gpu: 12 kept for interactive (16 reserved, 4
    /// held by its pods) from workload-type batch, fits`; with a headroom, `15 kept (3 as
    /// headroom) for ...`.
    pub fn audit(&self) -> String {
        let headroom = match self.headroom {
            0 => String::new(),
            h => format!(" ({h} as headroom)"),
        };
        let types = if self.kept_for.is_empty() {
            String::new()
        } else {
            format!(" for {}", self.reserves_text())
        };
        format!(
            "reserve {}: {} kept{headroom}{types} from {}, {}",
            self.resource,
            self.held,
            self.caller(),
            self.left().verdict()
        )
    }
}

/// `pools[].reserve`, `pools[].reserveWindows` and `pools[].headroom`: each type a label
/// value, each amount a count or a percent, the percents of one set of reserves at most
/// 100 together, each window naming a schedule (among `schedules`, checked) once, and the
/// usage of a pool with reserves counted from its Pods (ResourceQuotas do not say which
/// workload type holds what).
pub fn validate(
    settings: &Settings,
    schedules: &BTreeMap<String, schedule::Checked>,
) -> Result<(), FieldError> {
    for (i, pool) in settings.pools.iter().enumerate() {
        check_form(&format!("pools[{i}]"), pool)?;
        if !pool.has_reserves() {
            continue;
        }
        if settings.usage_of(pool) != Usage::Pods {
            let field = if pool.reserve.is_empty() {
                format!("pools[{i}].reserveWindows")
            } else {
                format!("pools[{i}].reserve")
            };
            return Err(FieldError::new(
                field,
                "a reserve counts what each workload type holds from the pool's Pods; set the pool's usage to pods (ResourceQuotas do not say which workload type holds what)",
            ));
        }
        let defined: Vec<&str> = schedules.keys().map(String::as_str).collect();
        for (k, w) in pool.reserve_windows.iter().enumerate() {
            let field = format!("pools[{i}].reserveWindows[{k}].window");
            let valid = schedules.contains_key(&w.window);
            check_window_ref(&field, &w.window, valid, &defined)?;
            if pool.reserve_windows[..k]
                .iter()
                .any(|o| o.window == w.window)
            {
                return Err(FieldError::new(
                    field,
                    format!(
                        "'{}' is listed twice; the first entry whose window holds now wins, so the second would never apply",
                        w.window
                    ),
                ));
            }
        }
    }
    Ok(())
}
