//! The committed artifacthub/ files are what `make artifacthub`
//! generates from the current metadata.yml, questions-ui.yml and README.md, and
//! carry every field `kwctl scaffold artifacthub` writes.

use gpu_dist::artifacthub::{self, PKG_FILE, REPO_FILE};
use gpu_e2e::metadata::ANNOTATION_VERSION;
use yaml_serde::Value;

use crate::common::{Failures, policies, policies_with_metadata, root};

#[test]
fn committed_artifacthub_files_are_current() {
    let dir = root().join("artifacthub");
    let files = artifacthub::generate(&policies(), &dir, &artifacthub::now_rfc3339().unwrap())
        .unwrap_or_else(|e| panic!("{e:#}"));
    let differences = artifacthub::differences(&dir, &files).unwrap();
    assert!(
        differences.is_empty(),
        "artifacthub/ is not current; run `make artifacthub` and commit:\n  {}",
        differences.join("\n  ")
    );
}

#[test]
fn artifacthub_packages_are_complete() {
    let dir = root().join("artifacthub");
    let mut failures = Failures::default();
    for (policy, metadata) in policies_with_metadata(&mut failures) {
        let version = metadata.annotation(ANNOTATION_VERSION).unwrap_or_default();
        let pkg_dir = dir.join(&policy.name).join(version);
        let Ok(text) = std::fs::read_to_string(pkg_dir.join(PKG_FILE)) else {
            failures.add(
                &policy.name,
                format!("{} is missing", pkg_dir.join(PKG_FILE).display()),
            );
            continue;
        };
        let pkg: Value = match yaml_serde::from_str(&text) {
            Ok(v) => v,
            Err(e) => {
                failures.add(&policy.name, format!("{PKG_FILE} is not YAML: {e}"));
                continue;
            }
        };
        for field in [
            "version",
            "name",
            "displayName",
            "createdAt",
            "description",
            "license",
            "homeURL",
            "containersImages",
            "keywords",
            "links",
            "install",
            "maintainers",
            "provider",
            "recommendations",
            "annotations",
        ] {
            if pkg.get(field).is_none_or(Value::is_null) {
                failures.add(&policy.name, format!("{PKG_FILE} has no {field}"));
            }
        }
        let mut annotations = vec![
            "kubewarden/mutation",
            "kubewarden/resources",
            "kubewarden/rules",
            "kubewarden/questions-ui",
        ];
        if !metadata.context_aware_resources.is_empty() {
            annotations.push("kubewarden/contextAwareResources");
        }
        for a in annotations {
            if pkg["annotations"].get(a).is_none() {
                failures.add(&policy.name, format!("{PKG_FILE} has no annotation {a}"));
            }
        }
        if policy.questions_path().is_none() {
            failures.add(&policy.name, "no questions-ui.yml (the Rancher UI form)");
        }
        if pkg["version"].as_str() != Some(version) {
            failures.add(
                &policy.name,
                format!("{PKG_FILE} version {:?}", pkg["version"]),
            );
        }
        let created = pkg["createdAt"].as_str().unwrap_or_default();
        let rfc3339 = created.len() >= 20
            && created.as_bytes()[4] == b'-'
            && created.as_bytes()[10] == b'T'
            && (created.ends_with('Z') || created[19..].contains(['+', '-']));
        if !rfc3339 {
            failures.add(
                &policy.name,
                format!("createdAt {created:?} is not RFC 3339"),
            );
        }
        match std::fs::read(pkg_dir.join("README.md")) {
            Ok(readme) if std::fs::read(policy.readme_path()).ok().as_ref() == Some(&readme) => {}
            _ => failures.add(
                &policy.name,
                "artifacthub README.md is not the policy's README.md",
            ),
        }
    }
    let repo = std::fs::read_to_string(dir.join(REPO_FILE)).unwrap_or_default();
    let repo: Value = yaml_serde::from_str(&repo).unwrap_or(Value::Null);
    if repo["owners"].as_sequence().is_none_or(|o| o.is_empty()) {
        failures.add("artifacthub", format!("{REPO_FILE} has no owners"));
    }
    failures.assert_none("Artifact Hub packages");
}
