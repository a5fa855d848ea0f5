//! When a workload already says something that contradicts its pool, the policy denies
//! it rather than overwrite the user's intent: a node selection pointing at other nodes,
//! a hand-set pool label, a toleration for another pool's taint, a priority class the pool
//! does not allow. Each [`Conflict`] names the field, the pool, the value and the fix.

use super::constraint::KeyConstraint;
use super::settings::{Pool, PoolToleration, Settings, describe_requirement};
use crate::podspec::Toleration;
use crate::scheduling::{TaintPattern, tolerates};
use crate::workload::{PodTemplate, pointer_to_location};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// One contradiction between a pod template and its pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conflict {
    /// The pool label is set to something other than the pool the labels select.
    PoolLabel {
        field: String,
        value: String,
        pool: String,
        /// True when `value` is the name of another configured pool.
        names_a_pool: bool,
    },
    /// A nodeSelector entry on a key the pool constrains, with a value the pool excludes.
    NodeSelector {
        field: String,
        value: String,
        pool: String,
        /// What the pool requires of that node label (`batch`, `one of a, b`).
        pool_wants: String,
        /// Another pool whose nodes the value selects.
        points_at: Option<String>,
    },
    /// A required node affinity term whose requirements on a key the pool constrains
    /// exclude every node of the pool.
    Affinity {
        field: String,
        requirement: String,
        key: String,
        pool: String,
        pool_wants: String,
        points_at: Option<String>,
    },
    /// A toleration for the taint of another pool's nodes that the pool's own nodes do not have.
    Toleration {
        field: String,
        toleration: String,
        other_pool: String,
        taint: String,
        pool: String,
        /// The tolerations the pool gives its workloads, described.
        pool_tolerations: Vec<String>,
    },
    /// A priority class the pool does not allow.
    PriorityClass {
        field: String,
        value: String,
        pool: String,
        allowed: Vec<String>,
        /// What the policy sets when the field is removed.
        pool_default: Option<String>,
    },
    /// The pool label names a pool that lends to the template's pool, and lending does not
    /// apply ([`super::lending::update::refusal`]).
    Lending { field: String, reason: String },
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes_of = |p: &Option<String>| match p {
            Some(other) => format!("points at the nodes of pool {other}"),
            None => "points at nodes outside the pool".to_string(),
        };
        match self {
            Conflict::Lending { field, reason } => write!(f, "{field}: {reason}"),
            Conflict::PoolLabel {
                field,
                value,
                pool,
                names_a_pool,
            } => {
                let what = if *names_a_pool {
                    format!("names pool {value}")
                } else {
                    format!("'{value}' names no configured pool")
                };
                write!(
                    f,
                    "{field}: {what}, but the workload's labels place it in pool {pool}. The pool is chosen from the workload's labels, not set by hand: remove the label (the policy sets it to {pool})"
                )
            }
            Conflict::NodeSelector {
                field,
                value,
                pool,
                pool_wants,
                points_at,
            } => write!(
                f,
                "{field}: '{value}' {}, but the workload belongs to pool {pool}, whose nodes have {pool_wants}. Remove this nodeSelector entry (the policy sets the pool's own)",
                nodes_of(points_at)
            ),
            Conflict::Affinity {
                field,
                requirement,
                key,
                pool,
                pool_wants,
                points_at,
            } => write!(
                f,
                "{field}: {requirement} {}, but the workload belongs to pool {pool}, whose nodes have {key} {pool_wants}. Remove the requirement on {key} (the policy adds the pool's own)",
                nodes_of(points_at)
            ),
            Conflict::Toleration {
                field,
                toleration,
                other_pool,
                taint,
                pool,
                pool_tolerations,
            } => {
                let adds = if pool_tolerations.is_empty() {
                    format!("pool {pool} needs no toleration")
                } else {
                    format!(
                        "the policy adds what pool {pool} needs: {}",
                        pool_tolerations.join(", ")
                    )
                };
                write!(
                    f,
                    "{field}: {toleration} tolerates the taint of pool {other_pool} ({taint}), which the nodes of pool {pool} do not have. Remove it ({adds})"
                )
            }
            Conflict::PriorityClass {
                field,
                value,
                pool,
                allowed,
                pool_default,
            } => {
                write!(f, "{field}: '{value}' is not allowed: pool {pool} allows ")?;
                if allowed.is_empty() {
                    f.write_str("no priority class of the workload's own; ")?;
                } else {
                    write!(f, "{}; use one of them or ", allowed.join(", "))?;
                }
                match pool_default {
                    Some(pc) => write!(f, "remove it (the policy sets {pc})"),
                    None => f.write_str("remove it"),
                }
            }
        }
    }
}

/// The class of taints a pool toleration stands for: its key, its value (any for
/// `Exists`), its effect (any when empty).
pub fn taint_class(t: &PoolToleration) -> TaintPattern {
    TaintPattern {
        key: t.key.clone(),
        value: (t.operator != "Exists").then(|| t.value.clone()),
        effect: (!t.effect.is_empty()).then(|| t.effect.clone()),
    }
}

/// True when some taint belongs to both classes.
fn classes_overlap(a: &TaintPattern, b: &TaintPattern) -> bool {
    let compatible = |x: &Option<String>, y: &Option<String>| match (x, y) {
        (Some(x), Some(y)) => x == y,
        _ => true,
    };
    a.key == b.key && compatible(&a.value, &b.value) && compatible(&a.effect, &b.effect)
}

/// `dedicated=batch:NoSchedule`, `nvidia.com/gpu (any value):NoSchedule`.
pub fn describe_taint(t: &TaintPattern) -> String {
    let value = match &t.value {
        Some(v) => format!("={v}"),
        None => " (any value)".to_string(),
    };
    let effect = match &t.effect {
        Some(e) => format!(":{e}"),
        None => " (any effect)".to_string(),
    };
    format!("{}{value}{effect}", t.key)
}

/// `dedicated=batch:NoSchedule`, `dedicated Exists`, `operator Exists without a key`.
pub fn describe_toleration(t: &Toleration) -> String {
    let key = t.key.as_deref().unwrap_or("");
    let exists = t.operator.as_deref() == Some("Exists");
    let effect = t
        .effect
        .as_deref()
        .filter(|e| !e.is_empty())
        .map(|e| format!(":{e}"))
        .unwrap_or_default();
    match (key.is_empty(), exists) {
        (true, true) => "operator Exists without a key (tolerates every taint)".to_string(),
        (_, true) => format!("{key} Exists{effect}"),
        (_, false) => format!("{key}={}{effect}", t.value.as_deref().unwrap_or("")),
    }
}

/// The toleration the ExtendedResourceToleration admission plugin adds for each extended
/// resource a pod requests (`key: <resource>, operator: Exists, effect: NoSchedule`).
/// The API server adds it itself, so it never counts against the workload.
fn is_extended_resource_toleration(t: &Toleration, gpu_resources: &BTreeSet<String>) -> bool {
    t.operator.as_deref() == Some("Exists")
        && t.effect.as_deref() == Some("NoSchedule")
        && t.value.as_deref().unwrap_or("").is_empty()
        && t.toleration_seconds.is_none()
        && t.key.as_ref().is_some_and(|k| gpu_resources.contains(k))
}

/// Every contradiction between `template` and `pool`. `gpu_resources` are the GPU
/// resource names the template asks for.
/// `sets_priority` is false for bare Pods, whose priority class the policy does not set.
pub fn find(
    settings: &Settings,
    pool: &Pool,
    template: &PodTemplate,
    gpu_resources: &BTreeSet<String>,
    sets_priority: bool,
) -> Vec<Conflict> {
    let mut out = Vec::new();
    pool_label(settings, pool, template, &mut out);
    node_selection(settings, pool, template, &mut out);
    tolerations(settings, pool, template, gpu_resources, &mut out);
    priority_class(pool, template, sets_priority, &mut out);
    out
}

fn pool_label(settings: &Settings, pool: &Pool, template: &PodTemplate, out: &mut Vec<Conflict>) {
    let key = &settings.pool_label_key;
    if let Some(value) = template.meta.labels.get(key)
        && value != &pool.name
    {
        out.push(Conflict::PoolLabel {
            field: format!(
                "{}.labels.{key}",
                pointer_to_location(&template.metadata_pointer)
            ),
            value: value.clone(),
            pool: pool.name.clone(),
            names_a_pool: settings.pool(value).is_some(),
        });
    }
}

/// The first other pool whose nodes may satisfy `wanted` on `key`.
fn pool_pointed_at(
    settings: &Settings,
    pool: &Pool,
    key: &str,
    wanted: &KeyConstraint,
) -> Option<String> {
    settings
        .pools
        .iter()
        .filter(|q| q.name != pool.name)
        .find(|q| {
            q.node_constraints()
                .get(key)
                .is_some_and(|c| !c.intersect(wanted).is_empty())
        })
        .map(|q| q.name.clone())
}

fn node_selection(
    settings: &Settings,
    pool: &Pool,
    template: &PodTemplate,
    out: &mut Vec<Conflict>,
) {
    let constraints = pool.node_constraints();
    for (key, value) in &template.spec.node_selector {
        if let Some(c) = constraints.get(key)
            && !c.admits(Some(value))
        {
            out.push(Conflict::NodeSelector {
                field: format!("{}.nodeSelector.{key}", template.location),
                value: value.clone(),
                pool: pool.name.clone(),
                pool_wants: format!("{key}={c}"),
                points_at: pool_pointed_at(settings, pool, key, &KeyConstraint::equal(value)),
            });
        }
    }
    for (i, term) in template.spec.required_node_terms().iter().enumerate() {
        let mut per_key: BTreeMap<&str, (KeyConstraint, Vec<String>)> = BTreeMap::new();
        for e in term
            .match_expressions
            .iter()
            .filter(|e| constraints.contains_key(&e.key))
        {
            let c = KeyConstraint::from_operator(&e.operator, &e.values);
            let entry = per_key
                .entry(e.key.as_str())
                .or_insert_with(|| (KeyConstraint::any(), Vec::new()));
            entry.0 = entry.0.intersect(&c);
            entry
                .1
                .push(describe_requirement(&e.key, &e.operator, &e.values));
        }
        for (key, (wanted, described)) in per_key {
            let Some(c) = constraints.get(key) else {
                continue;
            };
            if c.intersect(&wanted).is_empty() {
                out.push(Conflict::Affinity {
                    field: format!(
                        "{}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]",
                        template.location
                    ),
                    requirement: described.join(" and "),
                    key: key.to_string(),
                    pool: pool.name.clone(),
                    pool_wants: c.to_string(),
                    points_at: pool_pointed_at(settings, pool, key, &wanted),
                });
            }
        }
    }
}

fn tolerations(
    settings: &Settings,
    pool: &Pool,
    template: &PodTemplate,
    gpu_resources: &BTreeSet<String>,
    out: &mut Vec<Conflict>,
) {
    let own: Vec<TaintPattern> = pool.tolerations.iter().map(taint_class).collect();
    for (j, t) in template.spec.tolerations.iter().enumerate() {
        if is_extended_resource_toleration(t, gpu_resources) {
            continue;
        }
        let foreign = settings
            .pools
            .iter()
            .filter(|q| q.name != pool.name)
            .flat_map(|q| q.tolerations.iter().map(move |qt| (q, taint_class(qt))))
            .find(|(_, taint)| {
                tolerates(t, taint) && !own.iter().any(|o| classes_overlap(o, taint))
            });
        if let Some((other, taint)) = foreign {
            out.push(Conflict::Toleration {
                field: format!("{}.tolerations[{j}]", template.location),
                toleration: describe_toleration(t),
                other_pool: other.name.clone(),
                taint: describe_taint(&taint),
                pool: pool.name.clone(),
                pool_tolerations: pool
                    .tolerations
                    .iter()
                    .map(|pt| describe_toleration(&pt.to_toleration()))
                    .collect(),
            });
        }
    }
}

fn priority_class(
    pool: &Pool,
    template: &PodTemplate,
    sets_priority: bool,
    out: &mut Vec<Conflict>,
) {
    let Some(value) = template
        .spec
        .priority_class_name
        .as_deref()
        .filter(|s| !s.is_empty())
    else {
        return;
    };
    let allowed = pool.allowed_priority_classes();
    if !allowed.contains(&value) {
        out.push(Conflict::PriorityClass {
            field: format!("{}.priorityClassName", template.location),
            value: value.to_string(),
            pool: pool.name.clone(),
            allowed: allowed.iter().map(|s| s.to_string()).collect(),
            pool_default: pool.priority_class_name.clone().filter(|_| sets_priority),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Workload;
    use rstest::rstest;
    use serde_json::{Value, json};

    fn tol(v: Value) -> Toleration {
        serde_json::from_value(v).unwrap()
    }

    fn pool_tol(v: Value) -> PoolToleration {
        serde_json::from_value(v).unwrap()
    }

    #[rstest]
    #[case::equal(json!({"key": "d", "operator": "Equal", "value": "b", "effect": "NoSchedule"}), "d=b:NoSchedule")]
    #[case::default_operator(json!({"key": "d", "value": "b"}), "d=b")]
    #[case::exists(json!({"key": "d", "operator": "Exists"}), "d Exists")]
    #[case::exists_effect(json!({"key": "d", "operator": "Exists", "effect": "NoExecute"}), "d Exists:NoExecute")]
    #[case::wildcard(json!({"operator": "Exists"}), "operator Exists without a key (tolerates every taint)")]
    fn tolerations_are_described(#[case] t: Value, #[case] text: &str) {
        assert_eq!(describe_toleration(&tol(t)), text);
    }

    #[rstest]
    #[case::equal(json!({"key": "d", "value": "b", "effect": "NoSchedule"}), "d=b:NoSchedule")]
    #[case::exists_any_effect(json!({"key": "nvidia.com/gpu", "operator": "Exists"}), "nvidia.com/gpu (any value) (any effect)")]
    fn taint_classes_are_described(#[case] t: Value, #[case] text: &str) {
        assert_eq!(describe_taint(&taint_class(&pool_tol(t))), text);
    }

    #[rstest]
    #[case::same(json!({"key": "d", "value": "a"}), json!({"key": "d", "value": "a"}), true)]
    #[case::values_differ(json!({"key": "d", "value": "a"}), json!({"key": "d", "value": "b"}), false)]
    #[case::exists_meets_any_value(json!({"key": "d", "operator": "Exists"}), json!({"key": "d", "value": "b"}), true)]
    #[case::effects_differ(json!({"key": "d", "operator": "Exists", "effect": "NoSchedule"}), json!({"key": "d", "operator": "Exists", "effect": "NoExecute"}), false)]
    #[case::any_effect(json!({"key": "d", "operator": "Exists"}), json!({"key": "d", "operator": "Exists", "effect": "NoExecute"}), true)]
    #[case::keys_differ(json!({"key": "d", "operator": "Exists"}), json!({"key": "e", "operator": "Exists"}), false)]
    fn taint_class_overlap(#[case] a: Value, #[case] b: Value, #[case] overlap: bool) {
        let (a, b) = (taint_class(&pool_tol(a)), taint_class(&pool_tol(b)));
        assert_eq!(classes_overlap(&a, &b), overlap);
        assert_eq!(classes_overlap(&b, &a), overlap, "symmetric");
    }

    #[test]
    fn extended_resource_toleration_shape() {
        let gpus: BTreeSet<String> = ["nvidia.com/gpu".to_string()].into();
        let added =
            tol(json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}));
        assert!(is_extended_resource_toleration(&added, &gpus));
        for other in [
            json!({"key": "nvidia.com/gpu", "operator": "Exists"}),
            json!({"key": "nvidia.com/gpu", "operator": "Equal", "value": "x", "effect": "NoSchedule"}),
            json!({"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"}),
        ] {
            assert!(
                !is_extended_resource_toleration(&tol(other.clone()), &gpus),
                "{other}"
            );
        }
    }

    fn settings() -> Settings {
        serde_json::from_value(json!({"pools": [
            {"name": "l4", "selector": {"matchLabels": {"t": "l4"}},
             "requiredNodeAffinity": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-L4", "Tesla-T4"]}],
             "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
            {"name": "h100", "selector": {"matchLabels": {"t": "h100"}},
             "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
             "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                             {"key": "h100", "operator": "Exists", "effect": "NoSchedule"}]}
        ]}))
        .unwrap()
    }

    fn conflicts_of(pool: &str, spec: Value) -> Vec<Conflict> {
        let s = settings();
        let object =
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec});
        let t = Workload::from_object(&object, &[])
            .unwrap()
            .templates
            .remove(0);
        let gpus: BTreeSet<String> = ["nvidia.com/gpu".to_string()].into();
        find(&s, s.pool(pool).unwrap(), &t, &gpus, true)
    }

    #[test]
    fn affinity_pools_check_node_selectors_against_their_in_set() {
        let c = conflicts_of(
            "l4",
            json!({"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}),
        );
        assert_eq!(
            c,
            vec![Conflict::NodeSelector {
                field: "spec.nodeSelector.nvidia.com/gpu.product".into(),
                value: "NVIDIA-H100-80GB-HBM3".into(),
                pool: "l4".into(),
                pool_wants: "nvidia.com/gpu.product=one of NVIDIA-L4, Tesla-T4".into(),
                points_at: Some("h100".into()),
            }]
        );
        // Narrowing within the pool's set is fine.
        assert!(
            conflicts_of(
                "l4",
                json!({"nodeSelector": {"nvidia.com/gpu.product": "Tesla-T4"}})
            )
            .is_empty()
        );
    }

    #[test]
    fn affinity_terms_are_checked_one_by_one() {
        let c = conflicts_of(
            "h100",
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "Exists"}]},
                {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-L4", "NVIDIA-H100-80GB-HBM3"]},
                                      {"key": "nvidia.com/gpu.product", "operator": "NotIn", "values": ["NVIDIA-H100-80GB-HBM3"]}]}]}}}}),
        );
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(
            c[0].to_string(),
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1]: nvidia.com/gpu.product In (NVIDIA-L4, NVIDIA-H100-80GB-HBM3) and nvidia.com/gpu.product NotIn (NVIDIA-H100-80GB-HBM3) points at the nodes of pool l4, but the workload belongs to pool h100, whose nodes have nvidia.com/gpu.product NVIDIA-H100-80GB-HBM3. Remove the requirement on nvidia.com/gpu.product (the policy adds the pool's own)"
        );
    }

    #[test]
    fn shared_taints_are_not_conflicts_but_foreign_ones_are() {
        // Both pools tolerate nvidia.com/gpu: tolerating it is fine in either.
        assert!(
            conflicts_of(
                "l4",
                json!({"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]})
            )
            .is_empty()
        );
        let c = conflicts_of(
            "l4",
            json!({"tolerations": [{"key": "h100", "operator": "Exists", "effect": "NoSchedule"}]}),
        );
        assert_eq!(
            c[0].to_string(),
            "spec.tolerations[0]: h100 Exists:NoSchedule tolerates the taint of pool h100 (h100 (any value):NoSchedule), which the nodes of pool l4 do not have. Remove it (the policy adds what pool l4 needs: nvidia.com/gpu Exists:NoSchedule)"
        );
    }

    #[test]
    fn bare_pods_are_not_told_the_policy_sets_a_priority_class() {
        let mut s = settings();
        s.pools[0].priority_class_name = Some("low".into());
        let object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"priorityClassName": "high"}});
        let t = Workload::from_object(&object, &[])
            .unwrap()
            .templates
            .remove(0);
        let c = find(&s, &s.pools[0], &t, &BTreeSet::new(), false);
        assert_eq!(
            c[0].to_string(),
            "spec.priorityClassName: 'high' is not allowed: pool l4 allows low; use one of them or remove it"
        );
    }
}
