//! gpu-capacity-gate-policy: deny new GPU work when its pool is (nearly) full.
//!
//! For an admitted GPU workload the gate works out which pools its pod templates target
//! ([`crate::pools::PoolSet::targeted_by`]) and how many GPUs of each resource name it adds
//! to each ([`demand`]: pods x effective GPUs on CREATE, the increase on UPDATE and on
//! `scale` subresource updates). For every pool it adds to, it reads the pool's state
//! through context-aware host calls ([`state`]): what the pool offers as
//! [`crate::pools`] reads it for every policy (allocatable GPUs from its Nodes or from the
//! capacity declared in settings, and its ceiling: `maxAllocatable`, a Karpenter
//! NodePool's `spec.limits`, or cluster-autoscaler's `maxNodes` x `gpusPerNode`), GPUs in
//! use from the pool's Pods ([`pods`]) or from its ResourceQuotas ([`pool_quotas`],
//! `usage: quotas`: one object per namespace instead of one per pod), with the queries of
//! [`queries`]; then it checks `used + incoming` against the threshold in force (the
//! pool's, or a schedule window's) times the larger of allocatable and the ceiling, per
//! resource name, and one pod of each template against each node of the pool (bigger than
//! every node: denied; no node with room: fragmentation) ([`decision::decide_with`]). Node
//! and Pod lists are read one item at a time with serde_json, borrowing from the answer
//! ([`crate::lists`]).
//!
//! Suspended workloads (`spec.suspend: true`) are charged when they are unsuspended;
//! workloads a queue is proven to own (Kueue's `kueue.x-k8s.io/queue-name` label on a
//! kind Kueue manages, held the way Kueue holds it, naming a LocalQueue that exists:
//! [`queue`]) are left to it unless `gateQueued`; an UPDATE that starts a Deployment rollout is charged its
//! `maxSurge` pods. A denied pool names the first of its `alternatives` with room.
//!
//! Its settings are checked once into the form the rules take ([`check::Checked`]: each
//! pool's declared GPUs and settings ceiling as counts, its node selector as a query, its
//! thresholds with their windows' schedules read, [`crate::pools::PoolForm`]; the team
//! budgets read): a request parses none of them again.
//!
//! It fails closed: when cluster state cannot be read the workload is denied with a
//! message naming the missing contextAwareResources entry or RBAC permission, and when
//! the pool's ResourceQuotas cannot count the request's pods with the quota to create or
//! fix, unless `unreadableCluster: warn` is set (`failOpen: true` in the old spelling).

pub mod check;
pub mod claims;
pub mod decision;
pub mod demand;
pub mod offers;
pub mod pods;
pub mod policy;
pub mod pool_quotas;
pub mod queries;
pub mod queue;
pub mod quotas;
pub mod reserve;
pub mod settings;
pub mod state;
pub mod tally;
pub mod teams;
pub mod upgrade;
// Burst brakes and sustained rules: when the pools' pods were created.
pub mod brake;
pub mod pace;
pub mod sustained;
pub mod timeline;

pub use crate::pools::{Ceiling, CeilingSource};
pub use check::Checked;
pub use decision::{
    CapacitySource, Decision, NodeUse, PoolSnapshot, ResourceCheck, UsageSource, decide_with,
};
pub use settings::{ChargePods, Pool, Settings, Usage};

use crate::admission::{AdmissionRequest, Verdict};
use crate::cluster::{Cluster, HOST_ERROR_MAX, HostError, HostFailure, call};
use crate::dra;
use crate::gpu::GpuResources;
use crate::policy::object_name;
use crate::pools::CheckedPool;
use crate::workload::Workload;
use decision::Inputs;
use demand::{Demand, Incoming};
use serde_json::Value;
use state::PoolError;

/// Audit annotation keys (Kubernetes prefixes them with the webhook's name).
pub mod audit {
    /// Pools checked, comma-separated.
    pub const POOL: &str = "pool";
    /// Per pool and resource: used, incoming, allocatable, percent, threshold.
    pub const CAPACITY: &str = "capacity";
    /// GPU templates that target no configured pool (not checked).
    pub const NO_POOL: &str = "no-pool";
    /// Why nothing or part of the object was not charged.
    pub const EXEMPT: &str = crate::policy::AUDIT_EXEMPT;
    pub const NOT_CHARGED: &str = "not-charged";
    /// The host's error text (truncated) when cluster state could not be read.
    pub const HOST_ERROR: &str = crate::policy::AUDIT_HOST_ERROR;
    /// A workload carrying the queue label (Kueue): left to its queue, or why not.
    pub const QUEUE: &str = "queue";
    /// Not an annotation: a note under this key is a warning to the client.
    pub const WARNING: &str = "";
    /// A suspended workload (not charged), or the update that unsuspends it (charged in full).
    pub const SUSPEND: &str = "suspend";
    /// The extra pods of a Deployment's rollout (maxSurge), charged.
    pub const SURGE: &str = "surge";
    /// Pods no node of the pool has room for now.
    pub const FRAGMENTATION: &str = "fragmentation";
    /// What the pool's alternatives said on a denial.
    pub const ALTERNATIVES: &str = "alternatives";
    /// The namespace's ResourceQuotas checked: per quota and resource, used, incoming, hard.
    pub const QUOTA: &str = "quota";
    /// The team's budget checked: how the team was found, per limit used, incoming, limit.
    pub const TEAM: &str = "team";
    /// The allocated DRA ResourceClaims of the pools' pods counted (`countDraClaims`).
    pub const DRA_CLAIMS: &str = "dra-claims";
    /// What the pools' nodes do not offer of what the templates select (`nodeOffers`).
    pub const NODE_OFFERS: &str = "node-offers";
}

/// What a request charges, or why it is decided without looking at the cluster.
enum Plan {
    Charge {
        /// Per pool what the request adds (`per_pool`: its growth on UPDATE), with the
        /// charged templates' classes, shapes and types.
        demand: Demand,
        notes: Vec<(&'static str, String)>,
        /// What the request adds template by template (namespace quotas, team budgets).
        incoming: Incoming,
    },
    Done(Verdict),
    HostFailed {
        failure: HostFailure,
        context: String,
    },
}

/// The rules for a request the gate judges, outside its exempt namespaces, reading
/// cluster state through `cluster` at the time `clock` tells (thresholds by schedule
/// window).
pub fn decide(a: crate::policy::Admission<'_, Checked>) -> Verdict {
    let (request, settings, clock) = (a.request, a.settings, a.clock);
    // The claim list (countDraClaims) is read once, whichever pools ask for it.
    let memo = claims::Memo::new(a.cluster);
    let cluster: &dyn Cluster = &memo;
    let now = clock.now();
    let names = settings.gpu_resources();
    let plan = match request.sub_resource.as_str() {
        "" => object_plan(request, settings, &names, cluster),
        "scale" if request.is_update() => scale_plan(request, settings, &names, cluster),
        // status, ephemeralcontainers, resize...: GPU requests cannot change there.
        _ => Plan::Done(Verdict::accept()),
    };
    let (demand, mut notes, incoming) = match plan {
        Plan::Charge {
            demand,
            notes,
            incoming,
        } => (demand, notes, incoming),
        Plan::Done(verdict) => return verdict,
        Plan::HostFailed { failure, context } => {
            return host_failure(settings, &context, &failure, Vec::new());
        }
    };

    let mut decisions = Vec::new();
    let mut pace = pace::Pace::new(cluster, settings, request, now);
    for (index, pool_demand) in &demand.per_pool {
        let Some(pool) = settings.pool(*index) else {
            continue;
        };
        let context = format!("pool {}", pool.name);
        if settings.usage_of(&pool) == Usage::Quotas
            && let Some(denial) = uncounted_templates(&pool, demand.classes.get(index))
        {
            return with_notes(Verdict::reject(format!("{context}: {denial}")), notes)
                .with_audit(audit::CAPACITY, format!("{context}: not checked"));
        }
        let shapes = demand
            .shapes
            .get(index)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let job = PoolJob {
            cluster,
            settings,
            names: &names,
            namespace: &request.namespace,
            demand: pool_demand,
            shapes,
            workload_type: demand::workload_type(demand.types.get(index)),
            now,
        };
        match job.read_and_decide(pool) {
            Ok((decision, snapshot)) => {
                if let Some(times) = &snapshot.pod_times
                    && let Err(failure) = pace.judge(
                        &pool.name,
                        times,
                        pool_demand,
                        &decision.checks,
                        pool.sustained.as_ref(),
                    )
                {
                    return host_failure(settings, &context, &failure, notes);
                }
                decisions.push((decision, job))
            }
            Err(PoolError::Host(failure)) => {
                return host_failure(settings, &context, &failure, notes);
            }
            Err(PoolError::Uncountable(problem)) => {
                return uncountable(settings, &context, &problem, notes);
            }
        }
    }
    // Exceptions for nodeOffers first: a pool they excuse may not be denied at all.
    notes.extend(node_offers(
        decisions.iter_mut().map(|(d, _)| d),
        settings,
        request,
        now,
    ));
    // Denied pools name their first alternative with room.
    let mut alternatives = Vec::new();
    for (decision, job) in &mut decisions {
        if decision.denial().is_none() {
            continue;
        }
        let Some((_, pool)) = settings.pool_named(&decision.pool) else {
            continue;
        };
        if let Some(text) = job.alternatives(pool) {
            alternatives.push(format!("{}: {text}", pool.name));
            decision.alternatives = Some(text);
        }
    }
    let decisions: Vec<Decision> = decisions.into_iter().map(|(d, _)| d).collect();

    let counted = decisions
        .iter()
        .filter_map(|d| Some((d.pool.as_str(), d.claims.as_ref()?)));
    notes.extend(claims::audit(counted).map(|text| (audit::DRA_CLAIMS, text)));
    notes.extend(decisions.iter().filter_map(|d| {
        crate::pools::plugin_down_warning(&d.pool, &d.plugin_down).map(|w| (audit::WARNING, w))
    }));
    let mut denials: Vec<String> = decisions.iter().filter_map(Decision::denial).collect();
    denials.append(&mut pace.found.denials);
    notes.extend(pace.into_notes());
    let mut warnings: Vec<String> = decisions.iter().filter_map(Decision::warning).collect();
    // Namespace quotas and team budgets, reported with the pools' denials.
    match namespace_checks(request, settings, &names, cluster, &incoming) {
        Ok(found) => {
            denials.extend(found.denials);
            warnings.extend(found.warnings);
            notes.extend(found.notes);
        }
        Err(verdict) => return with_notes(*verdict, notes),
    }
    let mut verdict = if denials.is_empty() {
        let mut v = Verdict::accept();
        for warning in warnings {
            v = v.with_warning(warning);
        }
        v
    } else {
        Verdict::reject(denials.join(" "))
    };
    if !decisions.is_empty() {
        let pools: Vec<&str> = decisions.iter().map(|d| d.pool.as_str()).collect();
        let capacity: Vec<String> = decisions.iter().map(Decision::audit).collect();
        verdict = verdict
            .with_audit(audit::POOL, pools.join(","))
            .with_audit(audit::CAPACITY, capacity.join("; "));
        let fragmented: Vec<String> = decisions
            .iter()
            .filter_map(Decision::fragmentation_audit)
            .collect();
        if !fragmented.is_empty() {
            verdict = verdict.with_audit(audit::FRAGMENTATION, fragmented.join("; "));
        }
        if !alternatives.is_empty() {
            verdict = verdict.with_audit(audit::ALTERNATIVES, alternatives.join("; "));
        }
    }
    with_notes(verdict, notes)
}

/// The `node-offers` audit and warnings of the pools' decisions, with the exceptions for
/// `nodeOffers` applied: an exception that applies to the request drops the denial it
/// excuses from its decision (which then decides as if `nodeOffers` were `allow`), one that
/// has ended is named at the end of the denial.
fn node_offers<'d>(
    decisions: impl Iterator<Item = &'d mut Decision>,
    settings: &Checked,
    request: &AdmissionRequest,
    now: crate::clock::UnixSeconds,
) -> Vec<(&'static str, String)> {
    let mut notes = Vec::new();
    let mut audit_lines = Vec::new();
    for d in decisions {
        let Some(found) = d.offers.as_mut() else {
            continue;
        };
        audit_lines.extend(found.audit(&d.pool));
        if let Some(w) = found.warning(&d.pool) {
            notes.push((audit::WARNING, w));
        }
        let Some(denial) = found.denial(&d.pool) else {
            continue;
        };
        match offers::excused(settings, request, &denial, now) {
            Ok(excused) => {
                notes.extend(excused);
                d.offers = None;
            }
            Err(expired) => found.expired = expired,
        }
    }
    if !audit_lines.is_empty() {
        notes.push((audit::NODE_OFFERS, audit_lines.join("; ")));
    }
    notes
}

/// What the namespace quota and team budget checks found.
#[derive(Default)]
struct NamespaceFindings {
    denials: Vec<String>,
    warnings: Vec<String>,
    notes: Vec<(&'static str, String)>,
}

/// Checks the namespace's ResourceQuotas (`checkNamespaceQuotas`) and the team's budget
/// against what the request adds. No host call when it adds nothing. `Err` is the verdict
/// when something could not be read (fail closed, or `unreadableCluster`), or the budgets
/// ConfigMap is malformed.
fn namespace_checks(
    request: &AdmissionRequest,
    settings: &Checked,
    names: &GpuResources,
    cluster: &dyn Cluster,
    incoming: &Incoming,
) -> Result<NamespaceFindings, Box<Verdict>> {
    let mut found = NamespaceFindings::default();
    if incoming.is_empty() {
        return Ok(found);
    }
    let namespace = request.namespace.as_str();
    if settings.checks_namespace_quotas() {
        match quotas::check(cluster, namespace, names, incoming) {
            Ok(outcome) => {
                found.denials.extend(outcome.denials(namespace));
                found.warnings.extend(outcome.warnings.iter().cloned());
                found.notes.push((audit::QUOTA, outcome.audit(namespace)));
            }
            Err(failure) => {
                let context = format!("namespace {namespace}: its ResourceQuotas");
                if settings.on_unreadable_namespace_quotas(&failure)
                    == crate::settings::Action::Deny
                {
                    return Err(Box::new(host_failure(
                        settings,
                        &context,
                        &failure,
                        Vec::new(),
                    )));
                }
                found.warnings.push(if settings.unreadable_namespace_quotas.is_some() {
                    format!(
                        "{context} were not checked: {} (unreadableNamespaceQuotas: warn; Kubernetes still enforces them when the pods are created)",
                        failure.explanation()
                    )
                } else {
                    upgrade::not_granted_warning(&context, &failure)
                });
                found
                    .notes
                    .push((audit::HOST_ERROR, failure.raw(HOST_ERROR_MAX)));
                found
                    .notes
                    .push((audit::QUOTA, format!("namespace {namespace}: not checked")));
            }
        }
    }
    match teams::check(
        cluster,
        settings,
        &settings.budgets,
        names,
        namespace,
        incoming,
    ) {
        Ok(teams::Judged::NoBudget(why)) => {
            if teams::configured(settings) {
                found.notes.push((audit::TEAM, why));
            }
        }
        Ok(teams::Judged::Checked(outcome)) => {
            found.denials.extend(outcome.denials());
            found.notes.push((audit::TEAM, outcome.audit()));
        }
        Err(teams::TeamError::Host(failure)) => {
            let context = format!("team budget of namespace {namespace}");
            return Err(Box::new(
                host_failure(settings, &context, &failure, Vec::new())
                    .with_audit(audit::TEAM, format!("{context}: not checked")),
            ));
        }
        Err(teams::TeamError::Invalid(problem)) => {
            return Err(Box::new(
                Verdict::reject(format!(
                    "{problem}. The GPU capacity gate denies what it cannot check."
                ))
                .with_audit(
                    audit::TEAM,
                    format!("team budget of namespace {namespace}: not checked"),
                ),
            ));
        }
    }
    Ok(found)
}

/// What a request asks of any pool: reading it and deciding with the same demand (for
/// the pools it targets, and for their alternatives on a denial).
struct PoolJob<'a> {
    cluster: &'a dyn Cluster,
    settings: &'a Checked,
    names: &'a GpuResources<'a>,
    namespace: &'a str,
    demand: &'a crate::gpu::GpuCounts,
    shapes: &'a [demand::PodShape],
    /// The request's workload type for the pool's reserves.
    workload_type: Option<&'a str>,
    now: crate::clock::UnixSeconds,
}

impl PoolJob<'_> {
    /// Reads `pool` and decides at the threshold in force now.
    fn decide(&self, pool: CheckedPool) -> Result<Decision, PoolError> {
        self.read_and_decide(pool).map(|(decision, _)| decision)
    }

    /// [`PoolJob::decide`], with the pool's state read.
    fn read_and_decide(&self, pool: CheckedPool) -> Result<(Decision, PoolSnapshot), PoolError> {
        let labels = self.settings.node_offers != crate::settings::Action::Allow
            && self.shapes.iter().any(|s| s.selects.is_some());
        let snapshot = state::read_pool(
            self.cluster,
            self.settings,
            pool,
            self.names,
            self.namespace,
            self.demand,
            labels,
        )?;
        let (threshold_percent, window) = pool.threshold_at(self.now);
        let inputs = Inputs {
            threshold_percent,
            window: window.map(str::to_string),
            shapes: self.shapes,
            fragmentation: self.settings.fragmentation,
            reserve: pool.reserve_at(self.now),
            workload_type: self.workload_type,
            node_offers: self.settings.node_offers,
        };
        let decision = decide_with(&snapshot, self.demand, &pool, &inputs);
        Ok((decision, snapshot))
    }

    /// The sentence a denial of `pool` ends with: the first of its alternatives with room
    /// for the workload (read with the same calls as any pool), or why none has. `None`
    /// when the pool has no alternatives.
    fn alternatives(&self, pool: CheckedPool) -> Option<String> {
        if pool.alternatives.is_empty() {
            return None;
        }
        let mut without = Vec::new();
        for name in &pool.alternatives {
            let Some((_, alternative)) = self.settings.pool_named(name) else {
                continue;
            };
            let why = match self.decide(alternative) {
                Ok(d) if d.denial().is_none() && d.warning().is_none() => {
                    return Some(format!("Pool {name} has room for {}.", room_text(&d)));
                }
                Ok(d) if d.offers.as_ref().is_some_and(offers::Found::denies) => {
                    format!("{name} (its nodes do not offer what the pod selects)")
                }
                Ok(d) if !d.unschedulable.is_empty() => {
                    format!("{name} (its nodes are too small for one pod)")
                }
                Ok(d) if !d.fragmented.is_empty() && d.checks.iter().all(|c| c.tally.fits()) => {
                    format!("{name} (no node has room for one pod)")
                }
                Ok(d) => format!("{name} (room for {})", room_text(&d)),
                Err(_) => format!("{name} (its state could not be read)"),
            };
            without.push(why);
        }
        Some(format!(
            "No alternative pool has room: {}.",
            without.join(", ")
        ))
    }
}

/// `24 nvidia.com/gpu` (and more resources with `and`): how many more GPUs of each
/// demanded resource fit under the pool's threshold.
fn room_text(decision: &Decision) -> String {
    decision
        .checks
        .iter()
        .map(|c| format!("{} {}", c.tally.room(), c.resource))
        .collect::<Vec<_>>()
        .join(" and ")
}

/// Adds `notes` to `verdict`: audit annotations, and warnings under [`audit::WARNING`].
fn with_notes(mut verdict: Verdict, notes: Vec<(&'static str, String)>) -> Verdict {
    for (key, value) in notes {
        verdict = if key == audit::WARNING {
            verdict.with_warning(value)
        } else {
            verdict.with_audit(key, value)
        };
    }
    verdict
}

/// CREATE or UPDATE of a workload object (Pod, Deployment, ..., custom kind).
fn object_plan(
    request: &AdmissionRequest,
    settings: &Settings,
    names: &GpuResources,
    cluster: &dyn Cluster,
) -> Plan {
    let workload = match Workload::from_object(&request.object, &settings.custom_kinds) {
        Ok(w) => w,
        Err(e) => return Plan::Done(crate::policy::unreadable(request, e)),
    };
    let what = format!(
        "{} {}/{}",
        workload.kind,
        request.namespace,
        object_name(request)
    );
    // Decided before any claim is read: a suspended workload is not charged, one its queue
    // is proven to own is left to it ([`queue`]).
    let holds_gpus = || {
        demand::workload_demand(&workload, settings, names, &dra::ClaimBook::default()).uses_gpu()
    };
    let suspended =
        |object: &Value| demand::is_suspended(&workload.group, &workload.kind, object, settings);
    let path = demand::suspend_path(&workload.group, &workload.kind, settings).unwrap_or_default();
    if suspended(&request.object) {
        if !holds_gpus() {
            return Plan::Done(Verdict::accept());
        }
        return Plan::Done(Verdict::accept().with_audit(
            audit::SUSPEND,
            format!("{what} is suspended ({path}: true): not charged until the update that unsuspends it"),
        ));
    }
    let mut queue_notes = Vec::new();
    if holds_gpus() {
        match queue::judge(request, &workload, settings, cluster, &what) {
            queue::Judged::NotQueued => {}
            queue::Judged::Owned(note) => {
                return Plan::Done(Verdict::accept().with_audit(audit::QUEUE, note));
            }
            queue::Judged::NotOwned {
                note,
                warning,
                host_error,
            } => {
                queue_notes.push((audit::QUEUE, note));
                queue_notes.extend(warning.map(|w| (audit::WARNING, w)));
                queue_notes.extend(host_error.map(|e| (audit::HOST_ERROR, e)));
            }
            queue::Judged::Failed(failure) => {
                return Plan::HostFailed {
                    failure,
                    context: format!("{what}: its LocalQueue"),
                };
            }
        }
    }
    let claims = dra::resolve(&workload, &request.namespace, &settings.dra, cluster);
    let mut new = demand::workload_demand(&workload, settings, names, &claims);
    demand::read_scopes(&mut new.templates, &workload, &request.object, true);
    if !new.uses_gpu() {
        return Plan::Done(with_notes(Verdict::accept(), queue_notes));
    }
    if let Some(denial) = uncountable_demand(&new) {
        return Plan::Done(with_notes(denial, queue_notes));
    }
    let mut notes = queue_notes;
    notes.extend(demand_notes(&new));

    if let Some(reason) = not_charged(&workload, &request.object, settings) {
        notes.push((audit::NOT_CHARGED, reason));
        return Plan::Done(with_notes(Verdict::accept(), notes));
    }

    let mut incoming = Incoming {
        new: std::mem::take(&mut new.templates),
        ..Incoming::default()
    };
    let per_pool = if request.is_update() {
        // The old object was admitted before; if it cannot be read, charge everything. A
        // suspended old object held nothing: the update that unsuspends it is charged in full.
        let old_workload = Workload::from_object(&request.old_object, &settings.custom_kinds);
        let old = match &old_workload {
            Ok(_) if suspended(&request.old_object) => {
                notes.push((
                    audit::SUSPEND,
                    format!("{what} is unsuspended ({path}: true -> false): charged in full"),
                ));
                Demand::default()
            }
            Ok(w) => {
                let mut old = demand::workload_demand(w, settings, names, &claims);
                demand::read_scopes(&mut old.templates, w, &request.old_object, true);
                old
            }
            Err(_) => Demand::default(),
        };
        incoming.old = old.templates;
        let grown = demand::increase(&new.per_pool, &old.per_pool);
        match rollout(request, &workload, settings, names, &claims) {
            Some((mut surge, note)) => {
                notes.push((audit::SURGE, note));
                demand::read_scopes(&mut surge.templates, &workload, &request.object, true);
                incoming.surge = surge.templates;
                demand::sum(&grown, &surge.per_pool)
            }
            None => grown,
        }
    } else {
        new.per_pool
    };
    if per_pool.is_empty() && incoming.is_empty() {
        return Plan::Done(with_notes(Verdict::accept(), notes));
    }
    new.per_pool = per_pool;
    Plan::Charge {
        demand: new,
        notes,
        incoming,
    }
}

/// The extra pods of a Deployment rollout this UPDATE starts (`maxSurge` of its replicas,
/// GPUs per pod of the new template), with the audit note; `None` when it starts none,
/// for other kinds, and with `chargeRolloutSurge: false`.
fn rollout(
    request: &AdmissionRequest,
    workload: &Workload,
    settings: &Settings,
    names: &GpuResources,
    claims: &dra::ClaimBook,
) -> Option<(Demand, String)> {
    if !settings.charge_rollout_surge
        || (workload.group.as_str(), workload.kind.as_str()) != ("apps", "Deployment")
        || !demand::starts_rollout(&request.object, &request.old_object)
    {
        return None;
    }
    let (pods, how) = demand::rollout_surge(&request.object);
    if pods == 0 {
        return None;
    }
    let mut surge = workload.clone();
    for t in &mut surge.templates {
        t.pods = pods;
    }
    let charged = demand::workload_demand(&surge, settings, names, claims);
    if charged.templates.is_empty() {
        return None;
    }
    Some((
        charged,
        format!(
            "rollout of Deployment {}/{}: {pods} extra {} charged ({how}; chargeRolloutSurge: true)",
            request.namespace,
            object_name(request),
            if pods == 1 { "pod" } else { "pods" }
        ),
    ))
}

/// The denial for templates whose GPUs cannot be counted (fail closed, whatever
/// `unreadableCluster` says: the policy was not given what it needs to count them).
fn uncountable_demand(demand: &Demand) -> Option<Verdict> {
    (!demand.uncountable.is_empty()).then(|| {
        Verdict::reject(format!(
            "the capacity gate cannot count the GPUs of this workload, so it cannot admit it: {}",
            demand.uncountable.join("; ")
        ))
    })
}

fn demand_notes(demand: &Demand) -> Vec<(&'static str, String)> {
    let mut notes = Vec::new();
    if !demand.no_pool.is_empty() {
        notes.push((
            audit::NO_POOL,
            format!(
                "{}: no configured pool is named by the pool label or selected by the node selector; capacity not checked",
                demand.no_pool.join(", ")
            ),
        ));
    }
    if !demand.exempt.is_empty() {
        notes.push((
            audit::EXEMPT,
            format!("{}: exemptPriorityClasses", demand.exempt.join(", ")),
        ));
    }
    notes
}

/// Why an object is not charged: its controller was (or, for Pods, `chargePods`).
fn not_charged(workload: &Workload, object: &Value, settings: &Settings) -> Option<String> {
    if workload.is_pod() && settings.charge_pods == ChargePods::None {
        return Some("Pod (chargePods: none)".into());
    }
    if workload.is_pod() && settings.charge_pods == ChargePods::All {
        return None;
    }
    let owner = demand::controller_of(object)?;
    demand::is_gated_controller(&owner, settings).then(|| {
        format!(
            "created by {} {}, which was charged for its pods (chargePods: {})",
            owner.kind,
            owner.name,
            settings.charge_pods.as_str()
        )
    })
}

/// UPDATE of `<workload>/scale`: charge (new - old replicas) x GPUs per pod of the
/// workload's template, read with `get_resource`.
fn scale_plan(
    request: &AdmissionRequest,
    settings: &Settings,
    names: &GpuResources,
    cluster: &dyn Cluster,
) -> Plan {
    let replicas = demand::scale_replicas(&request.object).and_then(|new| {
        let old = demand::scale_replicas(&request.old_object)?;
        Ok((new, old))
    });
    let (new, old) = match replicas {
        Ok(r) => r,
        Err(e) => {
            return Plan::Done(
                Verdict::reject(format!(
                    "scale of {} {}/{}: {e}",
                    request.resource.resource, request.namespace, request.name
                ))
                .with_code(400),
            );
        }
    };
    if new <= old {
        return Plan::Done(Verdict::accept());
    }
    let Some((api_version, kind)) =
        demand::scale_parent(&request.resource.group, &request.resource.resource)
    else {
        return Plan::Done(Verdict::accept().with_audit(
            audit::NOT_CHARGED,
            format!(
                "scale of {}.{} is not gated (only deployments, statefulsets, replicasets and replicationcontrollers are)",
                request.resource.resource, request.resource.group
            ),
        ));
    };
    let name = object_name(request);
    let context = format!("scale of {kind} {}/{name}", request.namespace);
    let query = queries::parent_query(api_version, kind, name, &request.namespace);
    let parent = match call(cluster, &query) {
        Ok(bytes) => bytes,
        Err(failure) => return Plan::HostFailed { failure, context },
    };
    let unreadable = |e: String| Plan::HostFailed {
        failure: HostFailure {
            request: Box::new(query.clone()),
            error: HostError::Unreadable(e),
        },
        context: context.clone(),
    };
    let mut parent: Value = match serde_json::from_slice(&parent) {
        Ok(Value::Object(map)) => Value::Object(map),
        Ok(other) => return unreadable(format!("expected an object, got {other}")),
        Err(e) => return unreadable(e.to_string()),
    };
    // Masks may drop apiVersion and kind; the template's pods become the added replicas.
    if let Some(map) = parent.as_object_mut() {
        map.insert("apiVersion".into(), Value::from(api_version));
        map.insert("kind".into(), Value::from(kind));
    }
    match crate::workload::object_at_mut(&mut parent, "/spec") {
        Some(spec) => {
            spec.insert("replicas".into(), Value::from(new - old));
        }
        None => return unreadable("spec is not an object".into()),
    }
    let workload = match Workload::from_object(&parent, &settings.custom_kinds) {
        Ok(w) => w,
        Err(e) => return unreadable(e.to_string()),
    };
    let claims = dra::resolve(&workload, &request.namespace, &settings.dra, cluster);
    let mut added = demand::workload_demand(&workload, settings, names, &claims);
    if let Some(denial) = uncountable_demand(&added) {
        return Plan::Done(denial);
    }
    let notes = demand_notes(&added);
    // The parent was read masked to its resources: its pod affinity is not known.
    demand::read_scopes(&mut added.templates, &workload, &parent, false);
    let incoming = Incoming {
        new: std::mem::take(&mut added.templates),
        ..Incoming::default()
    };
    if added.per_pool.is_empty() && incoming.is_empty() {
        return Plan::Done(with_notes(Verdict::accept(), notes));
    }
    Plan::Charge {
        demand: added,
        notes,
        incoming,
    }
}

/// With `usage: quotas`, the templates charged to `pool` whose pods its quotas would not
/// count (their `priorityClassName` is not one of the pool's), as a denial with the fix.
fn uncounted_templates(
    pool: &Pool,
    templates: Option<&Vec<(String, Option<String>)>>,
) -> Option<String> {
    let classes = &pool.priority_classes;
    let uncounted: Vec<String> = templates
        .into_iter()
        .flatten()
        .filter(|(_, class)| !class.as_ref().is_some_and(|c| classes.contains(c)))
        .map(|(location, class)| match class {
            Some(c) => format!("{location} has priorityClassName {c}"),
            None => format!("{location} has no priorityClassName"),
        })
        .collect();
    if uncounted.is_empty() {
        return None;
    }
    let to = match classes.as_slice() {
        [one] => one.clone(),
        many => format!("one of {}", many.join(", ")),
    };
    Some(format!(
        "its GPUs in use are counted by ResourceQuotas scoped to its priority classes ({}), which would not count this workload's pods: {}. Set priorityClassName to {to} (gpu-pool-routing-policy sets it on the pool's workloads).",
        classes.join(", "),
        uncounted.join("; ")
    ))
}

/// The pool's ResourceQuotas cannot count what the request needs: deny (fail closed) or
/// accept with a warning, as when cluster state cannot be read.
fn uncountable(
    settings: &Settings,
    context: &str,
    problem: &str,
    notes: Vec<(&'static str, String)>,
) -> Verdict {
    let verdict = if settings.on_unreadable_cluster() == crate::settings::Action::Warn {
        Verdict::accept().with_warning(format!(
            "{context}: GPU capacity was not checked: {problem} (accepted because unreadableCluster is warn)"
        ))
    } else {
        Verdict::reject(format!(
            "{context}: {problem}. The GPU capacity gate denies what it cannot count (unreadableCluster: deny)."
        ))
    };
    with_notes(verdict, notes).with_audit(audit::CAPACITY, format!("{context}: not checked"))
}

/// Cluster state could not be read: deny (fail closed) or accept with a warning.
fn host_failure(
    settings: &Settings,
    context: &str,
    failure: &HostFailure,
    notes: Vec<(&'static str, String)>,
) -> Verdict {
    let explanation = failure.explanation();
    let verdict = if settings.on_unreadable_cluster() == crate::settings::Action::Warn {
        Verdict::accept().with_warning(format!(
            "{context}: GPU capacity was not checked: {explanation} (accepted because unreadableCluster is warn)"
        ))
    } else {
        Verdict::reject(format!(
            "{context}: {explanation}. The GPU capacity gate denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation {}.",
            audit::HOST_ERROR
        ))
    };
    with_notes(verdict, notes)
        .with_audit(audit::HOST_ERROR, failure.raw(HOST_ERROR_MAX))
        .with_audit(audit::CAPACITY, format!("{context}: not checked"))
}

#[cfg(test)]
mod tests;
