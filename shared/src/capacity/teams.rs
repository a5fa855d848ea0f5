//! Team budgets: GPUs a team may hold across its namespaces, per GPU resource and per
//! pool ("team ml-a: 16 nvidia.com/gpu, 8 of them in pool a100"), which ResourceQuota
//! (one namespace at a time) cannot express.
//!
//! A budget comes from the settings (`teamBudgets`) or from a ConfigMap read with
//! `get_resource` (`teamBudgetsConfigMap`; its entries replace the settings' of the same
//! team). A namespace belongs to the team whose budget lists it in `namespaces`, else to
//! the team its Namespace label `teamLabelKey` names (users cannot set a Namespace label;
//! they can set a pod label). What the team holds is the effective GPU requests of its
//! Pods that have not finished:
//! - a team found by its Namespace label: one `list_resources_all` of the Pods that carry
//!   the team label gpu-pool-routing-policy stamps from that Namespace label
//!   ([`crate::settings::TEAM_POD_LABEL_KEY`]), one watched list per team however many
//!   namespaces it has;
//! - a team given by its namespaces: one `list_resources_by_namespace` of Pods per
//!   namespace (no label needed; one watched list per namespace).
//!
//! Per-pool use is read from the pool label of those pods. The check is `used + incoming
//! <= limit`, incoming being what the request adds ([`Incoming::gpus`]), for every limited
//! resource the request adds to; a pool limit for what it adds to that pool.

use super::demand::Incoming;
use super::pods::{LabelledUse, parse_pods_by_label};
use super::queries::{namespace_pod_query, team_pod_query};
use super::quotas::room_sentence;
use super::settings::{ConfigMapRef, Settings};
use super::tally::Tally;
use crate::cluster::{Cluster, ClusterRequest, HostError, HostFailure, call, namespace_labels};
use crate::gpu::{GpuCounts, GpuResources};
use crate::pools::DeclaredGpus;
use crate::pools::set::check_gpu_map;
use crate::settings::{FieldError, check_pool_ref, is_dns_label, validate_config_map_ref};

use serde_json::Value;
use std::collections::BTreeMap;

/// The ConfigMap key read when `teamBudgetsConfigMap.key` is not set. Its text is JSON
/// (which YAML manifests hold as a block scalar): a YAML parser would grow the module by
/// about 480 KB.
pub const DEFAULT_BUDGET_KEY: &str = "budgets.json";

/// One team's budget: limits per GPU resource (`nvidia.com/gpu: 16`) and per pool, and
/// optionally the namespaces that make the team. Settings keep budgets as JSON values and
/// [`parse_budgets`] reads them, for the settings and the ConfigMap alike: one reader, and
/// no serde code per budget type in the module.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TeamBudget {
    /// The team's namespaces; empty: the namespaces whose `teamLabelKey` label names it.
    pub namespaces: Vec<String>,
    /// Limits in pools: (pool name, a count for each GPU resource or counts per resource).
    pub pools: Vec<(String, PoolLimit)>,
    /// Limits per GPU resource across every pool (and outside pools): every other key.
    pub gpus: BTreeMap<String, DeclaredGpus>,
}

/// A team's limit in one pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolLimit {
    /// The same limit for each GPU resource (a pool's nodes usually have one).
    Each(DeclaredGpus),
    PerResource(BTreeMap<String, DeclaredGpus>),
}

/// A count as written (`16` or `"16"`), checked later by [`validate_budgets`].
fn declared(field: &str, v: &Value) -> Result<DeclaredGpus, FieldError> {
    match v {
        Value::String(s) => Ok(DeclaredGpus(s.clone())),
        Value::Number(n) => Ok(DeclaredGpus(n.to_string())),
        other => Err(FieldError::new(
            field,
            format!("must be a whole number of GPUs (got {other})"),
        )),
    }
}

/// Reads budgets from JSON (`teamBudgets` of the settings, or the ConfigMap's text parsed),
/// naming the field of a value of the wrong kind; [`validate_budgets`] checks them.
pub fn parse_budgets(
    field: &str,
    budgets: &serde_json::Map<String, Value>,
) -> Result<Vec<(String, TeamBudget)>, FieldError> {
    let mut out = Vec::new();
    for (team, v) in budgets {
        let at = format!("{field}.{team}");
        let Some(entries) = v.as_object() else {
            return Err(FieldError::new(
                at,
                "must be a budget, e.g. {nvidia.com/gpu: 16, pools: {a100: 8}}",
            ));
        };
        let mut budget = TeamBudget::default();
        for (key, v) in entries {
            match key.as_str() {
                "namespaces" => {
                    let list = v.as_array().ok_or_else(|| {
                        FieldError::new(
                            format!("{at}.namespaces"),
                            "must be a list of namespace names",
                        )
                    })?;
                    for (i, ns) in list.iter().enumerate() {
                        let ns = ns.as_str().ok_or_else(|| {
                            FieldError::new(
                                format!("{at}.namespaces[{i}]"),
                                "must be a namespace name",
                            )
                        })?;
                        budget.namespaces.push(ns.to_string());
                    }
                }
                "pools" => {
                    let pools = v.as_object().ok_or_else(|| {
                        FieldError::new(
                            format!("{at}.pools"),
                            "must map pool names to GPUs, e.g. {a100: 8}",
                        )
                    })?;
                    for (pool, limit) in pools {
                        let f = format!("{at}.pools.{pool}");
                        let limit = match limit.as_object() {
                            Some(per) => {
                                let mut m = BTreeMap::new();
                                for (r, n) in per {
                                    m.insert(r.clone(), declared(&format!("{f}.{r}"), n)?);
                                }
                                PoolLimit::PerResource(m)
                            }
                            None => PoolLimit::Each(declared(&f, limit)?),
                        };
                        budget.pools.push((pool.clone(), limit));
                    }
                }
                resource => {
                    let n = declared(&format!("{at}.{resource}"), v)?;
                    budget.gpus.insert(resource.to_string(), n);
                }
            }
        }
        out.push((team.clone(), budget));
    }
    Ok(out)
}

impl TeamBudget {
    /// The team's limit of `resource` in pool `pool`, if any.
    fn pool_limit(&self, pool: &str, resource: &str) -> Option<u64> {
        self.pools
            .iter()
            .find(|(p, _)| p == pool)
            .and_then(|(_, l)| l.of(resource))
    }
}

impl PoolLimit {
    /// The limit for `resource`, if any (settings are valid: counts are whole).
    fn of(&self, resource: &str) -> Option<u64> {
        match self {
            PoolLimit::Each(n) => n.count().ok(),
            PoolLimit::PerResource(m) => m.get(resource).and_then(|n| n.count().ok()),
        }
    }
}

/// The team of `namespace`: its Namespace's label `teamLabelKey` (team budgets found by
/// label, and the team burst brake).
pub fn team_of(
    cluster: &dyn Cluster,
    settings: &Settings,
    namespace: &str,
) -> Result<Option<String>, HostFailure> {
    Ok(namespace_labels(cluster, namespace)?.remove(&settings.team_label_key))
}

/// The budgets ConfigMap, unless unset or left empty (no name and no namespace, as forms
/// send).
pub fn config_map(settings: &Settings) -> Option<&ConfigMapRef> {
    settings
        .team_budgets_config_map
        .as_ref()
        .filter(|r| !(r.name.is_empty() && r.namespace.is_empty()))
}

/// True when some budget is configured (in the settings or a ConfigMap).
pub fn configured(settings: &Settings) -> bool {
    !settings.team_budgets.is_empty() || config_map(settings).is_some()
}

/// Validates the team settings: `teamLabelKey`, every budget of `teamBudgets`, and
/// `teamBudgetsConfigMap`.
pub fn validate_settings(settings: &Settings) -> Result<(), FieldError> {
    if !settings.team_label_key.is_empty() {
        crate::settings::validate_label_key("teamLabelKey", &settings.team_label_key)?;
    }
    validate_budgets(
        "teamBudgets",
        &parse_budgets("teamBudgets", &settings.team_budgets)?,
        settings,
    )?;
    if let Some(r) = config_map(settings) {
        validate_config_map_ref(
            "teamBudgetsConfigMap",
            &r.namespace,
            &r.name,
            r.key.as_deref(),
        )?;
    }
    Ok(())
}

/// Validates budgets (from settings, or a ConfigMap's entries under `field`).
pub fn validate_budgets(
    field: &str,
    budgets: &[(String, TeamBudget)],
    settings: &Settings,
) -> Result<(), FieldError> {
    let mut owner: Vec<(&str, &str)> = Vec::new();
    for (team, budget) in budgets {
        let field = format!("{field}.{team}");
        if team.is_empty() || crate::settings::validate_label_value(&field, team).is_err() {
            return Err(FieldError::new(
                field,
                format!(
                    "'{team}' is not a team name (a label value: at most 63 letters, digits, '-', '_', '.')"
                ),
            ));
        }
        if budget.gpus.is_empty() && budget.pools.is_empty() {
            return Err(FieldError::new(
                field,
                "give limits per GPU resource (nvidia.com/gpu: 16) or per pool (pools: {a100: 8})",
            ));
        }
        if !budget.gpus.is_empty() {
            check_gpu_map(&settings.gpu_resources(), &field, &budget.gpus, "")?;
        }
        for (pool, limit) in &budget.pools {
            let at = format!("{field}.pools.{pool}");
            let names: Vec<&str> = settings.pools.iter().map(|p| p.name.as_str()).collect();
            check_pool_ref(&at, pool, &names)?;
            match limit {
                PoolLimit::Each(n) => {
                    n.count().map_err(|e| {
                        FieldError::new(at, format!("must be a whole number of GPUs ({e})"))
                    })?;
                }
                PoolLimit::PerResource(m) => check_gpu_map(
                    &settings.gpu_resources(),
                    &at,
                    m,
                    "give the team's GPUs in the pool, e.g. 8 or {nvidia.com/gpu: 8}",
                )?,
            }
        }
        if budget.namespaces.is_empty() && settings.team_label_key.is_empty() {
            return Err(FieldError::new(
                &field,
                format!(
                    "list the team's namespaces in {field}.namespaces, or set teamLabelKey to find them by their Namespace label"
                ),
            ));
        }
        for (i, ns) in budget.namespaces.iter().enumerate() {
            if !is_dns_label(ns) {
                return Err(FieldError::new(
                    format!("{field}.namespaces[{i}]"),
                    format!("'{ns}' is not a namespace name"),
                ));
            }
            if let Some((_, other)) = owner.iter().find(|(n, _)| n == ns) {
                return Err(FieldError::new(
                    format!("{field}.namespaces[{i}]"),
                    format!(
                        "namespace {ns} is also in the budget of team {other}; a namespace belongs to one team"
                    ),
                ));
            }
            owner.push((ns, team));
        }
    }
    Ok(())
}

/// Why the team budgets could not be judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TeamError {
    /// A host call failed or its answer could not be read (`unreadableCluster` applies).
    Host(HostFailure),
    /// The budgets ConfigMap is malformed: denied, whatever `unreadableCluster` says.
    Invalid(String),
}

impl From<HostFailure> for TeamError {
    fn from(f: HostFailure) -> Self {
        TeamError::Host(f)
    }
}

/// A budget and where it was found.
struct Found {
    team: String,
    budget: TeamBudget,
    /// `settings` or `ConfigMap ns/name`.
    source: String,
    /// How the namespace was found to be the team's.
    by: Membership,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Membership {
    Listed,
    Label(String),
}

/// One team limit checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamCheck {
    pub resource: String,
    /// `None`: the team's limit across pools.
    pub pool: Option<String>,
    /// What the team holds (in the pool), what the request adds, the budget's limit.
    pub tally: Tally,
    pub shape: Option<GpuCounts>,
    pub all_incoming: GpuCounts,
    pub room: GpuCounts,
}

impl TeamCheck {
    fn scope(&self) -> String {
        match &self.pool {
            Some(p) => format!(" in pool {p}"),
            None => String::new(),
        }
    }
}

/// The team of the request's namespace and its limits, judged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub team: String,
    /// How the team was found and where its budget is (for the audit annotation).
    pub how: String,
    pub pods: u64,
    pub checks: Vec<TeamCheck>,
}

impl Outcome {
    pub fn denials(&self) -> Vec<String> {
        self.checks
            .iter()
            .filter(|c| !c.tally.fits())
            .map(|c| {
                format!(
                    "team {} would hold {} of its {} {}{} ({} used + {} incoming): {}. Lower replicas, free the team's GPUs, or ask for a larger budget.",
                    self.team,
                    c.tally.after(),
                    c.tally.limit,
                    c.resource,
                    c.scope(),
                    c.tally.used,
                    c.tally.incoming,
                    room_sentence(&c.all_incoming, &c.room, c.shape.as_ref(), &c.resource)
                )
            })
            .collect()
    }

    pub fn audit(&self) -> String {
        let checks: Vec<String> = self
            .checks
            .iter()
            .map(|c| {
                format!(
                    "{}{} used {}, {}",
                    c.resource,
                    c.scope(),
                    c.tally,
                    c.tally.verdict()
                )
            })
            .collect();
        format!(
            "team {} ({}; {} pods): {}",
            self.team,
            self.how,
            self.pods,
            checks.join("; ")
        )
    }
}

/// What the team step found: nothing to check (with why, for the audit), or the checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judged {
    NoBudget(String),
    Checked(Outcome),
}

/// Finds the team of `namespace`, reads what it holds and checks its limits against what
/// `incoming` adds. `budgets` are the settings' `teamBudgets`, read when the settings were
/// checked ([`super::check::Checked`]). Makes no host call when no budget is configured.
pub fn check(
    cluster: &dyn Cluster,
    settings: &Settings,
    budgets: &[(String, TeamBudget)],
    names: &GpuResources,
    namespace: &str,
    incoming: &Incoming,
) -> Result<Judged, TeamError> {
    let Some(found) = find_team(cluster, settings, budgets, namespace)? else {
        return Ok(Judged::NoBudget(format!(
            "namespace {namespace} belongs to no team with a budget"
        )));
    };
    let total = incoming.gpus(&|_| true);
    // (pool name, pool index, what the request adds to the pool)
    let pools: Vec<(String, usize, GpuCounts)> = found
        .budget
        .pools
        .iter()
        .filter_map(|(name, _)| settings.pool_named(name).map(|(i, _)| (name.clone(), i)))
        .map(|(name, i)| {
            let added = incoming.gpus(&|t| t.pools.contains(&i));
            (name, i, added)
        })
        .filter(|(_, _, added)| !added.is_empty())
        .collect();
    let limited = total.keys().any(|r| found.budget.gpus.contains_key(r))
        || pools.iter().any(|(name, _, added)| {
            added
                .keys()
                .any(|r| found.budget.pool_limit(name, r).is_some())
        });
    let how = match &found.by {
        Membership::Listed => format!("namespaces listed in its budget in {}", found.source),
        Membership::Label(key) => format!("Namespace label {key}; budget in {}", found.source),
    };
    if !limited {
        return Ok(Judged::NoBudget(format!(
            "team {}: its budget ({how}) limits none of the GPUs this workload adds",
            found.team
        )));
    }
    let used = read_use(cluster, settings, names, &found)?;
    let mut checks = Vec::new();
    let room = |limits: &dyn Fn(&str) -> Option<u64>, used: &GpuCounts, added: &GpuCounts| {
        let mut room = GpuCounts::new();
        for r in added.keys() {
            if let Some(l) = limits(r) {
                room.insert(
                    r.clone(),
                    l.saturating_sub(used.get(r).copied().unwrap_or(0)),
                );
            }
        }
        room
    };
    let across = |r: &str| found.budget.gpus.get(r).and_then(|n| n.count().ok());
    let across_room = room(&across, &used.used, &total);
    for (resource, n) in &total {
        let Some(limit) = across(resource) else {
            continue;
        };
        checks.push(TeamCheck {
            resource: resource.clone(),
            pool: None,
            tally: Tally {
                used: used.used.get(resource).copied().unwrap_or(0),
                incoming: *n,
                limit,
            },
            shape: incoming.pod_shape(&|_| true),
            all_incoming: total.clone(),
            room: across_room.clone(),
        });
    }
    let nothing = GpuCounts::new();
    for (name, i, added) in &pools {
        let limit_of = |r: &str| found.budget.pool_limit(name, r);
        let in_pool = used.of_value(name).unwrap_or(&nothing);
        let pool_room = room(&limit_of, in_pool, added);
        for (resource, n) in added {
            let Some(limit) = limit_of(resource) else {
                continue;
            };
            checks.push(TeamCheck {
                resource: resource.clone(),
                pool: Some(name.clone()),
                tally: Tally {
                    used: in_pool.get(resource).copied().unwrap_or(0),
                    incoming: *n,
                    limit,
                },
                shape: incoming.pod_shape(&|t| t.pools.contains(i)),
                all_incoming: added.clone(),
                room: pool_room.clone(),
            });
        }
    }
    Ok(Judged::Checked(Outcome {
        team: found.team,
        how,
        pods: used.pods,
        checks,
    }))
}

/// One budget in force: (team, budget, `settings` or `ConfigMap ns/name`).
type Entry = (String, TeamBudget, String);

/// The budgets in force: the settings' (`read`, from the checked settings), replaced team by
/// team by the ConfigMap's. (Vecs, not maps: teams are few, and each map type is more code
/// in the module.)
fn budgets(
    cluster: &dyn Cluster,
    settings: &Settings,
    read: &[(String, TeamBudget)],
) -> Result<Vec<Entry>, TeamError> {
    let mut all: Vec<Entry> = read
        .iter()
        .map(|(t, b)| (t.clone(), b.clone(), "settings".to_string()))
        .collect();
    if let Some(r) = config_map(settings) {
        for (team, budget) in read_config_map(cluster, settings, r)? {
            all.retain(|(t, _, _)| *t != team);
            all.push((team, budget, r.what()));
        }
        // A namespace listed by a ConfigMap team and by another team of the settings.
        for (i, (team, budget, _)) in all.iter().enumerate() {
            for ns in &budget.namespaces {
                if let Some((other, _, _)) =
                    all[..i].iter().find(|(_, b, _)| b.namespaces.contains(ns))
                {
                    return Err(TeamError::Invalid(format!(
                        "the team budgets {} are malformed: namespace {ns} is in the budgets of teams {other} and {team} (settings teamBudgets and the ConfigMap together); fix the ConfigMap",
                        r.what()
                    )));
                }
            }
        }
    }
    Ok(all)
}

/// Reads and checks the budgets ConfigMap.
fn read_config_map(
    cluster: &dyn Cluster,
    settings: &Settings,
    r: &ConfigMapRef,
) -> Result<Vec<(String, TeamBudget)>, TeamError> {
    let request = r.request();
    let bytes = call(cluster, &request)?;
    let malformed = |reason: String| {
        TeamError::Invalid(format!(
            "the team budgets {} is malformed: {reason}; fix the ConfigMap (settings.teamBudgetsConfigMap)",
            r.what()
        ))
    };
    let object: Value = serde_json::from_slice(&bytes).map_err(|e| {
        TeamError::Host(HostFailure {
            request: Box::new(request.clone()),
            error: HostError::Unreadable(e.to_string()),
        })
    })?;
    let data = object.get("data").and_then(Value::as_object);
    let key = r
        .key
        .as_deref()
        .filter(|k| !k.is_empty())
        .unwrap_or(DEFAULT_BUDGET_KEY);
    let Some(text) = data.and_then(|d| d.get(key)).and_then(Value::as_str) else {
        let present: Vec<&str> = data
            .map(|d| d.keys().map(String::as_str).collect())
            .unwrap_or_default();
        return Err(malformed(format!(
            "it has no data key {key} (keys present: {})",
            if present.is_empty() {
                "none".to_string()
            } else {
                present.join(", ")
            }
        )));
    };
    let example = r#"e.g. {"ml-a": {"nvidia.com/gpu": 16, "pools": {"a100": 8}}}"#;
    let budgets = match serde_json::from_slice::<Value>(text.as_bytes()) {
        Ok(Value::Object(map)) => parse_budgets(key, &map).map_err(|e| malformed(e.to_string()))?,
        Ok(_) => {
            return Err(malformed(format!(
                "{key}: must map team names to budgets, {example}"
            )));
        }
        Err(e) => return Err(malformed(format!("{key}: not JSON ({e}), {example}"))),
    };
    validate_budgets(key, &budgets, settings).map_err(|e| malformed(e.to_string()))?;
    Ok(budgets)
}

/// The team of `namespace`: the budget listing it, else the one its Namespace label names.
fn find_team(
    cluster: &dyn Cluster,
    settings: &Settings,
    read: &[(String, TeamBudget)],
    namespace: &str,
) -> Result<Option<Found>, TeamError> {
    if !configured(settings) {
        return Ok(None);
    }
    let mut all = budgets(cluster, settings, read)?;
    let found = |all: &mut Vec<Entry>, i: usize, by: Membership| {
        let (team, budget, source) = all.swap_remove(i);
        Some(Found {
            team,
            budget,
            source,
            by,
        })
    };
    if let Some(i) = all
        .iter()
        .position(|(_, b, _)| b.namespaces.iter().any(|n| n == namespace))
    {
        return Ok(found(&mut all, i, Membership::Listed));
    }
    // Only budgets without namespaces are found by the label.
    let by_label = all.iter().any(|(_, b, _)| b.namespaces.is_empty());
    if !by_label || settings.team_label_key.is_empty() {
        return Ok(None);
    }
    let key = &settings.team_label_key;
    let Some(team) = team_of(cluster, settings, namespace)? else {
        return Ok(None);
    };
    Ok(all
        .iter()
        .position(|(t, b, _)| *t == team && b.namespaces.is_empty())
        .and_then(|i| found(&mut all, i, Membership::Label(key.clone()))))
}

/// What the team's pods hold, in total and per pool; with `countDraClaims`, with the
/// devices of the allocated claims they reference ([`super::claims::read_by_label`]).
fn read_use(
    cluster: &dyn Cluster,
    settings: &Settings,
    names: &GpuResources,
    found: &Found,
) -> Result<LabelledUse, HostFailure> {
    let requests: Vec<ClusterRequest> = match found.by {
        Membership::Label(_) => vec![team_pod_query(&found.team)],
        Membership::Listed => found
            .budget
            .namespaces
            .iter()
            .map(|ns| namespace_pod_query(ns))
            .collect(),
    };
    let mut total = LabelledUse::default();
    let mut lists = Vec::new();
    for mut request in requests {
        if settings.count_dra_claims {
            request = super::claims::with_claim_masks(request);
        }
        let bytes = call(cluster, &request)?;
        let used = parse_pods_by_label(&bytes, names, &settings.pool_label_key).map_err(|e| {
            HostFailure {
                request: Box::new(request.clone()),
                error: HostError::Unreadable(e.to_string()),
            }
        })?;
        total.add(&used);
        if settings.count_dra_claims {
            lists.push(bytes);
        }
    }
    if settings.count_dra_claims {
        let pools: Vec<&str> = found.budget.pools.iter().map(|(p, _)| p.as_str()).collect();
        let lists: Vec<&[u8]> = lists.iter().map(Vec::as_slice).collect();
        let (held, per_pool) = super::claims::read_by_label(
            cluster,
            &lists,
            &settings.dra,
            &settings.pool_label_key,
            &pools,
        )?;
        crate::gpu::add_into(&mut total.used, &held.gpus);
        for (pool, held) in per_pool {
            match total.per_value.iter_mut().find(|(v, _)| *v == pool) {
                Some((_, used)) => crate::gpu::add_into(used, &held.gpus),
                None => total.per_value.push((pool, held.gpus)),
            }
        }
    }
    Ok(total)
}
