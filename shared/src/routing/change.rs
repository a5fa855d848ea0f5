//! The routing change as data: what joining its pool adds to one pod template, and
//! writing it into the admitted object.
//!
//! Only what is missing is added, so a template that is already routed yields an empty
//! [`Routing`] and the policy accepts it without a patch (re-applies and UPDATEs do not
//! churn).

use super::settings::{NodeRequirement, Pool};
use crate::podspec::{NodeSelectorRequirement, Toleration};
use crate::workload::{PodTemplate, metadata_mut, pointer_to_location, spec_mut};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::fmt;

/// How the pool's required node affinity is merged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AffinityChange {
    #[default]
    Unchanged,
    /// The template has no required node affinity: one term with these requirements.
    NewTerm(Vec<NodeRequirement>),
    /// Requirements appended to existing terms, by term index.
    AddToTerms(Vec<(usize, Vec<NodeRequirement>)>),
}

/// What routing adds to one pod template.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Routing {
    /// The pool the template joins.
    pub pool: String,
    /// The pool label to set (key, value), when missing.
    pub pool_label: Option<(String, String)>,
    /// nodeSelector entries to add.
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations to append.
    pub tolerations: Vec<Toleration>,
    /// The priority class to set (the template has none).
    pub priority_class_name: Option<String>,
    /// Required node affinity to merge.
    pub affinity: AffinityChange,
}

impl Routing {
    /// True when the template is already routed.
    pub fn is_empty(&self) -> bool {
        self.pool_label.is_none() && self.changes_spec().is_none()
    }

    /// The first pod spec field this routing changes (`None`: only the pool label, or nothing).
    pub fn changes_spec(&self) -> Option<&'static str> {
        if !self.node_selector.is_empty() {
            Some("nodeSelector")
        } else if !self.tolerations.is_empty() {
            Some("tolerations")
        } else if self.priority_class_name.is_some() {
            Some("priorityClassName")
        } else if self.affinity != AffinityChange::Unchanged {
            Some("affinity")
        } else {
            None
        }
    }
}

impl fmt::Display for Routing {
    /// `pool batch: label gpu-admission/pool=batch, nodeSelector pool=batch, ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some((k, v)) = &self.pool_label {
            parts.push(format!("label {k}={v}"));
        }
        for (k, v) in &self.node_selector {
            parts.push(format!("nodeSelector {k}={v}"));
        }
        for t in &self.tolerations {
            parts.push(format!(
                "toleration {}",
                super::conflicts::describe_toleration(t)
            ));
        }
        if let Some(pc) = &self.priority_class_name {
            parts.push(format!("priorityClassName {pc}"));
        }
        let reqs = |r: &[NodeRequirement]| {
            r.iter()
                .map(NodeRequirement::describe)
                .collect::<Vec<_>>()
                .join(" and ")
        };
        match &self.affinity {
            AffinityChange::Unchanged => {}
            AffinityChange::NewTerm(r) => parts.push(format!("required node affinity {}", reqs(r))),
            AffinityChange::AddToTerms(terms) => {
                for (i, r) in terms {
                    parts.push(format!("required node affinity term {i}: {}", reqs(r)));
                }
            }
        }
        if parts.is_empty() {
            write!(f, "pool {}: already routed", self.pool)
        } else {
            write!(f, "pool {}: {}", self.pool, parts.join(", "))
        }
    }
}

/// True when `have` tolerates every taint `want` tolerates (so `want` need not be added).
pub fn covers(have: &Toleration, want: &Toleration) -> bool {
    let operator = |t: &Toleration| match t.operator.as_deref() {
        Some("Exists") => "Exists",
        _ => "Equal",
    };
    let have_key = have.key.as_deref().unwrap_or("");
    let want_key = want.key.as_deref().unwrap_or("");
    let key_ok = (have_key.is_empty() && operator(have) == "Exists")
        || (!have_key.is_empty() && have_key == want_key);
    let value_ok = operator(have) == "Exists"
        || (operator(want) == "Equal"
            && have.value.as_deref().unwrap_or("") == want.value.as_deref().unwrap_or(""));
    let have_effect = have.effect.as_deref().unwrap_or("");
    let effect_ok = have_effect.is_empty() || Some(have_effect) == want.effect.as_deref();
    key_ok && value_ok && effect_ok
}

fn same_requirement(have: &NodeSelectorRequirement, want: &NodeRequirement) -> bool {
    let mut a = have.values.clone();
    let mut b = want.values.clone();
    a.sort();
    b.sort();
    have.key == want.key && have.operator == want.operator && a == b
}

/// What `pool` adds to `template`. `pool_label_key` is the label to set; `sets_priority`
/// is false for bare Pods (their priority is resolved before admission webhooks run).
pub fn routing_for(
    pool: &Pool,
    template: &PodTemplate,
    pool_label_key: &str,
    sets_priority: bool,
) -> Routing {
    let spec = &template.spec;
    let pool_label = (template.meta.labels.get(pool_label_key) != Some(&pool.name))
        .then(|| (pool_label_key.to_string(), pool.name.clone()));
    let node_selector = pool
        .node_selector
        .match_labels
        .iter()
        .filter(|(k, v)| spec.node_selector.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut tolerations: Vec<Toleration> = Vec::new();
    for want in pool.tolerations.iter().map(|t| t.to_toleration()) {
        if !spec
            .tolerations
            .iter()
            .chain(tolerations.iter())
            .any(|have| covers(have, &want))
        {
            tolerations.push(want);
        }
    }
    let priority_class_name = match (&spec.priority_class_name, &pool.priority_class_name) {
        (Some(have), _) if !have.is_empty() => None,
        (_, Some(pc)) if sets_priority => Some(pc.clone()),
        _ => None,
    };
    let affinity = if pool.required_node_affinity.is_empty() {
        AffinityChange::Unchanged
    } else {
        let terms = spec.required_node_terms();
        if terms.is_empty() {
            AffinityChange::NewTerm(pool.required_node_affinity.clone())
        } else {
            let additions: Vec<(usize, Vec<NodeRequirement>)> = terms
                .iter()
                .enumerate()
                .filter_map(|(i, term)| {
                    let missing: Vec<NodeRequirement> = pool
                        .required_node_affinity
                        .iter()
                        .filter(|want| {
                            !term
                                .match_expressions
                                .iter()
                                .any(|have| same_requirement(have, want))
                        })
                        .cloned()
                        .collect();
                    (!missing.is_empty()).then_some((i, missing))
                })
                .collect();
            if additions.is_empty() {
                AffinityChange::Unchanged
            } else {
                AffinityChange::AddToTerms(additions)
            }
        }
    };
    Routing {
        pool: pool.name.clone(),
        pool_label,
        node_selector,
        tolerations,
        priority_class_name,
        affinity,
    }
}

/// The slot under `key` of `map`, set to `empty` when absent or null. Looked up by
/// reference first: a new key is allocated only when inserted.
fn child<'a>(map: &'a mut Map<String, Value>, key: &str, empty: fn() -> Value) -> &'a mut Value {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.to_string(), empty());
    }
    map.get_mut(key).expect("the slot was just set")
}

/// The object under `key` of `map`, created when absent or null. `at` says where `map`
/// is, for the error (built only then).
fn child_object<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
    at: impl FnOnce() -> String,
) -> Result<&'a mut Map<String, Value>, String> {
    child(map, key, || Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| format!("{}.{key}: is not an object", at()))
}

/// The array under `key` of `map`, created when absent or null (`at` as for
/// [`child_object`]).
fn child_array<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
    at: impl FnOnce() -> String,
) -> Result<&'a mut Vec<Value>, String> {
    child(map, key, || Value::Array(Vec::new()))
        .as_array_mut()
        .ok_or_else(|| format!("{}.{key}: is not a list", at()))
}

/// Sets the label `key` of `template`'s metadata in `object` to `value`, or removes it
/// (`None`); the labels map is created when missing.
pub fn write_label(
    object: &mut Value,
    template: &PodTemplate,
    key: &str,
    value: Option<&str>,
) -> Result<(), String> {
    let at = || pointer_to_location(&template.metadata_pointer);
    let meta = metadata_mut(object, template).map_err(|e| e.to_string())?;
    match value {
        Some(v) => {
            child_object(meta, "labels", at)?.insert(key.to_string(), json!(v));
        }
        None => {
            if let Some(labels) = meta.get_mut("labels").and_then(Value::as_object_mut) {
                labels.remove(key);
            }
        }
    }
    Ok(())
}

/// Writes `routing` into `template`'s place in `object` (through the same pointers the
/// template was read from, so custom kinds configured by JSONPath work too).
pub fn apply(object: &mut Value, template: &PodTemplate, routing: &Routing) -> Result<(), String> {
    if let Some((key, value)) = &routing.pool_label {
        let at = || pointer_to_location(&template.metadata_pointer);
        let meta = metadata_mut(object, template).map_err(|e| e.to_string())?;
        child_object(meta, "labels", at)?.insert(key.clone(), json!(value));
    }
    if routing.changes_spec().is_none() {
        return Ok(());
    }
    let at = template.location.as_str();
    let here = || at.to_string();
    let spec = spec_mut(object, template).map_err(|e| e.to_string())?;
    if !routing.node_selector.is_empty() {
        let selector = child_object(spec, "nodeSelector", here)?;
        for (k, v) in &routing.node_selector {
            selector.insert(k.clone(), json!(v));
        }
    }
    if !routing.tolerations.is_empty() {
        let list = child_array(spec, "tolerations", here)?;
        for t in &routing.tolerations {
            list.push(serde_json::to_value(t).map_err(|e| e.to_string())?);
        }
    }
    if let Some(pc) = &routing.priority_class_name {
        spec.insert("priorityClassName".into(), json!(pc));
    }
    let required = "requiredDuringSchedulingIgnoredDuringExecution";
    match &routing.affinity {
        AffinityChange::Unchanged => {}
        AffinityChange::NewTerm(reqs) => {
            let affinity = child_object(spec, "affinity", here)?;
            let node = child_object(affinity, "nodeAffinity", || format!("{at}.affinity"))?;
            let expressions: Vec<Value> = reqs.iter().map(NodeRequirement::to_json).collect();
            node.insert(
                required.into(),
                json!({"nodeSelectorTerms": [{"matchExpressions": expressions}]}),
            );
        }
        AffinityChange::AddToTerms(terms) => {
            let field = format!("{at}.affinity.nodeAffinity.{required}");
            let affinity = child_object(spec, "affinity", here)?;
            let node = child_object(affinity, "nodeAffinity", || format!("{at}.affinity"))?;
            let selector = child_object(node, required, || format!("{at}.affinity.nodeAffinity"))?;
            let list = child_array(selector, "nodeSelectorTerms", || field.clone())?;
            for (i, reqs) in terms {
                let term = list
                    .get_mut(*i)
                    .and_then(Value::as_object_mut)
                    .ok_or_else(|| format!("{field}.nodeSelectorTerms[{i}]: is not an object"))?;
                let expressions = child_array(term, "matchExpressions", || {
                    format!("{field}.nodeSelectorTerms[{i}]")
                })?;
                expressions.extend(reqs.iter().map(NodeRequirement::to_json));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Workload;
    use rstest::rstest;
    use serde_json::json;

    fn tol(v: Value) -> Toleration {
        serde_json::from_value(v).unwrap()
    }

    #[rstest]
    #[case::equal(json!({"key": "d", "operator": "Equal", "value": "b", "effect": "NoSchedule"}), json!({"key": "d", "value": "b", "effect": "NoSchedule"}), true)]
    #[case::exists_covers_equal(json!({"key": "d", "operator": "Exists"}), json!({"key": "d", "value": "b", "effect": "NoSchedule"}), true)]
    #[case::wildcard(json!({"operator": "Exists"}), json!({"key": "d", "operator": "Exists"}), true)]
    #[case::equal_does_not_cover_exists(json!({"key": "d", "value": "b"}), json!({"key": "d", "operator": "Exists"}), false)]
    #[case::other_value(json!({"key": "d", "value": "a"}), json!({"key": "d", "value": "b"}), false)]
    #[case::narrower_effect(json!({"key": "d", "operator": "Exists", "effect": "NoExecute"}), json!({"key": "d", "operator": "Exists", "effect": "NoSchedule"}), false)]
    #[case::all_effects_needed(json!({"key": "d", "operator": "Exists", "effect": "NoSchedule"}), json!({"key": "d", "operator": "Exists"}), false)]
    #[case::empty_key_equal_is_nothing(json!({"value": "b"}), json!({"key": "d", "value": "b"}), false)]
    fn toleration_coverage(#[case] have: Value, #[case] want: Value, #[case] expected: bool) {
        assert_eq!(covers(&tol(have), &tol(want)), expected);
    }

    fn pool(v: Value) -> Pool {
        serde_json::from_value(v).unwrap()
    }

    fn deployment(spec: Value, labels: Value) -> (Value, PodTemplate) {
        let object = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"metadata": {"labels": labels}, "spec": spec}}});
        let t = Workload::from_object(&object, &[])
            .unwrap()
            .templates
            .remove(0);
        (object, t)
    }

    fn route_twice(p: &Pool, spec: Value) -> (Routing, Value) {
        let (mut object, t) = deployment(spec, json!({"w": "b"}));
        let r = routing_for(p, &t, "gpu-admission/pool", true);
        apply(&mut object, &t, &r).unwrap();
        let again = Workload::from_object(&object, &[])
            .unwrap()
            .templates
            .remove(0);
        let second = routing_for(p, &again, "gpu-admission/pool", true);
        assert!(second.is_empty(), "second pass: {second}");
        (r, object)
    }

    #[test]
    fn fields_of_the_wrong_shape_are_errors_naming_them() {
        let p = pool(json!({"name": "batch", "nodeSelector": {"pool": "batch"},
            "tolerations": [{"key": "d", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}],
            "requiredNodeAffinity": [{"key": "zone", "operator": "Exists"}]}));
        let bare = json!({"containers": [{"name": "c"}]});
        let termed = json!({"containers": [{"name": "c"}], "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}]}}}});
        let required = "/spec/template/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution";
        for (spec, pointer, wrong, message) in [
            (
                &bare,
                "/spec/template/metadata/labels",
                json!("x"),
                "spec.template.metadata.labels: is not an object",
            ),
            (
                &bare,
                "/spec/template/spec/nodeSelector",
                json!(1),
                "spec.template.spec.nodeSelector: is not an object",
            ),
            (
                &bare,
                "/spec/template/spec/tolerations",
                json!({}),
                "spec.template.spec.tolerations: is not a list",
            ),
            (
                &bare,
                "/spec/template/spec/affinity",
                json!([]),
                "spec.template.spec.affinity: is not an object",
            ),
            (
                &termed,
                "/spec/template/spec/affinity/nodeAffinity",
                json!(2),
                "spec.template.spec.affinity.nodeAffinity: is not an object",
            ),
            (
                &termed,
                required,
                json!("x"),
                "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution: is not an object",
            ),
            (
                &termed,
                &format!("{required}/nodeSelectorTerms"),
                json!({}),
                "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: is not a list",
            ),
            (
                &termed,
                &format!("{required}/nodeSelectorTerms/0"),
                json!(3),
                "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]: is not an object",
            ),
            (
                &termed,
                &format!("{required}/nodeSelectorTerms/0/matchExpressions"),
                json!("x"),
                "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions: is not a list",
            ),
        ] {
            let (mut object, t) = deployment(spec.clone(), json!({"w": "b"}));
            let r = routing_for(&p, &t, "gpu-admission/pool", true);
            let (parent, key) = pointer.rsplit_once('/').unwrap();
            match object.pointer_mut(parent).unwrap() {
                Value::Array(items) => items[key.parse::<usize>().unwrap()] = wrong,
                parent => {
                    parent[key] = wrong;
                }
            }
            assert_eq!(
                apply(&mut object, &t, &r),
                Err(message.to_string()),
                "{pointer}"
            );
        }
        let (mut object, t) = deployment(bare, json!({"w": "b"}));
        *object
            .pointer_mut("/spec/template/metadata/labels")
            .unwrap() = json!(["x"]);
        assert_eq!(
            write_label(&mut object, &t, "team", Some("a")),
            Err("spec.template.metadata.labels: is not an object".to_string())
        );
    }

    #[test]
    fn adds_everything_to_a_bare_template() {
        let p = pool(json!({"name": "batch", "nodeSelector": {"pool": "batch"},
            "tolerations": [{"key": "d", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}],
            "priorityClassName": "low",
            "requiredNodeAffinity": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["A", "B"]}]}));
        let (r, object) = route_twice(&p, json!({"containers": [{"name": "c"}]}));
        assert_eq!(
            r.to_string(),
            "pool batch: label gpu-admission/pool=batch, nodeSelector pool=batch, toleration d=batch:NoSchedule, priorityClassName low, required node affinity nvidia.com/gpu.product In (A, B)"
        );
        assert_eq!(
            object["spec"]["template"],
            json!({"metadata": {"labels": {"w": "b", "gpu-admission/pool": "batch"}},
                   "spec": {"containers": [{"name": "c"}],
                            "nodeSelector": {"pool": "batch"},
                            "tolerations": [{"key": "d", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}],
                            "priorityClassName": "low",
                            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [{"matchExpressions": [
                                    {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["A", "B"]}]}]}}}}})
        );
    }

    #[test]
    fn merges_into_existing_fields_without_duplicates() {
        let p = pool(json!({"name": "batch", "nodeSelector": {"pool": "batch"},
            "tolerations": [{"key": "d", "operator": "Exists", "effect": "NoSchedule"},
                            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "priorityClassName": "low",
            "requiredNodeAffinity": [{"key": "zone", "operator": "Exists"}]}));
        let (r, object) = route_twice(
            &p,
            json!({"containers": [{"name": "c"}],
                "nodeSelector": {"disk": "ssd"},
                "priorityClassName": "mine",
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                "affinity": {"podAntiAffinity": {"x": 1}, "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [],
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "Exists"}]},
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}}),
        );
        assert_eq!(
            r.tolerations,
            vec![tol(
                json!({"key": "d", "operator": "Exists", "effect": "NoSchedule"})
            )]
        );
        assert_eq!(r.priority_class_name, None, "the template has its own");
        assert_eq!(
            r.affinity,
            AffinityChange::AddToTerms(vec![(1, p.required_node_affinity.clone())])
        );
        let spec = &object["spec"]["template"]["spec"];
        assert_eq!(
            spec["nodeSelector"],
            json!({"disk": "ssd", "pool": "batch"})
        );
        assert_eq!(spec["priorityClassName"], "mine");
        assert_eq!(spec["affinity"]["podAntiAffinity"], json!({"x": 1}));
        assert_eq!(
            spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
                [1],
            json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}],
                   "matchExpressions": [{"key": "zone", "operator": "Exists"}]})
        );
    }

    #[test]
    fn null_fields_are_replaced() {
        let p = pool(json!({"name": "b", "nodeSelector": {"pool": "b"},
            "tolerations": [{"key": "d", "operator": "Exists"}],
            "requiredNodeAffinity": [{"key": "zone", "operator": "In", "values": ["z"]}]}));
        let (_, object) = route_twice(
            &p,
            json!({"containers": [], "nodeSelector": null, "tolerations": null,
                   "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}}),
        );
        let spec = &object["spec"]["template"]["spec"];
        assert_eq!(spec["nodeSelector"], json!({"pool": "b"}));
        assert_eq!(
            spec["tolerations"],
            json!([{"key": "d", "operator": "Exists"}])
        );
        assert_eq!(
            spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"],
            json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z"]}]}]})
        );
    }

    #[test]
    fn bare_pods_get_no_priority_class_and_labels_are_created() {
        let p =
            pool(json!({"name": "b", "nodeSelector": {"pool": "b"}, "priorityClassName": "low"}));
        let mut object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}});
        let t = Workload::from_object(&object, &[])
            .unwrap()
            .templates
            .remove(0);
        let r = routing_for(&p, &t, "gpu-admission/pool", false);
        assert_eq!(r.priority_class_name, None);
        apply(&mut object, &t, &r).unwrap();
        assert_eq!(
            object["metadata"]["labels"],
            json!({"gpu-admission/pool": "b"})
        );
        assert_eq!(object["spec"]["nodeSelector"], json!({"pool": "b"}));
    }

    #[test]
    fn only_the_label_is_not_a_spec_change() {
        let r = Routing {
            pool: "b".into(),
            pool_label: Some(("k".into(), "b".into())),
            ..Routing::default()
        };
        assert!(!r.is_empty());
        assert_eq!(r.changes_spec(), None);
        assert_eq!(Routing::default().to_string(), "pool : already routed");
    }
}
