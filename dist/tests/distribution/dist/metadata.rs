//! Every policy's metadata.yml is complete and agrees with its
//! Cargo.toml, with the host calls in its built module, and with what the module
//! does (a mutating policy patches some test_data request, the others never do).

use std::collections::BTreeSet;

use gpu_dist::checks::{metadata_problems, module_problems};
use gpu_dist::policies::policy_license;
use gpu_e2e::module_path;
use gpu_e2e::wasm_scanner::{capability_allowed, scan_host_capabilities};

use crate::common::{Failures, module, policies, policies_with_metadata, resource_of, root, runs};

#[test]
fn metadata_is_complete_and_matches_cargo() {
    let mut failures = Failures::default();
    for policy in policies() {
        failures.record(&policy.name, || {
            let package = policy.package()?;
            let license = policy_license(&root(), &package)?;
            let text = policy.metadata_text()?;
            let metadata = policy.metadata()?;
            Ok(metadata_problems(
                &policy.name,
                &package,
                license.as_deref(),
                &text,
                &metadata,
            ))
        });
    }
    failures.assert_none("metadata.yml");
}

#[test]
fn declared_host_capabilities_match_the_module() {
    let mut failures = Failures::default();
    for (policy, metadata) in policies_with_metadata(&mut failures) {
        failures.record(&policy.name, || {
            let path = module_path(&policy.package()?.name)?;
            let detected = scan_host_capabilities(&std::fs::read(&path)?)?;
            let protocol = module(&policy)
                .map_err(anyhow::Error::msg)?
                .protocol_version()?;
            let observed: BTreeSet<String> = runs(&policy)
                .map_err(anyhow::Error::msg)?
                .iter()
                .flat_map(|(_, e)| &e.host_calls)
                .filter(|c| c.namespace == "kubernetes")
                .map(|c| format!("kubernetes/{}", c.operation))
                .collect();
            let findings = module_problems(&metadata, &detected, &observed, &protocol);
            Ok(findings.problems)
        });
    }
    failures.assert_none("hostCapabilities against the built modules");
}

#[test]
fn mutating_matches_what_the_module_does() {
    let mut failures = Failures::default();
    for (policy, metadata) in policies_with_metadata(&mut failures) {
        let Some(runs) = failures.ok(&policy.name, runs(&policy)) else {
            continue;
        };
        let patched: Vec<&str> = runs
            .iter()
            .filter(|(_, e)| e.response.patch.is_some())
            .map(|(label, _)| label.as_str())
            .collect();
        if metadata.mutating && patched.is_empty() {
            failures.add(
                &policy.name,
                format!(
                    "mutating: true, but the module returned no patch on any of {} test_data evaluations (add a request it mutates, or set mutating: false)",
                    runs.len()
                ),
            );
        }
        if !metadata.mutating && !patched.is_empty() {
            failures.add(
                &policy.name,
                format!(
                    "mutating: false, but the module returned a patch (Kubewarden would reject these requests) on {} evaluation(s), e.g. {}",
                    patched.len(),
                    patched[..patched.len().min(3)].join("; ")
                ),
            );
        }
        if runs.is_empty() {
            failures.add(&policy.name, "no test_data request could be evaluated");
        }
    }
    failures.assert_none("mutating against module behaviour");
}

#[test]
fn host_calls_stay_within_the_declared_resources() {
    let mut failures = Failures::default();
    for (policy, metadata) in policies_with_metadata(&mut failures) {
        let declared = metadata.host_capabilities.clone().unwrap_or_default();
        let Some(runs) = failures.ok(&policy.name, runs(&policy)) else {
            continue;
        };
        let mut reported = std::collections::BTreeSet::new();
        for (label, evaluation) in runs.iter() {
            for call in &evaluation.host_calls {
                if call.namespace != "kubernetes" {
                    continue;
                }
                let capability = format!("kubernetes/{}", call.operation);
                if !capability_allowed(&declared, &capability)
                    && reported.insert(capability.clone())
                {
                    failures.add(
                        &policy.name,
                        format!("{label}: called {capability}, not in hostCapabilities"),
                    );
                }
                match resource_of(call) {
                    Some(r) if metadata.context_aware_resources.contains(&r) => {}
                    Some(r) => {
                        if reported.insert(format!("{}/{}", r.api_version, r.kind)) {
                            failures.add(
                                &policy.name,
                                format!(
                                    "{label}: read {}/{}, not in contextAwareResources (Kubewarden would refuse the call)",
                                    r.api_version, r.kind
                                ),
                            );
                        }
                    }
                    None => failures.add(
                        &policy.name,
                        format!(
                            "{label}: host call payload without api_version/kind: {}",
                            call.payload
                        ),
                    ),
                }
            }
        }
    }
    failures.assert_none("host calls against contextAwareResources");
}

/// The README's policy table says which policies mutate and which read the cluster.
#[test]
fn readme_table_matches_metadata() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let mut failures = Failures::default();
    for (policy, metadata) in policies_with_metadata(&mut failures) {
        let Some(row) = readme
            .lines()
            .find(|l| l.starts_with(&format!("| [{}](", policy.name)))
        else {
            failures.add(&policy.name, "no row in the README's policy table");
            continue;
        };
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (Some(mutating), Some(context)) = (cells.get(3), cells.get(4)) else {
            failures.add(&policy.name, format!("unexpected README row {row:?}"));
            continue;
        };
        if (*mutating == "yes") != metadata.mutating {
            failures.add(
                &policy.name,
                format!(
                    "README says mutating {mutating:?}, metadata.yml says mutating: {}",
                    metadata.mutating
                ),
            );
        }
        if context.starts_with("no") != metadata.context_aware_resources.is_empty() {
            failures.add(
                &policy.name,
                format!(
                    "README says context-aware {context:?}, metadata.yml lists {} contextAwareResources",
                    metadata.context_aware_resources.len()
                ),
            );
        }
    }
    failures.assert_none("README policy table");
}
