//! Which host capabilities a module calls, found the way `kwctl annotate` finds
//! them (its `wasm_scanner`): a waPC host call passes the namespace and the
//! operation as string constants, so both strings are in the module's data
//! segments. A capability counts as used when its namespace string and its
//! operation string are both present (an operation that is a prefix of another,
//! like `v1/oci_manifest` of `v1/oci_manifest_config`, must also occur on its
//! own). It is a heuristic: it can report a capability whose strings are in the
//! module for another reason, and it cannot see strings built at run time.
//!
//! Also: the host-capability patterns `metadata.yml` may declare
//! (`hostCapabilities`), checked against Kubewarden's capability tree.

use std::collections::BTreeSet;

use anyhow::{Context, Result};
use wasmparser::Payload;

use crate::wasm_sections::sections;

/// Every host capability Kubewarden serves, as `(namespace, operation)`
/// (policy-evaluator's capability tree).
pub const HOST_CAPABILITIES: &[(&str, &str)] = &[
    ("oci", "v1/verify"),
    ("oci", "v1/manifest_digest"),
    ("oci", "v1/oci_manifest"),
    ("oci", "v1/oci_manifest_config"),
    ("oci", "v2/verify"),
    ("net", "v1/dns_lookup_host"),
    ("crypto", "v1/is_certificate_trusted"),
    ("kubernetes", "list_resources_by_namespace"),
    ("kubernetes", "list_resources_all"),
    ("kubernetes", "get_resource"),
    ("kubernetes", "can_i"),
];

/// The host capabilities (`namespace/operation`) whose strings are in the
/// module's data segments.
pub fn scan_host_capabilities(module: &[u8]) -> Result<BTreeSet<String>> {
    let mut data = Vec::new();
    for segment in data_segments(module)? {
        data.extend_from_slice(segment);
        data.push(0xff); // no match across segment boundaries
    }
    let mut found = BTreeSet::new();
    for &(namespace, operation) in HOST_CAPABILITIES {
        if find(&data, namespace.as_bytes()).is_none() {
            continue;
        }
        let longer: Vec<&str> = HOST_CAPABILITIES
            .iter()
            .map(|&(_, op)| op)
            .filter(|op| *op != operation && op.starts_with(operation))
            .collect();
        let present = if longer.is_empty() {
            find(&data, operation.as_bytes()).is_some()
        } else {
            longer
                .iter()
                .all(|l| standalone_match(&data, operation.as_bytes(), l.as_bytes()))
        };
        if present {
            found.insert(format!("{namespace}/{operation}"));
        }
    }
    Ok(found)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// `needle` occurs somewhere that is not the start of `longer`.
fn standalone_match(data: &[u8], needle: &[u8], longer: &[u8]) -> bool {
    let mut offset = 0;
    while let Some(pos) = find(&data[offset..], needle) {
        let at = offset + pos;
        if !data[at..].starts_with(longer) {
            return true;
        }
        offset = at + 1;
    }
    false
}

/// The payloads of the module's data segments (active and passive, in order).
pub fn data_segments(module: &[u8]) -> Result<Vec<&[u8]>> {
    let mut out = Vec::new();
    for section in sections(module)? {
        if let Payload::DataSection(reader) = section.payload {
            for segment in reader {
                out.push(segment.context("malformed data segment")?.data);
            }
        }
    }
    Ok(out)
}

/// Checks a `hostCapabilities` pattern the way policy-evaluator does: `*`, a
/// known path (`kubernetes/get_resource`) or a known prefix ending in `/*`
/// (`oci/*`, `oci/v1/*`).
pub fn validate_capability_pattern(pattern: &str) -> Result<(), String> {
    let p = pattern.trim();
    if p.is_empty() {
        return Err("empty host capability pattern".into());
    }
    if p == "*" {
        return Ok(());
    }
    if let Some(star) = p.find('*') {
        if star != p.len() - 1 || !p[..star].ends_with('/') {
            return Err(format!(
                "{pattern:?}: a wildcard must be the whole last segment (like `oci/*`)"
            ));
        }
        let prefix = &p[..star];
        return if all_paths().any(|path| path.starts_with(prefix)) {
            Ok(())
        } else {
            Err(format!(
                "{pattern:?}: no host capability starts with {prefix:?}"
            ))
        };
    }
    if all_paths().any(|path| path == p) {
        Ok(())
    } else {
        Err(format!(
            "{pattern:?} is not a host capability (known: {})",
            all_paths().collect::<Vec<_>>().join(", ")
        ))
    }
}

/// Whether `capability` (`namespace/operation`) is covered by `patterns`.
pub fn capability_allowed<'a>(
    patterns: impl IntoIterator<Item = &'a String>,
    capability: &str,
) -> bool {
    patterns.into_iter().any(|p| {
        let p = p.trim();
        p == "*"
            || p == capability
            || p.strip_suffix('*')
                .is_some_and(|prefix| prefix.ends_with('/') && capability.starts_with(prefix))
    })
}

fn all_paths() -> impl Iterator<Item = String> {
    HOST_CAPABILITIES
        .iter()
        .map(|(ns, op)| format!("{ns}/{op}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wasm_sections::add_custom_section;

    /// A module with one memory and one active data segment holding `strings`.
    fn module_with_data(strings: &[&str]) -> Vec<u8> {
        let mut payload = Vec::new();
        for s in strings {
            payload.extend_from_slice(s.as_bytes());
            payload.push(0);
        }
        let mut m = b"\0asm\x01\0\0\0".to_vec();
        m.extend_from_slice(&[5, 3, 1, 0, 1]); // memory section: one memory, min 1 page
        let mut data = vec![1, 0, 0x41, 0, 0x0b]; // one segment, memory 0, i32.const 0, end
        data.push(payload.len() as u8);
        data.extend_from_slice(&payload);
        m.push(11);
        m.push(data.len() as u8);
        m.extend_from_slice(&data);
        m
    }

    fn scan(strings: &[&str]) -> Vec<String> {
        scan_host_capabilities(&module_with_data(strings))
            .unwrap()
            .into_iter()
            .collect()
    }

    #[test]
    fn finds_capabilities_like_kwctl() {
        assert!(scan(&["hello", "world"]).is_empty());
        assert!(scan(&["kubewarden"]).is_empty());
        assert_eq!(
            scan(&["kubewarden", "kubernetes", "list_resources_all"]),
            vec!["kubernetes/list_resources_all"]
        );
        // the operation alone, without its namespace, is not a call
        assert!(scan(&["kubewarden", "can_i"]).is_empty());
        // a prefix operation inside a longer one is not a match on its own
        assert_eq!(
            scan(&["oci", "v1/oci_manifest_config"]),
            vec!["oci/v1/oci_manifest_config"]
        );
        assert_eq!(
            scan(&["oci", "v1/oci_manifest_config", "v1/oci_manifest"]),
            vec!["oci/v1/oci_manifest", "oci/v1/oci_manifest_config"]
        );
    }

    #[test]
    fn custom_sections_are_not_scanned() {
        let m = module_with_data(&["kubewarden"]);
        let m = add_custom_section(&m, "x", b"kubernetes get_resource");
        assert!(scan_host_capabilities(&m).unwrap().is_empty());
        assert_eq!(data_segments(&m).unwrap().len(), 1);
    }

    #[test]
    fn malformed_data_is_an_error() {
        let mut m = module_with_data(&["abc"]);
        let last = m.len() - 1;
        m.truncate(last); // the segment now runs past its section
        assert!(scan_host_capabilities(&m).is_err());
    }

    #[test]
    fn patterns() {
        for ok in [
            "*",
            "kubernetes/*",
            "oci/v1/*",
            "kubernetes/get_resource",
            "net/v1/dns_lookup_host",
        ] {
            assert_eq!(validate_capability_pattern(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "kubernetes",
            "kubernetes/get",
            "oci*",
            "oci/v1/oci_*",
            "unknown/*",
        ] {
            assert!(validate_capability_pattern(bad).is_err(), "{bad}");
        }
        let declared = vec!["kubernetes/*".to_string(), "net/v1/dns_lookup_host".into()];
        assert!(capability_allowed(&declared, "kubernetes/can_i"));
        assert!(capability_allowed(&declared, "net/v1/dns_lookup_host"));
        assert!(!capability_allowed(&declared, "oci/v1/verify"));
        assert!(!capability_allowed(&[], "kubernetes/can_i"));
    }
}
