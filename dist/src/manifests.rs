//! The deploy manifests: `policies/<name>/examples/*.yaml` (ClusterAdmissionPolicy,
//! RBAC) and the ClusterAdmissionPolicyGroup in `deploy/`. What is checked here
//! is what a cluster would otherwise find out at apply or admission time: the
//! module reference points at the policy's released artifact, the webhook fails
//! closed, the rollout mode is explicit, `mutating` and `contextAwareResources`
//! agree with the policy metadata, the group's expression calls its members, and
//! the policy-server may read what the policy lists. Settings are checked by
//! running the module's own `validate_settings` (in the tests, on the harness).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result, bail};
use gpu_e2e::metadata::{self as md, ContextAwareResource, Metadata, Rule};
use serde::Deserialize;
use serde_json::Value;

/// The kinds that carry a policy module.
pub const POLICY_KINDS: &[&str] = &["ClusterAdmissionPolicy", "AdmissionPolicy"];
/// The kinds that carry a group of policy modules.
pub const GROUP_KINDS: &[&str] = &["ClusterAdmissionPolicyGroup", "AdmissionPolicyGroup"];

/// The documents of a (multi-document) YAML file, as JSON values; empty
/// documents are skipped.
pub fn read_documents(path: &Path) -> Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut out = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(&text).enumerate() {
        let value = Value::deserialize(doc)
            .with_context(|| format!("{}: document {} is not valid YAML", path.display(), i + 1))?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

/// `kind` and `metadata.name` of a document.
pub fn kind_and_name(doc: &Value) -> (&str, &str) {
    (
        doc["kind"].as_str().unwrap_or_default(),
        doc["metadata"]["name"].as_str().unwrap_or_default(),
    )
}

/// A policy's release reference, as a manifest's `module` must name it:
/// `registry://<ociUrl>:v<version>`.
pub fn release_module(metadata: &Metadata) -> Option<String> {
    Some(format!(
        "registry://{}:v{}",
        metadata.annotation(md::ANNOTATION_OCI_URL)?,
        metadata.annotation(md::ANNOTATION_VERSION)?
    ))
}

/// `module` with the default `registry://` scheme made explicit.
pub fn normalize_module(module: &str) -> String {
    if module.contains("://") {
        module.to_string()
    } else {
        format!("registry://{module}")
    }
}

/// Which of `policies` (name -> metadata) a `module` reference is a release of
/// (same repository, any tag), if any.
pub fn policy_of_module<'a>(
    module: &str,
    policies: &'a BTreeMap<String, Metadata>,
) -> Option<&'a str> {
    let module = normalize_module(module);
    let image = module.strip_prefix("registry://")?.split('@').next()?;
    // The tag is a `:` in the last path segment (a `:` before is a port).
    let repository = match image.rsplit_once('/') {
        Some((head, last)) => match last.split_once(':') {
            Some((name, _tag)) => format!("{head}/{name}"),
            None => image.to_string(),
        },
        None => image.split(':').next()?.to_string(),
    };
    policies
        .iter()
        .find(|(_, m)| m.annotation(md::ANNOTATION_OCI_URL) == Some(repository.as_str()))
        .map(|(name, _)| name.as_str())
}

/// The webhook fields every policy and group manifest must set: fail closed,
/// an explicit rollout mode, well-formed rules.
fn webhook_problems(spec: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if spec["failurePolicy"] != "Fail" {
        out.push(format!(
            "spec.failurePolicy must be Fail (fail closed), got {}",
            spec["failurePolicy"]
        ));
    }
    match spec["mode"].as_str() {
        Some("monitor" | "protect") => {}
        _ => out.push(format!(
            "spec.mode must be set to monitor or protect (start in monitor, then protect), got {}",
            spec["mode"]
        )),
    }
    match serde_json::from_value::<Vec<Rule>>(spec["rules"].clone()) {
        Ok(rules) if rules.is_empty() => out.push("spec.rules is empty".into()),
        Ok(rules) => {
            for (i, rule) in rules.iter().enumerate() {
                for p in rule.problems() {
                    out.push(format!("spec.rules[{i}].{p}"));
                }
            }
        }
        Err(e) => out.push(format!("spec.rules: {e}")),
    }
    out
}

fn context_aware_resources(value: &Value) -> Result<BTreeSet<ContextAwareResource>, String> {
    if value.is_null() {
        return Ok(BTreeSet::new());
    }
    serde_json::from_value(value.clone()).map_err(|e| format!("contextAwareResources: {e}"))
}

fn settings_problem(settings: &Value) -> Option<String> {
    (!settings.is_null() && !settings.is_object())
        .then(|| format!("settings must be a mapping, got {settings}"))
}

/// What is wrong with a ClusterAdmissionPolicy / AdmissionPolicy of the policy
/// with `metadata`.
pub fn policy_problems(doc: &Value, metadata: &Metadata) -> Vec<String> {
    let spec = &doc["spec"];
    let mut out = webhook_problems(spec);
    let module = spec["module"].as_str().unwrap_or_default();
    match release_module(metadata) {
        Some(expected) if normalize_module(module) != expected => out.push(format!(
            "spec.module is {module:?}, expected the release {expected:?}"
        )),
        None => out.push("the policy metadata has no ociUrl or version".into()),
        _ => {}
    }
    let mutating = spec["mutating"].as_bool().unwrap_or(false);
    if mutating != metadata.mutating {
        out.push(format!(
            "spec.mutating is {mutating} but the policy metadata says mutating: {} ({})",
            metadata.mutating,
            if metadata.mutating {
                "its patches would be refused"
            } else {
                "it never patches"
            }
        ));
    }
    match context_aware_resources(&spec["contextAwareResources"]) {
        Ok(granted) => {
            if doc["kind"] == "AdmissionPolicy" && !granted.is_empty() {
                out.push("an AdmissionPolicy cannot have contextAwareResources".into());
            }
            for r in granted.difference(&metadata.context_aware_resources) {
                out.push(format!(
                    "spec.contextAwareResources grants {}/{} which the policy metadata does not list",
                    r.api_version, r.kind
                ));
            }
        }
        Err(e) => out.push(format!("spec.{e}")),
    }
    out.extend(settings_problem(&spec["settings"]).map(|p| format!("spec.{p}")));
    out
}

/// A member of a policy group: its name, module, settings and granted resources.
#[derive(Debug, Clone)]
pub struct GroupMember {
    /// The member's name (called as `name()` in the expression).
    pub name: String,
    /// Its module reference.
    pub module: String,
    /// Its settings (`{}` when absent).
    pub settings: Value,
    /// The resources granted to it.
    pub context_aware_resources: BTreeSet<ContextAwareResource>,
}

/// The members of a ClusterAdmissionPolicyGroup / AdmissionPolicyGroup.
pub fn group_members(doc: &Value) -> Result<Vec<GroupMember>> {
    let Some(policies) = doc["spec"]["policies"].as_object() else {
        bail!("spec.policies must be a mapping of member name to policy");
    };
    policies
        .iter()
        .map(|(name, member)| {
            Ok(GroupMember {
                name: name.clone(),
                module: member["module"]
                    .as_str()
                    .with_context(|| format!("spec.policies.{name}.module is missing"))?
                    .to_string(),
                settings: match &member["settings"] {
                    Value::Null => Value::Object(Default::default()),
                    s => s.clone(),
                },
                context_aware_resources: context_aware_resources(&member["contextAwareResources"])
                    .map_err(|e| anyhow::anyhow!("spec.policies.{name}.{e}"))?,
            })
        })
        .collect()
}

/// Identifiers called as functions (`name(`) in a group expression.
pub fn expression_calls(expression: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = expression.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_alphabetic() || bytes[i] == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let mut j = i;
            while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            if bytes.get(j) == Some(&b'(') {
                out.insert(expression[start..i].to_string());
            }
        } else {
            i += 1;
        }
    }
    out
}

/// What is wrong with a group of `policies` (name -> metadata).
pub fn group_problems(doc: &Value, policies: &BTreeMap<String, Metadata>) -> Vec<String> {
    let spec = &doc["spec"];
    let mut out = webhook_problems(spec);
    if spec["message"].as_str().is_none_or(|m| m.trim().is_empty()) {
        out.push("spec.message is required".into());
    }
    let members = match group_members(doc) {
        Ok(m) => m,
        Err(e) => {
            out.push(format!("{e:#}"));
            return out;
        }
    };
    if members.is_empty() {
        out.push("spec.policies is empty".into());
    }
    let calls = expression_calls(spec["expression"].as_str().unwrap_or_default());
    let names: BTreeSet<String> = members.iter().map(|m| m.name.clone()).collect();
    for name in names.difference(&calls) {
        out.push(format!("spec.expression never calls member {name}()"));
    }
    for name in calls.difference(&names) {
        out.push(format!(
            "spec.expression calls {name}() which is not a member"
        ));
    }
    for m in &members {
        let Some(policy) = policy_of_module(&m.module, policies) else {
            out.push(format!(
                "spec.policies.{}.module {:?} is not a release of any policy of this repository",
                m.name, m.module
            ));
            continue;
        };
        let metadata = &policies[policy];
        if let Some(expected) = release_module(metadata)
            && normalize_module(&m.module) != expected
        {
            out.push(format!(
                "spec.policies.{}.module is {:?}, expected the release {expected:?}",
                m.name, m.module
            ));
        }
        if metadata.mutating {
            out.push(format!(
                "spec.policies.{}: {policy} is a mutating policy; groups only validate",
                m.name
            ));
        }
        for r in m
            .context_aware_resources
            .difference(&metadata.context_aware_resources)
        {
            out.push(format!(
                "spec.policies.{}.contextAwareResources grants {}/{} which {policy} does not list",
                m.name, r.api_version, r.kind
            ));
        }
        if doc["kind"] == "AdmissionPolicyGroup" && !m.context_aware_resources.is_empty() {
            out.push(format!(
                "spec.policies.{}: an AdmissionPolicyGroup member cannot have contextAwareResources",
                m.name
            ));
        }
        out.extend(settings_problem(&m.settings).map(|p| format!("spec.policies.{}.{p}", m.name)));
    }
    out
}

/// The RBAC resource name of a kind (`Node` -> `nodes`, `Ingress` -> `ingresses`).
pub fn plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if lower.ends_with('s') || lower.ends_with('x') || lower.ends_with("ch") {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

fn covers(list: &Value, item: &str) -> bool {
    list.as_array()
        .is_some_and(|l| l.iter().any(|v| v == "*" || v == item))
}

/// The RBAC verbs a host call needs (`get_resource` -> `get`, the lists ->
/// `list` and `watch`, since policy-server serves them from a watch).
pub fn verbs_for_operation(operation: &str) -> &'static [&'static str] {
    match operation {
        "get_resource" => &["get"],
        "list_resources_all" | "list_resources_by_namespace" => &["list", "watch"],
        _ => &[],
    }
}

/// What is missing for the policy-server to read each resource of `needs`
/// with the verbs listed (an empty set: any of get, list, watch): a Role or
/// ClusterRole in `docs` with a rule on it, bound by a RoleBinding or
/// ClusterRoleBinding to a ServiceAccount. `resourceNames` and the Role's
/// namespace are not checked (the settings decide what is read where).
pub fn rbac_problems(
    docs: &[Value],
    needs: &BTreeMap<ContextAwareResource, BTreeSet<String>>,
) -> Vec<String> {
    let bound: Vec<&Value> = docs
        .iter()
        .filter(|role| {
            let (kind, name) = kind_and_name(role);
            (kind == "ClusterRole" || kind == "Role")
                && docs.iter().any(|b| {
                    (b["kind"] == "ClusterRoleBinding" || b["kind"] == "RoleBinding")
                        && b["roleRef"]["kind"] == kind
                        && b["roleRef"]["name"] == name
                        && b["subjects"].as_array().is_some_and(|s| {
                            s.iter().any(|s| {
                                s["kind"] == "ServiceAccount" && s["namespace"].is_string()
                            })
                        })
                })
        })
        .collect();
    let mut out = Vec::new();
    for (r, verbs) in needs {
        let group = r.api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let resource = plural(&r.kind);
        let granted = bound.iter().any(|role| {
            role["rules"].as_array().is_some_and(|rules| {
                rules.iter().any(|rule| {
                    covers(&rule["apiGroups"], group)
                        && covers(&rule["resources"], &resource)
                        && if verbs.is_empty() {
                            ["get", "list", "watch"]
                                .iter()
                                .any(|v| covers(&rule["verbs"], v))
                        } else {
                            verbs.iter().all(|v| covers(&rule["verbs"], v))
                        }
                })
            })
        });
        if !granted {
            let verbs = if verbs.is_empty() {
                "get, list or watch".to_string()
            } else {
                verbs.iter().cloned().collect::<Vec<_>>().join(", ")
            };
            out.push(format!(
                "no Role or ClusterRole bound to a ServiceAccount grants {verbs} on {resource} (apiGroup {group:?}), which contextAwareResources {}/{} needs (the default PolicyServer may read only Namespaces, Services and Ingresses)",
                r.api_version, r.kind
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn metadata(mutating: bool, resources: &str) -> Metadata {
        Metadata::from_yaml(&format!(
            "rules: []\nmutating: {mutating}\ncontextAwareResources: {resources}\nannotations:\n  io.kubewarden.policy.ociUrl: ghcr.io/o/policies/p\n  io.kubewarden.policy.version: 1.0.0\n"
        ))
        .unwrap()
    }

    fn cap(spec: Value) -> Value {
        json!({"apiVersion": "policies.kubewarden.io/v1", "kind": "ClusterAdmissionPolicy",
               "metadata": {"name": "p"}, "spec": spec})
    }

    fn good_spec() -> Value {
        json!({"module": "registry://ghcr.io/o/policies/p:v1.0.0", "mode": "monitor",
               "failurePolicy": "Fail", "mutating": false,
               "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"]}],
               "contextAwareResources": [{"apiVersion": "v1", "kind": "Node"}],
               "settings": {"a": 1}})
    }

    #[test]
    fn policy_manifest() {
        let m = metadata(
            false,
            "[{apiVersion: v1, kind: Node}, {apiVersion: v1, kind: Pod}]",
        );
        assert_eq!(policy_problems(&cap(good_spec()), &m), Vec::<String>::new());
        let mut spec = good_spec();
        spec["module"] = json!("ghcr.io/o/policies/p:v0.9.0");
        spec["failurePolicy"] = json!("Ignore");
        spec["mode"] = Value::Null;
        spec["mutating"] = json!(true);
        spec["contextAwareResources"] = json!([{"apiVersion": "v1", "kind": "Secret"}]);
        spec["settings"] = json!([1]);
        assert_eq!(policy_problems(&cap(spec), &m).len(), 6);
    }

    #[test]
    fn group_manifest() {
        let policies = BTreeMap::from([
            (
                "p".to_string(),
                metadata(false, "[{apiVersion: v1, kind: Node}]"),
            ),
            ("q".to_string(), metadata(true, "[]")),
        ]);
        let mut q = metadata(true, "[]");
        q.annotations
            .as_mut()
            .unwrap()
            .insert(md::ANNOTATION_OCI_URL.into(), "ghcr.io/o/policies/q".into());
        let policies = BTreeMap::from([
            ("p".to_string(), policies["p"].clone()),
            ("q".to_string(), q),
        ]);
        let group = |expression: &str, members: Value| {
            json!({"kind": "ClusterAdmissionPolicyGroup", "metadata": {"name": "g"},
                   "spec": {"mode": "protect", "failurePolicy": "Fail", "message": "no",
                            "expression": expression, "policies": members,
                            "rules": good_spec()["rules"]}})
        };
        let p = json!({"module": "registry://ghcr.io/o/policies/p:v1.0.0",
                       "contextAwareResources": [{"apiVersion": "v1", "kind": "Node"}]});
        assert_eq!(
            group_problems(
                &group("p_member() && true", json!({"p_member": p})),
                &policies
            ),
            Vec::<String>::new()
        );
        let problems = group_problems(
            &group(
                "p_member() || other()",
                json!({"p_member": p, "q": {"module": "ghcr.io/o/policies/q:v1.0.0"},
                       "x": {"module": "ghcr.io/x/y:v1"}}),
            ),
            &policies,
        );
        // q and x never called, other() unknown, q mutating, x unknown module
        assert_eq!(problems.len(), 5, "{problems:#?}");
        assert_eq!(
            expression_calls("a() && (b_1 () || !c())"),
            BTreeSet::from(["a".to_string(), "b_1".into(), "c".into()])
        );
    }

    #[test]
    fn module_references() {
        let policies = BTreeMap::from([("p".to_string(), metadata(false, "[]"))]);
        assert_eq!(
            policy_of_module("registry://ghcr.io/o/policies/p:v1", &policies),
            Some("p")
        );
        assert_eq!(
            policy_of_module("ghcr.io/o/policies/p@sha256:ab", &policies),
            Some("p")
        );
        assert_eq!(
            policy_of_module("ghcr.io/o/policies/p", &policies),
            Some("p")
        );
        assert_eq!(
            policy_of_module("ghcr.io/o/policies/pp:v1", &policies),
            None
        );
    }

    #[test]
    fn rbac() {
        let node = ContextAwareResource {
            api_version: "v1".into(),
            kind: "Node".into(),
        };
        let rs = ContextAwareResource {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
        };
        let needs = |node_verbs: &[&str], rs_verbs: &[&str]| {
            BTreeMap::from([
                (
                    node.clone(),
                    node_verbs.iter().map(|v| v.to_string()).collect(),
                ),
                (rs.clone(), rs_verbs.iter().map(|v| v.to_string()).collect()),
            ])
        };
        let role = json!({"kind": "ClusterRole", "metadata": {"name": "r"}, "rules": [
            {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["list", "watch"]},
            {"apiGroups": ["apps"], "resources": ["replicasets"], "verbs": ["get"]}]});
        let binding = json!({"kind": "ClusterRoleBinding", "roleRef": {"kind": "ClusterRole", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "policy-server", "namespace": "kubewarden"}]});
        let docs = [role.clone(), binding.clone()];
        assert!(rbac_problems(&docs, &needs(&["list", "watch"], &["get"])).is_empty());
        assert!(rbac_problems(&docs, &needs(&[], &[])).is_empty());
        assert_eq!(rbac_problems(&docs, &needs(&["get"], &["get"])).len(), 1);
        assert_eq!(
            rbac_problems(std::slice::from_ref(&role), &needs(&[], &[])).len(),
            2
        ); // unbound
        // A namespaced Role with resourceNames, bound by a RoleBinding, counts.
        let cm = ContextAwareResource {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        let role = json!({"kind": "Role", "metadata": {"name": "reader", "namespace": "gpu"}, "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["models"], "verbs": ["get"]}]});
        let binding = json!({"kind": "RoleBinding", "roleRef": {"kind": "Role", "name": "reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "policy-server", "namespace": "kubewarden"}]});
        let get = BTreeMap::from([(cm, BTreeSet::from(["get".to_string()]))]);
        assert!(rbac_problems(&[role, binding], &get).is_empty());
        assert_eq!(plural("Ingress"), "ingresses");
        assert_eq!(plural("NetworkPolicy"), "networkpolicies");
        assert_eq!(plural("Gateway"), "gateways");
    }
}
