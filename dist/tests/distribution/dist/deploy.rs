//! The rest of `deploy/`: every manifest (there and in the policies'
//! `examples/`) parses as Kubernetes objects; the dedicated PolicyServer is
//! replicated, covered by a disruption budget and runs as a ServiceAccount
//! defined beside it; an object defined in several files is the same in each;
//! the PrometheusRule alerts on the metrics policy-server exports.

use gpu_dist::manifests::{
    duplicate_object_problems, kind_and_name, object_problems, policy_server_problems,
    prometheus_rule_problems,
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
