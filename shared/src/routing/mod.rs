//! gpu-pool-routing-policy: steer every GPU workload to its node pool, by mutation.
//!
//! Settings describe pools: which workloads belong to one (a label selector on the pod
//! template, optionally namespaces) and what joining it means (nodeSelector entries,
//! tolerations, a priority class, required node affinity). For each GPU pod template of
//! an admitted object the policy picks the one pool its labels match (pools are validated
//! to be disjoint), or the default pool, or denies (fail closed). It then either denies
//! the workload because it already contradicts its pool ([`conflicts`]), or adds what is
//! missing ([`change`]) including a pool label other rules can select on.
//!
//! - [`settings`]: the settings and their validation.
//! - [`constraint`] / [`overlap`]: label requirements as sets, and why two pools are disjoint.
//! - [`conflicts`]: contradictions between a template and its pool.
//! - [`change`]: the routing change as data ([`change::Routing`]) and writing it back.
//! - [`team`]: the team label, stamped from the namespace's label (`teamLabelKey`).
//! - [`plan`] (this module): one decision per template; [`decide`] turns it into a verdict.
//! - [`policy`]: the policy ([`policy::Routing`]): its settings checked, its exceptions.

pub mod change;
pub mod conflicts;
pub mod constraint;
pub mod lending;
pub mod overlap;
pub mod policy;
pub mod settings;
pub mod team;

pub use change::Routing;
pub use conflicts::Conflict;
pub use settings::{
    Checked, DEFAULT_POOL_LABEL_KEY, NodeRequirement, Pool, PoolToleration, Settings,
};

use crate::admission::{AdmissionRequest, Verdict};
use crate::cluster::Cluster;
use crate::dra::{self, ClaimBook};
use crate::gpu::{GpuProblem, GpuResources, PodGpus, template_gpus};
use crate::workload::At;
use crate::workload::{Workload, pointer_to_location, value_at};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A GPU pod template whose labels match no pool, with no default pool configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoPool {
    /// Where the template's labels are (`spec.template.metadata.labels`).
    pub field: String,
    pub location: String,
    pub labels: BTreeMap<String, String>,
    pub namespace: String,
    /// Each pool and what it takes (`batch: workload-type=batch`).
    pub pools: Vec<String>,
}

impl fmt::Display for NoPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let labels = if self.labels.is_empty() {
            "no labels".to_string()
        } else {
            let mut pairs: Vec<String> = self
                .labels
                .iter()
                .take(crate::limits::MAX_LISTED)
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            if self.labels.len() > crate::limits::MAX_LISTED {
                pairs.push(format!(
                    "and {} more",
                    self.labels.len() - crate::limits::MAX_LISTED
                ));
            }
            format!("labels {}", pairs.join(", "))
        };
        write!(
            f,
            "{}: the GPU pod template at {} ({labels}) in namespace {} matches no GPU pool; {}. Label the pod template so that it matches one of them, or ask the cluster admins to set defaultPool",
            self.field,
            self.location,
            if self.namespace.is_empty() {
                "(none)"
            } else {
                &self.namespace
            },
            self.pools.join("; ")
        )
    }
}

/// What the policy decided for one pod template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The template asks for no GPU: left alone.
    NotGpu,
    /// The template joins a pool; `routing` is what is missing (empty when routed already).
    Route { routing: Routing, by_default: bool },
    /// The template contradicts its pool.
    Deny(Vec<Conflict>),
    /// No pool matches and there is no default pool.
    NoPool(NoPool),
    /// The template's GPUs cannot be counted (a DRA claim that cannot be read, a
    /// fractional-GPU request that cannot): it is denied, not routed as if it had none.
    Uncountable {
        location: String,
        problems: Vec<String>,
    },
}

/// One template's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplatePlan {
    /// Where the PodSpec is (`spec.template.spec`).
    pub location: String,
    pub outcome: Outcome,
    /// Why the template goes to a pool that lends to its own (the audit annotation).
    pub lent: Option<String>,
}

/// When a decision is made: the time (lending windows) and whether a template already
/// on a lending pool stays there ([`lending::update::stay`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct When {
    pub now: crate::clock::UnixSeconds,
    pub stay: lending::update::Stay,
}

/// The decisions for every pod template of a workload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub templates: Vec<TemplatePlan>,
}

impl Plan {
    /// The denial messages, in template order.
    pub fn denials(&self) -> Vec<String> {
        let mut out = Vec::new();
        for t in &self.templates {
            match &t.outcome {
                Outcome::Deny(conflicts) => out.extend(conflicts.iter().map(ToString::to_string)),
                Outcome::NoPool(no_pool) => out.push(no_pool.to_string()),
                Outcome::Uncountable { location, problems } => out.push(format!(
                    "{location}: the GPUs of this pod template cannot be counted, so it cannot be routed to its pool: {}",
                    problems.join("; ")
                )),
                _ => {}
            }
        }
        out
    }

    /// The non-empty routings, with the template index.
    pub fn changes(&self) -> impl Iterator<Item = (usize, &Routing)> {
        self.templates
            .iter()
            .enumerate()
            .filter_map(|(i, t)| match &t.outcome {
                Outcome::Route { routing, .. } if !routing.is_empty() => Some((i, routing)),
                _ => None,
            })
    }

    /// True when every template is left alone or already routed.
    pub fn is_settled(&self) -> bool {
        self.denials().is_empty() && self.changes().next().is_none()
    }
}

/// The pool `labels` in `namespace` belong to (the first match; settings validation makes
/// pools disjoint), and whether it is the default pool.
pub fn choose_pool<'s>(
    settings: &'s Settings,
    labels: &BTreeMap<String, String>,
    namespace: &str,
) -> Option<(&'s Pool, bool)> {
    if let Some(pool) = settings.pools.iter().find(|p| p.matches(labels, namespace)) {
        return Some((pool, false));
    }
    settings
        .default_pool
        .as_deref()
        .and_then(|name| settings.pool(name))
        .map(|p| (p, true))
}

/// The GPU resource names a template asks for, or `None` when it asks for no GPU.
fn gpu_resources(gpus: &PodGpus) -> Option<BTreeSet<String>> {
    if !gpus.uses_gpu() {
        return None;
    }
    let mut out: BTreeSet<String> = gpus
        .containers
        .iter()
        .flat_map(|c| c.gpus.keys().cloned())
        .collect();
    out.extend(gpus.pod_level.keys().cloned());
    out.extend(gpus.effective.keys().cloned());
    Some(out)
}

/// Why the GPUs of a template cannot be counted: its DRA claims that cannot be read and a
/// fractional-GPU request that cannot (empty when they can).
fn uncountable_gpus(gpus: &PodGpus) -> Vec<String> {
    gpus.problems
        .iter()
        .filter(|p| matches!(p, GpuProblem::Claim { .. } | GpuProblem::Share(_)))
        .map(ToString::to_string)
        .collect()
}

/// The decision for every pod template of `workload` in `namespace`.
pub fn plan(
    settings: &Checked,
    workload: &Workload,
    names: &GpuResources,
    claims: &ClaimBook,
    namespace: &str,
    when: When,
) -> Plan {
    // A bare Pod's priority is resolved by the Priority admission plugin before webhooks
    // run: setting only the class name would leave the pod at the old priority.
    let sets_priority = !workload.is_pod();
    let mut templates = Vec::with_capacity(workload.templates.len());
    for t in &workload.templates {
        let mut lent = None;
        let gpus = template_gpus(t, names, claims);
        let uncountable = uncountable_gpus(&gpus);
        let outcome = match gpu_resources(&gpus) {
            _ if !uncountable.is_empty() => Outcome::Uncountable {
                location: t.location.clone(),
                problems: uncountable,
            },
            None => Outcome::NotGpu,
            Some(resources) => match choose_pool(settings, &t.meta.labels, namespace) {
                None => Outcome::NoPool(NoPool {
                    field: format!("{}.labels", pointer_to_location(&t.metadata_pointer)),
                    location: t.location.clone(),
                    labels: t.meta.labels.clone(),
                    namespace: namespace.to_string(),
                    pools: settings
                        .pools
                        .iter()
                        .map(|p| format!("pool {} takes {}", p.name, p.describe_membership()))
                        .collect(),
                }),
                Some((own, by_default)) => {
                    // A pool label naming the template's own pool keeps it there.
                    let stays_home = t.meta.labels.get(&settings.pool_label_key) == Some(&own.name);
                    let guest = match lending::lender(settings, own, t, when.stay, when.now) {
                        Some((lender, why)) if !stays_home => {
                            lent = Some(lending::audit(&t.location, lender, own, &why, when.now));
                            Some(lending::as_guest_pool(lender, own))
                        }
                        _ => None,
                    };
                    let pool = guest.as_ref().unwrap_or(own);
                    let mut conflicts =
                        conflicts::find(settings, pool, t, &resources, sets_priority);
                    if guest.is_none()
                        && let Some(refused) =
                            lending::update::refusal(settings, own, t, when.stay, when.now)
                    {
                        conflicts.retain(|c| !matches!(c, conflicts::Conflict::PoolLabel { .. }));
                        conflicts.insert(0, refused);
                    }
                    if conflicts.is_empty() {
                        Outcome::Route {
                            routing: change::routing_for(
                                pool,
                                t,
                                &settings.pool_label_key,
                                sets_priority,
                            ),
                            by_default,
                        }
                    } else {
                        Outcome::Deny(conflicts)
                    }
                }
            },
        };
        templates.push(TemplatePlan {
            location: t.location.clone(),
            outcome,
            lent,
        });
    }
    Plan { templates }
}

/// What routing reads from one template; an UPDATE that leaves it unchanged cannot have
/// changed which pool the template belongs to or how it is scheduled.
#[derive(Debug, Clone, PartialEq)]
struct RoutingView {
    uses_gpu: bool,
    pool: Option<String>,
    pool_label: Option<String>,
    /// The team label, when the policy stamps it.
    team_label: Option<String>,
    scheduling: [Value; 4],
}

fn routing_views(
    object: &Value,
    settings: &Settings,
    names: &GpuResources,
    claims: &ClaimBook,
    namespace: &str,
) -> Option<BTreeMap<String, RoutingView>> {
    let workload = Workload::from_object(object, &settings.custom_kinds).ok()?;
    let views = workload
        .templates
        .iter()
        .map(|t| {
            let spec = value_at(object, &t.spec_pointer);
            let field = |pointer: &str| {
                spec.and_then(|s| value_at(s, pointer))
                    .cloned()
                    .unwrap_or(Value::Null)
            };
            let view = RoutingView {
                uses_gpu: template_gpus(t, names, claims).uses_gpu(),
                pool: choose_pool(settings, &t.meta.labels, namespace).map(|(p, _)| p.name.clone()),
                pool_label: t.meta.labels.get(&settings.pool_label_key).cloned(),
                team_label: settings
                    .team_label_key
                    .as_ref()
                    .and_then(|_| t.meta.labels.get(team::TEAM_POD_LABEL_KEY).cloned()),
                scheduling: [
                    field("/nodeSelector"),
                    field("/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"),
                    field("/tolerations"),
                    field("/priorityClassName"),
                ],
            };
            (t.spec_pointer.clone(), view)
        })
        .collect();
    Some(views)
}

/// The namespace of the request (or of the object, for requests that omit it).
fn namespace_of(request: &AdmissionRequest) -> String {
    crate::policy::request_namespace(request).to_string()
}

/// `Deployment/name` of the object's controller, from `metadata.ownerReferences`.
fn controller_of(object: &Value) -> Option<String> {
    object
        .at("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
        .map(|o| {
            let text = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or("?");
            format!("{}/{}", text("kind"), text("name"))
        })
}

/// Kinds whose pod template cannot change after creation: a routing mutation on UPDATE
/// would be refused by the API server ("field is immutable").
fn template_is_immutable(workload: &Workload) -> bool {
    workload.is_pod() || (workload.group == "batch" && workload.kind == "Job")
}

/// At most this many problems are spelled out in one denial (a request with thousands of
/// bad tolerations must not produce a megabyte of message).
const MAX_REPORTED: usize = crate::limits::MAX_LISTED;

/// A denial of `problems`, the first [`MAX_REPORTED`] spelled out and the rest counted.
fn rejection(mut problems: Vec<String>) -> Verdict {
    if problems.len() > MAX_REPORTED {
        let more = problems.len() - MAX_REPORTED;
        problems.truncate(MAX_REPORTED);
        problems.push(format!("and {more} more"));
    }
    Verdict::reject(problems.join("; "))
}

/// Audit annotation of a template routed to a pool that lends to its own.
pub const AUDIT_LENT: &str = "lent";

/// Whether routing judges `request`: a CREATE or UPDATE that carries an object.
pub fn judges(request: &AdmissionRequest) -> bool {
    request.creates_or_updates() && !request.object.is_null()
}

/// The rules for a request routing judges, outside its exempt namespaces, at the time
/// `clock` tells (lending windows). `cluster` answers the `get_resource` calls that read
/// the workload's DRA claims (none without claims). The changed object is a copy of the
/// request's: [`Change::apply`] changes a request handed over in place.
pub fn decide(a: crate::policy::Admission<'_, Checked>) -> Verdict {
    let request = a.request;
    match prepare(a) {
        Ok(change) => {
            let mut object = request.object.clone();
            match change.write(&mut object) {
                Ok(()) => change.verdict(object),
                Err(e) => crate::policy::unreadable(request, e),
            }
        }
        Err(verdict) => verdict,
    }
}

/// What routing writes into the object it changes, decided from the request but holding
/// none of it, so that the object can then be moved into the verdict.
pub struct Change {
    workload: Workload,
    /// Its changes ([`Plan::changes`]), by index in `workload.templates`.
    plan: Plan,
    /// The team label of each template that gets one.
    teams: Vec<(usize, team::Judged)>,
    warnings: Vec<String>,
    lent_audit: Option<String>,
}

impl Change {
    /// Writes the change into `object`, through the pointers its templates were read from;
    /// `Err`: the part of `object` that cannot take it.
    fn write(&self, object: &mut Value) -> Result<(), String> {
        for (i, routing) in self.plan.changes() {
            if let Some(template) = self.workload.templates.get(i) {
                change::apply(object, template, routing)?;
            }
        }
        for (i, judged) in &self.teams {
            let (Some(template), Some(value)) =
                (self.workload.templates.get(*i), judged.label.write())
            else {
                continue;
            };
            change::write_label(object, template, team::TEAM_POD_LABEL_KEY, value)?;
        }
        Ok(())
    }

    /// The verdict: `object` (the request's, written) with the warnings and audit.
    fn verdict(self, object: Value) -> Verdict {
        with_lent(
            with_warnings(Verdict::mutate(object), self.warnings),
            self.lent_audit,
        )
    }

    /// The verdict on `request`, its object changed in place and moved into the verdict
    /// (the request's object is then null). An object that cannot take the change is put
    /// back, partly written, and the verdict is [`crate::policy::unreadable`]'s.
    pub fn apply(self, request: &mut AdmissionRequest) -> Verdict {
        let mut object = std::mem::take(&mut request.object);
        match self.write(&mut object) {
            Ok(()) => self.verdict(object),
            Err(e) => {
                request.object = object;
                crate::policy::unreadable(request, e)
            }
        }
    }
}

/// [`decide`] up to the change: `Ok` when the verdict is the request's object changed,
/// `Err` with the verdict otherwise.
pub fn prepare(a: crate::policy::Admission<'_, Checked>) -> Result<Change, Verdict> {
    let (request, settings, cluster, clock) = (a.request, a.settings, a.cluster, a.clock);
    let namespace = namespace_of(request);
    let object = &request.object;
    // An object on its way out: never block the finalizer removals that delete it.
    if request.is_update()
        && object
            .at("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null())
    {
        return Err(Verdict::accept());
    }
    let workload = match Workload::from_object(object, &settings.custom_kinds) {
        Ok(w) => w,
        Err(e) => return Err(crate::policy::unreadable(request, e)),
    };
    let names = settings.gpu_resources();
    let claims = dra::resolve(&workload, &namespace, &settings.dra, cluster);
    let when = When {
        now: if settings.pools.iter().any(|p| !p.lend_to.is_empty()) {
            clock.now()
        } else {
            0
        },
        stay: lending::update::stay(request, settings),
    };
    let plan = plan(settings, &workload, &names, &claims, &namespace, when);
    let lent: Vec<&str> = plan
        .templates
        .iter()
        .filter_map(|t| t.lent.as_deref())
        .collect();
    let lent_audit = (!lent.is_empty()).then(|| lent.join("; "));
    let kind = format!("{}/{}", workload.kind, workload.meta.name);

    if request.is_update()
        && template_is_immutable(&workload)
        && !plan.is_settled()
        && routing_views(object, settings, &names, &claims, &namespace)
            == routing_views(&request.old_object, settings, &names, &claims, &namespace)
    {
        // The update does not touch what routing reads, and the template cannot change
        // any more: let metadata updates (finalizers, annotations) through.
        return Err(Verdict::accept().with_warning(format!(
            "{kind} is not routed as its pool requires ({}); it was admitted before, and its pod template cannot change after creation, so this update is let through unchanged",
            summary(&plan)
        )));
    }

    let denials = plan.denials();
    if !denials.is_empty() {
        return Err(rejection(denials));
    }

    let teams = match namespace_team(request, settings, &workload, &plan, &namespace, cluster) {
        Ok(Some(team)) => team_labels(request, settings, &workload, &plan, &team),
        Ok(None) => Vec::new(),
        Err(message) => return Err(Verdict::reject(message)),
    };
    let forged: Vec<String> = teams
        .iter()
        .filter(|(_, j)| matches!(j.label, team::TeamLabel::Forged(_)))
        .map(|(_, j)| j.to_string())
        .collect();
    if !forged.is_empty() {
        return Err(rejection(forged));
    }

    let mut warnings = Vec::new();
    warnings.extend(
        teams
            .iter()
            .filter(|(_, j)| matches!(j.label, team::TeamLabel::Restamp { .. }))
            .map(|(_, j)| j.to_string()),
    );
    for t in &plan.templates {
        if let Outcome::Route {
            routing,
            by_default: true,
        } = &t.outcome
        {
            warnings.push(format!(
                "{}: the pod template's labels match no pool, so it runs in the default pool {}",
                t.location, routing.pool
            ));
        }
    }
    // Only at CREATE: later metadata updates of the Pod need not hear it again.
    if workload.is_pod() && request.is_create() {
        for (t, tp) in workload.templates.iter().zip(&plan.templates) {
            if let Outcome::Route { routing, .. } = &tp.outcome
                && t.spec
                    .priority_class_name
                    .as_deref()
                    .unwrap_or("")
                    .is_empty()
            {
                // A lent Pod runs with the guest class, not the lending pool's own.
                let lender = settings.pool(&routing.pool);
                let own = choose_pool(settings, &t.meta.labels, &namespace).map(|(p, _)| p);
                let (class, whose) = match (lender, own) {
                    (Some(l), Some(o)) if tp.lent.is_some() => (
                        lending::as_guest_pool(l, o).priority_class_name,
                        format!("guests from pool {}", o.name),
                    ),
                    _ => (
                        lender.and_then(|p| p.priority_class_name.clone()),
                        "its workloads".to_string(),
                    ),
                };
                if let Some(pc) = class {
                    warnings.push(format!(
                        "spec.priorityClassName: pool {} runs {whose} with priority class {pc}, but a Pod's priority is resolved before this policy runs, so it is not set on a bare Pod; set spec.priorityClassName: {pc} (Pods of routed Deployments, Jobs and other controllers already carry it)",
                        routing.pool
                    ));
                }
            }
        }
    }

    let changes = plan.changes().count();
    if changes == 0 && teams.is_empty() {
        return Err(with_lent(
            with_warnings(Verdict::accept(), warnings),
            lent_audit,
        ));
    }
    if request.is_update()
        && workload.is_pod()
        && let Some((routing, field)) = plan
            .changes()
            .find_map(|(_, r)| r.changes_spec().map(|f| (r, f)))
    {
        return Err(Verdict::reject(format!(
            "spec.{field}: this running Pod would have to join pool {} ({}), but a Pod's scheduling fields cannot change after creation; delete the Pod and create it again",
            routing.pool,
            summary(&plan)
        )));
    }
    if !workload.is_pod()
        && let Some(owner) = controller_of(object)
    {
        // Another controller manages this object and compares it with what it wants: the
        // Deployment controller finds its ReplicaSet by pod template, so a changed template
        // makes it create ReplicaSets in a loop; others re-apply their version. Leave it;
        // its Pods are routed when they are created.
        warnings.push(format!(
            "{kind} is controlled by {owner}, whose pod template is not routed ({}); the policy does not change objects another controller manages, and routes their Pods when they are created. Route {owner} itself: update it (e.g. kubectl rollout restart), or list its kind in customKinds",
            summary(&plan)
        ));
        return Err(with_warnings(Verdict::accept(), warnings));
    }

    Ok(Change {
        workload,
        plan,
        teams,
        warnings,
        lent_audit,
    })
}

/// The team of the workload's namespace, read when the policy stamps team labels and the
/// workload has a GPU template it routes; `None` (no host call) without `teamLabelKey`,
/// without such a template, for an object another controller manages (the policy does not
/// change it; its Pods are stamped), and for an UPDATE of a Job (its template cannot
/// change). `Err`: the denial, the namespace cannot be read.
fn namespace_team(
    request: &AdmissionRequest,
    settings: &Settings,
    workload: &Workload,
    plan: &Plan,
    namespace: &str,
    cluster: &dyn Cluster,
) -> Result<Option<team::NamespaceTeam>, String> {
    let Some(key) = &settings.team_label_key else {
        return Ok(None);
    };
    let routes = plan
        .templates
        .iter()
        .any(|t| matches!(t.outcome, Outcome::Route { .. }));
    let managed = !workload.is_pod() && controller_of(&request.object).is_some();
    let frozen = request.is_update() && !workload.is_pod() && template_is_immutable(workload);
    if !routes || managed || frozen {
        return Ok(None);
    }
    team::read(cluster, namespace, key).map(Some)
}

/// The team label of every routed template that is not right as it is, with its index.
fn team_labels(
    request: &AdmissionRequest,
    settings: &Settings,
    workload: &Workload,
    plan: &Plan,
    team: &team::NamespaceTeam,
) -> Vec<(usize, team::Judged)> {
    let key = team::TEAM_POD_LABEL_KEY;
    // On UPDATE: the label each template had before, by where the template's metadata is.
    let before: BTreeMap<String, Option<String>> = if request.is_update() {
        Workload::from_object(&request.old_object, &settings.custom_kinds)
            .map(|old| {
                old.templates
                    .into_iter()
                    .map(|t| (t.metadata_pointer, t.meta.labels.get(key).cloned()))
                    .collect()
            })
            .unwrap_or_default()
    } else {
        BTreeMap::new()
    };
    // A Pod a controller created carries the label of the controller's template.
    let from_controller = !request.is_update() && controller_of(&request.object).is_some();
    let mut out = Vec::new();
    for (i, (t, tp)) in workload.templates.iter().zip(&plan.templates).enumerate() {
        if !matches!(tp.outcome, Outcome::Route { .. }) {
            continue;
        }
        let have = t.meta.labels.get(key);
        let carried_over = from_controller
            || before
                .get(&t.metadata_pointer)
                .is_some_and(|old| old.as_ref() == have);
        let label = team::judge(have.map(String::as_str), team, carried_over);
        if label != team::TeamLabel::Right {
            out.push((
                i,
                team::Judged {
                    field: format!("{}.labels.{key}", pointer_to_location(&t.metadata_pointer)),
                    team: team.clone(),
                    label,
                },
            ));
        }
    }
    out
}

fn with_warnings(mut verdict: Verdict, warnings: Vec<String>) -> Verdict {
    verdict.warnings.extend(warnings);
    verdict
}

fn with_lent(verdict: Verdict, lent: Option<String>) -> Verdict {
    match lent {
        Some(text) => verdict.with_audit(AUDIT_LENT, text),
        None => verdict,
    }
}

/// One line per template that is not settled, for warnings.
fn summary(plan: &Plan) -> String {
    let mut parts: Vec<String> = plan
        .changes()
        .filter_map(|(i, r)| {
            plan.templates
                .get(i)
                .map(|t| format!("{}: {r}", t.location))
        })
        .collect();
    parts.extend(plan.denials());
    parts.join("; ")
}

#[cfg(test)]
mod tests;
