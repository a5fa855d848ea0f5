//! Kubernetes label selectors: matching labels, and the query-string form the API
//! server (and Kubewarden's list host calls) take.

use crate::settings::{FieldError, validate_label_key, validate_label_value};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `In`, `NotIn`, `Exists`, `DoesNotExist`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    #[serde(default)]
    pub values: Vec<String>,
}

/// A label selector. The empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct LabelSelector {
    pub match_labels: BTreeMap<String, String>,
    pub match_expressions: Vec<Requirement>,
}

impl LabelSelector {
    /// A selector of `key=value` pairs.
    pub fn from_labels<I: IntoIterator<Item = (String, String)>>(labels: I) -> LabelSelector {
        LabelSelector {
            match_labels: labels.into_iter().collect(),
            match_expressions: Vec::new(),
        }
    }

    /// True when the selector has no requirement (it matches everything).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    /// True when `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| {
                let value = labels.get(&r.key);
                match r.operator {
                    Operator::In => value.is_some_and(|v| r.values.contains(v)),
                    Operator::NotIn => value.is_none_or(|v| !r.values.contains(v)),
                    Operator::Exists => value.is_some(),
                    Operator::DoesNotExist => value.is_none(),
                }
            })
    }

    /// The API server's query form: `a=b,c in (x,y),d notin (z),e,!f`.
    pub fn to_query(&self) -> String {
        let mut parts: Vec<String> = self
            .match_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        for r in &self.match_expressions {
            parts.push(match r.operator {
                Operator::In => format!("{} in ({})", r.key, r.values.join(",")),
                Operator::NotIn => format!("{} notin ({})", r.key, r.values.join(",")),
                Operator::Exists => r.key.clone(),
                Operator::DoesNotExist => format!("!{}", r.key),
            });
        }
        parts.join(",")
    }

    /// Keys and values must be valid labels; `In`/`NotIn` need values, `Exists` /
    /// `DoesNotExist` must have none. Errors name `field....`.
    pub fn validate(&self, field: &str) -> Result<(), FieldError> {
        for (k, v) in &self.match_labels {
            validate_label_key(&format!("{field}.matchLabels"), k)?;
            validate_label_value(&format!("{field}.matchLabels.{k}"), v)?;
        }
        for (i, r) in self.match_expressions.iter().enumerate() {
            let f = format!("{field}.matchExpressions[{i}]");
            validate_label_key(&format!("{f}.key"), &r.key)?;
            match r.operator {
                Operator::In | Operator::NotIn if r.values.is_empty() => {
                    return Err(FieldError::new(
                        format!("{f}.values"),
                        format!("{:?} needs at least one value", r.operator),
                    ));
                }
                Operator::Exists | Operator::DoesNotExist if !r.values.is_empty() => {
                    return Err(FieldError::new(
                        format!("{f}.values"),
                        format!("{:?} takes no values", r.operator),
                    ));
                }
                _ => {}
            }
            for (j, v) in r.values.iter().enumerate() {
                validate_label_value(&format!("{f}.values[{j}]"), v)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn selector(v: serde_json::Value) -> LabelSelector {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn matches_labels_and_expressions() {
        let s = selector(json!({
            "matchLabels": {"workload-type": "batch"},
            "matchExpressions": [
                {"key": "team", "operator": "In", "values": ["a", "b"]},
                {"key": "tier", "operator": "NotIn", "values": ["prod"]},
                {"key": "model", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist"}
            ]
        }));
        let fits = labels(&[("workload-type", "batch"), ("team", "a"), ("model", "m")]);
        assert!(s.matches(&fits));
        let with = |key: &str, value: &str| {
            let mut l = fits.clone();
            l.insert(key.into(), value.into());
            l
        };
        let without = |key: &str| {
            let mut l = fits.clone();
            l.remove(key);
            l
        };
        for (l, why) in [
            (with("team", "c"), "team not In (a, b)"),
            (with("tier", "prod"), "tier NotIn (prod)"),
            (without("model"), "model does not exist"),
            (with("legacy", ""), "legacy exists"),
            (without("workload-type"), "no workload-type=batch"),
        ] {
            assert!(!s.matches(&l), "{why}: {l:?}");
        }
        assert_eq!(
            s.to_query(),
            "workload-type=batch,team in (a,b),tier notin (prod),model,!legacy"
        );
    }

    #[test]
    fn empty_selector_matches_everything() {
        let s = LabelSelector::default();
        assert!(s.is_empty());
        assert!(s.matches(&labels(&[])));
        assert_eq!(s.to_query(), "");
        assert!(!LabelSelector::from_labels([("a".into(), "b".into())]).is_empty());
    }

    #[test]
    fn validation_names_the_field() {
        let cases = [
            (
                json!({"matchLabels": {"bad key": "x"}}),
                "pools[0].selector.matchLabels",
            ),
            (
                json!({"matchLabels": {"k": "bad value!"}}),
                "pools[0].selector.matchLabels.k",
            ),
            (
                json!({"matchExpressions": [{"key": "k", "operator": "In"}]}),
                "pools[0].selector.matchExpressions[0].values",
            ),
            (
                json!({"matchExpressions": [{"key": "k", "operator": "Exists", "values": ["x"]}]}),
                "pools[0].selector.matchExpressions[0].values",
            ),
        ];
        for (s, field) in cases {
            let err = selector(s)
                .validate("pools[0].selector")
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(field), "{err}");
        }
        assert!(
            serde_json::from_value::<LabelSelector>(
                json!({"matchExpressions": [{"key": "k", "operator": "Maybe"}]})
            )
            .is_err()
        );
        assert!(serde_json::from_value::<LabelSelector>(json!({"matchLabel": {}})).is_err());
    }
}
