//! What a set of label requirements allows for one label key, as a value that can be
//! intersected: the algebra behind "are these two pools disjoint?" and "does this
//! workload's node affinity contradict its pool?".
//!
//! A key's constraint is whether the label may be absent plus a value set that is either
//! finite (`In`, `=`) or everything except a finite set (`NotIn`, `Exists`). Label values
//! are unbounded strings, so "everything except a finite set" is never empty.

use std::collections::BTreeSet;
use std::fmt;

/// The values a key may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Values {
    /// Exactly these values.
    Only(BTreeSet<String>),
    /// Any value except these.
    AllExcept(BTreeSet<String>),
}

/// What a conjunction of requirements allows for one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyConstraint {
    /// True when an object without the label satisfies the constraint.
    pub absent_ok: bool,
    pub values: Values,
}

impl KeyConstraint {
    /// No requirement: absent or any value.
    pub fn any() -> KeyConstraint {
        KeyConstraint {
            absent_ok: true,
            values: Values::AllExcept(BTreeSet::new()),
        }
    }

    /// `key = value` (also `In [value]`).
    pub fn equal(value: &str) -> KeyConstraint {
        KeyConstraint::one_of(std::iter::once(value))
    }

    /// `key In values`.
    pub fn one_of<'a>(values: impl IntoIterator<Item = &'a str>) -> KeyConstraint {
        KeyConstraint {
            absent_ok: false,
            values: Values::Only(values.into_iter().map(str::to_string).collect()),
        }
    }

    /// `key NotIn values` (an object without the label satisfies it).
    pub fn none_of<'a>(values: impl IntoIterator<Item = &'a str>) -> KeyConstraint {
        KeyConstraint {
            absent_ok: true,
            values: Values::AllExcept(values.into_iter().map(str::to_string).collect()),
        }
    }

    /// `key Exists`.
    pub fn exists() -> KeyConstraint {
        KeyConstraint {
            absent_ok: false,
            values: Values::AllExcept(BTreeSet::new()),
        }
    }

    /// `key DoesNotExist`.
    pub fn does_not_exist() -> KeyConstraint {
        KeyConstraint {
            absent_ok: true,
            values: Values::Only(BTreeSet::new()),
        }
    }

    /// The constraint of a requirement by its operator name (`In`, `NotIn`, `Exists`,
    /// `DoesNotExist`). Anything else (`Gt`, `Lt`, an unknown operator) is not modelled
    /// and reads as no constraint: it never proves a conflict or a disjointness.
    pub fn from_operator(operator: &str, values: &[String]) -> KeyConstraint {
        let values = values.iter().map(String::as_str);
        match operator {
            "In" => KeyConstraint::one_of(values),
            "NotIn" => KeyConstraint::none_of(values),
            "Exists" => KeyConstraint::exists(),
            "DoesNotExist" => KeyConstraint::does_not_exist(),
            _ => KeyConstraint::any(),
        }
    }

    /// Both constraints at once.
    pub fn intersect(&self, other: &KeyConstraint) -> KeyConstraint {
        use Values::{AllExcept, Only};
        let values = match (&self.values, &other.values) {
            (Only(a), Only(b)) => Only(a.intersection(b).cloned().collect()),
            (Only(a), AllExcept(ex)) | (AllExcept(ex), Only(a)) => {
                Only(a.difference(ex).cloned().collect())
            }
            (AllExcept(a), AllExcept(b)) => AllExcept(a.union(b).cloned().collect()),
        };
        KeyConstraint {
            absent_ok: self.absent_ok && other.absent_ok,
            values,
        }
    }

    /// True when nothing satisfies the constraint.
    pub fn is_empty(&self) -> bool {
        !self.absent_ok && matches!(&self.values, Values::Only(v) if v.is_empty())
    }

    /// True when the label state (`None`: absent) satisfies the constraint.
    pub fn admits(&self, value: Option<&str>) -> bool {
        match value {
            None => self.absent_ok,
            Some(v) => match &self.values {
                Values::Only(set) => set.contains(v),
                Values::AllExcept(set) => !set.contains(v),
            },
        }
    }

    /// One label state that satisfies the constraint: `Some(None)` for "absent",
    /// `Some(Some(v))` for a value, `None` when the constraint is empty. Values made up for
    /// "anything but ..." are `example`, `example-2`, ...
    pub fn example(&self) -> Option<Option<String>> {
        if self.absent_ok {
            return Some(None);
        }
        match &self.values {
            Values::Only(set) => set.iter().next().map(|v| Some(v.clone())),
            Values::AllExcept(excluded) => {
                let mut candidate = "example".to_string();
                let mut n = 1u32;
                while excluded.contains(&candidate) {
                    n = n.saturating_add(1);
                    candidate = format!("example-{n}");
                }
                Some(Some(candidate))
            }
        }
    }
}

impl fmt::Display for KeyConstraint {
    /// `one of a, b`, `any value but a`, `absent`, ... (the key is said by the caller).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(", ");
        match (&self.values, self.absent_ok) {
            (Values::Only(s), false) if s.is_empty() => f.write_str("nothing"),
            (Values::Only(s), true) if s.is_empty() => f.write_str("absent"),
            (Values::Only(s), false) if s.len() == 1 => write!(f, "{}", list(s)),
            (Values::Only(s), false) => write!(f, "one of {}", list(s)),
            (Values::Only(s), true) => write!(f, "absent or one of {}", list(s)),
            (Values::AllExcept(s), false) if s.is_empty() => f.write_str("any value"),
            (Values::AllExcept(s), true) if s.is_empty() => f.write_str("anything"),
            (Values::AllExcept(s), false) => write!(f, "any value but {}", list(s)),
            (Values::AllExcept(s), true) => write!(f, "absent or any value but {}", list(s)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn c(op: &str, values: &[&str]) -> KeyConstraint {
        let values: Vec<String> = values.iter().map(|s| s.to_string()).collect();
        KeyConstraint::from_operator(op, &values)
    }

    #[rstest]
    #[case::equal_values_overlap(c("In", &["a"]), c("In", &["a", "b"]), false)]
    #[case::different_values(c("In", &["a"]), c("In", &["b"]), true)]
    #[case::in_vs_notin_covering(c("In", &["a", "b"]), c("NotIn", &["a", "b", "c"]), true)]
    #[case::in_vs_notin_partial(c("In", &["a", "b"]), c("NotIn", &["a"]), false)]
    #[case::exists_vs_does_not_exist(c("Exists", &[]), c("DoesNotExist", &[]), true)]
    #[case::notin_vs_notin(c("NotIn", &["a"]), c("NotIn", &["b"]), false)]
    #[case::notin_vs_does_not_exist(c("NotIn", &["a"]), c("DoesNotExist", &[]), false)]
    #[case::in_vs_does_not_exist(c("In", &["a"]), c("DoesNotExist", &[]), true)]
    #[case::gt_is_not_modelled(c("Gt", &["3"]), c("In", &["1"]), false)]
    fn intersection_emptiness(
        #[case] a: KeyConstraint,
        #[case] b: KeyConstraint,
        #[case] empty: bool,
    ) {
        assert_eq!(a.intersect(&b).is_empty(), empty, "{a} & {b}");
        assert_eq!(b.intersect(&a).is_empty(), empty, "symmetric");
    }

    #[rstest]
    #[case::in_set(c("In", &["a", "b"]))]
    #[case::notin(c("NotIn", &["example", "example-2"]))]
    #[case::exists(c("Exists", &[]))]
    #[case::does_not_exist(c("DoesNotExist", &[]))]
    #[case::exists_minus(c("Exists", &[]).intersect(&c("NotIn", &["example"])))]
    fn examples_satisfy_the_constraint(#[case] k: KeyConstraint) {
        let example = k.example().expect("satisfiable");
        assert!(k.admits(example.as_deref()), "{k}: {example:?}");
    }

    #[test]
    fn empty_constraint_has_no_example() {
        let k = c("In", &["a"]).intersect(&c("In", &["b"]));
        assert!(k.is_empty());
        assert_eq!(k.example(), None);
        assert_eq!(k.to_string(), "nothing");
    }

    #[rstest]
    #[case::one(c("In", &["a"]), "a")]
    #[case::several(c("In", &["b", "a"]), "one of a, b")]
    #[case::notin(c("NotIn", &["a"]), "absent or any value but a")]
    #[case::exists(c("Exists", &[]), "any value")]
    #[case::absent(c("DoesNotExist", &[]), "absent")]
    #[case::any(KeyConstraint::any(), "anything")]
    fn describes_itself(#[case] k: KeyConstraint, #[case] text: &str) {
        assert_eq!(k.to_string(), text);
    }
}
