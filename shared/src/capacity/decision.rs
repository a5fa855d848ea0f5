//! The capacity decision for one pool, as a pure function of the pool's state and the
//! incoming demand, with the numbers that explain it.
//!
//! Everything is integer arithmetic on GPU counts: a resource is over its threshold when
//! `(used + incoming) * 100 > threshold * allocatable`. A pool with no allocatable GPUs of
//! a requested resource denies any demand for it (no division anywhere).

use super::demand::PodShape;
use super::offers::Found;
use super::reserve::{Judged, ReserveCheck};
use super::settings::Pool;
use super::tally::Tally;
use crate::gpu::{GpuCounts, describe};
use crate::pools::Ceiling;
use crate::pools::ceiling::most;
use crate::pools::reserve::InForce;
use crate::settings::Action;
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
    /// The most the pool can grow to, when settings give it a ceiling.
    pub ceiling: Option<Ceiling>,
    /// Each schedulable node (when the pool's Nodes are listed), with the GPUs its pods
    /// hold when `per_node_used` (usage from Pods).
    pub per_node: Option<Vec<NodeUse>>,
    /// True when `per_node[].used` was counted (usage from Pods with `spec.nodeName`).
    pub per_node_used: bool,
    /// GPUs the pool's pods hold per workload type (read when the pool has reserves).
    pub used_by_type: Vec<(String, GpuCounts)>,
    /// When the pool's pods were created (read for burst brakes and sustained rules).
    pub pod_times: Option<super::timeline::PodTimes>,
    /// What the allocated DRA claims of the pool's pods hold, counted in `used`
    /// (`countDraClaims`).
    pub claims: Option<super::claims::ClaimUse>,
    /// Schedulable nodes with GPU labels and no allocatable GPU (device plugin down).
    pub plugin_down: Vec<String>,
    /// The pool's GPU nodes with their labels, read when a template charged to it
    /// selects what they tell (`nodeOffers`, [`super::offers`]).
    pub inventory: Option<crate::inventory::Inventory>,
}

/// One schedulable node of a pool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeUse {
    pub name: String,
    pub allocatable: std::rc::Rc<GpuCounts>,
    /// GPUs held by the pool's pods bound to it.
    pub used: GpuCounts,
}

impl NodeUse {
    /// What is left on the node, per resource.
    pub fn free(&self, resource: &str) -> u64 {
        let get = |m: &GpuCounts| m.get(resource).copied().unwrap_or(0);
        get(&self.allocatable).saturating_sub(get(&self.used))
    }
}

/// What a resource's check says about the pool's ceiling.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CeilingNote {
    /// The pool has no ceiling.
    #[default]
    None,
    /// The ceiling of the resource: its count, where it comes from.
    Limit { gpus: u64, from: String },
    /// The ceiling's source gives no number for the resource (a NodePool without that limit).
    Unset { from: String },
}

/// Where a pool's allocatable GPUs come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CapacitySource {
    /// `status.allocatable` of the pool's schedulable Nodes.
    #[default]
    Nodes,
    /// The pool's `capacity` in settings.
    Declared,
    /// The pool's ceiling, above what its Nodes offer now: what it can grow to.
    Ceiling,
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
            CapacitySource::Ceiling => format!("{n} it can grow to"),
        }
    }
}

/// One resource of one pool, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceCheck {
    pub resource: String,
    /// GPUs in use, what the workload adds, and the most the pool may hold under its
    /// threshold ([`threshold_limit`] of `threshold_percent` and `allocatable`).
    pub tally: Tally,
    /// What the pool is judged against: allocatable (or declared), or its ceiling when
    /// that is higher.
    pub allocatable: u64,
    pub threshold_percent: u32,
    pub used_from: UsageSource,
    pub allocatable_from: CapacitySource,
    /// Allocatable (or declared) now, whatever the ceiling.
    pub allocatable_now: u64,
    pub ceiling: CeilingNote,
    /// The schedule window that set `threshold_percent`, if one did.
    pub window: Option<String>,
}

/// The most GPUs a pool may hold under its threshold: `floor(threshold% x allocatable)`.
/// (GPUs in use fit under the threshold exactly when they are at most this.)
pub fn threshold_limit(threshold_percent: u32, allocatable: u64) -> u64 {
    let l = u128::from(threshold_percent) * u128::from(allocatable) / 100;
    u64::try_from(l).unwrap_or(u64::MAX)
}

impl ResourceCheck {
    /// `after / allocatable` as text, e.g. `90.6%`, never shown at or below the threshold
    /// when the check fails (see [`percent_text`]).
    pub fn percent_after(&self) -> String {
        percent_text(self.tally.after(), self.allocatable, self.threshold_percent)
    }

    /// ` of window peak` after a threshold chosen by a schedule window.
    fn window_text(&self) -> String {
        self.window
            .as_ref()
            .map(|w| format!(" of window {w}"))
            .unwrap_or_default()
    }

    /// What the ceiling says: `ceiling 64 from maxAllocatable in settings, 16 allocatable
    /// now`, or that its source sets no limit of the resource; `None` without a ceiling.
    fn ceiling_said(&self) -> Option<String> {
        match &self.ceiling {
            CeilingNote::None => None,
            CeilingNote::Limit { gpus, from } => Some(format!(
                "ceiling {gpus} from {from}, {} allocatable now",
                self.allocatable_now
            )),
            CeilingNote::Unset { from } => Some(format!("{from} sets no {}", self.resource)),
        }
    }

    /// What the ceiling says, for the audit line: ` (ceiling 64 from maxAllocatable in
    /// settings, 16 allocatable now)`, ` (... sets no amd.com/gpu: judged on allocatable)`.
    fn ceiling_text(&self) -> String {
        let judged = match self.ceiling {
            CeilingNote::Unset { .. } => ": judged on allocatable",
            _ => "",
        };
        self.ceiling_said()
            .map(|said| format!(" ({said}{judged})"))
            .unwrap_or_default()
    }
}

/// The inputs of a pool's decision besides its state and the demand.
#[derive(Debug, Clone)]
pub struct Inputs<'a> {
    /// The threshold in force (the pool's, or a window's).
    pub threshold_percent: u32,
    /// The schedule window that set it.
    pub window: Option<String>,
    /// One pod of each template charged to the pool (the per-node checks).
    pub shapes: &'a [PodShape],
    pub fragmentation: Action,
    /// The pool's reserves in force and its headroom.
    pub reserve: InForce<'a>,
    /// The workload's type (`None`: no label, or templates of different types).
    pub workload_type: Option<&'a str>,
    /// `nodeOffers` ([`super::offers`]; `allow`: not checked).
    pub node_offers: Action,
}

impl Inputs<'_> {
    /// The pool's own threshold, no per-node checks.
    pub fn of(pool: &Pool) -> Inputs<'static> {
        Inputs {
            threshold_percent: pool.threshold_percent,
            window: None,
            shapes: &[],
            fragmentation: Action::Warn,
            reserve: InForce::default(),
            workload_type: None,
            node_offers: Action::Allow,
        }
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
    /// Pods bigger than every node of the pool (never schedulable): one clause each.
    pub unschedulable: Vec<Unschedulable>,
    /// Pods for which no node has room now, although the pool has: one clause each.
    pub fragmented: Vec<String>,
    pub fragmentation: Action,
    /// What the pool's alternatives say, appended to a denial (set by the caller).
    pub alternatives: Option<String>,
    /// What the pool's reserves keep from the workload, per resource they keep some of.
    pub reserves: Vec<ReserveCheck>,
    /// The snapshot's DRA claims counted and device-plugin-down nodes, for notes.
    pub claims: Option<super::claims::ClaimUse>,
    pub plugin_down: Vec<String>,
    /// What the pool's nodes do not offer of what the templates select (`nodeOffers`).
    pub offers: Option<Found>,
}

/// A pod bigger than every node of its pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unschedulable {
    /// Why, naming the largest node.
    pub clause: String,
    /// The resource that does not fit, and the most of it one node has.
    pub resource: String,
    pub largest: u64,
}

/// Checks `demand` (incoming GPUs per resource name) against the pool's state, at the
/// pool's own threshold, without per-node checks.
pub fn decide(snapshot: &PoolSnapshot, demand: &GpuCounts, pool: &Pool) -> Decision {
    decide_with(snapshot, demand, pool, &Inputs::of(pool))
}

/// Checks `demand` against the pool's state: per resource, `used + incoming` against
/// the threshold in force x the larger of allocatable and the pool's ceiling; then, with
/// the pool's nodes known, one pod of each template in `inputs.shapes` against each node
/// (bigger than every node: never schedulable; no node with room for it: fragmentation).
pub fn decide_with(
    snapshot: &PoolSnapshot,
    demand: &GpuCounts,
    pool: &Pool,
    inputs: &Inputs,
) -> Decision {
    let get = |m: &GpuCounts, k: &str| m.get(k).copied().unwrap_or(0);
    let checks: Vec<ResourceCheck> = demand
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(resource, incoming)| {
            let now = get(&snapshot.allocatable, resource);
            let (allocatable, allocatable_from, ceiling) = match &snapshot.ceiling {
                None => (now, snapshot.allocatable_from, CeilingNote::None),
                Some(c) => match c.gpus.get(resource) {
                    None => (
                        now,
                        snapshot.allocatable_from,
                        CeilingNote::Unset {
                            from: c.from_text(resource),
                        },
                    ),
                    Some(&limit) => (
                        most(now, Some(c), resource),
                        if limit > now {
                            CapacitySource::Ceiling
                        } else {
                            snapshot.allocatable_from
                        },
                        CeilingNote::Limit {
                            gpus: limit,
                            from: c.from_text(resource),
                        },
                    ),
                },
            };
            ResourceCheck {
                resource: resource.clone(),
                tally: Tally {
                    used: get(&snapshot.used, resource),
                    incoming: *incoming,
                    limit: threshold_limit(inputs.threshold_percent, allocatable),
                },
                allocatable,
                threshold_percent: inputs.threshold_percent,
                used_from: snapshot.used_from,
                allocatable_from,
                allocatable_now: now,
                ceiling,
                window: inputs.window.clone(),
            }
        })
        .collect();
    let mut decision = Decision {
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
        checks,
        unschedulable: Vec::new(),
        fragmented: Vec::new(),
        fragmentation: inputs.fragmentation,
        alternatives: None,
        reserves: Vec::new(),
        claims: snapshot.claims.clone(),
        plugin_down: snapshot.plugin_down.clone(),
        offers: None,
    };
    if let Some(inventory) = &snapshot.inventory
        && inputs.node_offers != Action::Allow
    {
        let found = Found::of(
            inventory,
            inputs
                .shapes
                .iter()
                .map(|s| (s.location.as_str(), s.selects.as_ref())),
            inputs.node_offers,
            snapshot.ceiling.as_ref().map(super::offers::grows),
        );
        decision.offers = (!found.clauses.is_empty()).then_some(found);
    }
    if !inputs.reserve.is_empty() {
        decision.reserves = decision
            .checks
            .iter()
            .filter_map(|c| {
                let judged = Judged {
                    resource: &c.resource,
                    allocatable: c.allocatable,
                    tally: c.tally,
                };
                ReserveCheck::of(
                    judged,
                    inputs.reserve,
                    &snapshot.used_by_type,
                    inputs.workload_type,
                )
            })
            .collect();
    }
    if let Some(nodes) = &snapshot.per_node {
        decision.check_nodes(snapshot, nodes, inputs.shapes);
    }
    decision
}

/// True when `gpus` holds at least `need` of every resource.
fn holds(gpus: impl Fn(&str) -> u64, need: &GpuCounts) -> bool {
    need.iter().all(|(r, n)| gpus(r) >= *n)
}

/// `16 nvidia.com/gpu` or `8 nvidia.com/gpu and 1 nvidia.com/mig-1g.10gb`.
fn amounts(counts: &GpuCounts) -> String {
    counts
        .iter()
        .map(|(r, n)| format!("{n} {r}"))
        .collect::<Vec<_>>()
        .join(" and ")
}

impl Decision {
    /// The per-node checks: each pod shape against every node. Linear in nodes x shapes.
    fn check_nodes(&mut self, snapshot: &PoolSnapshot, nodes: &[NodeUse], shapes: &[PodShape]) {
        let ceiling = snapshot.ceiling.as_ref();
        let node_shape = ceiling.and_then(|c| c.node_shape.as_ref());
        for shape in shapes {
            let need: GpuCounts = shape
                .per_pod
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(r, n)| (r.clone(), *n))
                .collect();
            if need.is_empty() || (nodes.is_empty() && node_shape.is_none()) {
                continue;
            }
            let of = |m: &GpuCounts, r: &str| m.get(r).copied().unwrap_or(0);
            let fits_a_node = nodes
                .iter()
                .any(|n| holds(|r| of(&n.allocatable, r), &need))
                || node_shape.is_some_and(|s| holds(|r| of(s, r), &need));
            if !fits_a_node {
                self.unschedulable
                    .push(unschedulable(shape, &need, nodes, node_shape));
                continue;
            }
            if !snapshot.per_node_used || nodes.iter().any(|n| holds(|r| n.free(r), &need)) {
                continue;
            }
            // A pool that can still add a node that holds the pod is not fragmented: the
            // autoscaler adds one for the pending pod.
            let can_grow = ceiling.is_some_and(|c| {
                node_shape.is_none_or(|s| holds(|r| of(s, r), &need))
                    && need.iter().all(|(r, n)| {
                        c.gpus.get(r).is_some_and(|limit| {
                            *limit >= of(&snapshot.allocatable, r).saturating_add(*n)
                        })
                    })
            });
            if can_grow {
                continue;
            }
            let blocks: Vec<String> = need
                .keys()
                .map(|r| {
                    let best = nodes
                        .iter()
                        .max_by_key(|n| (n.free(r), std::cmp::Reverse(&n.name)));
                    match best.map(|n| (n.free(r), &n.name)) {
                        Some((free, name)) if free > 0 => format!("{free} {r} on {name}"),
                        _ => format!("no free {r} on any node"),
                    }
                })
                .collect();
            let total: GpuCounts = need
                .keys()
                .map(|r| (r.clone(), nodes.iter().map(|n| n.free(r)).sum::<u64>()))
                .collect();
            self.fragmented.push(format!(
                "no node has room for {} ({}): the largest free block is {} ({} free over its {} nodes)",
                one_pod_of(shape),
                amounts(&need),
                blocks.join(" and "),
                amounts(&total),
                nodes.len()
            ));
        }
    }

    /// True when every resource fits, every pod fits a node, and fragmentation (when
    /// found) only warns.
    pub fn allowed(&self) -> bool {
        !self.offers.as_ref().is_some_and(Found::denies)
            && self.checks.iter().all(|c| c.tally.fits())
            && self.reserves.iter().all(ReserveCheck::fits)
            && self.unschedulable.is_empty()
            && (self.fragmentation == Action::Warn || self.fragmented.is_empty())
    }

    /// The warning for fragmentation (`fragmentation: warn`) on an accepted workload.
    pub fn warning(&self) -> Option<String> {
        (self.allowed()
            && self.fragmentation == Action::Warn
            && !self.fragmented.is_empty())
        .then(|| {
            format!(
                "pool {}: {}. Its pods will wait (Pending) until GPUs free up on one node (fragmentation: warn).",
                self.pool,
                self.fragmented.join("; ")
            )
        })
    }

    /// The fragmentation found, for the audit annotation.
    pub fn fragmentation_audit(&self) -> Option<String> {
        (!self.fragmented.is_empty())
            .then(|| format!("{}: {}", self.pool, self.fragmented.join("; ")))
    }

    /// Why the workload is denied and what to do, or `None` when it fits.
    pub fn denial(&self) -> Option<String> {
        let text = self.denial_text()?;
        Some(match &self.alternatives {
            Some(alternatives) => format!("{text} {alternatives}"),
            None => text,
        })
    }

    fn denial_text(&self) -> Option<String> {
        if let Some(denial) = self.offers.as_ref().and_then(|o| o.denial(&self.pool)) {
            return Some(denial);
        }
        if !self.unschedulable.is_empty() {
            let clauses: Vec<&str> = self
                .unschedulable
                .iter()
                .map(|u| u.clause.as_str())
                .collect();
            let most: Vec<String> = self
                .unschedulable
                .iter()
                .map(|u| format!("{} {}", u.largest, u.resource))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            return Some(format!(
                "pool {}: {}. Ask for at most {} per pod (split the work over more pods), or target a pool with bigger nodes.",
                self.pool,
                clauses.join("; "),
                most.join(" and ")
            ));
        }
        let failing: Vec<&ResourceCheck> = self.checks.iter().filter(|c| !c.tally.fits()).collect();
        let kept: Vec<String> = self
            .reserves
            .iter()
            .filter(|r| !r.fits())
            .map(ReserveCheck::clause)
            .collect();
        if failing.is_empty() && !kept.is_empty() {
            return Some(format!(
                "pool {}: {}. Wait for capacity, lower replicas, or target another pool.",
                self.pool,
                kept.join("; ")
            ));
        }
        if failing.is_empty() {
            if self.fragmentation == Action::Deny && !self.fragmented.is_empty() {
                return Some(format!(
                    "pool {}: {}. Wait for GPUs to free up on one node, ask for fewer GPUs per pod, or target another pool (fragmentation: deny).",
                    self.pool,
                    self.fragmented.join("; ")
                ));
            }
            return None;
        }
        let mut clauses = Vec::new();
        let mut no_capacity = false;
        for c in failing {
            clauses.push(if c.allocatable == 0 {
                no_capacity = true;
                self.no_capacity_clause(c)
            } else {
                let ceiling = c
                    .ceiling_said()
                    .map(|said| format!("; {said}"))
                    .unwrap_or_default();
                format!(
                    "{} would be {} of {} ({}) with this workload's {} ({} in use{}), above the {}% threshold{} (room for {} more{ceiling})",
                    c.resource,
                    c.tally.after(),
                    c.allocatable_from.amount(c.allocatable),
                    c.percent_after(),
                    c.tally.incoming,
                    c.tally.used,
                    c.used_from.suffix(),
                    c.threshold_percent,
                    c.window_text(),
                    c.tally.room()
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
                c.resource, c.tally.incoming
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
            c.resource, c.tally.incoming
        )
    }

    /// One line per resource for the `capacity` audit annotation.
    pub fn audit(&self) -> String {
        self.checks
            .iter()
            .map(|c| format!("{}: {c}", self.pool))
            .chain(
                self.reserves
                    .iter()
                    .map(|r| format!("{}: {}", self.pool, r.audit())),
            )
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// `one pod of spec.template.spec`, or `the pod` for a Pod (whose template is `spec`).
fn one_pod_of(shape: &PodShape) -> String {
    if shape.location == "spec" {
        "the pod".into()
    } else {
        format!("one pod of {}", shape.location)
    }
}

/// `a pod of spec.template.spec`, or `the pod` for a Pod.
fn a_pod_of(shape: &PodShape) -> String {
    if shape.location == "spec" {
        "the pod".into()
    } else {
        format!("a pod of {}", shape.location)
    }
}

/// The clause for a pod bigger than every node: the resource that does not fit, the
/// largest node for it (and the node shape of a node-count ceiling).
fn unschedulable(
    shape: &PodShape,
    need: &GpuCounts,
    nodes: &[NodeUse],
    node_shape: Option<&GpuCounts>,
) -> Unschedulable {
    let of = |m: &GpuCounts, r: &str| m.get(r).copied().unwrap_or(0);
    let most = |r: &str| {
        let on_nodes = nodes
            .iter()
            .map(|n| of(&n.allocatable, r))
            .max()
            .unwrap_or(0);
        on_nodes.max(node_shape.map_or(0, |s| of(s, r)))
    };
    // The first resource no node has enough of (else the first asked for: no node has
    // all of them together).
    let resource = need
        .iter()
        .find(|(r, n)| most(r) < **n)
        .or_else(|| need.iter().next())
        .map(|(r, _)| r.clone())
        .unwrap_or_default();
    let largest = nodes
        .iter()
        .max_by_key(|n| (of(&n.allocatable, &resource), std::cmp::Reverse(&n.name)));
    let mut held = Vec::new();
    if let Some(n) = largest {
        held.push(format!(
            "the largest, {}, has {} {resource} allocatable",
            n.name,
            of(&n.allocatable, &resource)
        ));
    }
    if let Some(s) = node_shape {
        held.push(format!(
            "{}the nodes the cluster autoscaler adds have {}",
            if nodes.is_empty() {
                "the pool has no node now and "
            } else {
                ""
            },
            of(s, &resource)
        ));
    }
    Unschedulable {
        clause: format!(
            "{} asks for {}, more than any node of the pool has ({}), so it can never be scheduled",
            a_pod_of(shape),
            amounts(need),
            held.join("; ")
        ),
        largest: most(&resource),
        resource,
    }
}

impl fmt::Display for ResourceCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} used {}{} + incoming {} = {} of {} ({}), threshold {}%{}, {}{}",
            self.resource,
            self.tally.used,
            self.used_from.suffix(),
            self.tally.incoming,
            self.tally.after(),
            self.allocatable_from.amount(self.allocatable),
            self.percent_after(),
            self.threshold_percent,
            self.window
                .as_ref()
                .map(|w| format!(" in window {w}"))
                .unwrap_or_default(),
            self.tally.verdict(),
            self.ceiling_text()
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
        assert_eq!(threshold_limit(90, 64), 57);
        assert_eq!(threshold_limit(100, u64::MAX), u64::MAX);
        let c = Tally {
            used: 50,
            incoming: 8,
            limit: threshold_limit(90, 64),
        };
        assert_eq!(c.room(), 7);
        assert_eq!(Tally { used: 60, ..c }.room(), 0);
    }
}
