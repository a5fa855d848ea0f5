//! The deploy manifests: `policies/<name>/examples/*.yaml` (ClusterAdmissionPolicy,
//! RBAC), and in `deploy/` the ClusterAdmissionPolicyGroup, the dedicated
//! PolicyServer with its ServiceAccount and RBAC, and the PrometheusRule. What is
//! checked here is what a cluster would otherwise find out at apply or admission
//! time, or in production: the module reference points at the policy's released
//! artifact, the webhook fails closed, starts in monitor mode, has its
//! `matchPolicy` and timeouts within Kubewarden's bounds, `mutating` and
//! `contextAwareResources` agree with the policy metadata, the group's expression
//! calls its members, every policy runs on the dedicated PolicyServer, which is
//! replicated and covered by a disruption budget, its ServiceAccount may read what
//! the policies list, objects defined in several files agree, and the alerts
//! query metrics policy-server exports. Settings are checked by running the
//! module's own `validate_settings` (in the tests, on the harness).

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
    for (i, doc) in yaml_serde::Deserializer::from_str(&text).enumerate() {
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

/// The `matchPolicy` values of an admission webhook.
pub const MATCH_POLICIES: &[&str] = &["Equivalent", "Exact"];

/// The bounds of `timeoutSeconds` and `timeoutEvalSeconds` in Kubewarden's
/// CRDs (kubewarden-controller `api/policies/v1/policy_types.go`:
/// `+kubebuilder:validation:Minimum=2`, `Maximum=30`).
pub const TIMEOUT_BOUNDS: std::ops::RangeInclusive<i64> = 2..=30;

/// `field` of `object`, a required number of seconds within [`TIMEOUT_BOUNDS`].
pub fn timeout_seconds(object: &Value, field: &str) -> Result<i64, String> {
    let value = &object[field];
    let Some(seconds) = value.as_i64() else {
        return Err(if value.is_null() {
            format!("{field} is required (a whole number of seconds, 2 to 30)")
        } else {
            format!("{field} must be a whole number of seconds, got {value}")
        });
    };
    if !TIMEOUT_BOUNDS.contains(&seconds) {
        return Err(format!(
            "{field} is {seconds}, outside Kubewarden's allowed range of {} to {} seconds",
            TIMEOUT_BOUNDS.start(),
            TIMEOUT_BOUNDS.end()
        ));
    }
    Ok(seconds)
}

/// A policy's evaluation deadline against its webhook timeout: both set, in
/// range, and the deadline below the timeout (else the API server gives up
/// before policy-server can answer, even with a refusal).
fn policy_timeout_problems(spec: &Value) -> Vec<String> {
    let mut out = Vec::new();
    match (
        timeout_seconds(spec, "timeoutEvalSeconds"),
        timeout_seconds(spec, "timeoutSeconds"),
    ) {
        (Ok(eval), Ok(webhook)) if eval >= webhook => out.push(format!(
            "spec.timeoutEvalSeconds ({eval}) must be below spec.timeoutSeconds ({webhook}): the webhook would time out before the policy's deadline"
        )),
        (Err(p), _) => out.push(format!("spec.{p}")),
        _ => {} // a bad timeoutSeconds is reported by webhook_problems
    }
    out
}

/// A group's member deadlines against its webhook timeout: a group has no
/// `timeoutEvalSeconds` of its own (not a field of Kubewarden's GroupSpec);
/// every member sets one, in range, each and their sum below the group's
/// `timeoutSeconds` (the controller refuses a sum above it).
fn group_timeout_problems(spec: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if !spec["timeoutEvalSeconds"].is_null() {
        out.push(
            "spec.timeoutEvalSeconds is not a field of a policy group: set timeoutEvalSeconds on each member of spec.policies".into(),
        );
    }
    let webhook = timeout_seconds(spec, "timeoutSeconds").ok();
    let mut sum = 0;
    for (name, member) in spec["policies"].as_object().into_iter().flatten() {
        match timeout_seconds(member, "timeoutEvalSeconds") {
            Ok(eval) => {
                sum += eval;
                if let Some(webhook) = webhook
                    && eval >= webhook
                {
                    out.push(format!(
                        "spec.policies.{name}.timeoutEvalSeconds ({eval}) must be below spec.timeoutSeconds ({webhook})"
                    ));
                }
            }
            Err(p) => out.push(format!("spec.policies.{name}.{p}")),
        }
    }
    if let Some(webhook) = webhook
        && sum >= webhook
    {
        out.push(format!(
            "the members' timeoutEvalSeconds add up to {sum}, which must be below spec.timeoutSeconds ({webhook}): the members run one after the other"
        ));
    }
    out
}

/// The webhook fields every policy and group manifest must set: fail closed,
/// monitor mode to start with, an explicit `matchPolicy`, a webhook timeout in
/// range, well-formed rules.
fn webhook_problems(spec: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if spec["failurePolicy"] != "Fail" {
        out.push(format!(
            "spec.failurePolicy must be Fail (fail closed), got {}",
            spec["failurePolicy"]
        ));
    }
    if spec["mode"] != "monitor" {
        out.push(format!(
            "spec.mode must be monitor: the shipped manifests start in monitor, and are switched to protect once the policy-server logs show only what is meant to be denied (got {})",
            spec["mode"]
        ));
    }
    match spec["matchPolicy"].as_str() {
        Some(p) if MATCH_POLICIES.contains(&p) => {}
        _ => out.push(format!(
            "spec.matchPolicy must be set to Equivalent or Exact (say which, and why, in a comment), got {}",
            spec["matchPolicy"]
        )),
    }
    if let Err(p) = timeout_seconds(spec, "timeoutSeconds") {
        out.push(format!("spec.{p}"));
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

/// A `contextAwareResources` list (absent: none).
pub fn context_aware_resources(value: &Value) -> Result<BTreeSet<ContextAwareResource>, String> {
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
    out.extend(policy_timeout_problems(spec));
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

/// The policies whose settings give the same `pools` block its one meaning (the pool
/// model of `gpu_rules::pools`): the capacity gate and the autoscaler policy.
pub const POOL_MODEL_POLICIES: [&str; 2] = ["gpu-capacity-gate-policy", "gpu-autoscaler-policy"];

/// The pools block of a policy's settings: `poolLabelKey` (its default when absent) and
/// `pools`.
pub fn pools_block(settings: &Value) -> Value {
    let key = match &settings["poolLabelKey"] {
        Value::Null => Value::from("gpu-admission/pool"),
        k => k.clone(),
    };
    serde_json::json!({"poolLabelKey": key, "pools": settings["pools"]})
}

/// A group whose members include the capacity gate and the autoscaler policy must give
/// both the same pools block (one meaning for both): each disagreement, naming the members.
pub fn shared_pools_problems(doc: &Value) -> Vec<String> {
    let members = match group_members(doc) {
        Ok(m) => m,
        Err(e) => return vec![format!("{e:#}")],
    };
    let of = |policy: &str| {
        members
            .iter()
            .filter(|m| {
                m.module.contains(&format!("/{policy}:"))
                    || m.module.contains(&format!("/{policy}@"))
            })
            .collect::<Vec<_>>()
    };
    let mut out = Vec::new();
    for gate in of(POOL_MODEL_POLICIES[0]) {
        for autoscaler in of(POOL_MODEL_POLICIES[1]) {
            let (a, b) = (
                pools_block(&gate.settings),
                pools_block(&autoscaler.settings),
            );
            if a != b {
                out.push(format!(
                    "spec.policies.{} and spec.policies.{} give different pools blocks ({a} and {b}); give both the same block (a YAML anchor: pools: &pools, then pools: *pools), so that a pool means the same thing to the capacity gate and the autoscaler policy",
                    gate.name, autoscaler.name
                ));
            }
        }
    }
    out
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
    out.extend(group_timeout_problems(spec));
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

/// A ServiceAccount, as a RoleBinding subject names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccountRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl std::fmt::Display for ServiceAccountRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What is missing for the policy-server running as `account` to read each
/// resource of `needs` with the verbs listed (an empty set: any of get, list,
/// watch): a Role or ClusterRole in `docs` with a rule on it, bound by a
/// RoleBinding or ClusterRoleBinding to that ServiceAccount. `resourceNames`
/// and the Role's namespace are not checked (the settings decide what is read
/// where).
pub fn rbac_problems(
    docs: &[Value],
    needs: &BTreeMap<ContextAwareResource, BTreeSet<String>>,
    account: &ServiceAccountRef,
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
                                s["kind"] == "ServiceAccount"
                                    && s["name"] == account.name.as_str()
                                    && s["namespace"] == account.namespace.as_str()
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
                "no Role or ClusterRole bound to ServiceAccount {account} (the PolicyServer's) grants {verbs} on {resource} (apiGroup {group:?}), which contextAwareResources {}/{} needs",
                r.api_version, r.kind
            ));
        }
    }
    out
}

/// The namespace of the kubewarden-controller, where it runs every
/// PolicyServer's Deployment (the Helm charts' default).
pub const KUBEWARDEN_NAMESPACE: &str = "kubewarden";

/// The pod label the controller puts on a PolicyServer's pods, valued with
/// the PolicyServer's name (`constants.PolicyServerLabelKey`).
pub const POLICY_SERVER_POD_LABEL: &str = "kubewarden/policy-server";

/// The ServiceAccount a PolicyServer's pods run as, if it names one.
pub fn policy_server_account(server: &Value) -> Option<ServiceAccountRef> {
    let name = server["spec"]["serviceAccountName"].as_str()?;
    (!name.is_empty()).then(|| ServiceAccountRef {
        namespace: KUBEWARDEN_NAMESPACE.into(),
        name: name.into(),
    })
}

/// How many of `replicas` pods a PodDisruptionBudget bound (an integer or a
/// percentage, rounded up as Kubernetes does) amounts to.
fn pods_of(bound: &Value, replicas: i64) -> Result<i64, String> {
    if let Some(n) = bound.as_i64() {
        return Ok(n);
    }
    let percent = bound
        .as_str()
        .and_then(|s| s.strip_suffix('%'))
        .and_then(|p| p.parse::<i64>().ok())
        .filter(|p| (0..=100).contains(p))
        .ok_or_else(|| format!("must be a number of pods or a percentage, got {bound}"))?;
    Ok((replicas * percent + 99) / 100)
}

/// What a disruption budget (`minAvailable` or `maxUnavailable` of `holder`)
/// allows for `replicas` pods: evicting at least one (else drains hang) and
/// never all of them (else a drain takes the webhook down).
fn disruption_problems(holder: &Value, replicas: i64, at: &str) -> Vec<String> {
    let min = &holder["minAvailable"];
    let max = &holder["maxUnavailable"];
    let available = match (min.is_null(), max.is_null()) {
        (false, false) => {
            return vec![format!(
                "{at}: set minAvailable or maxUnavailable, not both (Kubewarden and Kubernetes refuse both)"
            )];
        }
        (true, true) => return vec![format!("{at}: neither minAvailable nor maxUnavailable")],
        (false, true) => pods_of(min, replicas).map_err(|e| format!("{at}.minAvailable {e}")),
        (true, false) => pods_of(max, replicas)
            .map(|n| replicas - n)
            .map_err(|e| format!("{at}.maxUnavailable {e}")),
    };
    match available {
        Err(e) => vec![e],
        Ok(n) if n < 1 => vec![format!(
            "{at}: the budget lets every one of the {replicas} replicas be evicted at once (keep at least one)"
        )],
        Ok(n) if n >= replicas => vec![format!(
            "{at}: the budget keeps all {replicas} replicas, so no node running one can ever be drained"
        )],
        Ok(_) => Vec::new(),
    }
}

/// What is wrong with a PolicyServer for running fail-closed GPU policies:
/// a pinned image, at least two replicas, a disruption budget (its own
/// `minAvailable`/`maxUnavailable`, from which the controller makes a
/// PodDisruptionBudget, or a PodDisruptionBudget in `docs` selecting its
/// pods), a ServiceAccount defined in `docs`, and resource requests.
pub fn policy_server_problems(server: &Value, docs: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    let name = kind_and_name(server).1;
    let spec = &server["spec"];
    if server["apiVersion"] != "policies.kubewarden.io/v1" {
        out.push(format!(
            "apiVersion must be policies.kubewarden.io/v1, got {}",
            server["apiVersion"]
        ));
    }
    let image = spec["image"].as_str().unwrap_or_default();
    let tag = image
        .rsplit_once('/')
        .map_or(image, |(_, last)| last)
        .split_once(':')
        .map(|(_, tag)| tag);
    if image.is_empty() {
        out.push("spec.image is required".into());
    } else if !image.contains("@sha256:") && tag.is_none_or(|t| t == "latest") {
        out.push(format!(
            "spec.image {image:?} must be pinned to a release tag or digest, not latest"
        ));
    }
    let replicas = spec["replicas"].as_i64().unwrap_or(0);
    if replicas < 2 {
        out.push(format!(
            "spec.replicas is {}: at least 2, since every policy on it fails closed and one pod down would block GPU workloads",
            spec["replicas"]
        ));
    }
    if replicas < 2 {
        // Any budget over a single replica either blocks drains or allows an outage.
    } else if spec["minAvailable"].is_null() && spec["maxUnavailable"].is_null() {
        let pdbs: Vec<&Value> = docs
            .iter()
            .filter(|d| {
                d["kind"] == "PodDisruptionBudget"
                    && d["metadata"]["namespace"] == KUBEWARDEN_NAMESPACE
                    && d["spec"]["selector"]["matchLabels"][POLICY_SERVER_POD_LABEL] == name
            })
            .collect();
        match pdbs.as_slice() {
            [] => out.push(format!(
                "no disruption budget: set spec.minAvailable or spec.maxUnavailable (the controller makes the PodDisruptionBudget), or add a PodDisruptionBudget in {KUBEWARDEN_NAMESPACE} selecting {POLICY_SERVER_POD_LABEL}: {name}"
            )),
            [pdb] => out.extend(disruption_problems(
                &pdb["spec"],
                replicas,
                &format!("PodDisruptionBudget {}", kind_and_name(pdb).1),
            )),
            _ => out.push(format!(
                "{} PodDisruptionBudgets select the PolicyServer's pods: Kubernetes refuses evictions of pods with more than one",
                pdbs.len()
            )),
        }
    } else {
        out.extend(disruption_problems(spec, replicas, "spec"));
    }
    match policy_server_account(server) {
        None => out.push(
            "spec.serviceAccountName is required: the RBAC of the context-aware policies is bound to it (without it the pods run as the namespace's default ServiceAccount)".into(),
        ),
        Some(account) => {
            let defined = docs.iter().any(|d| {
                d["kind"] == "ServiceAccount"
                    && d["metadata"]["name"] == account.name.as_str()
                    && d["metadata"]["namespace"] == account.namespace.as_str()
            });
            if !defined {
                out.push(format!(
                    "spec.serviceAccountName names ServiceAccount {account}, which no manifest beside it defines"
                ));
            }
        }
    }
    for resource in ["cpu", "memory"] {
        if spec["requests"][resource].is_null() {
            out.push(format!(
                "spec.requests.{resource} is required (the capacity gate holds whole pools in memory and answers on the API server's critical path)"
            ));
        }
    }
    out
}

/// What is wrong with the `spec.policyServer` of a policy or group that must
/// run on the PolicyServer named `dedicated`.
pub fn policy_server_ref_problem(spec: &Value, dedicated: &str) -> Option<String> {
    match spec["policyServer"].as_str() {
        Some(name) if name == dedicated => None,
        None => Some(format!(
            "spec.policyServer is not set (Kubewarden then uses `default`): name the dedicated PolicyServer {dedicated:?}"
        )),
        Some(name) => Some(format!(
            "spec.policyServer is {name:?}, expected the dedicated PolicyServer {dedicated:?} of deploy/"
        )),
    }
}

/// What is wrong with the basic shape of a manifest document: `apiVersion`,
/// `kind` and `metadata.name` are required by every Kubernetes object.
pub fn object_problems(doc: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if !doc.is_object() {
        return vec![format!("a manifest must be a mapping, got {doc}")];
    }
    for (field, value) in [
        ("apiVersion", &doc["apiVersion"]),
        ("kind", &doc["kind"]),
        ("metadata.name", &doc["metadata"]["name"]),
    ] {
        if value.as_str().is_none_or(|s| s.is_empty()) {
            out.push(format!("{field} is required"));
        }
    }
    out
}

/// Objects defined in more than one file (same apiVersion, kind, namespace
/// and name) that differ: whichever file is applied last would win.
/// `files` is (file, its documents).
pub fn duplicate_object_problems(files: &[(String, Vec<Value>)]) -> Vec<String> {
    let mut seen: BTreeMap<(String, String, String, String), (&str, &Value)> = BTreeMap::new();
    let mut out = Vec::new();
    for (file, docs) in files {
        for doc in docs {
            let key = (
                doc["apiVersion"].as_str().unwrap_or_default().to_string(),
                doc["kind"].as_str().unwrap_or_default().to_string(),
                doc["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                doc["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
            match seen.get(&key) {
                Some((first, other)) if *other != doc => out.push(format!(
                    "{} {}{} is defined differently in {first} and {file}: the one applied last wins",
                    key.1,
                    if key.2.is_empty() {
                        String::new()
                    } else {
                        format!("{}/", key.2)
                    },
                    key.3
                )),
                Some(_) => {}
                None => {
                    seen.insert(key, (file, doc));
                }
            }
        }
    }
    out
}

/// The metrics policy-server exports, under their Prometheus names:
/// kubewarden-controller `crates/policy-server/src/metrics/policy_evaluations_total.rs`
/// (counter `kubewarden_policy_evaluations_total`) and
/// `crates/policy-server/src/metrics/policy_evaluations_latency.rs` (histogram
/// `kubewarden_policy_evaluation_latency_milliseconds`, exported as its
/// `_bucket`, `_sum` and `_count` series).
pub const POLICY_SERVER_METRICS: &[&str] = &[
    "kubewarden_policy_evaluations_total",
    "kubewarden_policy_evaluation_latency_milliseconds_bucket",
    "kubewarden_policy_evaluation_latency_milliseconds_sum",
    "kubewarden_policy_evaluation_latency_milliseconds_count",
];

/// The labels of those metrics (`crates/policy-server/src/metrics.rs`:
/// `PolicyEvaluation`, `RawPolicyEvaluation`, `PolicyInitializationError`),
/// plus the histogram's `le`.
pub const POLICY_SERVER_METRIC_LABELS: &[&str] = &[
    "policy_name",
    "policy_mode",
    "resource_kind",
    "resource_namespace",
    "resource_request_operation",
    "accepted",
    "mutated",
    "request_origin",
    "error_code",
    "initialization_error",
    "le",
];

/// The names a PromQL expression uses.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PromqlNames {
    /// Metric (series) names.
    pub metrics: BTreeSet<String>,
    /// Label names, in matchers and in `by`/`without`/`on`/`ignoring`/`group_*` lists.
    pub labels: BTreeSet<String>,
    /// Functions and aggregation operators.
    pub functions: BTreeSet<String>,
}

const PROMQL_AGGREGATIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];
const PROMQL_GROUPING: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];
const PROMQL_KEYWORDS: &[&str] = &["and", "or", "unless", "bool", "offset", "inf", "nan"];

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b':'
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b':'
}

fn skip_spaces(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// The end (one past the closing quote) of the string literal at `i`.
fn skip_string(b: &[u8], i: usize) -> Result<usize, String> {
    let quote = b[i];
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' if quote != b'`' => j += 2,
            c if c == quote => return Ok(j + 1),
            _ => j += 1,
        }
    }
    Err(format!("unterminated string starting at byte {i}"))
}

fn read_ident(b: &[u8], i: usize) -> usize {
    let mut j = i;
    while j < b.len() && is_ident(b[j]) {
        j += 1;
    }
    j
}

/// The label matchers `{name op "value", ...}` at `i` (a `{`): adds the label
/// names, returns the index after the `}`.
fn label_matchers(b: &[u8], i: usize, labels: &mut BTreeSet<String>) -> Result<usize, String> {
    let mut j = i + 1;
    loop {
        j = skip_spaces(b, j);
        match b.get(j) {
            None => return Err(format!("unclosed {{ at byte {i}")),
            Some(b'}') => return Ok(j + 1),
            Some(b',') => j += 1,
            Some(&c) if is_ident_start(c) => {
                let end = read_ident(b, j);
                labels.insert(String::from_utf8_lossy(&b[j..end]).into_owned());
                j = skip_spaces(b, end);
                let op_len = match (b.get(j), b.get(j + 1)) {
                    (Some(b'!' | b'='), Some(b'=' | b'~')) => 2,
                    (Some(b'='), _) => 1,
                    _ => {
                        return Err(format!(
                            "label matcher at byte {j}: expected =, !=, =~ or !~"
                        ));
                    }
                };
                j = skip_spaces(b, j + op_len);
                match b.get(j) {
                    Some(b'"' | b'\'' | b'`') => j = skip_string(b, j)?,
                    _ => {
                        return Err(format!(
                            "label matcher at byte {j}: expected a quoted value"
                        ));
                    }
                }
            }
            Some(_) => {
                return Err(format!(
                    "unexpected character in label matchers at byte {j}"
                ));
            }
        }
    }
}

/// The metric names, label names and functions of a PromQL expression, with
/// its brackets checked for balance. A scanner, not a parser: it tells names
/// apart by position (before `(`: a function; after `by`/`on`...: labels;
/// inside `{}`: labels; else a metric), which is all the alert checks need.
pub fn promql_names(expr: &str) -> Result<PromqlNames, String> {
    let b = expr.as_bytes();
    let mut out = PromqlNames::default();
    let mut open: Vec<(u8, usize)> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'"' | b'\'' | b'`' => i = skip_string(b, i)?,
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'{' => i = label_matchers(b, i, &mut out.labels)?,
            b'}' => return Err(format!("unmatched }} at byte {i}")),
            b'[' => {
                let end = b[i..]
                    .iter()
                    .position(|&c| c == b']')
                    .ok_or_else(|| format!("unclosed [ at byte {i}"))?;
                i += end + 1;
            }
            b']' => return Err(format!("unmatched ] at byte {i}")),
            b'(' => {
                open.push((c, i));
                i += 1;
            }
            b')' => {
                open.pop()
                    .ok_or_else(|| format!("unmatched ) at byte {i}"))?;
                i += 1;
            }
            c if c.is_ascii_digit()
                || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) =>
            {
                // Numbers and durations (0.99, 1e3, 5m, 1h30m).
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.' || b[i] == b'_')
                {
                    i += 1;
                }
            }
            c if is_ident_start(c) => {
                let end = read_ident(b, i);
                let word = String::from_utf8_lossy(&b[i..end]).into_owned();
                let next = skip_spaces(b, end);
                i = end;
                if PROMQL_GROUPING.contains(&word.as_str()) {
                    if b.get(next) == Some(&b'(') {
                        let close = b[next..]
                            .iter()
                            .position(|&c| c == b')')
                            .ok_or_else(|| format!("unclosed ( after {word}"))?;
                        for label in String::from_utf8_lossy(&b[next + 1..next + close]).split(',')
                        {
                            let label = label.trim();
                            if !label.is_empty() {
                                out.labels.insert(label.to_string());
                            }
                        }
                        i = next + close + 1;
                    }
                } else if PROMQL_KEYWORDS.contains(&word.to_ascii_lowercase().as_str()) {
                } else if PROMQL_AGGREGATIONS.contains(&word.as_str()) || b.get(next) == Some(&b'(')
                {
                    out.functions.insert(word);
                } else {
                    out.metrics.insert(word);
                }
            }
            _ => i += 1,
        }
    }
    if let Some((_, at)) = open.last() {
        return Err(format!("unclosed ( at byte {at}"));
    }
    Ok(out)
}

/// The numbers an expression compares with `>` or `>=` (whitespace removed).
fn thresholds(compact: &str) -> Vec<f64> {
    compact
        .match_indices('>')
        .filter_map(|(i, _)| {
            let rest = compact[i + 1..].trim_start_matches('=');
            let end = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(rest.len());
            rest[..end].parse().ok()
        })
        .collect()
}

/// What is wrong with a PrometheusRule alerting on policy-server: well-formed
/// groups and rules, every expression querying only [`POLICY_SERVER_METRICS`]
/// by [`POLICY_SERVER_METRIC_LABELS`], every alert with a `for`, a severity and
/// a summary, and among the alerts one on the p99 evaluation latency over
/// 500 ms and one on the rate of failed evaluations (`error_code`).
pub fn prometheus_rule_problems(doc: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if doc["apiVersion"] != "monitoring.coreos.com/v1" || doc["kind"] != "PrometheusRule" {
        out.push(format!(
            "expected apiVersion monitoring.coreos.com/v1, kind PrometheusRule, got {} {}",
            doc["apiVersion"], doc["kind"]
        ));
    }
    let Some(groups) = doc["spec"]["groups"].as_array().filter(|g| !g.is_empty()) else {
        out.push("spec.groups must be a non-empty list".into());
        return out;
    };
    let (mut latency, mut errors) = (false, false);
    for (g, group) in groups.iter().enumerate() {
        if group["name"].as_str().is_none_or(str::is_empty) {
            out.push(format!("spec.groups[{g}].name is required"));
        }
        let Some(rules) = group["rules"].as_array().filter(|r| !r.is_empty()) else {
            out.push(format!("spec.groups[{g}].rules must be a non-empty list"));
            continue;
        };
        for (r, rule) in rules.iter().enumerate() {
            let at = format!("spec.groups[{g}].rules[{r}]");
            let alert = rule["alert"].as_str();
            if alert.is_none() && rule["record"].as_str().is_none() {
                out.push(format!("{at}: needs alert or record"));
            }
            let Some(expr) = rule["expr"].as_str().filter(|e| !e.trim().is_empty()) else {
                out.push(format!("{at}.expr is required"));
                continue;
            };
            let names = match promql_names(expr) {
                Ok(n) => n,
                Err(e) => {
                    out.push(format!("{at}.expr: {e}"));
                    continue;
                }
            };
            if names.metrics.is_empty() {
                out.push(format!("{at}.expr queries no policy-server metric"));
            }
            for m in &names.metrics {
                if !POLICY_SERVER_METRICS.contains(&m.as_str()) {
                    out.push(format!(
                        "{at}.expr queries {m}, which policy-server does not export (it exports {})",
                        POLICY_SERVER_METRICS.join(", ")
                    ));
                }
            }
            for l in &names.labels {
                if !POLICY_SERVER_METRIC_LABELS.contains(&l.as_str()) {
                    out.push(format!(
                        "{at}.expr uses label {l}, which policy-server's metrics do not have (they have {})",
                        POLICY_SERVER_METRIC_LABELS.join(", ")
                    ));
                }
            }
            if alert.is_some() {
                for (field, value) in [
                    ("for", &rule["for"]),
                    ("labels.severity", &rule["labels"]["severity"]),
                    ("annotations.summary", &rule["annotations"]["summary"]),
                ] {
                    if value.as_str().is_none_or(str::is_empty) {
                        out.push(format!("{at}.{field} is required for an alert"));
                    }
                }
                let compact: String = expr.chars().filter(|c| !c.is_whitespace()).collect();
                latency |= compact.contains("histogram_quantile(0.99,")
                    && names
                        .metrics
                        .contains("kubewarden_policy_evaluation_latency_milliseconds_bucket")
                    && thresholds(&compact).contains(&500.0);
                errors |= names
                    .metrics
                    .contains("kubewarden_policy_evaluations_total")
                    && names.labels.contains("error_code");
            }
        }
    }
    if !latency {
        out.push("no alert on the p99 evaluation latency over 500 ms (histogram_quantile(0.99, ...kubewarden_policy_evaluation_latency_milliseconds_bucket...) > 500)".into());
    }
    if !errors {
        out.push(
            "no alert on the error rate (kubewarden_policy_evaluations_total by error_code)".into(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_gate_and_the_autoscaler_in_a_group_share_their_pools() {
        let group = |gate_pools: Value, autoscaler_pools: Value| {
            json!({"kind": "ClusterAdmissionPolicyGroup", "metadata": {"name": "g"}, "spec": {"policies": {
                "capacity": {"module": "registry://ghcr.io/o/policies/gpu-capacity-gate-policy:v0.1.0",
                             "settings": {"pools": gate_pools, "chargePods": "ownerless"}},
                "autoscaler": {"module": "registry://ghcr.io/o/policies/gpu-autoscaler-policy:v0.1.0",
                               "settings": {"poolLabelKey": "gpu-admission/pool", "pools": autoscaler_pools}},
                "labels": {"module": "registry://ghcr.io/o/policies/gpu-labels-policy:v0.1.0"}}}})
        };
        let a = json!([{"name": "h100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "h100"}},
                        "maxAllocatable": {"nvidia.com/gpu": 128}}]);
        assert_eq!(
            shared_pools_problems(&group(a.clone(), a.clone())),
            Vec::<String>::new()
        );
        let mut b = a.clone();
        b[0]["capacity"] = json!({"nvidia.com/gpu": 128});
        b[0].as_object_mut().unwrap().remove("maxAllocatable");
        let problems = shared_pools_problems(&group(a, b));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with(
                "spec.policies.capacity and spec.policies.autoscaler give different pools blocks"
            ),
            "{problems:?}"
        );
    }

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
               "failurePolicy": "Fail", "mutating": false, "matchPolicy": "Equivalent",
               "timeoutEvalSeconds": 2, "timeoutSeconds": 5,
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
                   "spec": {"mode": "monitor", "failurePolicy": "Fail", "message": "no",
                            "matchPolicy": "Exact", "timeoutSeconds": 10,
                            "expression": expression, "policies": members,
                            "rules": good_spec()["rules"]}})
        };
        let p = json!({"module": "registry://ghcr.io/o/policies/p:v1.0.0", "timeoutEvalSeconds": 3,
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
                json!({"p_member": p, "q": {"module": "ghcr.io/o/policies/q:v1.0.0", "timeoutEvalSeconds": 2},
                       "x": {"module": "ghcr.io/x/y:v1", "timeoutEvalSeconds": 2}}),
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
        let account = ServiceAccountRef {
            namespace: "kubewarden".into(),
            name: "policy-server".into(),
        };
        let docs = [role.clone(), binding.clone()];
        assert!(rbac_problems(&docs, &needs(&["list", "watch"], &["get"]), &account).is_empty());
        assert!(rbac_problems(&docs, &needs(&[], &[]), &account).is_empty());
        assert_eq!(
            rbac_problems(&docs, &needs(&["get"], &["get"]), &account).len(),
            1
        );
        assert_eq!(
            rbac_problems(std::slice::from_ref(&role), &needs(&[], &[]), &account).len(),
            2
        ); // unbound
        // Bound, but to another ServiceAccount than the PolicyServer's (name, then namespace).
        for other in [
            ServiceAccountRef {
                namespace: "kubewarden".into(),
                name: "gpu-admission-policy-server".into(),
            },
            ServiceAccountRef {
                namespace: "default".into(),
                name: "policy-server".into(),
            },
        ] {
            let problems = rbac_problems(&docs, &needs(&[], &[]), &other);
            assert_eq!(problems.len(), 2, "{problems:#?}");
            assert!(problems[0].contains(&other.to_string()), "{}", problems[0]);
        }
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
        assert!(rbac_problems(&[role, binding], &get, &account).is_empty());
        assert_eq!(plural("Ingress"), "ingresses");
        assert_eq!(plural("NetworkPolicy"), "networkpolicies");
        assert_eq!(plural("Gateway"), "gateways");
    }
    #[test]
    fn policy_mode_match_policy_and_timeouts() {
        let m = metadata(false, "[{apiVersion: v1, kind: Node}]");
        let problems_with = |field: &str, value: Value| {
            let mut spec = good_spec();
            spec[field] = value;
            policy_problems(&cap(spec), &m)
        };
        let one = |field: &str, value: Value, expected: &str| {
            let problems = problems_with(field, value.clone());
            assert_eq!(problems.len(), 1, "{field}: {value}: {problems:#?}");
            assert!(problems[0].contains(expected), "{}", problems[0]);
        };
        one("mode", json!("protect"), "spec.mode must be monitor");
        one("mode", Value::Null, "spec.mode must be monitor");
        one("matchPolicy", Value::Null, "spec.matchPolicy must be set");
        one(
            "matchPolicy",
            json!("Equal"),
            "spec.matchPolicy must be set",
        );
        one(
            "timeoutEvalSeconds",
            Value::Null,
            "timeoutEvalSeconds is required",
        );
        one("timeoutEvalSeconds", json!("2s"), "whole number of seconds");
        one(
            "timeoutEvalSeconds",
            json!(1),
            "outside Kubewarden's allowed range",
        );
        one(
            "timeoutEvalSeconds",
            json!(5),
            "must be below spec.timeoutSeconds (5)",
        );
        one(
            "timeoutEvalSeconds",
            json!(9),
            "must be below spec.timeoutSeconds (5)",
        );
        one("timeoutSeconds", Value::Null, "timeoutSeconds is required");
        one(
            "timeoutSeconds",
            json!(31),
            "outside Kubewarden's allowed range",
        );
        // Both at the bounds: 2 and 30 are allowed.
        let mut spec = good_spec();
        spec["timeoutEvalSeconds"] = json!(2);
        spec["timeoutSeconds"] = json!(30);
        assert_eq!(policy_problems(&cap(spec), &m), Vec::<String>::new());
    }

    #[test]
    fn group_timeouts() {
        let policies = BTreeMap::from([("p".to_string(), metadata(false, "[]"))]);
        let group = |timeout: Value, extra: Value, evals: [Value; 2]| {
            let mut spec = json!({"mode": "monitor", "failurePolicy": "Fail", "message": "no",
                "matchPolicy": "Equivalent", "timeoutSeconds": timeout,
                "expression": "a() && b()", "rules": good_spec()["rules"],
                "policies": {
                    "a": {"module": "registry://ghcr.io/o/policies/p:v1.0.0", "timeoutEvalSeconds": evals[0]},
                    "b": {"module": "registry://ghcr.io/o/policies/p:v1.0.0", "timeoutEvalSeconds": evals[1]}}});
            if let Some(extra) = extra.as_object() {
                for (k, v) in extra {
                    spec[k] = v.clone();
                }
            }
            group_problems(
                &json!({"kind": "ClusterAdmissionPolicyGroup", "metadata": {"name": "g"}, "spec": spec}),
                &policies,
            )
        };
        assert_eq!(
            group(json!(12), json!({}), [json!(2), json!(5)]),
            Vec::<String>::new()
        );
        let one = |problems: Vec<String>, expected: &str| {
            assert_eq!(problems.len(), 1, "{problems:#?}");
            assert!(problems[0].contains(expected), "{}", problems[0]);
        };
        one(
            group(json!(7), json!({}), [json!(2), json!(5)]),
            "add up to 7, which must be below spec.timeoutSeconds (7)",
        );
        one(
            group(
                json!(12),
                json!({"timeoutEvalSeconds": 5}),
                [json!(2), json!(5)],
            ),
            "not a field of a policy group",
        );
        one(
            group(json!(12), json!({}), [json!(2), Value::Null]),
            "spec.policies.b.timeoutEvalSeconds is required",
        );
        one(
            group(json!(12), json!({}), [json!(2), json!(40)]),
            "spec.policies.b.timeoutEvalSeconds is 40, outside",
        );
        let problems = group(json!(5), json!({}), [json!(2), json!(5)]);
        assert!(
            problems
                .iter()
                .any(|p| p.contains("spec.policies.b.timeoutEvalSeconds (5) must be below")),
            "{problems:#?}"
        );
        one(
            group(json!(1), json!({}), [json!(2), json!(2)]),
            "spec.timeoutSeconds is 1, outside",
        );
    }

    fn policy_server(spec: Value) -> Value {
        let mut server = json!({"apiVersion": "policies.kubewarden.io/v1", "kind": "PolicyServer",
            "metadata": {"name": "gpu"},
            "spec": {"image": "ghcr.io/kubewarden/policy-server:v1.36.0", "replicas": 3,
                     "minAvailable": 2, "serviceAccountName": "gpu-ps",
                     "requests": {"cpu": "500m", "memory": "512Mi"}}});
        for (k, v) in spec.as_object().unwrap() {
            if v.is_null() {
                server["spec"].as_object_mut().unwrap().remove(k);
            } else {
                server["spec"][k] = v.clone();
            }
        }
        server
    }

    #[test]
    fn policy_server_checks() {
        let account = json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "gpu-ps", "namespace": "kubewarden"}});
        let docs = [account.clone()];
        let good = policy_server(json!({}));
        assert_eq!(policy_server_problems(&good, &docs), Vec::<String>::new());
        assert_eq!(
            policy_server_account(&good),
            Some(ServiceAccountRef {
                namespace: "kubewarden".into(),
                name: "gpu-ps".into()
            })
        );
        let one = |spec: Value, docs: &[Value], expected: &str| {
            let problems = policy_server_problems(&policy_server(spec.clone()), docs);
            assert_eq!(problems.len(), 1, "{spec}: {problems:#?}");
            assert!(problems[0].contains(expected), "{}", problems[0]);
        };
        one(json!({"replicas": 1}), &docs, "spec.replicas is 1");
        one(json!({"replicas": null}), &docs, "spec.replicas is null");
        one(
            json!({"image": "ghcr.io/kubewarden/policy-server:latest"}),
            &docs,
            "must be pinned",
        );
        one(
            json!({"image": "ghcr.io/kubewarden/policy-server"}),
            &docs,
            "must be pinned",
        );
        one(json!({"image": null}), &docs, "spec.image is required");
        one(json!({"minAvailable": null}), &docs, "no disruption budget");
        one(json!({"maxUnavailable": 1}), &docs, "not both");
        one(
            json!({"minAvailable": 3}),
            &docs,
            "no node running one can ever be drained",
        );
        one(
            json!({"minAvailable": "100%"}),
            &docs,
            "no node running one can ever be drained",
        );
        one(
            json!({"minAvailable": 0}),
            &docs,
            "every one of the 3 replicas",
        );
        one(
            json!({"minAvailable": null, "maxUnavailable": "100%"}),
            &docs,
            "every one of the 3 replicas",
        );
        one(
            json!({"minAvailable": "half"}),
            &docs,
            "a number of pods or a percentage",
        );
        one(
            json!({"serviceAccountName": null}),
            &docs,
            "spec.serviceAccountName is required",
        );
        one(json!({}), &[], "which no manifest beside it defines");
        one(
            json!({"requests": {"cpu": "1"}}),
            &docs,
            "spec.requests.memory is required",
        );
        // Percentages round up as Kubernetes does: 50% of 3 is 2, leaving one to evict.
        assert!(
            policy_server_problems(&policy_server(json!({"minAvailable": "50%"})), &docs)
                .is_empty()
        );
        assert!(
            policy_server_problems(
                &policy_server(json!({"image": "ghcr.io/kubewarden/policy-server@sha256:ab"})),
                &docs
            )
            .is_empty()
        );
        // A PodDisruptionBudget of its own instead of minAvailable.
        let pdb = |min: Value, selected: &str| {
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                   "metadata": {"name": "gpu-pdb", "namespace": "kubewarden"},
                   "spec": {"minAvailable": min,
                            "selector": {"matchLabels": {"kubewarden/policy-server": selected}}}})
        };
        let no_min = json!({"minAvailable": null});
        assert!(
            policy_server_problems(
                &policy_server(no_min.clone()),
                &[account.clone(), pdb(json!(1), "gpu")]
            )
            .is_empty()
        );
        one(
            no_min.clone(),
            &[account.clone(), pdb(json!(1), "default")],
            "no disruption budget",
        );
        one(
            no_min.clone(),
            &[account.clone(), pdb(json!(3), "gpu")],
            "PodDisruptionBudget gpu-pdb: the budget keeps all 3",
        );
        one(
            no_min,
            &[account.clone(), pdb(json!(1), "gpu"), pdb(json!(1), "gpu")],
            "2 PodDisruptionBudgets",
        );
    }

    #[test]
    fn policy_server_reference() {
        let spec = |name: Value| json!({"policyServer": name});
        assert_eq!(policy_server_ref_problem(&spec(json!("gpu")), "gpu"), None);
        assert!(
            policy_server_ref_problem(&spec(json!("default")), "gpu")
                .unwrap()
                .contains("is \"default\", expected the dedicated PolicyServer \"gpu\"")
        );
        assert!(
            policy_server_ref_problem(&spec(Value::Null), "gpu")
                .unwrap()
                .contains("not set")
        );
    }

    #[test]
    fn objects_and_duplicates() {
        assert!(
            object_problems(
                &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}})
            )
            .is_empty()
        );
        assert_eq!(
            object_problems(&json!({"kind": "Namespace", "metadata": {}})).len(),
            2
        );
        assert_eq!(object_problems(&json!([1])).len(), 1);
        let role = |verbs: Value| {
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "r", "namespace": "gpu"},
                   "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]})
        };
        let same = [
            ("a.yaml".to_string(), vec![role(json!(["get"]))]),
            ("b.yaml".to_string(), vec![role(json!(["get"]))]),
        ];
        assert!(duplicate_object_problems(&same).is_empty());
        let different = [
            ("a.yaml".to_string(), vec![role(json!(["get"]))]),
            ("b.yaml".to_string(), vec![role(json!(["get", "list"]))]),
        ];
        let problems = duplicate_object_problems(&different);
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].contains("Role gpu/r is defined differently in a.yaml and b.yaml"),
            "{}",
            problems[0]
        );
        // Same name in another namespace is another object.
        let mut other = role(json!(["list"]));
        other["metadata"]["namespace"] = json!("other");
        assert!(
            duplicate_object_problems(&[
                ("a.yaml".to_string(), vec![role(json!(["get"]))]),
                ("b.yaml".to_string(), vec![other]),
            ])
            .is_empty()
        );
    }

    #[test]
    fn promql_scanner() {
        let names = promql_names(
            r#"histogram_quantile(0.99, sum by (policy_name, le) (rate(kubewarden_policy_evaluation_latency_milliseconds_bucket{policy_name=~"clusterwide-(gpu)-.+", request_origin="validate"}[5m] offset 1h30m))) > 500
               / on (policy_name) group_left sum without(accepted) (kubewarden_policy_evaluations_total{error_code!~'4..'}) and bool inf # a comment: not_a_metric"#,
        )
        .unwrap();
        assert_eq!(
            names.metrics,
            BTreeSet::from([
                "kubewarden_policy_evaluation_latency_milliseconds_bucket".to_string(),
                "kubewarden_policy_evaluations_total".into()
            ])
        );
        assert_eq!(
            names.labels,
            BTreeSet::from([
                "accepted".to_string(),
                "error_code".into(),
                "le".into(),
                "policy_name".into(),
                "request_origin".into()
            ])
        );
        assert_eq!(
            names.functions,
            BTreeSet::from([
                "histogram_quantile".to_string(),
                "rate".into(),
                "sum".into()
            ])
        );
        for (bad, expected) in [
            ("sum(rate(x[5m])", "unclosed ("),
            ("x{a=\"1\"", "unclosed {"),
            ("x{a 1}", "expected =, !=, =~ or !~"),
            ("x{a=b}", "expected a quoted value"),
            ("rate(x[5m)", "unclosed ["),
            ("x]", "unmatched ]"),
            ("x}", "unmatched }"),
            ("x)", "unmatched )"),
            ("x{a=\"1}", "unterminated string"),
        ] {
            let e = promql_names(bad).unwrap_err();
            assert!(e.contains(expected), "{bad}: {e}");
        }
    }

    fn prometheus_rule(rules: Value) -> Value {
        json!({"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
               "metadata": {"name": "r", "namespace": "kubewarden"},
               "spec": {"groups": [{"name": "g", "rules": rules}]}})
    }

    fn alert(name: &str, expr: &str) -> Value {
        json!({"alert": name, "expr": expr, "for": "5m", "labels": {"severity": "warning"},
               "annotations": {"summary": "s"}})
    }

    const LATENCY: &str = "histogram_quantile(0.99, sum by (policy_name, le) (rate(kubewarden_policy_evaluation_latency_milliseconds_bucket[5m]))) > 500";
    const ERRORS: &str = "sum(rate(kubewarden_policy_evaluations_total{error_code=~\"5..\"}[5m])) / sum(rate(kubewarden_policy_evaluations_total[5m])) > 0.01";

    #[test]
    fn prometheus_rules() {
        let good = prometheus_rule(json!([alert("L", LATENCY), alert("E", ERRORS)]));
        assert_eq!(prometheus_rule_problems(&good), Vec::<String>::new());
        let one = |rules: Value, expected: &str| {
            let problems = prometheus_rule_problems(&prometheus_rule(rules.clone()));
            assert_eq!(problems.len(), 1, "{rules}: {problems:#?}");
            assert!(problems[0].contains(expected), "{}", problems[0]);
        };
        // The two good alerts and a third one on `expr`.
        let with_third =
            |expr: &str| json!([alert("L", LATENCY), alert("E", ERRORS), alert("X", expr)]);
        // An invented metric name, and an invented label.
        one(
            with_third("rate(policy_server_request_duration_seconds_count[5m]) > 1"),
            "queries policy_server_request_duration_seconds_count, which policy-server does not export",
        );
        one(
            with_third("sum by (policy) (rate(kubewarden_policy_evaluations_total[5m])) > 1"),
            "uses label policy, which policy-server's metrics do not have",
        );
        // Missing the latency alert, or with another quantile or threshold.
        one(
            json!([alert("E", ERRORS)]),
            "no alert on the p99 evaluation latency",
        );
        for (from, to) in [("0.99", "0.9"), ("500", "5000")] {
            one(
                json!([alert("L", &LATENCY.replace(from, to)), alert("E", ERRORS)]),
                "no alert on the p99 evaluation latency",
            );
        }
        one(json!([alert("L", LATENCY)]), "no alert on the error rate");
        // A rule without for/severity, an expression that does not scan, no metric at all.
        let mut no_for = alert("E", ERRORS);
        no_for.as_object_mut().unwrap().remove("for");
        one(
            json!([alert("L", LATENCY), no_for]),
            "rules[1].for is required",
        );
        one(
            with_third("sum(rate(kubewarden_policy_evaluations_total[5m])"),
            "unclosed (",
        );
        one(
            with_third("vector(1) > 0"),
            "queries no policy-server metric",
        );
        let mut wrong = good.clone();
        wrong["apiVersion"] = json!("monitoring.coreos.com/v1alpha1");
        assert_eq!(prometheus_rule_problems(&wrong).len(), 1);
        let mut empty = good;
        empty["spec"]["groups"] = json!([]);
        assert!(prometheus_rule_problems(&empty)[0].contains("non-empty"));
    }
}
