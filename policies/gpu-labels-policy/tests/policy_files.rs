//! The files shipped with the policy agree with its code: metadata, settings files, the
//! example ClusterAdmissionPolicy, the README and the Rancher questions; and the waPC glue
//! answers natively.

use gpu_rules::admission::ValidateSettings;
use gpu_rules::labels::Settings;
use gpu_rules::workload::presets;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn yaml(path: impl AsRef<Path>) -> Value {
    let text = std::fs::read_to_string(dir().join(path.as_ref())).unwrap();
    yaml_serde::from_str(&text).unwrap()
}

fn settings_from(v: &Value) -> Result<Settings, String> {
    let s: Settings = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    s.validate().map_err(|e| e.to_string())?;
    Ok(s)
}

#[test]
fn metadata_matches_the_crate_and_covers_every_builtin_kind() {
    let m = yaml("metadata.yml");
    assert_eq!(
        m["annotations"]["io.kubewarden.policy.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(
        m["annotations"]["io.kubewarden.policy.title"],
        env!("CARGO_PKG_NAME")
    );
    assert!(
        m["annotations"]["io.kubewarden.policy.ociUrl"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/{}", env!("CARGO_PKG_NAME")))
    );
    assert_eq!(m["mutating"], false);
    assert_eq!(m["backgroundAudit"], true);
    // DRA: the claims and claim templates a pod template names, read to count their GPUs;
    // the Namespace, read by gpuAccessLabel and gpuSharing's namespaceSelector (off by default).
    assert_eq!(
        m["contextAwareResources"],
        json!([
            {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate"},
            {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim"},
            {"apiVersion": "v1", "kind": "Namespace"}
        ])
    );
    let mut covered = Vec::new();
    for rule in m["rules"].as_array().unwrap() {
        assert_eq!(rule["operations"], json!(["CREATE", "UPDATE"]), "{rule}");
        for r in rule["resources"].as_array().unwrap() {
            covered.push(r.as_str().unwrap().to_string());
        }
    }
    covered.sort();
    assert_eq!(
        covered,
        [
            "cronjobs",
            "daemonsets",
            "deployments",
            "jobs",
            "pods",
            "replicasets",
            "replicationcontrollers",
            "resourceclaims",
            "resourceclaimtemplates",
            "statefulsets"
        ]
    );
}

#[test]
fn settings_files_are_valid_or_invalid_as_named() {
    let mut seen = 0;
    for entry in std::fs::read_dir(dir().join("test_data")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !name.starts_with("settings_") {
            continue;
        }
        seen += 1;
        let result = settings_from(&yaml(format!("test_data/{name}")));
        if name.starts_with("settings_invalid") {
            assert!(result.is_err(), "{name} should be invalid");
        } else {
            assert!(result.is_ok(), "{name}: {result:?}");
        }
    }
    assert!(seen >= 5);
}

#[test]
fn the_custom_kinds_file_names_exactly_the_presets() {
    let s = settings_from(&yaml("test_data/settings_custom_kinds.yml")).unwrap();
    let locations: Vec<_> = s.custom_kinds.iter().map(|k| k.locations()).collect();
    let preset_locations: Vec<_> = presets::all().into_iter().map(|k| k.templates).collect();
    assert_eq!(locations, preset_locations);
}

#[test]
fn the_example_policy_is_valid_and_routes_its_custom_kinds_to_the_policy() {
    let cap = yaml("examples/cluster-admission-policy.yaml");
    assert_eq!(cap["kind"], "ClusterAdmissionPolicy");
    assert_eq!(
        cap["spec"]["module"],
        format!(
            "registry://ghcr.io/gpu-admission/policies/{}:v{}",
            env!("CARGO_PKG_NAME"),
            env!("CARGO_PKG_VERSION")
        )
    );
    assert_eq!(cap["spec"]["mutating"], false);
    let s = settings_from(&cap["spec"]["settings"]).unwrap();
    let kinds: Vec<(&str, &str)> = s
        .custom_kinds
        .iter()
        .map(|k| (k.group.as_str(), k.kind.as_str()))
        .collect();
    let preset_kinds: Vec<(String, String)> = presets::all()
        .into_iter()
        .map(|k| (k.group, k.kind))
        .collect();
    assert_eq!(
        kinds,
        preset_kinds
            .iter()
            .map(|(g, k)| (g.as_str(), k.as_str()))
            .collect::<Vec<_>>()
    );
    let groups: Vec<&str> = cap["spec"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["apiGroups"].as_array().unwrap())
        .map(|g| g.as_str().unwrap())
        .collect();
    for kind in &s.custom_kinds {
        assert!(
            groups.contains(&kind.group.as_str()),
            "{} not in rules",
            kind.group
        );
    }
}

/// The settings' JSON field names.
fn setting_names() -> Vec<String> {
    let all = Settings {
        max_gpus_per_pod: Some(1),
        max_gpus_per_container: Some(1),
        exceptions: vec![Default::default()],
        gpu_access_label: Some(gpu_rules::labels::settings::RequiredLabel::present("k")),
        gpu_sharing: gpu_rules::labels::tenancy::GpuSharing {
            enabled: true,
            ..Default::default()
        },
        ..Settings::default()
    };
    serde_json::to_value(all)
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

#[test]
fn readme_and_questions_cover_every_setting() {
    let readme = std::fs::read_to_string(dir().join("README.md")).unwrap();
    let questions = yaml("questions-ui.yml");
    let variables: Vec<&str> = questions["questions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["variable"].as_str().unwrap())
        .collect();
    // A nested setting is asked field by field (`deviceAccess.privileged.enabled`).
    let top = |v: &str| v.split('.').next().unwrap_or(v).to_string();
    let names = setting_names();
    assert!(names.len() >= 16, "{names:?}");
    for name in &names {
        assert!(
            readme.contains(&format!("| `{name}` |")),
            "README settings table lacks {name}"
        );
        assert!(
            variables.iter().any(|v| top(v) == *name),
            "questions-ui lacks {name}"
        );
    }
    for v in &variables {
        assert!(
            names.contains(&top(v)),
            "questions-ui asks for {v}, which is no setting"
        );
    }
    // Every field of the nested blocks is a question and a README row.
    let all = serde_json::to_value(Settings::default()).unwrap();
    for block in ["deviceAccess", "fractionalGpus"] {
        for leaf in leaves(block, &all[block]) {
            assert!(
                variables.contains(&leaf.as_str()),
                "questions-ui lacks {leaf}"
            );
            let row = leaf.split_once('.').map_or(leaf.as_str(), |(_, r)| r);
            let row = if block == "fractionalGpus" {
                leaf.as_str()
            } else {
                row
            };
            assert!(
                readme.contains(&format!("| `{row}` |")),
                "README lacks the row {row}"
            );
        }
    }
}

/// `block.a.b` for every non-object value under `value`.
fn leaves(prefix: &str, value: &Value) -> Vec<String> {
    match value.as_object() {
        Some(map) => map
            .iter()
            .flat_map(|(k, v)| leaves(&format!("{prefix}.{k}"), v))
            .collect(),
        None => vec![prefix.to_string()],
    }
}

#[test]
fn the_wapc_glue_answers_natively() {
    let request: Value = serde_json::from_str(
        &std::fs::read_to_string(dir().join("test_data/deployment_missing_team.json")).unwrap(),
    )
    .unwrap();
    let payload = json!({"request": request, "settings": {}}).to_string();
    let out: Value =
        serde_json::from_slice(&gpu_labels_policy::validate(payload.as_bytes()).unwrap()).unwrap();
    // The message of a glue answer.
    let message = |answer: &Value| answer["message"].as_str().unwrap().to_string();
    assert_eq!(out["accepted"], false);
    assert!(message(&out).contains("label 'team' is missing"));

    let settings: Value = serde_json::from_slice(
        &gpu_labels_policy::validate_settings(b"{\"maxGpusPerPod\": 0}").unwrap(),
    )
    .unwrap();
    assert_eq!(settings["valid"], false);
    assert!(message(&settings).starts_with("maxGpusPerPod: "));
}
