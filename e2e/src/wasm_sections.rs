//! Custom sections of a WebAssembly module, and Kubewarden's metadata section.
//!
//! A module is `\0asm`, a 4-byte version, then sections: an id byte, a LEB128
//! `u32` size and the contents. A custom section (id 0) starts with a LEB128
//! name length and the UTF-8 name; the rest is its payload. This is all the
//! parsing needed here, so it is written by hand.

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// The custom section `kwctl annotate` writes: `serde_json` of the policy metadata.
pub const KUBEWARDEN_METADATA_SECTION: &str = "io.kubewarden.metadata";

const HEADER_LEN: usize = 8;
const MAGIC: &[u8; 4] = b"\0asm";

/// One section: its id and the byte ranges of the whole section and of its contents.
pub(crate) struct Section {
    pub(crate) id: u8,
    start: usize,
    pub(crate) contents: std::ops::Range<usize>,
}

pub(crate) fn read_leb128_u32(bytes: &[u8], pos: &mut usize) -> Result<u32> {
    let mut result: u32 = 0;
    for shift in (0..35).step_by(7) {
        let Some(&byte) = bytes.get(*pos) else {
            bail!("truncated LEB128 at offset {}", *pos);
        };
        *pos += 1;
        let low = u32::from(byte & 0x7f);
        if shift == 28 && low > 0x0f {
            bail!("LEB128 value overflows u32 at offset {}", *pos - 1);
        }
        result |= low << shift;
        if byte & 0x80 == 0 {
            return Ok(result);
        }
    }
    bail!("LEB128 longer than 5 bytes at offset {}", *pos)
}

fn write_leb128_u32(out: &mut Vec<u8>, mut value: u32) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

pub(crate) fn sections(bytes: &[u8]) -> Result<Vec<Section>> {
    if bytes.len() < HEADER_LEN || &bytes[..4] != MAGIC {
        bail!("not a WebAssembly module (bad magic number)");
    }
    let mut pos = HEADER_LEN;
    let mut out = Vec::new();
    while pos < bytes.len() {
        let start = pos;
        let id = bytes[pos];
        pos += 1;
        let size = read_leb128_u32(bytes, &mut pos)? as usize;
        let end = pos
            .checked_add(size)
            .filter(|&end| end <= bytes.len())
            .with_context(|| format!("section at offset {start} runs past the end"))?;
        out.push(Section {
            id,
            start,
            contents: pos..end,
        });
        pos = end;
    }
    Ok(out)
}

/// Splits a custom section's contents into name and payload.
fn custom_name_and_payload(contents: &[u8]) -> Result<(&str, &[u8])> {
    let mut pos = 0;
    let len = read_leb128_u32(contents, &mut pos)? as usize;
    let name = contents
        .get(pos..pos + len)
        .context("custom section name runs past the section")?;
    let name = std::str::from_utf8(name).context("custom section name is not UTF-8")?;
    Ok((name, &contents[pos + len..]))
}

/// Names of all custom sections, in order.
pub fn custom_section_names(bytes: &[u8]) -> Result<Vec<String>> {
    sections(bytes)?
        .iter()
        .filter(|s| s.id == 0)
        .map(|s| {
            Ok(custom_name_and_payload(&bytes[s.contents.clone()])?
                .0
                .to_string())
        })
        .collect()
}

/// Payload of the custom section `name` (the last one, if several); `None` when
/// there is none or the module is malformed.
pub fn wasm_custom_section(bytes: &[u8], name: &str) -> Option<Vec<u8>> {
    sections(bytes)
        .ok()?
        .iter()
        .filter(|s| s.id == 0)
        .filter_map(|s| custom_name_and_payload(&bytes[s.contents.clone()]).ok())
        .rfind(|(n, _)| *n == name)
        .map(|(_, payload)| payload.to_vec())
}

/// Appends a custom section `name` with `payload` at the end of the module.
///
/// Sizes above 4 GiB cannot be encoded in a wasm section and are not supported.
pub fn add_custom_section(bytes: &[u8], name: &str, payload: &[u8]) -> Vec<u8> {
    let mut contents = Vec::with_capacity(5 + name.len() + payload.len());
    write_leb128_u32(&mut contents, name.len() as u32);
    contents.extend_from_slice(name.as_bytes());
    contents.extend_from_slice(payload);

    let mut out = Vec::with_capacity(bytes.len() + 6 + contents.len());
    out.extend_from_slice(bytes);
    out.push(0);
    write_leb128_u32(&mut out, contents.len() as u32);
    out.extend_from_slice(&contents);
    out
}

/// The module without any custom section called `name`.
pub fn remove_custom_sections(bytes: &[u8], name: &str) -> Result<Vec<u8>> {
    let mut out = bytes[..HEADER_LEN.min(bytes.len())].to_vec();
    for s in sections(bytes)? {
        let keep = s.id != 0 || custom_name_and_payload(&bytes[s.contents.clone()])?.0 != name;
        if keep {
            out.extend_from_slice(&bytes[s.start..s.contents.end]);
        }
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
    fn leb128_round_trips() {
        for v in [0u32, 1, 127, 128, 300, 16_383, 16_384, u32::MAX] {
            let mut buf = Vec::new();
            write_leb128_u32(&mut buf, v);
            let mut pos = 0;
            assert_eq!(read_leb128_u32(&buf, &mut pos).unwrap(), v);
            assert_eq!(pos, buf.len());
        }
        let mut pos = 0;
        assert!(read_leb128_u32(&[0x80, 0x80], &mut pos).is_err());
        let mut pos = 0;
        assert!(read_leb128_u32(&[0xff, 0xff, 0xff, 0xff, 0x7f], &mut pos).is_err());
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
