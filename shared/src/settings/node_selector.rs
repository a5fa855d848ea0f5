//! A pool's `nodeSelector`: one type, a [`LabelSelector`] over node labels, in every policy.
//!
//! It is written as a label selector (`{matchLabels: {gpu-admission/pool: a100}}`, with
//! `matchExpressions` where the policy takes them). The map of node labels a Pod's own
//! `nodeSelector` is (`{gpu-admission/pool: a100}`) is accepted too, as a short spelling of
//! `matchLabels`: routing's settings were written that way before the policies shared one
//! type, and a pool's selector can now be copied between routing and the capacity gate.

use super::FieldError;
use crate::selector::{LabelSelector, Requirement};
use serde::Deserializer;
use serde::de::{MapAccess, Visitor};
use std::collections::BTreeMap;
use std::fmt;

/// Reads a `nodeSelector`: a label selector, or a map of node labels (its `matchLabels`).
/// A member other than `matchLabels` and `matchExpressions` is a node label, whose value
/// must be a string (so a misspelt `matchLabel: {...}` is an error at its own path).
pub fn read_node_selector<'de, D: Deserializer<'de>>(d: D) -> Result<LabelSelector, D::Error> {
    d.deserialize_map(SelectorVisitor)
}

struct SelectorVisitor;

impl<'de> Visitor<'de> for SelectorVisitor {
    type Value = LabelSelector;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a label selector (matchLabels, matchExpressions) or a map of node labels")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LabelSelector, A::Error> {
        let mut selector = LabelSelector::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "matchLabels" => {
                    let labels: BTreeMap<String, String> = map.next_value()?;
                    selector.match_labels.extend(labels);
                }
                "matchExpressions" => {
                    selector.match_expressions = map.next_value::<Vec<Requirement>>()?;
                }
                _ => {
                    let value: String = map.next_value()?;
                    selector.match_labels.entry(key).or_insert(value);
                }
            }
        }
        Ok(selector)
    }
}

/// For policies that write the selector into a Pod's `nodeSelector` (labels only): an
/// error when it has `matchExpressions`.
pub fn check_labels_only(
    field: &str,
    selector: &LabelSelector,
    instead: &str,
) -> Result<(), FieldError> {
    if selector.match_expressions.is_empty() {
        Ok(())
    } else {
        Err(FieldError::new(
            format!("{field}.matchExpressions"),
            format!("a Pod's nodeSelector takes labels only; {instead}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::{Value, json};

    #[derive(Deserialize)]
    struct Pool {
        #[serde(deserialize_with = "read_node_selector")]
        node_selector: LabelSelector,
    }

    fn read(v: Value) -> Result<LabelSelector, serde_json::Error> {
        serde_json::from_value::<Pool>(json!({ "node_selector": v })).map(|p| p.node_selector)
    }

    #[test]
    fn a_map_of_labels_is_match_labels() {
        let map = read(json!({"gpu-admission/pool": "a100"})).unwrap();
        let selector = read(json!({"matchLabels": {"gpu-admission/pool": "a100"}})).unwrap();
        assert_eq!(map, selector);
        assert!(read(json!({})).unwrap().is_empty());
        let with_expressions = read(json!({"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a"]}]}))
        .unwrap();
        assert_eq!(with_expressions.match_expressions.len(), 1);
        assert_eq!(
            check_labels_only("pools[0].nodeSelector", &with_expressions, "use x")
                .unwrap_err()
                .to_string(),
            "pools[0].nodeSelector.matchExpressions: a Pod's nodeSelector takes labels only; use x"
        );
        check_labels_only("pools[0].nodeSelector", &map, "use x").unwrap();
    }

    #[test]
    fn anything_else_is_read_as_a_label_selector() {
        let err = read(json!({"matchLabel": {"a": "b"}})).unwrap_err();
        assert!(
            err.to_string()
                .contains("invalid type: map, expected a string"),
            "{err}"
        );
        assert!(read(json!({"pool": 3})).is_err());
        assert!(read(json!(["a"])).is_err());
    }
}
