//! `make annotate` wrote policies/<name>/annotated-policy.wasm
//! with the metadata embedded the way kwctl embeds it, read back through the
//! harness.

use gpu_e2e::metadata::{ANNOTATION_KWCTL_VERSION, Metadata};
use gpu_e2e::wasm_sections::remove_custom_sections;
use gpu_e2e::{KUBEWARDEN_METADATA_SECTION, Policy, module_path, wasm_custom_section};
use serde_json::{Value, json};

use crate::common::{Failures, module, policies};

#[test]
fn annotated_modules_carry_the_metadata() {
    let mut failures = Failures::default();
    for policy in policies() {
        failures.record(&policy.name, || {
            let mut problems = Vec::new();
            let path = policy.annotated_path();
            let annotated = std::fs::read(&path)
                .map_err(|e| anyhow::anyhow!("{}: {e} (run `make annotate`)", path.display()))?;
            let loaded = Policy::from_bytes(&path, &annotated)?;
            let raw = module(&policy).map_err(anyhow::Error::msg)?;
            let protocol = raw.protocol_version()?;
            let readme = std::fs::read_to_string(policy.readme_path())?;
            let expected = policy.metadata()?.annotated(&protocol, Some(&readme));
            let Some(embedded) = loaded.metadata().cloned() else {
                anyhow::bail!("{} has no io.kubewarden.metadata section", path.display());
            };
            let mut embedded_without_kwctl = embedded.clone();
            let by_kwctl = embedded_without_kwctl["annotations"]
                .as_object_mut()
                .and_then(|a| a.remove(ANNOTATION_KWCTL_VERSION))
                .is_some();
            let expected_json: Value = serde_json::to_value(&expected)?;
            if embedded_without_kwctl != expected_json {
                problems.push(format!(
                    "the embedded metadata differs from metadata.yml + README.md in {} (run `make annotate`)",
                    differing_keys(&embedded_without_kwctl, &expected_json).join(", ")
                ));
            }
            // It parses as policy-evaluator's Metadata.
            let parsed: Metadata = serde_json::from_value(embedded)?;
            if parsed.protocol_version.as_deref() != Some("v1") {
                problems.push(format!("protocolVersion is {:?}", parsed.protocol_version));
            }
            if !by_kwctl {
                // gpu-kwctl annotate: kwctl's exact bytes, appended to the current build.
                let section = wasm_custom_section(&annotated, KUBEWARDEN_METADATA_SECTION);
                if section != Some(expected.to_section_bytes()?) {
                    problems.push("the section is not byte-for-byte kwctl's JSON".into());
                }
                let built = std::fs::read(module_path(&policy.package()?.name)?)?;
                if remove_custom_sections(&annotated, KUBEWARDEN_METADATA_SECTION)? != built {
                    problems.push(
                        "annotated-policy.wasm is not the current build plus metadata (run `make annotate`)"
                            .into(),
                    );
                }
            }
            // Still the same policy.
            if loaded.protocol_version()? != protocol {
                problems.push("the annotated module answers another protocol_version".into());
            }
            let empty = json!({});
            if loaded.validate_settings(&empty)? != raw.validate_settings(&empty)? {
                problems.push("validate_settings({}) differs between annotated and raw".into());
            }
            Ok(problems)
        });
    }
    failures.assert_none("annotated modules");
}

/// The keys (and annotation keys) whose values differ between two metadata objects.
fn differing_keys(a: &Value, b: &Value) -> Vec<String> {
    let empty = serde_json::Map::new();
    let (a, b) = (
        a.as_object().unwrap_or(&empty),
        b.as_object().unwrap_or(&empty),
    );
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let mut out = Vec::new();
    for key in keys {
        if a.get(key) == b.get(key) {
            continue;
        }
        if key == "annotations" {
            for k in differing_keys(&a[key], &b[key]) {
                out.push(format!("annotations.{k}"));
            }
        } else {
            out.push(key.clone());
        }
    }
    out
}
