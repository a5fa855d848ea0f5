//! Where a pod may run: node selectors, required node affinity and tolerations.

use crate::podspec::{PodSpec, Toleration};
use std::collections::BTreeSet;

/// The values a pod restricts node label `key` to, or `None` when it does not restrict it.
///
/// A `nodeSelector` entry gives one value. Required node affinity terms are ORed: the pod
/// is restricted only if *every* term restricts the key (with `In`), and then the allowed
/// values are the union over the terms. Combined with a `nodeSelector` entry, the result
/// is the intersection.
pub fn required_label_values(spec: &PodSpec, key: &str) -> Option<BTreeSet<String>> {
    let from_selector = spec
        .node_selector
        .get(key)
        .map(|v| BTreeSet::from([v.clone()]));

    let terms = spec.required_node_terms();
    let from_affinity = if terms.is_empty() {
        None
    } else {
        let mut union = BTreeSet::new();
        let mut every_term_restricts = true;
        for term in terms {
            let mut term_values: Option<BTreeSet<String>> = None;
            for expr in term.match_expressions.iter().filter(|e| e.key == key) {
                if expr.operator == "In" {
                    let values: BTreeSet<String> = expr.values.iter().cloned().collect();
                    term_values = Some(match term_values {
                        Some(prev) => prev.intersection(&values).cloned().collect(),
                        None => values,
                    });
                }
            }
            match term_values {
                Some(v) => union.extend(v),
                None => every_term_restricts = false,
            }
        }
        every_term_restricts.then_some(union)
    };

    match (from_selector, from_affinity) {
        (Some(a), Some(b)) => Some(a.intersection(&b).cloned().collect()),
        (a, b) => a.or(b),
    }
}

/// Node label keys among `keys` that the pod asks for positively (`nodeSelector`, or a
/// required affinity expression `In` / `Exists` / `Gt` / `Lt`), in `keys` order.
pub fn selected_label_keys<'k>(spec: &PodSpec, keys: &'k [String]) -> Vec<&'k str> {
    keys.iter()
        .filter(|key| {
            spec.node_selector.contains_key(key.as_str())
                || spec.required_node_terms().iter().any(|t| {
                    t.match_expressions.iter().any(|e| {
                        &e.key == *key
                            && matches!(e.operator.as_str(), "In" | "Exists" | "Gt" | "Lt")
                    })
                })
        })
        .map(|k| k.as_str())
        .collect()
}

/// A taint to test tolerations against. `value: None` stands for any value, so that
/// `nvidia.com/gpu=present` and `nvidia.com/gpu=true` are both "the GPU taint".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaintPattern {
    pub key: String,
    pub value: Option<String>,
    /// `None` stands for any effect.
    pub effect: Option<String>,
}

/// True when `toleration` tolerates a taint matching `taint`, by Kubernetes' rules: an
/// empty key with `Exists` tolerates everything; an empty effect tolerates every effect;
/// `Exists` ignores the value; `Equal` (the default) needs the same value.
pub fn tolerates(toleration: &Toleration, taint: &TaintPattern) -> bool {
    let key = toleration.key.as_deref().unwrap_or("");
    let exists = toleration.operator.as_deref() == Some("Exists");
    let key_ok = (key.is_empty() && exists) || key == taint.key;
    let effect_ok = match (toleration.effect.as_deref().unwrap_or(""), &taint.effect) {
        ("", _) => true,
        (_, None) => true,
        (e, Some(t)) => e == t,
    };
    let value_ok = exists
        || match &taint.value {
            None => true,
            Some(v) => toleration.value.as_deref().unwrap_or("") == v,
        };
    key_ok && effect_ok && value_ok
}

/// The pod's tolerations that tolerate `taint`.
pub fn tolerations_for<'a>(spec: &'a PodSpec, taint: &TaintPattern) -> Vec<&'a Toleration> {
    spec.tolerations
        .iter()
        .filter(|t| tolerates(t, taint))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn spec(v: Value) -> PodSpec {
        serde_json::from_value(v).unwrap()
    }

    fn set(values: &[&str]) -> Option<BTreeSet<String>> {
        Some(values.iter().map(|s| s.to_string()).collect())
    }

    const PRODUCT: &str = "nvidia.com/gpu.product";

    fn affinity(terms: Value) -> Value {
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}})
    }

    #[test]
    fn node_selector_restricts_to_one_value() {
        let s = spec(json!({"nodeSelector": {PRODUCT: "NVIDIA-A10G"}}));
        assert_eq!(required_label_values(&s, PRODUCT), set(&["NVIDIA-A10G"]));
        assert_eq!(required_label_values(&s, "other"), None);
    }

    #[test]
    fn affinity_terms_union_when_all_restrict() {
        let s = spec(json!({"affinity": affinity(json!([
            {"matchExpressions": [{"key": PRODUCT, "operator": "In", "values": ["NVIDIA-L4", "Tesla-T4"]}]},
            {"matchExpressions": [{"key": PRODUCT, "operator": "In", "values": ["NVIDIA-A10G"]}]}
        ]))}));
        assert_eq!(
            required_label_values(&s, PRODUCT),
            set(&["NVIDIA-A10G", "NVIDIA-L4", "Tesla-T4"])
        );
    }

    #[test]
    fn a_term_without_the_key_leaves_it_unrestricted() {
        let s = spec(json!({"affinity": affinity(json!([
            {"matchExpressions": [{"key": PRODUCT, "operator": "In", "values": ["NVIDIA-L4"]}]},
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
        ]))}));
        assert_eq!(required_label_values(&s, PRODUCT), None);
    }

    #[test]
    fn selector_and_affinity_intersect() {
        let s = spec(json!({
            "nodeSelector": {PRODUCT: "NVIDIA-L4"},
            "affinity": affinity(json!([{"matchExpressions": [
                {"key": PRODUCT, "operator": "In", "values": ["NVIDIA-L4", "NVIDIA-A10G"]}]}]))
        }));
        assert_eq!(required_label_values(&s, PRODUCT), set(&["NVIDIA-L4"]));
    }

    #[test]
    fn selected_keys_ignore_negative_operators() {
        let keys = vec![PRODUCT.to_string(), "nvidia.com/gpu.present".to_string()];
        let s = spec(json!({"affinity": affinity(json!([{"matchExpressions": [
            {"key": PRODUCT, "operator": "NotIn", "values": ["x"]},
            {"key": "nvidia.com/gpu.present", "operator": "Exists"}
        ]}]))}));
        assert_eq!(
            selected_label_keys(&s, &keys),
            vec!["nvidia.com/gpu.present"]
        );
        let t = spec(json!({"nodeSelector": {PRODUCT: "x"}}));
        assert_eq!(selected_label_keys(&t, &keys), vec![PRODUCT]);
        assert!(selected_label_keys(&spec(json!({})), &keys).is_empty());
    }

    fn tol(v: Value) -> Toleration {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn toleration_matching_follows_kubernetes() {
        let gpu_any = TaintPattern {
            key: "nvidia.com/gpu".into(),
            value: None,
            effect: Some("NoSchedule".into()),
        };
        let gpu_present = TaintPattern {
            value: Some("present".into()),
            ..gpu_any.clone()
        };
        assert!(tolerates(
            &tol(json!({"key": "nvidia.com/gpu", "operator": "Exists"})),
            &gpu_any
        ));
        assert!(
            tolerates(&tol(json!({"operator": "Exists"})), &gpu_any),
            "wildcard"
        );
        assert!(tolerates(
            &tol(json!({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})),
            &gpu_present
        ));
        assert!(!tolerates(
            &tol(json!({"key": "nvidia.com/gpu", "value": "true"})),
            &gpu_present
        ));
        assert!(tolerates(
            &tol(json!({"key": "nvidia.com/gpu", "value": "true"})),
            &gpu_any
        ));
        assert!(!tolerates(
            &tol(json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"})),
            &gpu_any
        ));
        assert!(!tolerates(
            &tol(json!({"key": "other", "operator": "Exists"})),
            &gpu_any
        ));
        assert!(
            !tolerates(&tol(json!({})), &gpu_any),
            "empty key with Equal matches nothing"
        );
        let s = spec(
            json!({"tolerations": [{"key": "a", "operator": "Exists"}, {"key": "nvidia.com/gpu", "operator": "Exists"}]}),
        );
        assert_eq!(tolerations_for(&s, &gpu_any).len(), 1);
    }
}
