//! Every object a policy's README says it judges (`## Objects it judges`) is sent to it:
//! in the `rules` of its example ClusterAdmissionPolicy, and of the recommended group in
//! `deploy/` when it is a member.

use gpu_dist::kinds::{judged, missing};
use gpu_dist::manifests::{group_members, policy_of_module, read_documents};

use crate::common::{Failures, all_metadata, policies, root};
use crate::dist::examples::GROUP_FILE;

#[test]
fn every_kind_a_readme_judges_is_in_the_rules() {
    let metadata = all_metadata();
    let group_docs = read_documents(&root().join(GROUP_FILE)).unwrap_or_else(|e| panic!("{e:#}"));
    let group = group_docs
        .iter()
        .find(|d| d["kind"] == "ClusterAdmissionPolicyGroup")
        .unwrap_or_else(|| panic!("{GROUP_FILE} has no ClusterAdmissionPolicyGroup"));
    let members = group_members(group).unwrap_or_else(|e| panic!("{e:#}"));
    let mut failures = Failures::default();
    let mut checked = 0;
    for policy in policies() {
        let readme = std::fs::read_to_string(policy.dir.join("README.md")).unwrap_or_default();
        let rows = match judged(&readme) {
            Ok(rows) => rows,
            Err(e) => {
                failures.add(&policy.name, format!("README.md: {e:#}"));
                continue;
            }
        };
        let mut examples = 0;
        for file in policy.example_manifests().unwrap_or_default() {
            for doc in read_documents(&file).unwrap_or_default() {
                if doc["kind"] != "ClusterAdmissionPolicy" {
                    continue;
                }
                let module = doc["spec"]["module"].as_str().unwrap_or_default();
                if policy_of_module(module, &metadata) != Some(policy.name.as_str()) {
                    continue;
                }
                examples += 1;
                for m in missing(&rows, &doc["spec"]["rules"]) {
                    failures.add(
                        &policy.name,
                        format!(
                            "{}: the rules leave out {m}, which README.md says the policy judges",
                            file.display()
                        ),
                    );
                }
            }
        }
        if examples == 0 {
            failures.add(
                &policy.name,
                "no example ClusterAdmissionPolicy of this policy",
            );
        }
        let member = members
            .iter()
            .any(|m| policy_of_module(&m.module, &metadata) == Some(policy.name.as_str()));
        if member {
            for m in missing(&rows, &group["spec"]["rules"]) {
                failures.add(
                    &policy.name,
                    format!("{GROUP_FILE}: the group's rules leave out {m}, which README.md says this member judges"),
                );
            }
        }
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} policies checked");
    failures.assert_none("objects the READMEs say are judged");
}
