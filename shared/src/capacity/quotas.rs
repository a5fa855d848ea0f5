//! Namespace ResourceQuotas judged at the door: a workload whose pods a quota of its
//! namespace would refuse is denied when it is admitted, with the numbers, instead of
//! being created and failing pod by pod (`FailedCreate` events on its ReplicaSet).
//!
//! One `list_resources_by_namespace` of `v1/ResourceQuota` in the request's namespace
//! ([`super::queries::namespace_quota_query`]). Every quota is checked whose `spec.hard` has
//! `requests.<gpu>` for a GPU resource the workload adds and whose scopes count the
//! workload's pods: `used + incoming <= hard`, incoming being what the request adds to
//! the pods that quota counts ([`Incoming::gpus`]: the whole object at CREATE, the
//! increase at UPDATE and on `scale`, a rollout's extra pods).
//!
//! Kubernetes counts an extended resource under `requests.<name>` only: it accepts
//! `limits.nvidia.com/gpu` and a bare `nvidia.com/gpu` in `spec.hard` but never counts
//! them (`status.used` never has them), so neither does the gate; such keys are named in
//! a warning.

use super::demand::{Incoming, ScopeFacts, TemplateDemand, pods_fitting};
use super::pool_quotas::{Quota, not_counted_yet, parse_quotas};
use super::queries::{QUOTA_REQUESTS_PREFIX, namespace_quota_query};
use super::tally::Tally;
use crate::cluster::{Cluster, HostError, HostFailure, call};
use crate::gpu::gpus_text;
use crate::gpu::{GpuCounts, GpuResources};

/// Whether a quota's scopes count a template's pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScopeMatch {
    Yes,
    No,
    /// The template cannot tell (see [`ScopeFacts`]); counted, as Kubernetes may.
    Assumed(String),
}

/// One quota and resource checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaCheck {
    pub quota: String,
    pub resource: String,
    /// Its `status.used`, what the request adds to the pods it counts, its `spec.hard`.
    pub tally: Tally,
    /// Why the quota was taken to count the pods, when their scope could not be told.
    pub assumed: Vec<String>,
    /// GPUs of one incoming pod, when the counted templates all hold the same.
    pub shape: Option<GpuCounts>,
    /// Everything the request adds to the pods this quota counts.
    pub all_incoming: GpuCounts,
    /// `hard - used` of each resource of the quota.
    pub room: GpuCounts,
}

impl QuotaCheck {
    pub fn audit(&self) -> String {
        format!(
            "{}: {QUOTA_REQUESTS_PREFIX}{} used {}, {}",
            self.quota,
            self.resource,
            self.tally,
            self.tally.verdict()
        )
    }

    pub fn denial(&self, namespace: &str) -> Option<String> {
        let t = &self.tally;
        if t.fits() {
            return None;
        }
        let assumed = if self.assumed.is_empty() {
            String::new()
        } else {
            format!(" (taken to count these pods: {})", self.assumed.join("; "))
        };
        Some(format!(
            "namespace {namespace}: ResourceQuota {} would hold {} of its {} {QUOTA_REQUESTS_PREFIX}{} ({} used + {} incoming){assumed}: {}. Lower replicas, free GPUs in the namespace, or ask for a larger quota.",
            self.quota,
            t.after(),
            t.limit,
            self.resource,
            t.used,
            t.incoming,
            room_sentence(
                &self.all_incoming,
                &self.room,
                self.shape.as_ref(),
                &self.resource
            ),
        ))
    }
}

/// What fits of the incoming pods: `2 of the 4 incoming replicas (2 nvidia.com/gpu each)
/// fit` when they are all alike, else the room in GPUs of `resource`.
pub fn room_sentence(
    incoming: &GpuCounts,
    room: &GpuCounts,
    shape: Option<&GpuCounts>,
    resource: &str,
) -> String {
    match shape {
        Some(shape) => {
            let (pods, fit) = pods_fitting(incoming, room, shape);
            let fit = match fit {
                0 => "none".to_string(),
                n => n.to_string(),
            };
            format!(
                "{fit} of the {pods} incoming {} ({} each) {}",
                if pods == 1 { "replica" } else { "replicas" },
                gpus_text(shape),
                if fit == "1" { "fits" } else { "fit" }
            )
        }
        None => format!(
            "room for {} more {resource}",
            room.get(resource).copied().unwrap_or(0)
        ),
    }
}

/// The namespace's quotas as far as the workload is concerned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// ResourceQuotas listed.
    pub quotas: usize,
    pub checks: Vec<QuotaCheck>,
    /// Denials that are not a number over a limit (a quota not counted yet).
    pub problems: Vec<String>,
    pub warnings: Vec<String>,
}

impl Outcome {
    pub fn denials(&self, namespace: &str) -> Vec<String> {
        self.checks
            .iter()
            .filter_map(|c| c.denial(namespace))
            .chain(self.problems.iter().cloned())
            .collect()
    }

    pub fn audit(&self, namespace: &str) -> String {
        if self.checks.is_empty() {
            return format!(
                "namespace {namespace}: {} ResourceQuota{}, none counts this workload's GPUs",
                self.quotas,
                if self.quotas == 1 { "" } else { "s" }
            );
        }
        let checks: Vec<String> = self.checks.iter().map(QuotaCheck::audit).collect();
        format!("namespace {namespace}: {}", checks.join("; "))
    }
}

/// Lists the ResourceQuotas of `namespace` and checks those that count the GPUs of
/// `incoming`.
pub fn check(
    cluster: &dyn Cluster,
    namespace: &str,
    names: &GpuResources,
    incoming: &Incoming,
) -> Result<Outcome, HostFailure> {
    let request = namespace_quota_query(namespace);
    let bytes = call(cluster, &request)?;
    let quotas = parse_quotas(&bytes, names).map_err(|e| HostFailure {
        request: Box::new(request.clone()),
        error: HostError::Unreadable(e.to_string()),
    })?;
    Ok(judge(&quotas, namespace, incoming))
}

/// The checks of [`check`] on quotas already read.
pub fn judge(quotas: &[Quota], namespace: &str, incoming: &Incoming) -> Outcome {
    let mut outcome = Outcome {
        quotas: quotas.len(),
        ..Outcome::default()
    };
    for q in quotas {
        let counted = |t: &TemplateDemand| scope_match(q, &t.scope) != ScopeMatch::No;
        let added = incoming.gpus(&counted);
        if added.is_empty() {
            continue;
        }
        let mut assumed: Vec<String> = Vec::new();
        for t in incoming.new.iter().chain(&incoming.surge) {
            if let ScopeMatch::Assumed(why) = scope_match(q, &t.scope)
                && !assumed.contains(&why)
            {
                assumed.push(why);
            }
        }
        for (key, resource) in &q.unenforced {
            if added.contains_key(resource) {
                outcome.warnings.push(format!(
                    "ResourceQuota {namespace}/{}: spec.hard {key} is not counted by Kubernetes (for an extended resource it counts only {QUOTA_REQUESTS_PREFIX}{resource}), so it limits nothing and the capacity gate does not check it: rename it to {QUOTA_REQUESTS_PREFIX}{resource}",
                    q.name
                ));
            }
        }
        let mut room = q.hard.clone();
        for (r, n) in room.iter_mut() {
            *n = n.saturating_sub(q.used.get(r).copied().unwrap_or(0));
        }
        let shape = incoming.pod_shape(&counted);
        for (resource, hard) in &q.hard {
            let Some(n) = added.get(resource).copied() else {
                continue;
            };
            let Some(used) = q.used.get(resource).copied() else {
                outcome
                    .problems
                    .push(not_counted_yet(namespace, &q.name, resource));
                continue;
            };
            outcome.checks.push(QuotaCheck {
                quota: q.name.clone(),
                resource: resource.clone(),
                tally: Tally {
                    used,
                    incoming: n,
                    limit: *hard,
                },
                assumed: assumed.clone(),
                shape: shape.clone(),
                all_incoming: added.clone(),
                room: room.clone(),
            });
        }
    }
    outcome
}

/// Whether the scopes of `q` count pods with `facts`, as Kubernetes decides it
/// (`podMatchesScopeFunc`): every `spec.scopes` entry and every `scopeSelector`
/// expression must hold.
pub fn scope_match(q: &Quota, facts: &ScopeFacts) -> ScopeMatch {
    let mut assumed = Vec::new();
    let scopes = q.scopes.iter().map(|s| (s.as_str(), "Exists", &[][..]));
    let expressions = q.scope_selector.iter().flatten().map(|e| {
        (
            e.scope_name.as_str(),
            e.operator.as_str(),
            e.values.as_slice(),
        )
    });
    for (scope, operator, values) in scopes.chain(expressions) {
        let class = facts.priority_class.as_deref();
        let holds = match scope {
            "PriorityClass" => match operator {
                "In" => class.is_some_and(|c| values.iter().any(|v| v == c)),
                "NotIn" => !class.is_some_and(|c| values.iter().any(|v| v == c)),
                "Exists" => class.is_some(),
                "DoesNotExist" => class.is_none(),
                _ => false,
            },
            "Terminating" => facts.terminating,
            "NotTerminating" => !facts.terminating,
            "BestEffort" | "NotBestEffort" => match facts.best_effort {
                Some(best_effort) => best_effort == (scope == "BestEffort"),
                None => {
                    assumed.push(format!(
                        "scope {scope}: the pod template sets no cpu or memory, so its pods are BestEffort unless a LimitRange gives them defaults"
                    ));
                    true
                }
            },
            "CrossNamespacePodAffinity" => match facts.cross_namespace_affinity {
                Some(crosses) => crosses,
                None => {
                    assumed.push(
                        "scope CrossNamespacePodAffinity: the pod template's affinity was not read"
                            .to_string(),
                    );
                    true
                }
            },
            // Kubernetes counts no pod under any other scope (VolumeAttributesClass is
            // for PersistentVolumeClaims).
            _ => false,
        };
        if !holds {
            return ScopeMatch::No;
        }
    }
    if assumed.is_empty() {
        ScopeMatch::Yes
    } else {
        ScopeMatch::Assumed(assumed.join("; "))
    }
}

#[cfg(test)]
mod tests;
