//! Burst brakes (`burstBrakes`): at most so many GPUs of each resource newly admitted per
//! namespace, and per team, within a sliding window, in each pool the workload adds GPUs
//! to.
//!
//! "Newly admitted" is read from the pool's Pod list ([`super::timeline`]): the GPUs of
//! the pods of the namespace (or of the team: pods carrying the team label
//! gpu-pool-routing-policy stamps, [`crate::settings::TEAM_POD_LABEL_KEY`]) created within
//! the window and still there, plus what the workload adds now. The check is `admitted +
//! incoming <= gpus`; a denial says when the workload may try again: the moment enough of
//! the counted pods leave the window for it to fit (if nothing else is admitted
//! meanwhile). A pod without a readable creation time counts as created now. The denial
//! names the owner workloads of the counted pods, most GPUs first.
//!
//! The request's team is the value of its Namespace's label `teamLabelKey` (read with
//! `get_resource`, once per request, only when a team brake is set).

use super::settings::Settings;
use super::settings::brakes::Brake;
use super::tally::Tally;
use super::timeline::{PodTime, PodTimes};
use crate::admission::AdmissionRequest;
use crate::clock::{UnixSeconds, duration_text, rfc3339};
use crate::exceptions::{Exceptions, Lookup};
use crate::gpu::GpuCounts;
use crate::settings::WindowRule;
use crate::workload::Workload;
use std::collections::BTreeMap;

/// The rule name exceptions give to excuse the brakes.
pub const RULE: &str = "burstBrake";

/// Whose admissions a brake counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    Namespace(String),
    Team(String),
}

impl Scope {
    fn text(&self) -> String {
        match self {
            Scope::Namespace(n) => format!("namespace {n}"),
            Scope::Team(t) => format!("team {t}"),
        }
    }

    fn field(&self) -> &'static str {
        match self {
            Scope::Namespace(_) => "burstBrakes.perNamespace",
            Scope::Team(_) => "burstBrakes.perTeam",
        }
    }
}

/// One brake judged for one resource of one pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrakeCheck {
    pub scope: Scope,
    pub pool: String,
    pub resource: String,
    /// GPUs of the counted pods created within the window (`used`), what the request
    /// adds, the brake's `gpus`.
    pub tally: Tally,
    /// How many pods those are.
    pub pods: u64,
    /// Their owner workloads and the GPUs of each, most first (then by name).
    pub workloads: Vec<(String, u64)>,
    /// The window, in seconds.
    pub per: i64,
    /// When enough counted pods have left the window for the workload to fit; `None` when
    /// it fits, or when it alone asks for more than the brake allows.
    pub retry_at: Option<UnixSeconds>,
}

impl BrakeCheck {
    /// The denial clause: what was admitted in the window, the limit, when to try again.
    pub fn clause(&self) -> String {
        let when = match self.retry_at {
            Some(t) => format!(
                "it may try again at {} (when enough of those pods have left the window, if nothing else is admitted meanwhile)",
                rfc3339(t)
            ),
            None => format!(
                "this workload alone asks for more than the brake allows: admit it in parts of at most {} over time",
                self.tally.limit
            ),
        };
        format!(
            "{} was admitted {} {} in the last {} ({} {}{}); with this workload's {} that is {}, over its burst brake of {} per {} ({}): {when}",
            self.scope.text(),
            self.tally.used,
            self.resource,
            duration_text(self.per),
            self.pods,
            if self.pods == 1 { "pod" } else { "pods" },
            self.workloads_text(),
            self.tally.incoming,
            self.tally.after(),
            self.tally.limit,
            duration_text(self.per),
            self.scope.field()
        )
    }

    /// `: 8 by deployment llm, 4 by job train`: the owner workloads of the counted pods, at most
    /// [`NAMED_WORKLOADS`] (then how many more); empty when no pod is counted.
    fn workloads_text(&self) -> String {
        if self.workloads.is_empty() {
            return String::new();
        }
        let named: Vec<String> = self
            .workloads
            .iter()
            .take(NAMED_WORKLOADS)
            .map(|(w, g)| format!("{g} by {w}"))
            .collect();
        let more = match self.workloads.len().saturating_sub(NAMED_WORKLOADS) {
            0 => String::new(),
            1 => " and 1 more workload".to_string(),
            n => format!(" and {n} more workloads"),
        };
        format!(": {}{more}", named.join(", "))
    }

    /// `a100: namespace ml-a nvidia.com/gpu admitted 24 + incoming 8 = 32 of 32 per 10m, fits`.
    pub fn audit(&self) -> String {
        format!(
            "{}: {} {} admitted {} per {}, {}",
            self.pool,
            self.scope.text(),
            self.resource,
            self.tally,
            duration_text(self.per),
            self.tally.verdict()
        )
    }
}

/// How many owner workloads a denial names.
pub const NAMED_WORKLOADS: usize = 3;

/// `brake` judged against the pods of `times` that `counted` selects, for each resource
/// the workload adds (`incoming`) to pool `pool`, at `now`.
pub fn check(
    times: &PodTimes,
    counted: &dyn Fn(&PodTime) -> bool,
    brake: &Brake,
    scope: &Scope,
    pool: &str,
    incoming: &GpuCounts,
    now: UnixSeconds,
) -> Vec<BrakeCheck> {
    let per = brake.seconds();
    let since = now.saturating_sub(per);
    let mut checks = Vec::new();
    for (resource, n) in incoming.iter().filter(|(_, n)| **n > 0) {
        // (the moment the pod leaves the window, its GPUs)
        let mut by_owner: Vec<u64> = vec![0; times.owners.len()];
        let mut recent: Vec<(UnixSeconds, u64)> = times
            .pods
            .iter()
            .filter(|p| counted(p) && p.created.is_none_or(|c| c > since))
            .filter_map(|p| {
                let gpus = times.gpus(p, resource);
                (gpus > 0).then(|| {
                    if let Some(owned) = by_owner.get_mut(p.owner) {
                        *owned = owned.saturating_add(gpus);
                    }
                    (p.created.unwrap_or(now).saturating_add(per), gpus)
                })
            })
            .collect();
        let admitted = recent.iter().fold(0u64, |s, (_, g)| s.saturating_add(*g));
        let mut workloads: Vec<(String, u64)> = times
            .owners
            .iter()
            .zip(by_owner)
            .filter(|(_, g)| *g > 0)
            .map(|(o, g)| (o.clone(), g))
            .collect();
        workloads.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let mut check = BrakeCheck {
            scope: scope.clone(),
            pool: pool.to_string(),
            resource: resource.clone(),
            tally: Tally {
                used: admitted,
                incoming: *n,
                limit: brake.gpus,
            },
            pods: recent.len() as u64,
            workloads,
            per,
            retry_at: None,
        };
        if !check.tally.fits() && *n <= brake.gpus {
            recent.sort_unstable();
            let excess = check.tally.after() - brake.gpus;
            let mut freed = 0u64;
            for (leaves, g) in recent {
                freed = freed.saturating_add(g);
                if freed >= excess {
                    check.retry_at = Some(leaves);
                    break;
                }
            }
        }
        checks.push(check);
    }
    checks
}

/// What an exception says about one rule for the request: its audit and warning when it
/// applies, the note a denial adds when it has expired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Excuse {
    pub applies: Option<(String, Option<String>)>,
    pub expired: Option<String>,
}

/// The exceptions of `settings` for rule `rule` and the workload of `request`, at `now`
/// (as [`crate::exceptions::excuse`] finds them for the gate's `capacity`).
pub fn excuse(
    settings: &Settings,
    request: &AdmissionRequest,
    rule: &str,
    now: UnixSeconds,
) -> Excuse {
    if settings.exceptions.is_empty() {
        return Excuse::default();
    }
    let Ok(exceptions) = Exceptions::check(
        &settings.exceptions,
        settings.max_exception_days,
        &super::settings::RULE_NAMES,
        now,
        "exceptions",
    ) else {
        return Excuse::default();
    };
    let Ok(workload) = Workload::from_object(&request.object, &settings.custom_kinds) else {
        return Excuse::default();
    };
    let labels: Vec<&BTreeMap<String, String>> = if workload.templates.is_empty() {
        vec![&workload.meta.labels]
    } else {
        workload.templates.iter().map(|t| &t.meta.labels).collect()
    };
    match exceptions.lookup(&request.namespace, &labels, rule, now) {
        Lookup::Applies { exception, warning } => Excuse {
            applies: Some((exception.audit(), warning)),
            expired: None,
        },
        lookup @ Lookup::Expired(_) => Excuse {
            applies: None,
            expired: lookup.expired_note(),
        },
        Lookup::None => Excuse::default(),
    }
}

#[cfg(test)]
mod tests;
