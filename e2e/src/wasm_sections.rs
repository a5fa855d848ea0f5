//! Custom sections of a WebAssembly module, and Kubewarden's metadata section.
//!
//! Reading goes through `wasmparser` (the parser wasmtime itself uses), writing a
//! custom section through `wasm-encoder`. Sections this module does not change
//! are copied byte for byte, so removing a section that was appended gives back
//! the original module exactly.

use std::ops::Range;

use anyhow::{Context, Result, bail};
use serde_json::Value;
use wasm_encoder::{CustomSection, Section as _};
use wasmparser::{Encoding, Parser, Payload};

/// The custom section `kwctl annotate` writes: `serde_json` of the policy metadata.
pub const KUBEWARDEN_METADATA_SECTION: &str = "io.kubewarden.metadata";

/// One section of a module: what `wasmparser` read, and the bytes it occupies
/// (from its id byte to the end of its contents).
pub(crate) struct Section<'a> {
    pub(crate) payload: Payload<'a>,
    range: Range<usize>,
}

impl<'a> Section<'a> {
    /// The name of a custom section, `None` for any other section.
    fn custom_name(&self) -> Option<&'a str> {
        match &self.payload {
            Payload::CustomSection(c) => Some(c.name()),
            _ => None,
        }
    }
}

/// The sections of a core module, in order. A component, a bad header or a
/// section that does not parse is an error.
pub(crate) fn sections(bytes: &[u8]) -> Result<Vec<Section<'_>>> {
    let mut out = Vec::new();
    // Sections are contiguous: each starts where the previous one (or the header) ends.
    let mut next = 0;
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload.context("not a valid WebAssembly module")?;
        match &payload {
            Payload::Version {
                encoding: Encoding::Component,
                ..
            } => bail!("a WebAssembly component, not a module"),
            Payload::Version { range, .. } => next = range.end,
            Payload::End(_) => break,
            _ => {}
        }
        // Function bodies (`CodeSectionEntry`) are inside the code section: no range of their own.
        if let Some((_, contents)) = payload.as_section() {
            let range = next..contents.end;
            next = contents.end;
            out.push(Section { payload, range });
        }
    }
    Ok(out)
}

/// Names of all custom sections, in order.
pub fn custom_section_names(bytes: &[u8]) -> Result<Vec<String>> {
    Ok(sections(bytes)?
        .iter()
        .filter_map(Section::custom_name)
        .map(str::to_string)
        .collect())
}

/// Payload of the custom section `name` (the last one, if several); `None` when
/// there is none or the module is malformed.
pub fn wasm_custom_section(bytes: &[u8], name: &str) -> Option<Vec<u8>> {
    sections(bytes)
        .ok()?
        .iter()
        .filter_map(|s| match &s.payload {
            Payload::CustomSection(c) if c.name() == name => Some(c.data()),
            _ => None,
        })
        .next_back()
        .map(<[u8]>::to_vec)
}

/// Appends a custom section `name` with `payload` at the end of the module.
///
/// Sizes above 4 GiB cannot be encoded in a wasm section and are not supported
/// (`wasm-encoder` panics on them).
pub fn add_custom_section(bytes: &[u8], name: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + 10 + name.len() + payload.len());
    out.extend_from_slice(bytes);
    CustomSection {
        name: name.into(),
        data: payload.into(),
    }
    .append_to(&mut out);
    out
}

/// The module without any custom section called `name`.
pub fn remove_custom_sections(bytes: &[u8], name: &str) -> Result<Vec<u8>> {
    let sections = sections(bytes)?;
    let header_end = sections.first().map_or(bytes.len(), |s| s.range.start);
    let mut out = bytes[..header_end].to_vec();
    for s in sections.iter().filter(|s| s.custom_name() != Some(name)) {
        out.extend_from_slice(&bytes[s.range.clone()]);
    }
    Ok(out)
}

/// The metadata `kwctl annotate` embedded (`io.kubewarden.metadata`), if any and
/// if it is JSON.
pub fn read_kubewarden_metadata(bytes: &[u8]) -> Option<Value> {
    serde_json::from_slice(&wasm_custom_section(bytes, KUBEWARDEN_METADATA_SECTION)?).ok()
}

/// Embeds `metadata` (camelCase policy metadata, as in `metadata.yml`) the way
/// `kwctl annotate` stores it, replacing an earlier annotation. Unlike kwctl this
/// does not validate the metadata nor fill in `protocolVersion`.
pub fn annotate(bytes: &[u8], metadata: &Value) -> Result<Vec<u8>> {
    let payload = serde_json::to_vec(metadata).context("cannot serialize metadata")?;
    annotate_bytes(bytes, &payload)
}

/// Replaces the module's `io.kubewarden.metadata` section(s) with one holding
/// `payload` (already serialized metadata, e.g.
/// [`crate::metadata::Metadata::to_section_bytes`]).
pub fn annotate_bytes(bytes: &[u8], payload: &[u8]) -> Result<Vec<u8>> {
    let stripped = remove_custom_sections(bytes, KUBEWARDEN_METADATA_SECTION)?;
    Ok(add_custom_section(
        &stripped,
        KUBEWARDEN_METADATA_SECTION,
        payload,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `(module)` plus a type section with no types.
    fn tiny_module() -> Vec<u8> {
        let mut m = b"\0asm\x01\0\0\0".to_vec();
        m.extend_from_slice(&[1, 1, 0]);
        m
    }

    #[test]
    fn sizes_of_every_leb128_length_round_trip() {
        // section sizes that take one, two, three and four LEB128 bytes
        for len in [0usize, 1, 120, 128, 300, 16_383, 16_384, 2_097_152] {
            let payload = vec![7u8; len];
            let m = add_custom_section(&tiny_module(), "x", &payload);
            assert_eq!(wasm_custom_section(&m, "x"), Some(payload), "{len}");
            assert_eq!(remove_custom_sections(&m, "x").unwrap(), tiny_module());
        }
        let name = "n".repeat(200); // a name length of two LEB128 bytes
        let m = add_custom_section(&tiny_module(), &name, b"p");
        assert_eq!(custom_section_names(&m).unwrap(), vec![name.clone()]);
        assert_eq!(wasm_custom_section(&m, &name), Some(b"p".to_vec()));
        // a truncated size, and a size that overflows u32
        for bad_size in [&[0x80, 0x80][..], &[0xff, 0xff, 0xff, 0xff, 0x7f]] {
            let mut m = tiny_module();
            m.push(0);
            m.extend_from_slice(bad_size);
            assert!(custom_section_names(&m).is_err(), "{bad_size:?}");
        }
    }

    #[test]
    fn add_then_read() {
        let payload = vec![7u8; 300]; // a size that needs two LEB128 bytes
        let m = add_custom_section(&tiny_module(), "x", &payload);
        assert_eq!(wasm_custom_section(&m, "x"), Some(payload));
        assert_eq!(wasm_custom_section(&m, "y"), None);
        assert_eq!(custom_section_names(&m).unwrap(), vec!["x".to_string()]);
    }

    #[test]
    fn annotate_replaces_earlier_metadata() {
        let once = annotate(&tiny_module(), &json!({"mutating": false})).unwrap();
        let twice = annotate(&once, &json!({"mutating": true})).unwrap();
        assert_eq!(
            read_kubewarden_metadata(&twice),
            Some(json!({"mutating": true}))
        );
        assert_eq!(custom_section_names(&twice).unwrap().len(), 1);
        assert_eq!(
            remove_custom_sections(&twice, KUBEWARDEN_METADATA_SECTION).unwrap(),
            tiny_module()
        );
    }

    #[test]
    fn malformed_modules_are_reported() {
        assert_eq!(wasm_custom_section(b"nope", "x"), None);
        let mut truncated = tiny_module();
        truncated.extend_from_slice(&[0, 50, 1]);
        assert!(custom_section_names(&truncated).is_err());
        assert_eq!(wasm_custom_section(&truncated, "x"), None);
        assert_eq!(read_kubewarden_metadata(&tiny_module()), None);
    }
}
