//! The team label: with `teamLabelKey` set, routing stamps [`TEAM_POD_LABEL_KEY`]
//! (`gpu-admission/team`) on every GPU pod template it routes, with the value of the label
//! `teamLabelKey` of the workload's Namespace. Users can set a pod label, not a namespace
//! label, so the stamped label is what the capacity gate counts a team's GPUs by.
//!
//! The Namespace is read with one `get_resource` (v1 Namespace, masked to
//! `metadata.labels`, from the host's cache), only for a workload with a GPU template that
//! routing changes or accepts as routed; without `teamLabelKey` nothing is read.
//!
//! What a template's label needs ([`TeamLabel`]):
//! - it says the namespace's team (or is absent, and the namespace has no team): nothing;
//! - it is absent: stamped;
//! - it was set by hand to another value (at CREATE, or changed by an UPDATE): denied,
//!   like a hand-set pool label;
//! - it is carried over from an earlier team of the namespace (an UPDATE that leaves it as
//!   it was, or an object a controller created from its own template, which was stamped
//!   when the controller's object was admitted): set to the namespace's team now, or
//!   removed when the namespace has none, with a warning.
//!
//! A namespace without the label (or with an empty value) belongs to no team: its
//! templates get no team label, and one set by hand is denied.

pub use crate::cluster::namespace_request;
use crate::cluster::{Cluster, FailureClass, HOST_ERROR_MAX, namespace_labels};
use std::fmt;

pub use crate::settings::TEAM_POD_LABEL_KEY;

/// The team a namespace belongs to, from its label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceTeam {
    pub namespace: String,
    /// The namespace label that names the team (`teamLabelKey`).
    pub label_key: String,
    /// `None`: the namespace has no such label, or an empty one.
    pub team: Option<String>,
}

/// Reads the team of `namespace` through `cluster`. A request without a namespace makes no
/// call: it is in no team. `Err` is the denial: the namespace cannot be read.
pub fn read(
    cluster: &dyn Cluster,
    namespace: &str,
    label_key: &str,
) -> Result<NamespaceTeam, String> {
    let mut out = NamespaceTeam {
        namespace: namespace.to_string(),
        label_key: label_key.to_string(),
        team: None,
    };
    if namespace.is_empty() {
        return Ok(out);
    }
    let labels = namespace_labels(cluster, namespace).map_err(|failure| match failure.class() {
        FailureClass::Unreadable => format!(
            "namespace {namespace}: the host's answer is not a readable Namespace ({}), so the team label {TEAM_POD_LABEL_KEY} of this workload cannot be set",
            failure.raw(HOST_ERROR_MAX)
        ),
        _ => format!(
            "namespace {namespace} cannot be read, so the team label {TEAM_POD_LABEL_KEY} of this workload cannot be set from the namespace's label {label_key}: {} (the host's error: {})",
            failure.explanation(),
            failure.raw(HOST_ERROR_MAX)
        ),
    })?;
    out.team = labels.get(label_key).filter(|v| !v.is_empty()).cloned();
    Ok(out)
}

/// What the team label of one pod template needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TeamLabel {
    /// Right as it is.
    Right,
    /// Missing: set to the namespace's team.
    Stamp(String),
    /// Carried over from an earlier team of the namespace: set to its team now (`to`), or
    /// removed when it has none.
    Restamp { from: String, to: Option<String> },
    /// Set by hand to something other than the namespace's team.
    Forged(String),
}

/// What the template label `have` needs in `team`'s namespace. `carried_over`: the label
/// is as the object had it before this UPDATE, or copied from a controller's template.
pub fn judge(have: Option<&str>, team: &NamespaceTeam, carried_over: bool) -> TeamLabel {
    match (have, team.team.as_deref()) {
        (Some(h), Some(t)) if h == t => TeamLabel::Right,
        (None, None) => TeamLabel::Right,
        (None, Some(t)) => TeamLabel::Stamp(t.to_string()),
        (Some(h), to) if carried_over => TeamLabel::Restamp {
            from: h.to_string(),
            to: to.map(str::to_string),
        },
        (Some(h), _) => TeamLabel::Forged(h.to_string()),
    }
}

impl TeamLabel {
    /// The value to write: `Some(Some(v))` set, `Some(None)` remove, `None` leave.
    pub fn write(&self) -> Option<Option<&str>> {
        match self {
            TeamLabel::Stamp(v) => Some(Some(v.as_str())),
            TeamLabel::Restamp { to, .. } => Some(to.as_deref()),
            TeamLabel::Right | TeamLabel::Forged(_) => None,
        }
    }
}

/// A team label judged, with where it is, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    /// `spec.template.metadata.labels.gpu-admission/team`.
    pub field: String,
    pub team: NamespaceTeam,
    pub label: TeamLabel,
}

impl fmt::Display for Judged {
    /// The denial of a forged label, the warning of a restamped one (empty otherwise).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let NamespaceTeam {
            namespace,
            label_key,
            team,
        } = &self.team;
        let field = &self.field;
        match (&self.label, team) {
            (TeamLabel::Forged(value), Some(team)) => write!(
                f,
                "{field}: '{value}' is not the team of namespace {namespace}, which is {team} (its label {label_key}). The team is taken from the namespace, not set by hand: remove the label (the policy sets it to {team})"
            ),
            (TeamLabel::Forged(value), None) => write!(
                f,
                "{field}: '{value}' names a team, but namespace {namespace} has no label {label_key}, so its workloads belong to no team. The team is taken from the namespace, not set by hand: remove the label (or ask the cluster admins to label the namespace {label_key}=<team>)"
            ),
            (TeamLabel::Restamp { from, to: Some(to) }, _) => write!(
                f,
                "{field}: set to {to}, the team of namespace {namespace} (its label {label_key}); it was {from}"
            ),
            (TeamLabel::Restamp { from, to: None }, _) => write!(
                f,
                "{field}: removed, as namespace {namespace} has no label {label_key} and so belongs to no team; it was {from}"
            ),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
