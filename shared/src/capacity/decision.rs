//! The capacity decision for one pool, as a pure function of the pool's state and the
//! incoming demand, with the numbers that explain it.
//!
//! Everything is integer arithmetic on GPU counts: a resource is over its threshold when
//! `(used + incoming) * 100 > threshold * allocatable`. A pool with no allocatable GPUs of
//! a requested resource denies any demand for it (no division anywhere).

use super::settings::Pool;
use crate::gpu::{GpuCounts, describe};
use std::fmt;

/// What a pool holds: read from its Nodes and Pods, or from its ResourceQuotas and the
/// capacity declared in settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolSnapshot {
    /// Nodes matching the pool's node selector (0 when capacity is declared).
    pub nodes: u64,
    /// Of those, the nodes that take new pods (not cordoned, not tainted not-ready).
    pub schedulable_nodes: u64,
    /// GPUs allocatable on the schedulable nodes (or declared), per resource name.
    pub allocatable: GpuCounts,
    /// Pods carrying the pool label that are not Succeeded or Failed (0 with quotas).
    pub pods: u64,
    /// GPUs those pods hold (effective requests, pending pods included), per resource name.
    pub used: GpuCounts,
    /// Where `allocatable` comes from.
    pub allocatable_from: CapacitySource,
    /// Where `used` comes from.
    pub used_from: UsageSource,
}

/// Where a pool's allocatable GPUs come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CapacitySource {
    /// `status.allocatable` of the pool's schedulable Nodes.
    #[default]
    Nodes,
    /// The pool's `capacity` in settings.
    Declared,
}

/// Where a pool's GPUs in use come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UsageSource {
    /// The effective requests of the pool's Pods.
    #[default]
    Pods,
    /// `status.used` of this many ResourceQuotas.
    Quotas(u64),
}

impl UsageSource {
    /// ` from 6 ResourceQuotas` after a used count; nothing for Pods (today's wording).
    fn suffix(self) -> String {
        match self {
            UsageSource::Pods => String::new(),
            UsageSource::Quotas(1) => " from 1 ResourceQuota".into(),
            UsageSource::Quotas(n) => format!(" from {n} ResourceQuotas"),
        }
    }
}

impl CapacitySource {
    /// `64 allocatable` or `capacity 64 declared in settings`.
    fn amount(self, n: u64) -> String {
        match self {
            CapacitySource::Nodes => format!("{n} allocatable"),
            CapacitySource::Declared => format!("capacity {n} declared in settings"),
        }
    }
}

/// One resource of one pool, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceCheck {
    pub resource: String,
    pub used: u64,
    pub incoming: u64,
    pub allocatable: u64,
    pub threshold_percent: u32,
    pub used_from: UsageSource,
    pub allocatable_from: CapacitySource,
}

impl ResourceCheck {
    /// GPUs in use once the workload is admitted.
    pub fn after(&self) -> u64 {
        self.used.saturating_add(self.incoming)
    }

    /// True when `after` stays within the threshold.
    pub fn fits(&self) -> bool {
        u128::from(self.after()) * 100
            <= u128::from(self.threshold_percent) * u128::from(self.allocatable)
    }

    /// The most GPUs the pool may hold under its threshold: `floor(threshold% x allocatable)`.
    pub fn limit(&self) -> u64 {
        let l = u128::from(self.threshold_percent) * u128::from(self.allocatable) / 100;
        u64::try_from(l).unwrap_or(u64::MAX)
    }

    /// How many more GPUs fit under the threshold now.
    pub fn room(&self) -> u64 {
        self.limit().saturating_sub(self.used)
    }

    /// `after / allocatable` as text, e.g. `90.6%`, never shown at or below the threshold
    /// when the check fails (see [`percent_text`]).
    pub fn percent_after(&self) -> String {
        percent_text(self.after(), self.allocatable, self.threshold_percent)
    }
}

/// `numerator / denominator` in percent with one decimal, rounded half up. When that
/// would read as the threshold or less although the exact value is above it (e.g.
/// 1801 of 2000 = 90.05% against 90%), two decimals rounded up are shown instead, so a
/// denial never quotes a percentage equal to its threshold. `n/a` when the denominator
/// is 0.
pub fn percent_text(numerator: u64, denominator: u64, threshold_percent: u32) -> String {
    if denominator == 0 {
        return "n/a".into();
    }
    let (n, d) = (u128::from(numerator), u128::from(denominator));
    let over = n * 100 > u128::from(threshold_percent) * d;
    let per_mille = (n * 2000 + d) / (2 * d);
    if over && per_mille <= u128::from(threshold_percent) * 10 {
        let per_10k = (n * 10_000).div_ceil(d);
        format!("{}.{:02}%", per_10k / 100, per_10k % 100)
    } else {
        format!("{}.{}%", per_mille / 10, per_mille % 10)
    }
}

/// The outcome for one pool: one check per resource the workload asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub pool: String,
    /// Node selector of the pool as a query, for messages.
    pub node_selector: String,
    pub nodes: u64,
    pub schedulable_nodes: u64,
    /// Everything the pool's schedulable nodes offer (or its declared capacity), for
    /// messages about a wrong resource.
    pub offered: GpuCounts,
    pub allocatable_from: CapacitySource,
    pub checks: Vec<ResourceCheck>,
}

/// Checks `demand` (incoming GPUs per resource name) against the pool's state.
pub fn decide(snapshot: &PoolSnapshot, demand: &GpuCounts, pool: &Pool) -> Decision {
    let get = |m: &GpuCounts, k: &str| m.get(k).copied().unwrap_or(0);
    Decision {
        pool: pool.name.clone(),
        node_selector: pool.node_selector.to_query(),
        nodes: snapshot.nodes,
        schedulable_nodes: snapshot.schedulable_nodes,
        allocatable_from: snapshot.allocatable_from,
        offered: snapshot
            .allocatable
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| (k.clone(), *n))
            .collect(),
        checks: demand
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(resource, incoming)| ResourceCheck {
                resource: resource.clone(),
                used: get(&snapshot.used, resource),
                incoming: *incoming,
                allocatable: get(&snapshot.allocatable, resource),
                threshold_percent: pool.threshold_percent,
                used_from: snapshot.used_from,
                allocatable_from: snapshot.allocatable_from,
            })
            .collect(),
    }
}

impl Decision {
    /// True when every resource fits.
    pub fn allowed(&self) -> bool {
        self.checks.iter().all(ResourceCheck::fits)
    }

    /// Why the workload is denied and what to do, or `None` when it fits.
    pub fn denial(&self) -> Option<String> {
        let failing: Vec<&ResourceCheck> = self.checks.iter().filter(|c| !c.fits()).collect();
        if failing.is_empty() {
            return None;
        }
        let mut clauses = Vec::new();
        let mut no_capacity = false;
        for c in failing {
            clauses.push(if c.allocatable == 0 {
                no_capacity = true;
                self.no_capacity_clause(c)
            } else {
                format!(
                    "{} would be {} of {} ({}) with this workload's {} ({} in use{}), above the {}% threshold (room for {} more)",
                    c.resource,
                    c.after(),
                    c.allocatable_from.amount(c.allocatable),
                    c.percent_after(),
                    c.incoming,
                    c.used,
                    c.used_from.suffix(),
                    c.threshold_percent,
                    c.room()
                )
            });
        }
        let advice = if no_capacity && self.allocatable_from == CapacitySource::Declared {
            "Request a resource the pool offers, target another pool, or declare the resource in the pool's capacity in the policy settings."
        } else if no_capacity {
            "Request a resource the pool offers, target another pool, or check the pool's nodeSelector in the policy settings and that its nodes are schedulable."
        } else {
            "Wait for capacity, lower replicas, or target another pool."
        };
        Some(format!(
            "pool {}: {}. {advice}",
            self.pool,
            clauses.join("; ")
        ))
    }

    fn no_capacity_clause(&self, c: &ResourceCheck) -> String {
        if self.allocatable_from == CapacitySource::Declared {
            let declared = if self.offered.is_empty() {
                String::new()
            } else {
                format!(" (it declares {})", describe(&self.offered))
            };
            return format!(
                "the capacity declared in settings has no {} for this workload's {}{declared}",
                c.resource, c.incoming
            );
        }
        let nodes = if self.nodes == 0 {
            format!("no node matches {}", self.node_selector)
        } else {
            format!(
                "{} of {} nodes matching {} are schedulable",
                self.schedulable_nodes, self.nodes, self.node_selector
            )
        };
        let offered = if self.offered.is_empty() {
            String::new()
        } else {
            format!("; it offers {}", describe(&self.offered))
        };
        format!(
            "no schedulable node offers {} for this workload's {} ({nodes}{offered})",
            c.resource, c.incoming
        )
    }

    /// One line per resource for the `capacity` audit annotation.
    pub fn audit(&self) -> String {
        self.checks
            .iter()
            .map(|c| format!("{}: {c}", self.pool))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

impl fmt::Display for ResourceCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} used {}{} + incoming {} = {} of {} ({}), threshold {}%, {}",
            self.resource,
            self.used,
            self.used_from.suffix(),
            self.incoming,
            self.after(),
            self.allocatable_from.amount(self.allocatable),
            self.percent_after(),
            self.threshold_percent,
            if self.fits() { "fits" } else { "over" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::LabelSelector;
    use rstest::rstest;

    const GPU: &str = "nvidia.com/gpu";

    fn pool(threshold: u32) -> Pool {
        Pool {
            name: "a100".into(),
            node_selector: LabelSelector::from_labels([(
                "gpu-admission/pool".to_string(),
                "a100".to_string(),
            )]),
            threshold_percent: threshold,
            ..Pool::default()
        }
    }

    fn counts(pairs: &[(&str, u64)]) -> GpuCounts {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    fn snapshot(allocatable: &[(&str, u64)], used: &[(&str, u64)]) -> PoolSnapshot {
        PoolSnapshot {
            nodes: 8,
            schedulable_nodes: 8,
            allocatable: counts(allocatable),
            pods: 10,
            used: counts(used),
            ..PoolSnapshot::default()
        }
    }

    #[rstest]
    #[case::well_below(64, 10, 8, 90, true)]
    #[case::exactly_at_threshold(100, 82, 8, 90, true)]
    #[case::one_over(100, 83, 8, 90, false)]
    #[case::fractional_limit_rounds_down(64, 50, 7, 90, true)] // 57 <= 57.6
    #[case::fractional_limit_exceeded(64, 50, 8, 90, false)] // 58 > 57.6
    #[case::full_pool_at_100(8, 0, 8, 100, true)]
    #[case::over_100(8, 1, 8, 100, false)]
    #[case::empty_pool(0, 0, 1, 90, false)]
    #[case::huge_numbers(u64::MAX, u64::MAX / 2, 1, 100, true)]
    #[case::saturating_used(10, u64::MAX, 1, 100, false)]
    fn threshold_arithmetic(
        #[case] allocatable: u64,
        #[case] used: u64,
        #[case] incoming: u64,
        #[case] threshold: u32,
        #[case] fits: bool,
    ) {
        let d = decide(
            &snapshot(&[(GPU, allocatable)], &[(GPU, used)]),
            &counts(&[(GPU, incoming)]),
            &pool(threshold),
        );
        assert_eq!(d.allowed(), fits, "{d:?}");
        assert_eq!(d.denial().is_none(), fits);
    }

    #[test]
    fn denial_message_has_the_numbers_and_the_fix() {
        let d = decide(
            &snapshot(&[(GPU, 64)], &[(GPU, 50)]),
            &counts(&[(GPU, 8)]),
            &pool(90),
        );
        assert_eq!(
            d.denial().unwrap(),
            "pool a100: nvidia.com/gpu would be 58 of 64 allocatable (90.6%) with this workload's 8 (50 in use), above the 90% threshold (room for 7 more). Wait for capacity, lower replicas, or target another pool."
        );
        assert_eq!(
            d.audit(),
            "a100: nvidia.com/gpu used 50 + incoming 8 = 58 of 64 allocatable (90.6%), threshold 90%, over"
        );
    }

    #[test]
    fn empty_pool_is_a_clear_denial() {
        let mut s = snapshot(&[], &[]);
        s.nodes = 0;
        s.schedulable_nodes = 0;
        let d = decide(&s, &counts(&[(GPU, 8)]), &pool(90));
        assert_eq!(
            d.denial().unwrap(),
            "pool a100: no schedulable node offers nvidia.com/gpu for this workload's 8 (no node matches gpu-admission/pool=a100). Request a resource the pool offers, target another pool, or check the pool's nodeSelector in the policy settings and that its nodes are schedulable."
        );
        assert!(d.audit().contains("0 allocatable (n/a)"), "{}", d.audit());
    }

    #[test]
    fn wrong_resource_for_a_mig_pool_names_what_the_pool_offers() {
        let mut s = snapshot(
            &[
                ("nvidia.com/mig-3g.40gb", 16),
                ("nvidia.com/mig-1g.10gb", 28),
            ],
            &[],
        );
        s.schedulable_nodes = 7;
        let d = decide(&s, &counts(&[(GPU, 1)]), &pool(90));
        assert_eq!(
            d.denial().unwrap(),
            "pool a100: no schedulable node offers nvidia.com/gpu for this workload's 1 (7 of 8 nodes matching gpu-admission/pool=a100 are schedulable; it offers nvidia.com/mig-1g.10gb: 28, nvidia.com/mig-3g.40gb: 16). Request a resource the pool offers, target another pool, or check the pool's nodeSelector in the policy settings and that its nodes are schedulable."
        );
    }

    #[test]
    fn each_resource_is_checked_on_its_own() {
        // MIG: one resource per profile. The 1g profile is nearly full, the 3g one is not.
        let s = snapshot(
            &[
                ("nvidia.com/mig-1g.10gb", 28),
                ("nvidia.com/mig-3g.40gb", 16),
            ],
            &[
                ("nvidia.com/mig-1g.10gb", 26),
                ("nvidia.com/mig-3g.40gb", 2),
            ],
        );
        let fits = decide(&s, &counts(&[("nvidia.com/mig-3g.40gb", 4)]), &pool(90));
        assert!(fits.allowed());
        let over = decide(
            &s,
            &counts(&[("nvidia.com/mig-3g.40gb", 4), ("nvidia.com/mig-1g.10gb", 1)]),
            &pool(90),
        );
        assert!(!over.allowed());
        let msg = over.denial().unwrap();
        assert!(
            msg.starts_with("pool a100: nvidia.com/mig-1g.10gb would be 27 of 28"),
            "{msg}"
        );
        assert!(!msg.contains("mig-3g.40gb would be"), "{msg}");
        assert_eq!(over.checks.len(), 2);
    }

    #[test]
    fn time_sliced_allocatable_and_used_are_in_replicas() {
        // 4 nodes x 8 GPUs x 4 time-slicing replicas = 128 allocatable nvidia.com/gpu;
        // pods request replicas, so used is in the same unit.
        let s = snapshot(&[(GPU, 128)], &[(GPU, 110)]);
        assert!(decide(&s, &counts(&[(GPU, 5)]), &pool(90)).allowed()); // 115 <= 115.2
        assert!(!decide(&s, &counts(&[(GPU, 6)]), &pool(90)).allowed());
    }

    #[test]
    fn zero_demand_entries_are_ignored() {
        let d = decide(&snapshot(&[], &[]), &counts(&[(GPU, 0)]), &pool(90));
        assert!(d.checks.is_empty());
        assert!(d.allowed());
    }

    #[rstest]
    #[case::plain(58, 64, 90, "90.6%")]
    #[case::exact(90, 100, 90, "90.0%")]
    #[case::half_up(1, 8, 90, "12.5%")]
    #[case::rounds_up(2, 3, 90, "66.7%")]
    #[case::rounds_half_up_over_threshold(1801, 2000, 90, "90.1%")]
    #[case::barely_over_threshold(18001, 20000, 90, "90.01%")]
    #[case::just_under_threshold(1799, 2000, 90, "90.0%")]
    #[case::over_100(9, 8, 100, "112.5%")]
    #[case::zero(0, 8, 90, "0.0%")]
    #[case::no_allocatable(3, 0, 90, "n/a")]
    fn percentages(#[case] n: u64, #[case] d: u64, #[case] threshold: u32, #[case] text: &str) {
        assert_eq!(percent_text(n, d, threshold), text);
    }

    #[test]
    fn room_and_limit() {
        let c = ResourceCheck {
            resource: GPU.into(),
            used: 50,
            incoming: 8,
            allocatable: 64,
            threshold_percent: 90,
            used_from: UsageSource::Pods,
            allocatable_from: CapacitySource::Nodes,
        };
        assert_eq!(c.limit(), 57);
        assert_eq!(c.room(), 7);
        let full = ResourceCheck { used: 60, ..c };
        assert_eq!(full.room(), 0);
    }
}
