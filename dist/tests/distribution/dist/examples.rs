//! The policy manifests. Every `policies/*/examples/*.yaml`
//! ClusterAdmissionPolicy and every member of the ClusterAdmissionPolicyGroup in
//! `deploy/` names the policy's release, fails closed, starts in monitor mode,
//! sets `matchPolicy` and its timeouts within Kubewarden's bounds, runs on the
//! dedicated PolicyServer of `deploy/`, and has settings the module's own
//! `validate_settings` accepts, so the examples cannot rot; context-aware ones
//! are granted what they read to that PolicyServer's ServiceAccount.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use gpu_dist::manifests::{
    GROUP_KINDS, POLICY_KINDS, ServiceAccountRef, group_members, group_problems, kind_and_name,
    policy_of_module, policy_problems, policy_server_account, policy_server_ref_problem,
    rbac_problems, read_documents,
};
use gpu_dist::policies::{PolicyDir, yaml_files};
use gpu_e2e::metadata::ContextAwareResource;
use serde_json::{Value, json};

use crate::common::{
    Failures, all_metadata, dedicated_policy_server, deploy_documents, module, observed_verbs,
    policies, root,
};

/// The policy group combining the validating policies.
pub const GROUP_FILE: &str = "deploy/cluster-admission-policy-group.yaml";

fn settings_problem(policy: &PolicyDir, settings: &Value) -> Option<String> {
    let settings = if settings.is_null() {
        json!({})
    } else {
        settings.clone()
    };
    match module(policy) {
        Err(e) => Some(e),
        Ok(m) => match m.validate_settings(&settings) {
            Ok(v) if v.valid => None,
            Ok(v) => Some(format!(
                "the module rejects the settings: {}",
                v.message.unwrap_or_default()
            )),
            Err(e) => Some(format!("{e:#}")),
        },
    }
}

/// For each granted resource, the verbs the policy was seen to need on it.
fn needs(
    policy: &PolicyDir,
    granted: &BTreeSet<ContextAwareResource>,
) -> Result<BTreeMap<ContextAwareResource, BTreeSet<String>>, String> {
    let observed = observed_verbs(policy)?;
    Ok(granted
        .iter()
        .map(|r| (r.clone(), observed.get(r).cloned().unwrap_or_default()))
        .collect())
}

/// The name of the dedicated PolicyServer and the ServiceAccount it runs as.
fn dedicated() -> (String, ServiceAccountRef) {
    let server = dedicated_policy_server().unwrap_or_else(|e| panic!("{e}"));
    let account = policy_server_account(&server)
        .unwrap_or_else(|| panic!("the PolicyServer of deploy/ has no spec.serviceAccountName"));
    (kind_and_name(&server).1.to_string(), account)
}

fn policies_by_name() -> BTreeMap<String, PolicyDir> {
    policies()
        .into_iter()
        .map(|p| (p.name.clone(), p))
        .collect()
}

fn mode_documented(path: &Path) -> bool {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.contains("monitor") && text.contains("protect")
}

#[test]
fn policy_examples_are_deployable() {
    let metadata = all_metadata();
    let (server, account) = dedicated();
    let by_name = policies_by_name();
    let mut failures = Failures::default();
    for policy in by_name.values() {
        let files = match policy.example_manifests() {
            Ok(f) => f,
            Err(e) => {
                failures.add(&policy.name, format!("{e:#}"));
                continue;
            }
        };
        let mut docs = Vec::new();
        for file in &files {
            match read_documents(file) {
                Ok(d) => docs.extend(d.into_iter().map(|d| (file.clone(), d))),
                Err(e) => failures.add(&policy.name, format!("{e:#}")),
            }
        }
        // The RBAC may come with the example or with the PolicyServer in deploy/.
        let all_docs: Vec<Value> = docs
            .iter()
            .map(|(_, d)| d.clone())
            .chain(deploy_documents())
            .collect();
        let mut own = 0;
        for (file, doc) in &docs {
            let (kind, name) = kind_and_name(doc);
            if !POLICY_KINDS.contains(&kind) && !GROUP_KINDS.contains(&kind) {
                continue;
            }
            let rel = file
                .strip_prefix(root())
                .unwrap_or(file)
                .display()
                .to_string();
            let at = format!("{rel}: {kind} {name}");
            failures.extend(
                &policy.name,
                policy_server_ref_problem(&doc["spec"], &server).map(|p| format!("{at}: {p}")),
            );
            if GROUP_KINDS.contains(&kind) {
                failures.extend(
                    &policy.name,
                    group_problems(doc, &metadata)
                        .into_iter()
                        .map(|p| format!("{at}: {p}")),
                );
                continue;
            }
            let module_ref = doc["spec"]["module"].as_str().unwrap_or_default();
            let Some(target) = policy_of_module(module_ref, &metadata) else {
                failures.add(&policy.name, format!("{at}: module {module_ref:?} is not a release of a policy of this repository"));
                continue;
            };
            own += usize::from(target == policy.name);
            failures.extend(
                &policy.name,
                policy_problems(doc, &metadata[target])
                    .into_iter()
                    .map(|p| format!("{at}: {p}")),
            );
            if let Some(p) = settings_problem(&by_name[target], &doc["spec"]["settings"]) {
                failures.add(&policy.name, format!("{at}: spec.settings: {p}"));
            }
            if !mode_documented(file) {
                failures.add(&policy.name, format!("{rel}: document the rollout: start with mode: monitor, then switch to protect"));
            }
            let granted: BTreeSet<ContextAwareResource> =
                serde_json::from_value(doc["spec"]["contextAwareResources"].clone())
                    .unwrap_or_default();
            match needs(&by_name[target], &granted) {
                Ok(needs) => failures.extend(
                    &policy.name,
                    rbac_problems(&all_docs, &needs, &account)
                        .into_iter()
                        .map(|p| format!("{at}: {p}")),
                ),
                Err(e) => failures.add(&policy.name, e),
            }
        }
        if own == 0 {
            failures.add(
                &policy.name,
                "examples/ has no ClusterAdmissionPolicy for this policy",
            );
        }
    }
    failures.assert_none("example manifests");
}

#[test]
fn policy_group_is_deployable() {
    let metadata = all_metadata();
    let (server, account) = dedicated();
    let by_name = policies_by_name();
    let path = root().join(GROUP_FILE);
    let docs = read_documents(&path).unwrap_or_else(|e| panic!("{e:#}"));
    let groups: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "ClusterAdmissionPolicyGroup")
        .collect();
    assert_eq!(
        groups.len(),
        1,
        "{GROUP_FILE}: one ClusterAdmissionPolicyGroup"
    );
    let group = groups[0];
    let mut failures = Failures::default();
    failures.extend(GROUP_FILE, group_problems(group, &metadata));
    failures.extend(
        GROUP_FILE,
        policy_server_ref_problem(&group["spec"], &server),
    );
    if !mode_documented(&path) {
        failures.add(
            GROUP_FILE,
            "document the rollout: start with mode: monitor, then switch to protect",
        );
    }
    // RBAC may come with deploy/ (the PolicyServer's) or with the member policies' examples.
    let mut rbac_docs = deploy_documents();
    for p in by_name.values() {
        for file in yaml_files(&p.dir.join("examples")).unwrap_or_default() {
            rbac_docs.extend(read_documents(&file).unwrap_or_default());
        }
    }
    let members = group_members(group).unwrap_or_else(|e| panic!("{e:#}"));
    let mut covered = BTreeSet::new();
    for m in &members {
        let Some(policy) = policy_of_module(&m.module, &metadata) else {
            continue; // reported by group_problems
        };
        covered.insert(policy.to_string());
        if let Some(p) = settings_problem(&by_name[policy], &m.settings) {
            failures.add(
                GROUP_FILE,
                format!("spec.policies.{}.settings: {p}", m.name),
            );
        }
        match needs(&by_name[policy], &m.context_aware_resources) {
            Ok(needs) => failures.extend(
                GROUP_FILE,
                rbac_problems(&rbac_docs, &needs, &account)
                    .into_iter()
                    .map(|p| format!("spec.policies.{}: {p}", m.name)),
            ),
            Err(e) => failures.add(GROUP_FILE, e),
        }
    }
    let validating: BTreeSet<String> = metadata
        .iter()
        .filter(|(_, m)| !m.mutating)
        .map(|(n, _)| n.clone())
        .collect();
    for missing in validating.difference(&covered) {
        failures.add(
            GROUP_FILE,
            format!("the validating policy {missing} is not a member"),
        );
    }
    failures.assert_none("policy group");
}
