//! The objects a policy judges, as its README lists them (the table of its `## Objects it
//! judges` section), against the `rules` of a ClusterAdmissionPolicy or group: a kind the
//! README promises but the rules leave out is never sent to the policy.

use anyhow::{Result, bail};
use serde_json::Value;

/// The README section that lists the objects a policy judges.
pub const SECTION: &str = "## Objects it judges";

/// One row of the table: `v1` / `pods`, `apps/v1` / `deployments/scale`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Judged {
    /// The kind as the README names it.
    pub kind: String,
    /// `v1`, `apps/v1`, `serving.kserve.io/v1beta1`.
    pub api_version: String,
    /// The plural resource, with `/subresource` when there is one.
    pub resource: String,
}

impl Judged {
    /// The API group (`""` for the core group) and version.
    pub fn group_version(&self) -> (&str, &str) {
        match self.api_version.rsplit_once('/') {
            Some((group, version)) => (group, version),
            None => ("", self.api_version.as_str()),
        }
    }
}

/// The rows of the README's [`SECTION`] table (`| kind | apiVersion | resource |`,
/// backticks dropped). An error when the section or its rows are missing or malformed.
pub fn judged(readme: &str) -> Result<Vec<Judged>> {
    let Some(start) = readme.find(&format!("{SECTION}\n")) else {
        bail!("the README has no '{SECTION}' section");
    };
    let body = &readme[start + SECTION.len() + 1..];
    let body = body.find("\n## ").map_or(body, |end| &body[..end]);
    let mut rows = Vec::new();
    for line in body.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<String> = line
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().trim_matches('`').to_string())
            .collect();
        if cells.first().is_some_and(|c| c == "kind") || cells.iter().all(|c| c.starts_with("--")) {
            continue;
        }
        let [kind, api_version, resource] = cells.as_slice() else {
            bail!(
                "'{SECTION}': the row {line:?} does not have 3 cells (kind, apiVersion, resource)"
            );
        };
        if api_version.is_empty() || resource.is_empty() {
            bail!("'{SECTION}': the row {line:?} names no apiVersion or resource");
        }
        rows.push(Judged {
            kind: kind.clone(),
            api_version: api_version.clone(),
            resource: resource.clone(),
        });
    }
    if rows.is_empty() {
        bail!("'{SECTION}' lists no object");
    }
    Ok(rows)
}

fn names(rule: &Value, field: &str) -> Vec<String> {
    rule[field]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// True when a rule of `rules` (a `spec.rules` list) sends CREATE or UPDATE requests for
/// `judged` (wildcards as the API server reads them: `*`, `*/scale`, `*/*`).
pub fn covered(rules: &Value, judged: &Judged) -> bool {
    let (group, version) = judged.group_version();
    let (resource, sub) = match judged.resource.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (judged.resource.as_str(), None),
    };
    let matches_resource = |name: &str| match (name.split_once('/'), sub) {
        (None, None) => name == "*" || name == resource,
        (Some((r, s)), Some(sub)) => (r == "*" || r == resource) && (s == "*" || s == sub),
        _ => false,
    };
    rules.as_array().into_iter().flatten().any(|rule| {
        let has =
            |field: &str, want: &str| names(rule, field).iter().any(|n| n == "*" || n == want);
        let operations = names(rule, "operations");
        has("apiGroups", group)
            && has("apiVersions", version)
            && names(rule, "resources").iter().any(|n| matches_resource(n))
            && ["CREATE", "UPDATE", "*"]
                .iter()
                .any(|op| operations.iter().any(|o| o == op))
    })
}

/// The rows of `readme` that `rules` leave out, as `Kind (apiVersion resource)`.
pub fn missing(readme: &[Judged], rules: &Value) -> Vec<String> {
    readme
        .iter()
        .filter(|j| !covered(rules, j))
        .map(|j| format!("{} ({} {})", j.kind, j.api_version, j.resource))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const README: &str = "# p\n\n## Objects it judges\n\ntext\n\n| kind | apiVersion | resource |\n|---|---|---|\n| Pod | `v1` | `pods` |\n| Scale (Deployment) | `apps/v1` | `deployments/scale` |\n| RayCluster (`customKinds`) | `ray.io/v1` | `rayclusters` |\n\n## Settings\n\n| a | b | c |\n";

    fn rules() -> Value {
        json!([
            {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE", "UPDATE"]},
            {"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["*/scale"], "operations": ["UPDATE"]}
        ])
    }

    #[test]
    fn the_table_is_read_up_to_the_next_section() {
        let rows = judged(README).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[2].api_version, "ray.io/v1");
        assert_eq!(rows[2].group_version(), ("ray.io", "v1"));
        assert_eq!(rows[0].group_version(), ("", "v1"));
    }

    #[test]
    fn a_kind_the_rules_leave_out_is_named() {
        let rows = judged(README).unwrap();
        assert_eq!(
            missing(&rows, &rules()),
            vec!["RayCluster (`customKinds`) (ray.io/v1 rayclusters)"]
        );
    }

    #[test]
    fn rules_must_match_group_version_resource_and_operation() {
        let pod = &judged(README).unwrap()[0];
        for rules in [
            json!([{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"]}]),
            json!([{"apiGroups": [""], "apiVersions": ["v2"], "resources": ["pods"], "operations": ["CREATE"]}]),
            json!([{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/status"], "operations": ["CREATE"]}]),
            json!([{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["DELETE"]}]),
        ] {
            assert!(!covered(&rules, pod), "{rules}");
        }
        let wild = json!([{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "operations": ["*"]}]);
        assert!(covered(&wild, pod));
    }

    #[test]
    fn a_readme_without_the_section_or_rows_is_an_error() {
        assert!(judged("# p\n## Settings\n").is_err());
        assert!(judged("# p\n## Objects it judges\n\nnone\n").is_err());
        assert!(judged("## Objects it judges\n| Pod | v1 |\n").is_err());
    }
}
