//! The rules of a request that read when the pools' pods were created
//! ([`super::timeline`]): the burst brakes ([`super::brake`]) and the pools' sustained
//! rules ([`super::sustained`]), each excused by an exception naming its rule
//! (`burstBrake`, `sustained`) or every rule.

use super::brake::{self, BrakeCheck, Excuse, Scope};
use super::decision::ResourceCheck;
use super::settings::Settings;
use super::sustained::{self, SustainedCheck};
use super::timeline::PodTimes;
use crate::admission::AdmissionRequest;
use crate::clock::UnixSeconds;
use crate::cluster::{Cluster, HostFailure};
use crate::gpu::GpuCounts;
use crate::pools::sustained::Sustained;
use crate::settings::WindowRule;

/// Audit annotation keys.
pub mod audit {
    /// Per pool, brake and resource: admitted in the window, incoming, the brake.
    pub const BRAKE: &str = "burst-brake";
    /// Per pool and resource: GPUs held for the whole of the rule's `for`.
    pub const SUSTAINED: &str = "sustained";
}

/// What the rules found for the request: denials, and audit notes (under
/// `crate::capacity::audit::WARNING`, `""`, a warning).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    pub denials: Vec<String>,
    pub notes: Vec<(&'static str, String)>,
}

/// The rules of one request, pool after pool.
pub struct Pace<'a> {
    cluster: &'a dyn Cluster,
    settings: &'a Settings,
    request: &'a AdmissionRequest,
    now: UnixSeconds,
    /// The request's team, once read.
    team: Option<Option<String>>,
    excuses: [Option<Excuse>; 2],
    pub found: Found,
}

impl<'a> Pace<'a> {
    pub fn new(
        cluster: &'a dyn Cluster,
        settings: &'a Settings,
        request: &'a AdmissionRequest,
        now: UnixSeconds,
    ) -> Self {
        Pace {
            cluster,
            settings,
            request,
            now,
            team: None,
            excuses: [None, None],
            found: Found::default(),
        }
    }

    /// Judges pool `pool`'s rules for what the request adds to it (`incoming`; `checks`:
    /// the pool's threshold checks), from its pods' creation times.
    pub fn judge(
        &mut self,
        pool: &str,
        times: &PodTimes,
        incoming: &GpuCounts,
        checks: &[ResourceCheck],
        rule: Option<&Sustained>,
    ) -> Result<(), HostFailure> {
        let brakes = self.brakes(pool, times, incoming)?;
        let (over, fit): (Vec<BrakeCheck>, Vec<BrakeCheck>) =
            brakes.into_iter().partition(|c| !c.tally.fits());
        let lines: Vec<String> = over.iter().chain(&fit).map(BrakeCheck::audit).collect();
        if !lines.is_empty() {
            self.found.notes.push((audit::BRAKE, lines.join("; ")));
        }
        if !over.is_empty() {
            let clauses: Vec<String> = over.iter().map(BrakeCheck::clause).collect();
            self.deny(
                0,
                format!("pool {pool}: {}.", clauses.join("; ")),
                brake::RULE,
            );
        }
        let Some(rule) = rule.filter(|r| r.is_set()) else {
            return Ok(());
        };
        let judged = sustained::check(times, rule, pool, checks, self.now);
        if !judged.is_empty() {
            let lines: Vec<String> = judged.iter().map(SustainedCheck::audit).collect();
            self.found.notes.push((audit::SUSTAINED, lines.join("; ")));
        }
        let over: Vec<String> = judged
            .iter()
            .filter(|c| !c.fits())
            .map(SustainedCheck::clause)
            .collect();
        if !over.is_empty() {
            self.deny(
                1,
                format!("pool {pool}: {}.", over.join("; ")),
                sustained::RULE,
            );
        }
        Ok(())
    }

    /// The brakes of `pool` for what the request adds to it.
    fn brakes(
        &mut self,
        pool: &str,
        times: &PodTimes,
        incoming: &GpuCounts,
    ) -> Result<Vec<BrakeCheck>, HostFailure> {
        let Some(brakes) = self.settings.burst_brakes.as_ref() else {
            return Ok(Vec::new());
        };
        let mut checks = Vec::new();
        if let Some(b) = brakes.namespace() {
            let scope = Scope::Namespace(self.request.namespace.clone());
            checks.extend(brake::check(
                times,
                &|p| p.in_namespace,
                b,
                &scope,
                pool,
                incoming,
                self.now,
            ));
        }
        if let Some(b) = brakes.team() {
            if self.team.is_none() {
                self.team = Some(super::teams::team_of(
                    self.cluster,
                    self.settings,
                    &self.request.namespace,
                )?);
            }
            match self.team.clone().flatten() {
                Some(team) => {
                    let index = times.team_index(&team);
                    checks.extend(brake::check(
                        times,
                        &|p| index.is_some() && p.team == index,
                        b,
                        &Scope::Team(team),
                        pool,
                        incoming,
                        self.now,
                    ));
                }
                None => self.found.notes.push((
                    audit::BRAKE,
                    format!(
                        "{pool}: namespace {} has no label {}: no team brake",
                        self.request.namespace, self.settings.team_label_key
                    ),
                )),
            }
        }
        Ok(checks)
    }

    /// The audit notes, one per key (several pools' joined with `; `), and the warnings.
    pub fn into_notes(self) -> Vec<(&'static str, String)> {
        let mut merged: Vec<(&'static str, String)> = Vec::new();
        for (key, value) in self.found.notes {
            match merged
                .iter_mut()
                .find(|(k, _)| !key.is_empty() && *k == key)
            {
                Some((_, text)) if key == crate::exceptions::AUDIT_KEY && *text == value => {}
                Some((_, text)) => {
                    text.push_str("; ");
                    text.push_str(&value);
                }
                None => merged.push((key, value)),
            }
        }
        merged
    }

    /// Denies with `message` unless an exception for `rule` (excuse slot `slot`) applies.
    fn deny(&mut self, slot: usize, message: String, rule: &str) {
        let excuse = self.excuses[slot]
            .get_or_insert_with(|| brake::excuse(self.settings, self.request, rule, self.now))
            .clone();
        match excuse.applies {
            Some((audit, warning)) => {
                self.found.notes.push((crate::exceptions::AUDIT_KEY, audit));
                self.found
                    .notes
                    .push((crate::exceptions::AUDIT_EXCUSED, message));
                if let Some(w) = warning {
                    self.found.notes.push(("", w));
                }
            }
            None => self.found.denials.push(match excuse.expired {
                Some(note) => format!("{message} ({note}; renew it or fix the workload)"),
                None => message,
            }),
        }
    }
}
