//! Custom sections on the real fixture module.

mod common;

use common::{fixture, fixture_metadata};
use gpu_e2e::wasm_sections::{annotate, custom_section_names};
use gpu_e2e::{
    KUBEWARDEN_METADATA_SECTION, Policy, add_custom_section, module_path, read_kubewarden_metadata,
    wasm_custom_section,
};

#[test]
fn built_module_is_not_annotated() {
    let bytes = std::fs::read(module_path("fixture-policy").unwrap()).unwrap();
    assert_eq!(read_kubewarden_metadata(&bytes), None);
    assert_eq!(fixture().metadata(), None);
}

#[test]
fn add_then_read_metadata_section() {
    let bytes = std::fs::read(module_path("fixture-policy").unwrap()).unwrap();
    let metadata = fixture_metadata();
    let payload = serde_json::to_vec(&metadata).unwrap();
    let annotated = add_custom_section(&bytes, KUBEWARDEN_METADATA_SECTION, &payload);

    assert_eq!(&annotated[..bytes.len()], &bytes[..]);
    assert_eq!(
        wasm_custom_section(&annotated, KUBEWARDEN_METADATA_SECTION),
        Some(payload)
    );
    assert_eq!(read_kubewarden_metadata(&annotated), Some(metadata.clone()));
    assert_eq!(
        custom_section_names(&annotated)
            .unwrap()
            .last()
            .map(String::as_str),
        Some(KUBEWARDEN_METADATA_SECTION)
    );

    // The annotated module is still a valid policy, and carries its metadata.
    let policy = Policy::from_bytes("annotated", &annotated).unwrap();
    assert_eq!(policy.metadata(), Some(&metadata));
    assert_eq!(policy.protocol_version().unwrap(), "v1");
    assert_eq!(
        metadata["contextAwareResources"],
        serde_json::json!([{"apiVersion": "v1", "kind": "Namespace"}])
    );
}

#[test]
fn annotating_twice_keeps_one_section() {
    let bytes = std::fs::read(module_path("fixture-policy").unwrap()).unwrap();
    let once = annotate(&bytes, &serde_json::json!({"mutating": false})).unwrap();
    let twice = annotate(&once, &fixture_metadata()).unwrap();
    assert_eq!(read_kubewarden_metadata(&twice), Some(fixture_metadata()));
    let count = custom_section_names(&twice)
        .unwrap()
        .iter()
        .filter(|n| *n == KUBEWARDEN_METADATA_SECTION)
        .count();
    assert_eq!(count, 1);
}
