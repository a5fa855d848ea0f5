//! Are two pools provably disjoint? Routing is only unambiguous when no pod template can
//! match two pools, so settings validation asks this of every pair, and answers "no" with
//! an example workload that matches both.
//!
//! Two pools are disjoint when their namespace lists cannot overlap, or when some label key
//! is constrained by both selectors in ways no value satisfies at once (`k=a` vs `k=b`,
//! `In` sets that do not intersect, `In` vs a `NotIn` covering it, `Exists` vs
//! `DoesNotExist`). Anything else is treated as overlapping: a pool label must never be a
//! guess.

use super::constraint::KeyConstraint;
use crate::selector::{LabelSelector, Operator};
use crate::settings::{NamespaceList, wildcard};
use std::collections::BTreeMap;
use std::fmt;

/// Per key, what a selector allows (keys it does not mention allow anything).
pub fn selector_constraints(selector: &LabelSelector) -> BTreeMap<String, KeyConstraint> {
    let mut out: BTreeMap<String, KeyConstraint> = BTreeMap::new();
    let mut add = |key: &str, c: KeyConstraint| {
        let merged = match out.get(key) {
            Some(prev) => prev.intersect(&c),
            None => c,
        };
        out.insert(key.to_string(), merged);
    };
    for (k, v) in &selector.match_labels {
        add(k, KeyConstraint::equal(v));
    }
    for r in &selector.match_expressions {
        let values = r.values.iter().map(String::as_str);
        add(
            &r.key,
            match r.operator {
                Operator::In => KeyConstraint::one_of(values),
                Operator::NotIn => KeyConstraint::none_of(values),
                Operator::Exists => KeyConstraint::exists(),
                Operator::DoesNotExist => KeyConstraint::does_not_exist(),
            },
        );
    }
    out
}

/// A key whose requirements in `selector` contradict each other (the selector matches nothing).
pub fn unsatisfiable_key(selector: &LabelSelector) -> Option<String> {
    selector_constraints(selector)
        .into_iter()
        .find(|(_, c)| c.is_empty())
        .map(|(k, _)| k)
}

/// A workload that two pools both match: labels, and a namespace (`None`: any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    pub labels: BTreeMap<String, String>,
    pub namespace: Option<String>,
}

impl fmt::Display for Overlap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.labels.is_empty() {
            f.write_str("a pod template without labels")?;
        } else {
            let labels: Vec<String> = self
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            write!(f, "a pod template labelled {}", labels.join(", "))?;
        }
        match &self.namespace {
            Some(ns) => write!(f, " in namespace {ns}"),
            None => f.write_str(" in any namespace"),
        }
    }
}

/// The workloads a pool takes: pod templates its selector matches, in its namespaces
/// (`None`: any namespace).
#[derive(Debug, Clone, Copy)]
pub struct Members<'a> {
    pub selector: &'a LabelSelector,
    pub namespaces: Option<&'a NamespaceList>,
}

/// `None` when `a` and `b` are provably disjoint; otherwise a workload matching both.
pub fn overlap(a: Members<'_>, b: Members<'_>) -> Option<Overlap> {
    let namespace = namespaces_overlap(a.namespaces, b.namespaces)?;
    let ca = selector_constraints(a.selector);
    let cb = selector_constraints(b.selector);
    let mut labels = BTreeMap::new();
    for key in ca.keys().chain(cb.keys()) {
        let both = match (ca.get(key), cb.get(key)) {
            (Some(x), Some(y)) => x.intersect(y),
            (Some(x), None) | (None, Some(x)) => x.clone(),
            (None, None) => continue,
        };
        // `None` inside: the label may be absent, so the example leaves it out.
        if let Some(value) = both.example()? {
            labels.insert(key.clone(), value);
        }
    }
    Some(Overlap { labels, namespace })
}

/// `None` when the lists cannot share a namespace; `Some(None)` when both admit any
/// namespace; `Some(Some(ns))` with a namespace both admit.
fn namespaces_overlap(
    a: Option<&NamespaceList>,
    b: Option<&NamespaceList>,
) -> Option<Option<String>> {
    match (a, b) {
        (None, None) => Some(None),
        (Some(list), None) | (None, Some(list)) => list.0.first().map(|p| Some(example_of(p))),
        (Some(x), Some(y)) => {
            x.0.iter()
                .flat_map(|p| y.0.iter().map(move |q| (p, q)))
                .find_map(|(p, q)| patterns_overlap(p, q))
                .map(Some)
        }
    }
}

/// A namespace matched by both patterns (exact names or prefixes ending in `*`).
fn patterns_overlap(p: &str, q: &str) -> Option<String> {
    match (wildcard::prefix_of(p), wildcard::prefix_of(q)) {
        ((_, false), (_, false)) => (p == q).then(|| p.to_string()),
        ((_, false), (prefix, true)) => p.starts_with(prefix).then(|| p.to_string()),
        ((prefix, true), (_, false)) => q.starts_with(prefix).then(|| q.to_string()),
        ((x, true), (y, true)) => {
            let longer = if x.len() >= y.len() { x } else { y };
            (x.starts_with(y) || y.starts_with(x)).then(|| example_of(&format!("{longer}*")))
        }
    }
}

/// A namespace a pattern matches.
fn example_of(pattern: &str) -> String {
    match wildcard::prefix_of(pattern) {
        (prefix, true) if prefix.ends_with(|c: char| c.is_ascii_alphanumeric()) => {
            prefix.to_string()
        }
        (prefix, true) => format!("{prefix}x"),
        (_, false) => pattern.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{Value, json};

    /// A pool's membership, owned.
    struct Pool {
        selector: LabelSelector,
        namespaces: Option<NamespaceList>,
    }

    impl Pool {
        fn members(&self) -> Members<'_> {
            Members {
                selector: &self.selector,
                namespaces: self.namespaces.as_ref(),
            }
        }

        fn admits_namespace(&self, ns: &str) -> bool {
            self.namespaces.as_ref().is_none_or(|l| l.contains(ns))
        }
    }

    fn overlap(a: &Pool, b: &Pool) -> Option<Overlap> {
        super::overlap(a.members(), b.members())
    }

    fn pool(selector: Value, namespaces: Option<Vec<&str>>) -> Pool {
        Pool {
            selector: serde_json::from_value(selector).unwrap(),
            namespaces: namespaces
                .map(|v| NamespaceList(v.into_iter().map(str::to_string).collect())),
        }
    }

    fn ml(pairs: &[(&str, &str)]) -> Value {
        json!({"matchLabels": pairs.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>()})
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> Value {
        json!({"matchExpressions": [{"key": key, "operator": op, "values": values}]})
    }

    #[rstest]
    #[case::different_values(ml(&[("t", "batch")]), ml(&[("t", "interactive")]))]
    #[case::in_sets_disjoint(expr("t", "In", &["a", "b"]), expr("t", "In", &["c"]))]
    #[case::equal_vs_notin(ml(&[("t", "a")]), expr("t", "NotIn", &["a", "b"]))]
    #[case::exists_vs_does_not_exist(expr("gpu-admission/priority", "Exists", &[]), expr("gpu-admission/priority", "DoesNotExist", &[]))]
    #[case::one_key_of_several(ml(&[("t", "a"), ("team", "x")]), ml(&[("t", "b")]))]
    fn disjoint_selectors(#[case] a: Value, #[case] b: Value) {
        assert_eq!(
            overlap(&pool(a.clone(), None), &pool(b.clone(), None)),
            None
        );
        assert_eq!(overlap(&pool(b, None), &pool(a, None)), None, "symmetric");
    }

    #[rstest]
    #[case::empty_vs_anything(json!({}), ml(&[("t", "a")]))]
    #[case::different_keys(ml(&[("t", "a")]), ml(&[("team", "x")]))]
    #[case::in_sets_intersect(expr("t", "In", &["a", "b"]), expr("t", "In", &["b", "c"]))]
    #[case::notin_vs_notin(expr("t", "NotIn", &["a"]), expr("t", "NotIn", &["b"]))]
    #[case::exists_vs_notin(expr("t", "Exists", &[]), expr("t", "NotIn", &["example"]))]
    #[case::notin_vs_absent(expr("t", "NotIn", &["a"]), expr("t", "DoesNotExist", &[]))]
    fn overlapping_selectors_come_with_a_witness(#[case] a: Value, #[case] b: Value) {
        let (pa, pb) = (pool(a, None), pool(b, None));
        let o = overlap(&pa, &pb).expect("overlap");
        assert!(pa.selector.matches(&o.labels), "{o}");
        assert!(pb.selector.matches(&o.labels), "{o}");
        assert_eq!(o.namespace, None);
    }

    #[rstest]
    #[case::exact_exact(vec!["a"], vec!["b"], None)]
    #[case::same_exact(vec!["a", "ml"], vec!["ml"], Some("ml"))]
    #[case::exact_in_prefix(vec!["team-a"], vec!["team-*"], Some("team-a"))]
    #[case::exact_outside_prefix(vec!["ops"], vec!["team-*"], None)]
    #[case::nested_prefixes(vec!["team-*"], vec!["team-ml-*"], Some("team-ml-x"))]
    #[case::prefixes_apart(vec!["team-*"], vec!["serving-*"], None)]
    #[case::alphanumeric_prefix(vec!["ml*"], vec!["m*"], Some("ml"))]
    fn namespace_lists(#[case] a: Vec<&str>, #[case] b: Vec<&str>, #[case] ns: Option<&str>) {
        let (pa, pb) = (pool(json!({}), Some(a)), pool(json!({}), Some(b)));
        let o = overlap(&pa, &pb);
        assert_eq!(o.as_ref().and_then(|o| o.namespace.as_deref()), ns);
        if let Some(ns) = ns {
            assert!(pa.admits_namespace(ns) && pb.admits_namespace(ns), "{ns}");
        }
    }

    #[test]
    fn one_namespace_list_against_all_namespaces() {
        let o = overlap(
            &pool(json!({}), Some(vec!["serving-*"])),
            &pool(json!({}), None),
        )
        .unwrap();
        assert_eq!(o.namespace.as_deref(), Some("serving-x"));
        assert_eq!(
            o.to_string(),
            "a pod template without labels in namespace serving-x"
        );
    }

    #[test]
    fn witness_reads_well() {
        let o = overlap(
            &pool(ml(&[("workload-type", "batch")]), None),
            &pool(expr("team", "Exists", &[]), None),
        )
        .unwrap();
        assert_eq!(
            o.to_string(),
            "a pod template labelled team=example, workload-type=batch in any namespace"
        );
    }

    #[test]
    fn unsatisfiable_selectors() {
        let s: LabelSelector = serde_json::from_value(json!({
            "matchLabels": {"t": "a"},
            "matchExpressions": [{"key": "t", "operator": "In", "values": ["b"]}]
        }))
        .unwrap();
        assert_eq!(unsatisfiable_key(&s).as_deref(), Some("t"));
        let ok: LabelSelector = serde_json::from_value(ml(&[("t", "a")])).unwrap();
        assert_eq!(unsatisfiable_key(&ok), None);
        // An unsatisfiable pool is disjoint from everything.
        assert_eq!(
            overlap(
                &pool(serde_json::to_value(&s).unwrap(), None),
                &pool(json!({}), None)
            ),
            None
        );
    }
}
