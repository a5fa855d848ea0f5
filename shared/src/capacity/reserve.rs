//! The reserve rule of a pool ([`crate::pools::reserve`]): a workload of a type is judged
//! against the pool's threshold less what the other types' reserves keep and their pods
//! do not hold yet. The reserved type is never judged against its own reserve.

use crate::gpu::GpuCounts;
use crate::pools::reserve::Amount;

/// What a pool's reserves keep from a workload, for one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReserveCheck {
    pub resource: String,
    /// The workload's type (`None`: no label, or templates of different types).
    pub workload_type: Option<String>,
    /// The other types' reserves: (type, GPUs reserved, GPUs its pods hold).
    pub kept_for: Vec<(String, u64, u64)>,
    /// GPUs held back from the workload: what those reserves keep beyond what their types hold.
    pub held: u64,
    /// The most the pool may hold under its threshold.
    pub limit: u64,
    pub used: u64,
    pub incoming: u64,
}

/// One resource of a pool as its threshold judges it (a [`super::decision::ResourceCheck`]).
#[derive(Debug, Clone, Copy)]
pub struct Judged<'a> {
    pub resource: &'a str,
    pub allocatable: u64,
    /// The most the pool may hold under its threshold.
    pub limit: u64,
    pub used: u64,
    pub incoming: u64,
}

/// The GPUs pods of each workload type hold in a pool: (type, GPUs per resource).
pub type UseByType = [(String, GpuCounts)];

impl ReserveCheck {
    /// The reserves' check of `check` (a resource of the pool) for a workload of
    /// `workload_type`; `None` when no other type's reserve keeps anything from it.
    pub fn of(
        check: Judged,
        reserve: &[(String, Amount)],
        by_type: &UseByType,
        workload_type: Option<&str>,
    ) -> Option<ReserveCheck> {
        let kept_for: Vec<(String, u64, u64)> = reserve
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
        if kept_for.is_empty() {
            return None;
        }
        let held = kept_for
            .iter()
            .fold(0u64, |sum, (_, r, h)| sum.saturating_add(r - h));
        Some(ReserveCheck {
            resource: check.resource.to_string(),
            workload_type: workload_type.map(str::to_string),
            kept_for,
            held,
            limit: check.limit,
            used: check.used,
            incoming: check.incoming,
        })
    }

    /// The most the pool may hold with this workload: the threshold's limit less `held`.
    pub fn free_for_caller(&self) -> u64 {
        self.limit.saturating_sub(self.held)
    }

    /// True when the workload stays out of the reserves.
    pub fn fits(&self) -> bool {
        self.used.saturating_add(self.incoming) <= self.free_for_caller()
    }

    /// `interactive (16 reserved, 4 held)` for each reserve that keeps something.
    fn reserves_text(&self) -> String {
        self.kept_for
            .iter()
            .map(|(t, r, h)| format!("{t} ({r} reserved, {h} held by its pods)"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn caller(&self) -> String {
        match &self.workload_type {
            Some(t) => format!("workload-type {t}"),
            None => "no single workload-type".into(),
        }
    }

    /// The denial clause: how much is reserved, for whom, and what is free for the caller.
    pub fn clause(&self) -> String {
        format!(
            "{} {} are kept for workload types {}; this workload ({}) may use {} of the {} under the threshold, {} are in use, room for {} more, it asks for {}",
            self.held,
            self.resource,
            self.reserves_text(),
            self.caller(),
            self.free_for_caller(),
            self.limit,
            self.used,
            self.free_for_caller().saturating_sub(self.used),
            self.incoming
        )
    }

    /// The audit line: `reserve nvidia.com/gpu: 12 kept for interactive (16 reserved, 4 held by its pods), fits`.
    pub fn audit(&self) -> String {
        format!(
            "reserve {}: {} kept for {} from {}, {}",
            self.resource,
            self.held,
            self.reserves_text(),
            self.caller(),
            if self.fits() { "fits" } else { "over" }
        )
    }
}
