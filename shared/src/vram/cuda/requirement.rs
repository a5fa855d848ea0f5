//! One requirement of the NVIDIA container toolkit (the value of an `NVIDIA_REQUIRE_*`
//! variable), read as libnvidia-container's `nvidia-container-cli --require` reads it:
//! alternatives separated by spaces, each a list of conditions separated by commas, all of
//! which must hold. A condition is `<fact><operator><value>`: the fact `cuda` (the CUDA
//! version the driver supports), `driver` (the driver version), `arch` (the GPU's compute
//! capability) or `brand` (`tesla`, `geforce`, ...), case-insensitive; the operators `=`,
//! `!=`, `<`, `<=`, `>`, `>=` (`brand` takes `=` and `!=` only); versions are dotted whole
//! numbers, compared part by part.
//!
//! `NVIDIA_REQUIRE_CUDA=cuda>=12.4 brand=tesla,driver>=535,driver<536` holds on a node whose
//! driver supports CUDA 12.4, or on a Tesla GPU with a 535 driver (CUDA's forward
//! compatibility).
//!
//! A node is judged with what its labels say ([`Facts`]): the CUDA and driver versions.
//! The brand and compute capability are not read, so a condition on them is
//! [`Truth::Unknown`], as is a version the node does not report; a requirement rules a node
//! out only when it is [`Truth::No`] whatever the unknown facts are.

use crate::inventory::Version;
use std::cmp::Ordering;

/// The most conditions one requirement may hold (NVIDIA's CUDA images list about 50).
const MAX_CONDITIONS: usize = 1_000;

/// A parsed requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    alternatives: Vec<Vec<Condition>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Condition {
    fact: Fact,
    op: Op,
    value: Value,
    text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fact {
    Cuda,
    Driver,
    Arch,
    Brand,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Value {
    Version(Version),
    Brand(String),
}

/// What a node's labels say of the facts a requirement names.
#[derive(Debug, Clone, Copy, Default)]
pub struct Facts<'a> {
    /// The CUDA version the driver supports (GFD `nvidia.com/cuda.runtime.major/minor`).
    pub cuda: Option<&'a Version>,
    /// The driver version (GFD `nvidia.com/cuda.driver.major/minor/rev`).
    pub driver: Option<&'a Version>,
}

/// Three-valued truth: whether a requirement holds on a node, given what is known of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truth {
    Yes,
    No,
    Unknown,
}

const OPERATORS: [(&str, Op); 6] = [
    ("=", Op::Eq),
    ("!=", Op::Ne),
    ("<", Op::Lt),
    ("<=", Op::Le),
    (">", Op::Gt),
    (">=", Op::Ge),
];

impl Requirement {
    /// Reads `text`; `Err` says what is wrong, naming the condition. An empty value (or
    /// only spaces) requires nothing, as for the toolkit.
    pub fn parse(text: &str) -> Result<Requirement, String> {
        let mut alternatives = Vec::new();
        let mut count = 0usize;
        for alternative in text.split(' ').filter(|a| !a.is_empty()) {
            let mut conditions = Vec::new();
            for term in alternative.split(',').filter(|t| !t.is_empty()) {
                count += 1;
                if count > MAX_CONDITIONS {
                    return Err(format!("more than {MAX_CONDITIONS} conditions"));
                }
                conditions.push(Condition::parse(term)?);
            }
            if conditions.is_empty() {
                return Err(format!("'{alternative}' holds no condition"));
            }
            alternatives.push(conditions);
        }
        Ok(Requirement { alternatives })
    }

    /// Whether the requirement holds on a node with `facts`: some alternative whose
    /// conditions all hold.
    pub fn holds(&self, facts: Facts<'_>) -> Truth {
        if self.alternatives.is_empty() {
            return Truth::Yes;
        }
        let mut result = Truth::No;
        for alternative in &self.alternatives {
            match all(alternative.iter().map(|c| c.holds(facts))) {
                Truth::Yes => return Truth::Yes,
                Truth::Unknown => result = Truth::Unknown,
                Truth::No => {}
            }
        }
        result
    }

    /// The first alternative, as the toolkit names an unsatisfied requirement
    /// (`cuda>=12.4`).
    pub fn first(&self) -> String {
        self.alternatives
            .first()
            .map(|a| {
                a.iter()
                    .map(|c| c.text.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default()
    }

    /// The alternatives after the first.
    pub fn more(&self) -> usize {
        self.alternatives.len().saturating_sub(1)
    }

    /// The least CUDA version the first alternative asks for (`cuda>=12.4`, `cuda>12.4`),
    /// for messages.
    pub fn least_cuda(&self) -> Option<&Version> {
        self.alternatives.first()?.iter().find_map(|c| match c {
            Condition {
                fact: Fact::Cuda,
                op: Op::Ge | Op::Gt | Op::Eq,
                value: Value::Version(v),
                ..
            } => Some(v),
            _ => None,
        })
    }
}

/// All of `truths`: no if one is no, yes if all are yes, unknown otherwise.
fn all(truths: impl Iterator<Item = Truth>) -> Truth {
    let mut result = Truth::Yes;
    for t in truths {
        match t {
            Truth::No => return Truth::No,
            Truth::Unknown => result = Truth::Unknown,
            Truth::Yes => {}
        }
    }
    result
}

impl Condition {
    fn parse(term: &str) -> Result<Condition, String> {
        let bad = |why: &str| Err(format!("'{term}' {why}"));
        let is_op = |c: char| matches!(c, '<' | '>' | '=' | '!');
        let Some(start) = term.find(is_op) else {
            return bad("has no operator (=, !=, <, <=, >, >=)");
        };
        let name = &term[..start];
        let rest = &term[start..];
        let end = rest.find(|c: char| !is_op(c)).unwrap_or(rest.len());
        let (op_text, value) = rest.split_at(end);
        let Some(op) = OPERATORS
            .iter()
            .find(|(t, _)| *t == op_text)
            .map(|(_, o)| *o)
        else {
            return bad(&format!(
                "has the operator '{op_text}', not one of =, !=, <, <=, >, >="
            ));
        };
        if value.is_empty() {
            return bad("has no value after its operator");
        }
        let fact = match name.to_ascii_lowercase().as_str() {
            "cuda" => Fact::Cuda,
            "driver" => Fact::Driver,
            "arch" => Fact::Arch,
            "brand" => Fact::Brand,
            "" => return bad("names nothing before its operator"),
            _ => return bad(&format!("names '{name}', not cuda, driver, arch or brand")),
        };
        let value = if fact == Fact::Brand {
            if !matches!(op, Op::Eq | Op::Ne) {
                return bad("compares a brand with something else than = or !=");
            }
            Value::Brand(value.to_string())
        } else {
            let version = value
                .bytes()
                .all(|b| b.is_ascii_digit() || b == b'.')
                .then(|| Version::parse(value))
                .flatten();
            match version {
                Some(v) => Value::Version(v),
                None => {
                    return bad(&format!(
                        "compares with '{value}', not a version like 12.4 (dotted whole numbers)"
                    ));
                }
            }
        };
        Ok(Condition {
            fact,
            op,
            value,
            text: term.to_string(),
        })
    }

    fn holds(&self, facts: Facts<'_>) -> Truth {
        let known = match self.fact {
            Fact::Cuda => facts.cuda,
            Fact::Driver => facts.driver,
            Fact::Arch | Fact::Brand => None,
        };
        let (Some(have), Value::Version(wanted)) = (known, &self.value) else {
            return Truth::Unknown;
        };
        let order = have.cmp(wanted);
        let yes = match self.op {
            Op::Eq => order == Ordering::Equal,
            Op::Ne => order != Ordering::Equal,
            Op::Lt => order == Ordering::Less,
            Op::Le => order != Ordering::Greater,
            Op::Gt => order == Ordering::Greater,
            Op::Ge => order != Ordering::Less,
        };
        if yes { Truth::Yes } else { Truth::No }
    }
}

#[cfg(test)]
pub(in crate::vram) mod tests {
    use super::*;

    /// NVIDIA's `nvidia/cuda:12.4.1-base-ubuntu22.04`, as its config's `Env` sets it.
    pub(in crate::vram) const CUDA_12_4_1: &str = "cuda>=12.4 brand=tesla,driver>=470,driver<471 brand=unknown,driver>=470,driver<471 brand=nvidia,driver>=470,driver<471 brand=nvidiartx,driver>=470,driver<471 brand=geforce,driver>=470,driver<471 brand=geforcertx,driver>=470,driver<471 brand=quadro,driver>=470,driver<471 brand=quadrortx,driver>=470,driver<471 brand=titan,driver>=470,driver<471 brand=titanrtx,driver>=470,driver<471 brand=tesla,driver>=525,driver<526 brand=unknown,driver>=525,driver<526 brand=nvidia,driver>=525,driver<526 brand=nvidiartx,driver>=525,driver<526 brand=geforce,driver>=525,driver<526 brand=geforcertx,driver>=525,driver<526 brand=quadro,driver>=525,driver<526 brand=quadrortx,driver>=525,driver<526 brand=titan,driver>=525,driver<526 brand=titanrtx,driver>=525,driver<526 brand=tesla,driver>=535,driver<536 brand=unknown,driver>=535,driver<536 brand=nvidia,driver>=535,driver<536 brand=nvidiartx,driver>=535,driver<536 brand=geforce,driver>=535,driver<536 brand=geforcertx,driver>=535,driver<536 brand=quadro,driver>=535,driver<536 brand=quadrortx,driver>=535,driver<536 brand=titan,driver>=535,driver<536 brand=titanrtx,driver>=535,driver<536";

    fn v(t: &str) -> Version {
        Version::parse(t).unwrap()
    }

    fn on(req: &str, cuda: Option<&str>, driver: Option<&str>) -> Truth {
        let (c, d) = (cuda.map(v), driver.map(v));
        Requirement::parse(req).unwrap().holds(Facts {
            cuda: c.as_ref(),
            driver: d.as_ref(),
        })
    }

    #[test]
    fn a_cuda_image_runs_where_the_driver_supports_its_cuda_or_a_listed_branch() {
        // Driver 550 supports CUDA 12.4.
        assert_eq!(on(CUDA_12_4_1, Some("12.4"), Some("550.54.15")), Truth::Yes);
        assert_eq!(on(CUDA_12_4_1, Some("12.8"), Some("570.86.10")), Truth::Yes);
        // A 535 driver (CUDA 12.2) is a listed branch: yes for the brands listed, and the
        // brand is not read, so it may hold.
        assert_eq!(
            on(CUDA_12_4_1, Some("12.2"), Some("535.104.05")),
            Truth::Unknown
        );
        // A 545 driver (CUDA 12.3) is neither new enough nor a listed branch.
        assert_eq!(on(CUDA_12_4_1, Some("12.3"), Some("545.23.08")), Truth::No);
        // A node reporting no CUDA version cannot be ruled out.
        assert_eq!(on(CUDA_12_4_1, None, Some("545.23.08")), Truth::Unknown);
        assert_eq!(on("cuda>=12.4", None, None), Truth::Unknown);
        assert_eq!(on("cuda>=12.4", Some("12.2"), None), Truth::No);
    }

    #[test]
    fn operators_and_versions_compare_as_the_toolkit_does() {
        for (req, cuda, want) in [
            ("cuda=12.4", "12.4.0", Truth::Yes),
            ("cuda!=12.4", "12.4", Truth::No),
            ("cuda<12.4", "12.2", Truth::Yes),
            ("cuda<=12.4", "12.4", Truth::Yes),
            ("cuda>12.4", "12.4", Truth::No),
            ("cuda>=12.10", "12.9", Truth::No),
            ("CUDA>=12.4", "12.4", Truth::Yes),
            ("cuda>=12.4,cuda<13", "13.0", Truth::No),
            ("cuda>=13 cuda<12", "12.8", Truth::No),
            ("cuda>=13 arch>=9.0", "12.8", Truth::Unknown),
            ("cuda>=12 arch>=9.0", "12.8", Truth::Yes),
            ("cuda>=13,arch>=9.0", "12.8", Truth::No),
            ("", "12.8", Truth::Yes),
            ("   ", "12.8", Truth::Yes),
        ] {
            assert_eq!(on(req, Some(cuda), None), want, "{req} on {cuda}");
        }
    }

    #[test]
    fn messages_name_the_first_alternative() {
        let r = Requirement::parse(CUDA_12_4_1).unwrap();
        assert_eq!(r.first(), "cuda>=12.4");
        assert_eq!(r.more(), 30);
        assert_eq!(r.least_cuda(), Some(&v("12.4")));
        let r = Requirement::parse("brand=tesla,driver>=470 cuda>=11").unwrap();
        assert_eq!(r.first(), "brand=tesla,driver>=470");
        assert_eq!(r.least_cuda(), None);
    }

    #[test]
    fn malformed_values_say_what_is_wrong() {
        for (req, message) in [
            (
                "cuda>=twelve",
                "'cuda>=twelve' compares with 'twelve', not a version like 12.4 (dotted whole numbers)",
            ),
            (
                "cuda>=v12.4",
                "'cuda>=v12.4' compares with 'v12.4', not a version like 12.4 (dotted whole numbers)",
            ),
            (
                "cuda>=12..4",
                "'cuda>=12..4' compares with '12..4', not a version like 12.4 (dotted whole numbers)",
            ),
            (
                "cuda12.4",
                "'cuda12.4' has no operator (=, !=, <, <=, >, >=)",
            ),
            (
                "cuda=>12.4",
                "'cuda=>12.4' has the operator '=>', not one of =, !=, <, <=, >, >=",
            ),
            (
                "cuda==12.4",
                "'cuda==12.4' has the operator '==', not one of =, !=, <, <=, >, >=",
            ),
            ("cuda>=", "'cuda>=' has no value after its operator"),
            (">=12.4", "'>=12.4' names nothing before its operator"),
            (
                "rocm>=6",
                "'rocm>=6' names 'rocm', not cuda, driver, arch or brand",
            ),
            (
                "brand>=tesla",
                "'brand>=tesla' compares a brand with something else than = or !=",
            ),
            ("cuda>=12.4 ,", "',' holds no condition"),
            (
                "cuda>=$(MIN_CUDA)",
                "'cuda>=$(MIN_CUDA)' compares with '$(MIN_CUDA)', not a version like 12.4 (dotted whole numbers)",
            ),
            (
                "cuda>=99999999999",
                "'cuda>=99999999999' compares with '99999999999', not a version like 12.4 (dotted whole numbers)",
            ),
        ] {
            assert_eq!(Requirement::parse(req).unwrap_err(), message, "{req}");
        }
        let many = vec!["cuda>=1"; MAX_CONDITIONS + 1].join(",");
        assert_eq!(
            Requirement::parse(&many).unwrap_err(),
            "more than 1000 conditions"
        );
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any text gives a requirement or a sentence, never a panic; and a parsed one is
        /// judged on any node.
        #[test]
        fn any_text_is_read_or_refused(text in "[ -~]{0,80}", major in 0u64..20, minor in 0u64..10) {
            if let Ok(r) = Requirement::parse(&text) {
                let cuda = Version::parse(&format!("{major}.{minor}")).unwrap();
                let _ = r.holds(Facts { cuda: Some(&cuda), driver: None });
                let _ = (r.first(), r.least_cuda());
            }
        }

        /// A newer CUDA on the node never turns a yes into a no for `cuda>=`/`cuda>` terms.
        #[test]
        fn a_newer_cuda_keeps_a_least_cuda_met(least in 0u64..20, have in 0u64..20, more in 0u64..5) {
            let r = Requirement::parse(&format!("cuda>={least}")).unwrap();
            let a = Version::parse(&have.to_string()).unwrap();
            let b = Version::parse(&(have + more).to_string()).unwrap();
            if r.holds(Facts { cuda: Some(&a), driver: None }) == Truth::Yes {
                prop_assert_eq!(r.holds(Facts { cuda: Some(&b), driver: None }), Truth::Yes);
            }
        }
    }
}
