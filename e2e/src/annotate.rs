//! `kwctl annotate` without kwctl: what `gpu-kwctl annotate` (and so `make annotate`
//! without kwctl) does to a module.
//!
//! [`annotate_module`] parses `metadata.yml` into policy-evaluator's
//! [`Metadata`] (unknown keys dropped, defaults filled in), sets
//! `protocolVersion` from the module's own `protocol_version` and the usage text
//! as `io.kubewarden.policy.usage`, validates it, compares the host capabilities
//! the module calls ([`scan_host_capabilities`]) with the declared ones, and
//! embeds the JSON as the `io.kubewarden.metadata` custom section.
//!
//! Differences from kwctl: no `io.kubewarden.kwctl` annotation (this is not
//! kwctl), an existing annotation is replaced without `--force`, and the module's
//! other bytes are kept as they are (kwctl re-encodes the module with walrus).

use anyhow::{Result, bail};

use crate::metadata::Metadata;
use crate::policy::Policy;
use crate::wasm_scanner::{capability_allowed, scan_host_capabilities};
use crate::wasm_sections;

/// An annotated module and what annotating it found.
#[derive(Debug, Clone)]
pub struct Annotated {
    /// The module with its `io.kubewarden.metadata` section.
    pub module: Vec<u8>,
    /// The embedded metadata.
    pub metadata: Metadata,
    /// Host capabilities the module calls that `hostCapabilities` does not allow
    /// (kwctl warns about these).
    pub undeclared_capabilities: Vec<String>,
    /// Declared `hostCapabilities` patterns no call of the module matches
    /// (kwctl warns about these too).
    pub unused_capabilities: Vec<String>,
}

impl Annotated {
    /// The warnings `kwctl annotate` prints for this module, one per line.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.undeclared_capabilities.is_empty() {
            out.push(format!(
                "host capabilities used by the policy but not declared in metadata: {:?}",
                self.undeclared_capabilities
            ));
        }
        if !self.unused_capabilities.is_empty() {
            out.push(format!(
                "host capabilities declared in metadata but not detected in the policy: {:?}",
                self.unused_capabilities
            ));
        }
        out
    }
}

/// Annotates `module` (a built policy) with `metadata_yaml` (the text of
/// `metadata.yml`) and `usage` (the README), as `kwctl annotate -m -u` does.
/// `name` is only used in messages.
pub fn annotate_module(
    name: &str,
    module: &[u8],
    metadata_yaml: &str,
    usage: Option<&str>,
) -> Result<Annotated> {
    let metadata = Metadata::from_yaml(metadata_yaml)?;
    let protocol = Policy::from_bytes(name, module)?.protocol_version()?;
    let metadata = metadata.annotated(&protocol, usage);
    if let Err(problems) = metadata.validate() {
        bail!("Metadata is invalid: {}", problems.join("; "));
    }
    let declared = metadata.host_capabilities.clone().unwrap_or_default();
    let detected = scan_host_capabilities(module)?;
    let undeclared_capabilities = detected
        .iter()
        .filter(|c| !capability_allowed(&declared, c))
        .cloned()
        .collect();
    let unused_capabilities = declared
        .iter()
        .filter(|p| !detected.iter().any(|c| capability_allowed([*p], c)))
        .cloned()
        .collect();
    let module = wasm_sections::annotate_bytes(module, &metadata.to_section_bytes()?)?;
    Ok(Annotated {
        module,
        metadata,
        undeclared_capabilities,
        unused_capabilities,
    })
}
