//! SECURITY.md: every way around the rules names the test that proves it closed or
//! accepted, and every test it names exists ([`gpu_dist::security`]).

use gpu_dist::security::{Known, problems};

use crate::common::root;

#[test]
fn every_security_row_names_an_existing_test() {
    let root = root();
    let text = std::fs::read_to_string(root.join("SECURITY.md")).expect("SECURITY.md");
    let known = Known::of_repository(
        &root,
        &["shared", "policies", "e2e", "dist", "fuzz", "bench"],
    )
    .expect("the sources");
    assert!(
        known.functions.len() > 500,
        "too few functions found: {}",
        known.functions.len()
    );
    let found = problems(&text, &known);
    assert!(found.is_empty(), "SECURITY.md:\n{}", found.join("\n"));
}
