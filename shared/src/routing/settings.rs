//! The routing policy's settings: pools, the pool label, the default pool, and their
//! validation. Every error starts with the field it found wrong.

use super::constraint::KeyConstraint;
use super::overlap::{self, Members};
use crate::podspec::Toleration;
use crate::selector::LabelSelector;
use crate::settings::{
    CheckedForm, FieldError, NamespaceList, ValidateSettings, check_labels_only, check_pool_ref,
    check_unique_pool_name, check_window_ref, policy_settings, read_node_selector,
    validate_label_key, validate_label_value, validate_object_name,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;

pub use crate::settings::DEFAULT_POOL_LABEL_KEY;

policy_settings! {
    /// Settings of gpu-pool-routing-policy.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Settings {
        @pools(Pool);
        /// Where a GPU workload that matches no pool goes; unset (or empty): it is denied.
        #[serde(deserialize_with = "empty_as_none")]
        pub default_pool: Option<String> = None,
        @shared + exceptions;
        /// Named time windows that pools' `lendTo` refer to.
        #[serde(skip_serializing_if = "BTreeMap::is_empty")]
        pub schedules: crate::schedule::Schedules = Default::default(),
        /// The Namespace label whose value names the workload's team, stamped on its GPU pod
        /// templates as `gpu-admission/team` ([`super::team`]); unset (or empty): no team label
        /// is stamped or checked, and no Namespace is read.
        #[serde(
            deserialize_with = "empty_as_none",
            skip_serializing_if = "Option::is_none"
        )]
        pub team_label_key: Option<String> = None,
    }
}

/// One pool: which GPU workloads belong to it and what joining it means.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Pool {
    /// The pool's name, written as the value of the pool label.
    pub name: String,
    /// Matched against the pod template's labels; empty matches every workload.
    pub selector: LabelSelector,
    /// When set (and not empty), only workloads in these namespaces belong to the pool.
    #[serde(deserialize_with = "empty_as_none")]
    pub namespaces: Option<NamespaceList>,
    /// Node labels of the pool's nodes (`matchLabels`; a map of labels reads the same),
    /// merged into the pod's `nodeSelector`.
    #[serde(deserialize_with = "read_node_selector")]
    pub node_selector: LabelSelector,
    /// Tolerations for the taints of the pool's nodes.
    pub tolerations: Vec<PoolToleration>,
    /// Set on pod templates that have no priority class.
    #[serde(deserialize_with = "empty_as_none")]
    pub priority_class_name: Option<String>,
    /// Priority classes a workload may set itself; unset: only `priorityClassName`.
    pub allowed_priority_classes: Option<Vec<String>>,
    /// Node selector requirements merged into every required node affinity term.
    pub required_node_affinity: Vec<NodeRequirement>,
    /// Other pools whose workloads this pool takes inside a time window.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lend_to: Vec<Lend>,
    /// The priority class guests from other pools run with here (so this pool's own
    /// workloads preempt them when the window closes); unset: the guest's own pool's.
    #[serde(
        deserialize_with = "empty_as_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub guest_priority_class_name: Option<String>,
}

/// `lendTo` entry: the workloads of `pool` created while `window` is open are routed
/// to the lending pool's nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Lend {
    pub pool: String,
    /// A name in `schedules`.
    pub window: String,
}

/// Values that have an empty form (`""`, `[]`) read as unset: forms such as Rancher's
/// send empty values for fields left blank.
trait Empty {
    fn is_empty_value(&self) -> bool;
}

impl Empty for String {
    fn is_empty_value(&self) -> bool {
        self.is_empty()
    }
}

impl Empty for NamespaceList {
    fn is_empty_value(&self) -> bool {
        self.0.is_empty()
    }
}

fn empty_as_none<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Empty,
{
    Ok(Option::<T>::deserialize(deserializer)?.filter(|v| !v.is_empty_value()))
}

/// A toleration in settings (strict: unknown fields are errors, so a typo cannot widen it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct PoolToleration {
    pub key: String,
    /// `Equal` (also when empty) or `Exists`.
    pub operator: String,
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule`, `NoExecute`, or empty for all effects.
    pub effect: String,
    pub toleration_seconds: Option<i64>,
}

impl PoolToleration {
    /// The toleration as written into a pod spec (empty fields omitted).
    pub fn to_toleration(&self) -> Toleration {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
        Toleration {
            key: some(&self.key),
            operator: some(&self.operator),
            value: some(&self.value),
            effect: some(&self.effect),
            toleration_seconds: self.toleration_seconds,
        }
    }
}

/// A node selector requirement in settings: `key`, `operator` (`In`, `NotIn`, `Exists`,
/// `DoesNotExist`, `Gt`, `Lt`) and `values`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct NodeRequirement {
    pub key: String,
    pub operator: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

impl NodeRequirement {
    /// The requirement as written into a node selector term.
    pub fn to_json(&self) -> Value {
        if self.values.is_empty() {
            json!({"key": self.key, "operator": self.operator})
        } else {
            json!({"key": self.key, "operator": self.operator, "values": self.values})
        }
    }

    /// `key In (a, b)`, for messages.
    pub fn describe(&self) -> String {
        describe_requirement(&self.key, &self.operator, &self.values)
    }
}

/// `key In (a, b)` / `key Exists`.
pub fn describe_requirement(key: &str, operator: &str, values: &[String]) -> String {
    if values.is_empty() {
        format!("{key} {operator}")
    } else {
        format!("{key} {operator} ({})", values.join(", "))
    }
}

impl Pool {
    /// True when a workload in `namespace` may belong to this pool.
    pub fn admits_namespace(&self, namespace: &str) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|list| list.contains(namespace))
    }

    /// The workloads the pool takes, as [`overlap`] compares them.
    pub fn members(&self) -> Members<'_> {
        Members {
            selector: &self.selector,
            namespaces: self.namespaces.as_ref(),
        }
    }

    /// True when a pod template with `labels` in `namespace` belongs to this pool.
    pub fn matches(&self, labels: &BTreeMap<String, String>, namespace: &str) -> bool {
        self.admits_namespace(namespace) && self.selector.matches(labels)
    }

    /// What the pool requires of its nodes' labels, per key: the nodeSelector entries and
    /// the requiredNodeAffinity requirements, intersected.
    pub fn node_constraints(&self) -> BTreeMap<String, KeyConstraint> {
        let mut out: BTreeMap<String, KeyConstraint> = BTreeMap::new();
        for (k, v) in &self.node_selector.match_labels {
            out.insert(k.clone(), KeyConstraint::equal(v));
        }
        for r in &self.required_node_affinity {
            let c = KeyConstraint::from_operator(&r.operator, &r.values);
            let merged = match out.get(&r.key) {
                Some(prev) => prev.intersect(&c),
                None => c,
            };
            out.insert(r.key.clone(), merged);
        }
        out
    }

    /// The priority classes a workload of this pool may carry.
    pub fn allowed_priority_classes(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self
            .allowed_priority_classes
            .iter()
            .flatten()
            .map(String::as_str)
            .collect();
        if let Some(pc) = self.priority_class_name.as_deref()
            && !out.contains(&pc)
        {
            out.insert(0, pc);
        }
        out
    }

    /// `workload-type=batch in namespaces ml-*`, for messages.
    pub fn describe_membership(&self) -> String {
        let labels = if self.selector.is_empty() {
            "any labels".to_string()
        } else {
            self.selector.to_query()
        };
        match &self.namespaces {
            Some(list) => format!("{labels} in namespaces {}", list.0.join(", ")),
            None => labels,
        }
    }
}

impl Settings {
    /// The pool named `name`.
    pub fn pool(&self, name: &str) -> Option<&Pool> {
        self.pools.iter().find(|p| p.name == name)
    }
}

const TOLERATION_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];
const NODE_OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];

impl ValidateSettings for Settings {
    fn validate(&self) -> Result<(), FieldError> {
        self.checked_windows().map(drop)
    }
}

/// The settings checked, in the form the rules take: the settings, with the schedules that
/// pools' `lendTo` windows name read into [`crate::schedule::Checked`] values (each request
/// asks them whether they are open, without reading them again).
#[derive(Debug, Clone)]
pub struct Checked {
    settings: Box<Settings>,
    /// `schedules`, checked, by name.
    pub windows: BTreeMap<String, crate::schedule::Checked>,
}

impl CheckedForm<Settings> for Checked {
    fn check(settings: Box<Settings>) -> Result<Box<Checked>, FieldError> {
        let windows = settings.checked_windows()?;
        Ok(Box::new(Checked { settings, windows }))
    }

    /// The schedules read, without the checks no request depends on (pools that overlap,
    /// label keys).
    fn prepare(settings: Box<Settings>) -> Result<Box<Checked>, FieldError> {
        let windows = crate::schedule::check_all(&settings.schedules, "schedules")?;
        Ok(Box::new(Checked { settings, windows }))
    }
}

crate::settings::holds_settings!(Checked => Settings);

impl Settings {
    /// Every check of the settings; the schedules, checked, by name.
    fn checked_windows(&self) -> Result<BTreeMap<String, crate::schedule::Checked>, FieldError> {
        validate_label_key("poolLabelKey", &self.pool_label_key)?;
        self.validate_team()?;
        if self.pools.is_empty() {
            return Err(FieldError::new(
                "pools",
                "configure at least one pool (a name, a selector on pod template labels, and a nodeSelector or requiredNodeAffinity); without pools every GPU workload would be denied",
            ));
        }
        for (i, pool) in self.pools.iter().enumerate() {
            validate_pool(&format!("pools[{i}]"), pool, &self.pool_label_key)?;
            check_unique_pool_name(
                &format!("pools[{i}]"),
                &pool.name,
                self.pools[..i].iter().map(|p| p.name.as_str()),
            )?;
        }
        for (i, pool) in self.pools.iter().enumerate() {
            for (j, other) in self.pools[..i].iter().enumerate() {
                if let Some(example) = overlap::overlap(other.members(), pool.members()) {
                    return Err(FieldError::new(
                        format!("pools[{i}].selector"),
                        format!(
                            "pool {} overlaps pool {} (pools[{j}]): {example} matches both, so its pool would be ambiguous. Make them disjoint: give both selectors the same label key with different values (e.g. matchLabels workload-type: batch vs workload-type: interactive), add a NotIn or DoesNotExist on a key the other pool requires, or restrict them to namespaces that do not overlap",
                            pool.name, other.name
                        ),
                    ));
                }
            }
        }
        let names: Vec<&str> = self.pools.iter().map(|p| p.name.as_str()).collect();
        if let Some(default) = &self.default_pool {
            check_pool_ref("defaultPool", default, &names).map_err(|mut e| {
                e.reason +=
                    " or remove defaultPool (GPU workloads that match no pool are then denied)";
                e
            })?;
        }
        let schedules = crate::schedule::check_all(&self.schedules, "schedules")?;
        let defined: Vec<&str> = self.schedules.keys().map(String::as_str).collect();
        for (i, pool) in self.pools.iter().enumerate() {
            for (j, lend) in pool.lend_to.iter().enumerate() {
                let field = format!("pools[{i}].lendTo[{j}]");
                if lend.pool == pool.name {
                    return Err(FieldError::new(
                        format!("{field}.pool"),
                        "a pool cannot lend to itself",
                    ));
                }
                let others: Vec<&str> = names.iter().copied().filter(|n| *n != pool.name).collect();
                check_pool_ref(&format!("{field}.pool"), &lend.pool, &others)?;
                let valid = schedules.contains_key(&lend.window);
                check_window_ref(&format!("{field}.window"), &lend.window, valid, &defined)?;
                if pool.lend_to[..j].iter().any(|l| l.pool == lend.pool) {
                    return Err(FieldError::new(
                        format!("{field}.pool"),
                        format!(
                            "pool {} already lends to {}; give one window per borrowing pool (a schedule may have several windows)",
                            pool.name, lend.pool
                        ),
                    ));
                }
            }
            if let Some(pc) = &pool.guest_priority_class_name {
                let field = format!("pools[{i}].guestPriorityClassName");
                validate_object_name(&field, pc, "PriorityClass")?;
            }
        }
        self.validate_shared()?;
        crate::exceptions::HasExceptions::validate_exceptions(self, &RULE_NAMES)?;
        Ok(schedules)
    }

    /// `teamLabelKey`: a label key; the team label it stamps is neither the pool label nor
    /// a key pools select on (the pool is chosen before the label is stamped, so a selector
    /// on it would move a workload to another pool once stamped).
    fn validate_team(&self) -> Result<(), FieldError> {
        let Some(key) = &self.team_label_key else {
            return Ok(());
        };
        validate_label_key("teamLabelKey", key)?;
        let team = crate::settings::TEAM_POD_LABEL_KEY;
        if self.pool_label_key == team {
            return Err(FieldError::new(
                "poolLabelKey",
                format!(
                    "{team} is the team label the policy stamps from the namespace label teamLabelKey; give the pool label another key"
                ),
            ));
        }
        for (i, pool) in self.pools.iter().enumerate() {
            if pool.selector.match_labels.contains_key(team)
                || pool
                    .selector
                    .match_expressions
                    .iter()
                    .any(|r| r.key == team)
            {
                return Err(FieldError::new(
                    format!("pools[{i}].selector"),
                    format!(
                        "must not select on the team label {team}: the policy stamps it from the namespace after choosing the pool; restrict the pool to the team's namespaces (pools[{i}].namespaces) instead"
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn validate_pool(field: &str, pool: &Pool, pool_label_key: &str) -> Result<(), FieldError> {
    if pool.name.is_empty() {
        return Err(FieldError::new(
            format!("{field}.name"),
            "must not be empty (it becomes the value of the pool label)",
        ));
    }
    validate_label_value(&format!("{field}.name"), &pool.name)?;

    let selector_field = format!("{field}.selector");
    pool.selector.validate(&selector_field)?;
    let uses_pool_label = pool.selector.match_labels.contains_key(pool_label_key)
        || pool
            .selector
            .match_expressions
            .iter()
            .any(|r| r.key == pool_label_key);
    if uses_pool_label {
        return Err(FieldError::new(
            selector_field,
            format!(
                "must not select on the pool label {pool_label_key}: the policy sets it, and users could pick their pool by setting it themselves; select on what the workload is (e.g. workload-type: batch)"
            ),
        ));
    }
    if let Some(key) = overlap::unsatisfiable_key(&pool.selector) {
        return Err(FieldError::new(
            selector_field,
            format!(
                "the requirements on label {key} contradict each other, so the pool can never match; remove one of them"
            ),
        ));
    }
    if let Some(list) = &pool.namespaces {
        list.validate(&format!("{field}.namespaces"))?;
    }

    let node_field = format!("{field}.nodeSelector");
    check_labels_only(
        &node_field,
        &pool.node_selector,
        "give them in requiredNodeAffinity",
    )?;
    for (k, v) in &pool.node_selector.match_labels {
        validate_label_key(&node_field, k)?;
        validate_label_value(&format!("{node_field}.{k}"), v)?;
    }
    for (j, r) in pool.required_node_affinity.iter().enumerate() {
        validate_node_requirement(&format!("{field}.requiredNodeAffinity[{j}]"), r)?;
    }
    if pool.node_selector.is_empty() && pool.required_node_affinity.is_empty() {
        return Err(FieldError::new(
            field,
            "give a nodeSelector or requiredNodeAffinity: without either the pool cannot steer workloads to its nodes (tolerations only allow, they do not attract)",
        ));
    }
    for (key, constraint) in pool.node_constraints() {
        if constraint.is_empty() {
            return Err(FieldError::new(
                format!("{field}.requiredNodeAffinity"),
                format!(
                    "the requirements on node label {key} contradict the pool's nodeSelector or each other, so no node can match; make them agree"
                ),
            ));
        }
    }

    for (j, t) in pool.tolerations.iter().enumerate() {
        validate_toleration(&format!("{field}.tolerations[{j}]"), t)?;
    }

    if let Some(pc) = &pool.priority_class_name {
        validate_object_name(&format!("{field}.priorityClassName"), pc, "PriorityClass")?;
    }
    for (j, pc) in pool.allowed_priority_classes.iter().flatten().enumerate() {
        let field = format!("{field}.allowedPriorityClasses[{j}]");
        validate_object_name(&field, pc, "PriorityClass")?;
    }
    Ok(())
}

fn validate_node_requirement(field: &str, r: &NodeRequirement) -> Result<(), FieldError> {
    validate_label_key(&format!("{field}.key"), &r.key)?;
    match r.operator.as_str() {
        "In" | "NotIn" if r.values.is_empty() => Err(FieldError::new(
            format!("{field}.values"),
            format!("{} needs at least one value", r.operator),
        )),
        "Exists" | "DoesNotExist" if !r.values.is_empty() => Err(FieldError::new(
            format!("{field}.values"),
            format!("{} takes no values; remove them", r.operator),
        )),
        "Gt" | "Lt"
            if r.values.len() != 1
                || r.values
                    .first()
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_none() =>
        {
            Err(FieldError::new(
                format!("{field}.values"),
                format!(
                    "{} takes exactly one integer value (got {:?})",
                    r.operator, r.values
                ),
            ))
        }
        op if !NODE_OPERATORS.contains(&op) => Err(FieldError::new(
            format!("{field}.operator"),
            format!("'{op}' is not one of {}", NODE_OPERATORS.join(", ")),
        )),
        _ => {
            for (k, v) in r.values.iter().enumerate() {
                validate_label_value(&format!("{field}.values[{k}]"), v)?;
            }
            Ok(())
        }
    }
}

fn validate_toleration(field: &str, t: &PoolToleration) -> Result<(), FieldError> {
    match t.operator.as_str() {
        "Exists" => {
            if !t.value.is_empty() {
                return Err(FieldError::new(
                    format!("{field}.value"),
                    format!(
                        "operator Exists takes no value (got '{}'); remove the value, or use operator Equal",
                        t.value
                    ),
                ));
            }
        }
        "" | "Equal" => {}
        other => {
            return Err(FieldError::new(
                format!("{field}.operator"),
                format!("'{other}' is not Equal or Exists"),
            ));
        }
    }
    if t.key.is_empty() {
        return Err(FieldError::new(
            format!("{field}.key"),
            "name the taint key of the pool's nodes; a toleration without a key tolerates every taint",
        ));
    }
    validate_label_key(&format!("{field}.key"), &t.key)?;
    validate_label_value(&format!("{field}.value"), &t.value)?;
    if !t.effect.is_empty() && !TOLERATION_EFFECTS.contains(&t.effect.as_str()) {
        return Err(FieldError::new(
            format!("{field}.effect"),
            format!(
                "'{}' is not one of {} (or empty for all effects)",
                t.effect,
                TOLERATION_EFFECTS.join(", ")
            ),
        ));
    }
    if let Some(seconds) = t.toleration_seconds
        && t.effect != "NoExecute"
    {
        return Err(FieldError::new(
            format!("{field}.tolerationSeconds"),
            format!(
                "only applies to effect NoExecute (got {seconds} with effect '{}'); remove it or set effect: NoExecute",
                t.effect
            ),
        ));
    }
    Ok(())
}

/// The rule names `exceptions[].rules` may give.
pub const RULE_NAMES: [&str; 1] = ["routing"];

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    /// Two disjoint pools that validate.
    pub(crate) fn base() -> Value {
        json!({
            "pools": [
                {"name": "batch", "selector": {"matchLabels": {"workload-type": "batch"}},
                 "nodeSelector": {"gpu-admission/node-pool": "batch"},
                 "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}],
                 "priorityClassName": "batch-low"},
                {"name": "interactive", "selector": {"matchLabels": {"workload-type": "interactive"}},
                 "nodeSelector": {"gpu-admission/node-pool": "interactive"}}
            ]
        })
    }

    fn settings(v: Value) -> Settings {
        serde_json::from_value(v).unwrap()
    }

    /// `v` with `value` at `pointer` (the last member is created when missing).
    fn with(mut v: Value, pointer: &str, value: Value) -> Value {
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        match v.pointer_mut(parent).unwrap() {
            Value::Array(items) => items[key.parse::<usize>().unwrap()] = value,
            other => {
                other
                    .as_object_mut()
                    .unwrap()
                    .insert(key.to_string(), value);
            }
        }
        v
    }

    #[test]
    fn defaults_and_base_settings() {
        let d = Settings::default();
        assert_eq!(d.pool_label_key, "gpu-admission/pool");
        assert_eq!(settings(json!({})), d);
        let err = d.validate().unwrap_err().to_string();
        assert!(
            err.starts_with("pools: configure at least one pool"),
            "{err}"
        );
        settings(base()).validate().unwrap();
    }

    #[rstest]
    #[case::top_level("", "pool")]
    #[case::pool("/pools/0", "nodeselector")]
    #[case::toleration("/pools/0/tolerations/0", "efect")]
    #[case::selector("/pools/0/selector", "matchLabel")]
    fn unknown_fields_are_rejected_at_every_level(#[case] at: &str, #[case] field: &str) {
        let mut v = base();
        v.pointer_mut(at)
            .and_then(Value::as_object_mut)
            .unwrap()
            .insert(field.into(), json!({}));
        let err = serde_json::from_value::<Settings>(v).unwrap_err();
        assert!(err.to_string().contains(field), "{err}");
    }

    #[rstest]
    #[case::bad_label_key(json!({"poolLabelKey": "bad key"}), "poolLabelKey:")]
    #[case::empty_name(with(base(), "/pools/1/name", json!("")), "pools[1].name: must not be empty")]
    #[case::name_not_a_label_value(with(base(), "/pools/1/name", json!("Inter active")), "pools[1].name:")]
    #[case::duplicate_name(with(base(), "/pools/1/name", json!("batch")), "pools[1].name: 'batch' is already the name of pools[0]")]
    #[case::selector_invalid(with(base(), "/pools/0/selector", json!({"matchLabels": {"bad key": "x"}})), "pools[0].selector.matchLabels:")]
    #[case::selector_on_pool_label(with(base(), "/pools/0/selector", json!({"matchLabels": {"gpu-admission/pool": "batch"}})), "pools[0].selector: must not select on the pool label gpu-admission/pool")]
    #[case::selector_contradicts_itself(with(base(), "/pools/0/selector", json!({"matchLabels": {"workload-type": "batch"}, "matchExpressions": [{"key": "workload-type", "operator": "NotIn", "values": ["batch"]}]})), "pools[0].selector: the requirements on label workload-type contradict")]
    #[case::bad_namespace(with(base(), "/pools/0/namespaces", json!(["Team"])), "pools[0].namespaces[0]:")]
    #[case::node_selector_key(with(base(), "/pools/0/nodeSelector", json!({"bad key": "x"})), "pools[0].nodeSelector:")]
    #[case::node_selector_value(with(base(), "/pools/0/nodeSelector", json!({"pool": "a b"})), "pools[0].nodeSelector.pool:")]
    #[case::cannot_steer(with(base(), "/pools/1/nodeSelector", json!({})), "pools[1]: give a nodeSelector or requiredNodeAffinity")]
    #[case::affinity_operator(with(base(), "/pools/1/requiredNodeAffinity", json!([{"key": "k", "operator": "Maybe"}])), "pools[1].requiredNodeAffinity[0].operator: 'Maybe'")]
    #[case::affinity_in_without_values(with(base(), "/pools/1/requiredNodeAffinity", json!([{"key": "k", "operator": "In"}])), "pools[1].requiredNodeAffinity[0].values: In needs")]
    #[case::affinity_exists_with_values(with(base(), "/pools/1/requiredNodeAffinity", json!([{"key": "k", "operator": "Exists", "values": ["x"]}])), "pools[1].requiredNodeAffinity[0].values: Exists takes no values")]
    #[case::affinity_gt_not_integer(with(base(), "/pools/1/requiredNodeAffinity", json!([{"key": "k", "operator": "Gt", "values": ["x"]}])), "pools[1].requiredNodeAffinity[0].values: Gt takes exactly one integer")]
    #[case::affinity_contradicts_node_selector(with(base(), "/pools/1/requiredNodeAffinity", json!([{"key": "gpu-admission/node-pool", "operator": "NotIn", "values": ["interactive"]}])), "pools[1].requiredNodeAffinity: the requirements on node label gpu-admission/node-pool contradict")]
    #[case::toleration_exists_with_value(with(base(), "/pools/0/tolerations/0/operator", json!("Exists")), "pools[0].tolerations[0].value: operator Exists takes no value")]
    #[case::toleration_operator(with(base(), "/pools/0/tolerations/0/operator", json!("equals")), "pools[0].tolerations[0].operator: 'equals'")]
    #[case::toleration_effect(with(base(), "/pools/0/tolerations/0/effect", json!("NoScheduling")), "pools[0].tolerations[0].effect: 'NoScheduling'")]
    #[case::toleration_without_key(with(base(), "/pools/0/tolerations/0", json!({"operator": "Exists"})), "pools[0].tolerations[0].key: name the taint key")]
    #[case::toleration_seconds_without_no_execute(with(base(), "/pools/0/tolerations/0/tolerationSeconds", json!(30)), "pools[0].tolerations[0].tolerationSeconds: only applies to effect NoExecute")]
    #[case::priority_class_name(with(base(), "/pools/0/priorityClassName", json!("Batch_Low")), "pools[0].priorityClassName: 'Batch_Low'")]
    #[case::allowed_priority_classes(with(base(), "/pools/0/allowedPriorityClasses", json!(["ok", "NOT OK"])), "pools[0].allowedPriorityClasses[1]:")]
    #[case::default_pool_unknown(with(base(), "/defaultPool", json!("training")), "defaultPool: 'training' names no pool; use one of batch, interactive")]
    #[case::extra_gpu_resources(with(base(), "/extraGpuResources", json!(["tpu"])), "extraGpuResources[0]:")]
    #[case::exempt_namespaces(with(base(), "/exemptNamespaces", json!(["*"])), "exemptNamespaces[0]:")]
    #[case::overlapping_pools(with(base(), "/pools/1/selector", json!({})), "pools[1].selector: pool interactive overlaps pool batch (pools[0]): a pod template labelled workload-type=batch in any namespace matches both")]
    #[case::team_label_key(json!({"teamLabelKey": "bad key"}), "teamLabelKey:")]
    #[case::team_label_is_the_pool_label(json!({"teamLabelKey": "team", "poolLabelKey": "gpu-admission/team"}), "poolLabelKey: gpu-admission/team is the team label the policy stamps")]
    #[case::selector_on_the_team_label(with(with(base(), "/teamLabelKey", json!("team")), "/pools/0/selector", json!({"matchExpressions": [{"key": "gpu-admission/team", "operator": "In", "values": ["ml-a"]}]})), "pools[0].selector: must not select on the team label gpu-admission/team")]
    fn invalid_settings_name_the_field(#[case] v: Value, #[case] prefix: &str) {
        let v = if v.get("pools").is_none() {
            let mut b = base();
            for (k, x) in v.as_object().unwrap() {
                b[k] = x.clone();
            }
            b
        } else {
            v
        };
        let err = settings(v).validate().unwrap_err().to_string();
        assert!(
            err.starts_with(prefix),
            "{err}\n  expected prefix: {prefix}"
        );
    }

    #[rstest]
    #[case::default_pool(with(base(), "/defaultPool", json!("interactive")))]
    #[case::disjoint_by_namespace(with(with(with(base(), "/pools/1/selector", json!({})), "/pools/1/namespaces", json!(["serving-*"])), "/pools/0/namespaces", json!(["team-*", "ml"])))]
    #[case::affinity_only(with(with(base(), "/pools/1/nodeSelector", json!({})), "/pools/1/requiredNodeAffinity", json!([{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-L4"]}])))]
    #[case::toleration_no_execute_seconds(with(base(), "/pools/0/tolerations", json!([{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}])))]
    #[case::custom_kinds(with(base(), "/customKinds", serde_json::to_value(crate::workload::presets::all()).unwrap()))]
    #[case::team_label_key(with(base(), "/teamLabelKey", json!("team")))]
    #[case::team_label_key_as_pool_label_when_teams_are_off(with(base(), "/poolLabelKey", json!("gpu-admission/team")))]
    fn valid_settings(#[case] v: Value) {
        settings(v).validate().unwrap();
    }

    #[test]
    fn node_selector_as_a_label_selector_or_a_map_of_labels() {
        let selector = settings(with(
            base(),
            "/pools/1/nodeSelector",
            json!({"matchLabels": {"gpu-admission/node-pool": "interactive"}}),
        ));
        selector.validate().unwrap();
        assert_eq!(selector, settings(base()));
        assert_eq!(
            selector.pools[1].node_selector.match_labels["gpu-admission/node-pool"],
            "interactive"
        );
        let expressions = settings(with(
            base(),
            "/pools/1/nodeSelector",
            json!({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}),
        ));
        assert_eq!(
            expressions.validate().unwrap_err().to_string(),
            "pools[1].nodeSelector.matchExpressions: a Pod's nodeSelector takes labels only; give them in requiredNodeAffinity"
        );
    }

    #[test]
    fn empty_form_values_read_as_unset() {
        let s = settings(
            json!({"defaultPool": "", "pools": [{"name": "a", "namespaces": [],
            "priorityClassName": "", "nodeSelector": {"pool": "a"}}]}),
        );
        assert_eq!(s.default_pool, None);
        assert_eq!(s.pools[0].namespaces, None);
        assert_eq!(s.pools[0].priority_class_name, None);
        assert_eq!(
            settings(json!({"teamLabelKey": ""})).team_label_key,
            None,
            "an empty teamLabelKey is unset"
        );
        s.validate().unwrap();
        assert!(s.pools[0].admits_namespace("any"));
        let nulls = settings(
            json!({"defaultPool": null, "pools": [{"name": "a", "namespaces": null,
            "priorityClassName": null, "nodeSelector": {"pool": "a"}}]}),
        );
        assert_eq!(nulls, s);
    }

    #[test]
    fn pool_helpers() {
        let s = settings(with(
            base(),
            "/pools/0/allowedPriorityClasses",
            json!(["batch-high"]),
        ));
        let batch = s.pool("batch").unwrap();
        assert_eq!(
            batch.allowed_priority_classes(),
            vec!["batch-low", "batch-high"]
        );
        assert_eq!(
            s.pool("interactive").unwrap().allowed_priority_classes(),
            Vec::<&str>::new()
        );
        assert_eq!(batch.describe_membership(), "workload-type=batch");
        assert_eq!(
            batch.tolerations[0].to_toleration(),
            Toleration {
                key: Some("dedicated".into()),
                operator: Some("Equal".into()),
                value: Some("batch".into()),
                effect: Some("NoSchedule".into()),
                toleration_seconds: None
            }
        );
        assert!(batch.admits_namespace("anything"));
    }
}
