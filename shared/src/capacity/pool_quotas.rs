//! A pool's GPUs in use from its ResourceQuotas (`usage: quotas`): reading the quotas
//! (GPU entries only), and their sum, refused with the fix when it would miss pods.

use super::queries::{QUOTA_LIMITS_PREFIX, QUOTA_REQUESTS_PREFIX};
use crate::gpu::{GpuCounts, GpuResources, add_into};
use crate::lists::{ListError, for_each_item};
use crate::pools::Pool;
use std::collections::{BTreeSet, HashMap};

/// One ResourceQuota of a pool, as far as the gate reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Quota {
    pub namespace: String,
    pub name: String,
    /// GPU resources it counts: its `spec.hard` entries `requests.<gpu>`, prefix removed.
    pub counts: BTreeSet<String>,
    /// Those entries' limits.
    pub hard: GpuCounts,
    /// `spec.hard` keys naming a GPU resource in a form Kubernetes accepts but never
    /// counts for an extended resource (`limits.<gpu>`, bare `<gpu>`), with the resource.
    pub unenforced: Vec<(String, String)>,
    /// `status.used` of those, prefix removed.
    pub used: GpuCounts,
    /// `spec.scopes`.
    pub scopes: Vec<String>,
    /// `spec.scopeSelector.matchExpressions`; `None` without a `scopeSelector`.
    pub scope_selector: Option<Vec<ScopeRequirement>>,
}

/// One entry of a quota's `scopeSelector.matchExpressions` (fields that are not strings
/// read as empty, which no scope check accepts).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScopeRequirement {
    pub scope_name: String,
    pub operator: String,
    pub values: Vec<String>,
}

/// The pool's quotas in a `ResourceQuotaList`, GPU entries only, in list order. Quotas are
/// few (one per namespace) and small, so each item's `metadata`, `spec` and `status` are
/// read as JSON values. A used or hard GPU amount that is not a whole number makes the
/// list unreadable (Kubernetes keeps extended resources in quotas whole).
pub fn parse_quotas(bytes: &[u8], names: &GpuResources) -> Result<Vec<Quota>, ListError> {
    use serde_json::Value;
    let gpu = |key: &str| {
        key.strip_prefix(QUOTA_REQUESTS_PREFIX)
            .filter(|r| names.is_gpu(r))
            .map(str::to_string)
    };
    let text = |v: &Value, key: &str| {
        v.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let texts = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|s| s.as_str().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let count = |namespace: &str, name: &str, field: &str, key: &str, quantity: &Value| {
        let text = match quantity {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        crate::quantity::Quantity::parse_count(&text).map_err(|e| {
            ListError::Invalid(format!(
                "ResourceQuota {namespace}/{name}: {field}.{key}: {e}"
            ))
        })
    };
    let mut quotas = Vec::new();
    for_each_item(
        bytes,
        [&["metadata"], &["spec"], &["status"]],
        |[metadata, spec, status]| {
            let [metadata, spec, status] = [metadata, spec, status]
                .map(|b| b.map_or(Ok(Value::Null), |b| serde_json::from_str::<Value>(b.get())));
            let (metadata, spec, status) = (metadata?, spec?, status?);
            let (namespace, name) = (text(&metadata, "namespace"), text(&metadata, "name"));
            let mut used = GpuCounts::new();
            let entries = status.get("used").and_then(Value::as_object);
            for (key, quantity) in entries.into_iter().flatten() {
                let Some(resource) = gpu(key) else {
                    continue;
                };
                used.insert(
                    resource,
                    count(&namespace, &name, "status.used", key, quantity)?,
                );
            }
            let mut hard = GpuCounts::new();
            let mut unenforced = Vec::new();
            let entries = spec.get("hard").and_then(Value::as_object);
            for (key, quantity) in entries.into_iter().flatten() {
                let Some(resource) = gpu(key) else {
                    let bare = key.strip_prefix(QUOTA_LIMITS_PREFIX).unwrap_or(key);
                    if names.is_gpu(bare) {
                        unenforced.push((key.clone(), bare.to_string()));
                    }
                    continue;
                };
                hard.insert(
                    resource,
                    count(&namespace, &name, "spec.hard", key, quantity)?,
                );
            }
            let selector = spec.get("scopeSelector").filter(|s| !s.is_null());
            quotas.push(Quota {
                counts: hard.keys().cloned().collect(),
                hard,
                unenforced,
                used,
                scopes: texts(spec.get("scopes")),
                scope_selector: selector.map(|s| {
                    s.get("matchExpressions")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .map(|e| ScopeRequirement {
                            scope_name: text(e, "scopeName"),
                            operator: text(e, "operator"),
                            values: texts(e.get("values")),
                        })
                        .collect()
                }),
                namespace,
                name,
            });
            Ok::<(), ListError>(())
        },
    )?;
    Ok(quotas)
}

/// What the pool's quotas are checked against.
pub struct QuotaTarget<'a> {
    pub pool_label_key: &'a str,
    pub pool: &'a Pool,
    /// The request's namespace: it must have the pool's quota.
    pub namespace: &'a str,
    /// The resources asked for: every quota must count them.
    pub demand: &'a GpuCounts,
    /// The pool's allocatable GPUs, suggested as the `hard` of a quota to create.
    pub allocatable: &'a GpuCounts,
}

impl QuotaTarget<'_> {
    /// The pool's PriorityClasses, sorted: what its quotas' scope must name.
    fn sorted_classes(&self) -> Vec<&str> {
        let mut classes: Vec<&str> = self
            .pool
            .priority_classes
            .iter()
            .map(String::as_str)
            .collect();
        classes.sort_unstable();
        classes
    }
}

/// The pool's GPUs in use: the sum of its quotas' `status.used`. Refused, with what is
/// wrong and the fix, when that sum would miss pods: the request's namespace has no quota
/// for the pool (its pods would not be counted), a quota is not scoped to exactly the
/// pool's PriorityClasses, does not count a resource asked for, has not been counted yet
/// by the quota controller, or two quotas of one namespace would count its pods twice.
pub fn quota_usage(quotas: &[Quota], target: &QuotaTarget) -> Result<GpuCounts, String> {
    if !quotas.iter().any(|q| q.namespace == target.namespace) {
        return Err(missing_quota(target));
    }
    let mut by_namespace: HashMap<&str, Vec<&str>> = HashMap::new();
    for q in quotas {
        by_namespace.entry(&q.namespace).or_default().push(&q.name);
    }
    let classes = target.sorted_classes();
    let label = format!("{}={}", target.pool_label_key, target.pool.name);
    let mut used = GpuCounts::new();
    for q in quotas {
        let names = &by_namespace[q.namespace.as_str()];
        if names.len() > 1 {
            return Err(format!(
                "namespace {} has {} ResourceQuotas labelled {label} ({}), which count the same pods twice: keep one",
                q.namespace,
                names.len(),
                names.join(", ")
            ));
        }
        if let Err(scope) = scoped_to(q, &classes) {
            let remove = if q.scopes.is_empty() {
                ""
            } else {
                " and remove its spec.scopes"
            };
            return Err(format!(
                "ResourceQuota {}/{} is not scoped to the pool's priority classes ({scope}): set its spec.scopeSelector to {}{remove}",
                q.namespace,
                q.name,
                scope_selector_text(&classes)
            ));
        }
        for resource in target.demand.keys() {
            if !q.counts.contains(resource) {
                return Err(format!(
                    "ResourceQuota {}/{} does not count {QUOTA_REQUESTS_PREFIX}{resource} (it is not in its spec.hard), so the pool's {resource} pods in {} would not be counted: add {QUOTA_REQUESTS_PREFIX}{resource} to its spec.hard",
                    q.namespace, q.name, q.namespace
                ));
            }
            if !q.used.contains_key(resource) {
                return Err(not_counted_yet(&q.namespace, &q.name, resource));
            }
        }
        add_into(&mut used, &q.used);
    }
    Ok(used)
}

/// A quota whose `status.used` lacks `resource`: the quota controller has not counted it
/// yet (Kubernetes refuses the pods it would count until it has).
pub fn not_counted_yet(namespace: &str, name: &str, resource: &str) -> String {
    format!(
        "ResourceQuota {namespace}/{name} has no status.used for {QUOTA_REQUESTS_PREFIX}{resource} yet (the quota controller has not counted it): retry in a few seconds"
    )
}

/// `Ok` when the quota counts exactly the pods of `classes` (sorted): no `scopes` and one
/// `PriorityClass In` expression naming those classes. Otherwise what its scope is.
fn scoped_to(q: &Quota, classes: &[&str]) -> Result<(), String> {
    let expressions = q.scope_selector.as_deref().unwrap_or_default();
    if let ([only], true) = (expressions, q.scopes.is_empty()) {
        let mut values: Vec<&str> = only.values.iter().map(String::as_str).collect();
        values.sort_unstable();
        values.dedup();
        if only.scope_name == "PriorityClass" && only.operator == "In" && values == classes {
            return Ok(());
        }
    }
    if expressions.is_empty() && q.scopes.is_empty() {
        return Err(format!(
            "it has no scope, so it counts the pods of every pool in {}",
            q.namespace
        ));
    }
    let mut parts = Vec::new();
    if !q.scopes.is_empty() {
        parts.push(format!("scopes [{}]", q.scopes.join(", ")));
    }
    for e in expressions {
        parts.push(if e.values.is_empty() {
            format!("{} {}", e.scope_name, e.operator)
        } else {
            format!("{} {} [{}]", e.scope_name, e.operator, e.values.join(", "))
        });
    }
    Err(format!("its scope is {}", parts.join(" and ")))
}

fn scope_selector_text(classes: &[&str]) -> String {
    format!(
        "{{matchExpressions: [{{scopeName: PriorityClass, operator: In, values: [{}]}}]}}",
        classes.join(", ")
    )
}

/// The request's namespace has no quota for the pool: the quota to create.
fn missing_quota(target: &QuotaTarget) -> String {
    let classes = target.sorted_classes();
    let hard: Vec<String> = target
        .demand
        .keys()
        .map(|resource| match target.allocatable.get(resource) {
            Some(all) if *all > 0 => format!("{QUOTA_REQUESTS_PREFIX}{resource}: \"{all}\""),
            // A quota of 0 would refuse every such pod of the namespace: no number to offer.
            _ => format!("{QUOTA_REQUESTS_PREFIX}{resource}: <the GPUs the namespace may hold>"),
        })
        .collect();
    format!(
        "namespace {ns} has no ResourceQuota labelled {key}={pool}, so the pool's pods there would not be counted. Create it: {{apiVersion: v1, kind: ResourceQuota, metadata: {{name: gpu-{pool}, namespace: {ns}, labels: {{{key}: \"{pool}\"}}}}, spec: {{hard: {{{hard}}}, scopeSelector: {selector}}}}} (spec.hard at the pool's size caps nothing; lower it to cap the namespace)",
        ns = target.namespace,
        key = target.pool_label_key,
        pool = target.pool.name,
        hard = hard.join(", "),
        selector = scope_selector_text(&classes),
    )
}

#[cfg(test)]
mod tests;
