//! The rest of `deploy/`: every manifest (there and in the policies'
//! `examples/`) parses as Kubernetes objects; the dedicated PolicyServer is
//! replicated, covered by a disruption budget and runs as a ServiceAccount
//! defined beside it; an object defined in several files is the same in each;
//! the PrometheusRule alerts on the metrics policy-server exports; a group gives the
//! capacity gate and the autoscaler policy one pools block.

use gpu_dist::manifests::{
    duplicate_object_problems, kind_and_name, object_problems, policy_server_problems, pools_block,
    prometheus_rule_problems, read_documents, shared_pools_problems,
};
use serde_json::Value;

use crate::common::{
    Failures, dedicated_policy_server, deploy_documents, deploy_manifests, example_manifests,
};

#[test]
fn every_manifest_parses() {
    let mut failures = Failures::default();
    let mut files = deploy_manifests();
    assert!(
        files.iter().any(|(f, _)| f.ends_with("policy-server.yaml")),
        "deploy/ has no policy-server.yaml: {:?}",
        files.iter().map(|(f, _)| f).collect::<Vec<_>>()
    );
    files.extend(example_manifests());
    for (file, docs) in &files {
        match docs {
            Err(e) => failures.add(file, e),
            Ok(docs) if docs.is_empty() => failures.add(file, "no document"),
            Ok(docs) => {
                for (i, doc) in docs.iter().enumerate() {
                    failures.extend(
                        file,
                        object_problems(doc)
                            .into_iter()
                            .map(|p| format!("document {}: {p}", i + 1)),
                    );
                }
            }
        }
    }
    failures.assert_none("manifests");
}

#[test]
fn the_policy_server_is_fit_for_production() {
    let server = dedicated_policy_server().unwrap_or_else(|e| panic!("{e}"));
    let mut failures = Failures::default();
    let at = format!("deploy/: PolicyServer {}", kind_and_name(&server).1);
    failures.extend(&at, policy_server_problems(&server, &deploy_documents()));
    failures.assert_none("PolicyServer");
}

#[test]
fn objects_in_several_files_agree() {
    let files: Vec<(String, Vec<Value>)> = deploy_manifests()
        .into_iter()
        .chain(example_manifests())
        .filter_map(|(file, docs)| docs.ok().map(|d| (file, d)))
        .collect();
    let mut failures = Failures::default();
    failures.extend("deploy/ and examples/", duplicate_object_problems(&files));
    failures.assert_none("objects defined in several files");
}

#[test]
fn the_prometheus_rule_alerts_on_policy_server_metrics() {
    let mut failures = Failures::default();
    let mut rules = 0;
    for (file, docs) in deploy_manifests() {
        for doc in docs.into_iter().flatten() {
            if doc["kind"] == "PrometheusRule" {
                rules += 1;
                failures.extend(&file, prometheus_rule_problems(&doc));
            }
        }
    }
    assert!(rules > 0, "deploy/ has no PrometheusRule");
    failures.assert_none("PrometheusRule");
}

/// Every policy group of `deploy/` and `examples/` that has both the capacity gate and the
/// autoscaler policy gives both the same pools block; so do the two policies' example
/// manifests and their test_data settings of the scale-from-zero case (one block each).
#[test]
fn the_gate_and_the_autoscaler_share_one_pools_block() {
    let mut failures = Failures::default();
    let mut groups = 0;
    for (file, docs) in deploy_manifests().into_iter().chain(example_manifests()) {
        for doc in docs.into_iter().flatten() {
            if doc["kind"]
                .as_str()
                .is_some_and(|k| k.ends_with("PolicyGroup"))
            {
                groups += 1;
                failures.extend(&file, shared_pools_problems(&doc));
            }
        }
    }
    assert!(groups > 0, "no policy group in deploy/ or examples/");
    let root = crate::common::root();
    let read = |policy: &str| {
        let path = root.join(format!(
            "policies/{policy}/test_data/settings_scale_from_zero.yml"
        ));
        let docs = read_documents(&path).unwrap_or_else(|e| panic!("{e:#}"));
        pools_block(&docs[0])
    };
    let (gate, autoscaler) = (
        read("gpu-capacity-gate-policy"),
        read("gpu-autoscaler-policy"),
    );
    let example = |policy: &str| {
        let path = root.join(format!(
            "policies/{policy}/examples/cluster-admission-policy.yaml"
        ));
        let docs = read_documents(&path).unwrap_or_else(|e| panic!("{e:#}"));
        let policy = docs
            .iter()
            .find(|d| d["kind"] == "ClusterAdmissionPolicy")
            .unwrap_or_else(|| panic!("{} has no ClusterAdmissionPolicy", path.display()));
        pools_block(&policy["spec"]["settings"])
    };
    let (gate_example, autoscaler_example) = (
        example("gpu-capacity-gate-policy"),
        example("gpu-autoscaler-policy"),
    );
    if gate_example != autoscaler_example {
        failures.add(
            "examples/cluster-admission-policy.yaml",
            format!(
                "the gate's pools block {gate_example} differs from the autoscaler's {autoscaler_example}"
            ),
        );
    }
    if gate != autoscaler {
        failures.add(
            "test_data/settings_scale_from_zero.yml",
            format!("the gate's pools block {gate} differs from the autoscaler's {autoscaler}"),
        );
    }
    failures.assert_none("pools blocks");
}
