//! Kubewarden policies as OCI artifacts, pushed and pulled with `oci-client`
//! exactly as `kwctl push` / `kwctl pull` lay them out:
//!
//! - config blob `{}` with media type `application/vnd.wasm.config.v1+json`;
//! - one layer, the annotated module, `application/vnd.wasm.content.layer.v1+wasm`;
//! - an OCI image manifest whose annotations are the metadata's annotations,
//!   multi-line values (the README usage, ...) dropped and values trimmed, plus
//!   `org.opencontainers.image.source` from `io.kubewarden.policy.source`.
//!
//! Registries on loopback addresses (`localhost`, `127.0.0.1`, `[::1]`) are
//! spoken to over plain HTTP, others over HTTPS, unless a [`Transport`] forces it.
//! Credentials: anonymous, or HTTP basic auth from `OCI_REGISTRY_USERNAME` and
//! `OCI_REGISTRY_PASSWORD`.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use gpu_e2e::metadata::{self as md, Metadata};
use gpu_e2e::wasm_sections::{KUBEWARDEN_METADATA_SECTION, wasm_custom_section};
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::{OciImageManifest, WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest, Sha256};

/// The OCI annotation kwctl copies `io.kubewarden.policy.source` into.
pub const ORG_OPENCONTAINERS_IMAGE_SOURCE: &str = "org.opencontainers.image.source";
/// The config blob of every Kubewarden policy artifact.
pub const CONFIG_BLOB: &[u8] = b"{}";
/// Environment variables with registry credentials (HTTP basic auth).
pub const USERNAME_ENV: &str = "OCI_REGISTRY_USERNAME";
/// See [`USERNAME_ENV`].
pub const PASSWORD_ENV: &str = "OCI_REGISTRY_PASSWORD";

/// How to reach the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// Plain HTTP for loopback registries, HTTPS for the others.
    #[default]
    Auto,
    /// Always plain HTTP (`--plain-http`).
    Http,
    /// Always HTTPS.
    Https,
}

/// A policy reference: `[registry://]host[:port]/path/name(:tag|@digest)`.
pub fn parse_reference(uri: &str) -> Result<Reference> {
    let image = uri.strip_prefix("registry://").unwrap_or(uri);
    if image.contains("://") {
        bail!("{uri}: only registry:// references can be pushed or pulled");
    }
    image
        .parse::<Reference>()
        .map_err(|e| anyhow!("{uri} is not an OCI reference: {e}"))
}

fn is_loopback(registry: &str) -> bool {
    let host = match registry.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => registry.split(':').next().unwrap_or_default(),
    };
    host == "localhost" || host == "::1" || host.starts_with("127.")
}

pub(crate) fn client(reference: &Reference, transport: Transport) -> Client {
    // reqwest is built with rustls without a default crypto provider (no
    // aws-lc-sys to compile): install ring's. An error only means one is set.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = match transport {
        Transport::Http => true,
        Transport::Https => false,
        Transport::Auto => is_loopback(reference.resolve_registry()),
    };
    Client::new(ClientConfig {
        protocol: if http {
            ClientProtocol::Http
        } else {
            ClientProtocol::Https
        },
        connect_timeout: Some(Duration::from_secs(10)),
        read_timeout: Some(Duration::from_secs(60)),
        ..Default::default()
    })
}

pub(crate) fn auth() -> RegistryAuth {
    match (std::env::var(USERNAME_ENV), std::env::var(PASSWORD_ENV)) {
        (Ok(user), Ok(password)) if !user.is_empty() => RegistryAuth::Basic(user, password),
        _ => RegistryAuth::Anonymous,
    }
}

/// Runs a future to completion on a single-threaded runtime.
pub fn block_on<F: std::future::Future>(future: F) -> Result<F::Output> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    Ok(runtime.block_on(future))
}

/// The metadata embedded in a module by `kwctl annotate` / `make annotate`.
pub fn embedded_metadata(module: &[u8]) -> Result<Option<Metadata>> {
    match wasm_custom_section(module, KUBEWARDEN_METADATA_SECTION) {
        None => Ok(None),
        Some(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .context("the module's io.kubewarden.metadata section is not valid policy metadata"),
    }
}

/// The manifest annotations `kwctl push` derives from policy metadata:
/// single-line annotations, trimmed, plus `org.opencontainers.image.source`
/// from `io.kubewarden.policy.source` unless already set.
pub fn oci_annotations(metadata: &Metadata) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(_, v)| v.lines().count() <= 1)
        .map(|(k, v)| (k.clone(), v.trim().to_string()))
        .collect();
    if let Some(source) = out.get(md::ANNOTATION_SOURCE).cloned() {
        out.entry(ORG_OPENCONTAINERS_IMAGE_SOURCE.to_string())
            .or_insert(source);
    }
    out
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let mut out = String::with_capacity(71);
    out.push_str("sha256:");
    for b in hash {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The layer, config and manifest `kwctl push` sends for `module`.
pub fn artifact(
    module: &[u8],
    annotations: BTreeMap<String, String>,
) -> (ImageLayer, Config, OciImageManifest) {
    let layer = ImageLayer::new(module.to_vec(), WASM_LAYER_MEDIA_TYPE.to_string(), None);
    let config = Config::new(
        CONFIG_BLOB.to_vec(),
        WASM_CONFIG_MEDIA_TYPE.to_string(),
        None,
    );
    let annotations = (!annotations.is_empty()).then_some(annotations);
    let manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, annotations);
    (layer, config, manifest)
}

/// What a push left in the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// `registry/repository@sha256:...`, the reference to deploy and sign.
    pub immutable_ref: String,
    /// `sha256:...` of the manifest.
    pub manifest_digest: String,
}

/// Pushes an annotated module to `uri` (`[registry://]host/path/name:tag`), like
/// `kwctl push`. Unannotated modules are refused unless `force`.
pub async fn push(module: &[u8], uri: &str, transport: Transport, force: bool) -> Result<Pushed> {
    let reference = parse_reference(uri)?;
    let annotations = match embedded_metadata(module)? {
        Some(metadata) => oci_annotations(&metadata),
        None if force => BTreeMap::new(),
        None => bail!(
            "Cannot push a policy that is not annotated: run `make annotate` (or use --force)"
        ),
    };
    let (layer, config, manifest) = artifact(module, annotations);
    let response = client(&reference, transport)
        .push(&reference, &[layer], config, &auth(), Some(manifest))
        .await
        .map_err(|e| anyhow!("could not push {uri}: {e}"))?;
    let digest = response
        .manifest_url
        .rsplit('/')
        .next()
        .filter(|d| is_sha256_digest(d))
        .with_context(|| {
            format!(
                "the registry answered an unexpected manifest location {:?}",
                response.manifest_url
            )
        })?
        .to_string();
    Ok(Pushed {
        immutable_ref: format!(
            "{}/{}@{digest}",
            reference.registry(),
            reference.repository()
        ),
        manifest_digest: digest,
    })
}

pub(crate) fn is_sha256_digest(d: &str) -> bool {
    d.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A pulled policy artifact.
#[derive(Debug, Clone)]
pub struct Pulled {
    /// The image manifest.
    pub manifest: OciImageManifest,
    /// `sha256:...` of the manifest.
    pub manifest_digest: String,
    /// The config blob (`{}`).
    pub config: Vec<u8>,
    /// The config's media type.
    pub config_media_type: String,
    /// The module (the only layer).
    pub module: Vec<u8>,
    /// The layer's media type.
    pub layer_media_type: String,
}

/// Pulls a policy by tag or digest, like `kwctl pull`: exactly one layer of
/// media type `application/vnd.wasm.content.layer.v1+wasm`.
pub async fn pull(uri: &str, transport: Transport) -> Result<Pulled> {
    let reference = parse_reference(uri)?;
    let image = client(&reference, transport)
        .pull(&reference, &auth(), vec![WASM_LAYER_MEDIA_TYPE])
        .await
        .map_err(|e| anyhow!("could not pull {uri}: {e}"))?;
    let manifest = image
        .manifest
        .with_context(|| format!("{uri}: the registry returned no image manifest"))?;
    let [layer] = <[ImageLayer; 1]>::try_from(image.layers).map_err(|layers| {
        anyhow!(
            "{uri}: a policy artifact has exactly one layer, this one has {}",
            layers.len()
        )
    })?;
    Ok(Pulled {
        manifest,
        manifest_digest: image
            .digest
            .with_context(|| format!("{uri}: the registry returned no manifest digest"))?,
        config: image.config.data.to_vec(),
        config_media_type: image.config.media_type,
        module: layer.data.to_vec(),
        layer_media_type: layer.media_type,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references() {
        let r = parse_reference("registry://127.0.0.1:5000/gpu/gpu-labels-policy:v0.1.0").unwrap();
        assert_eq!(r.registry(), "127.0.0.1:5000");
        assert_eq!(r.repository(), "gpu/gpu-labels-policy");
        assert_eq!(r.tag(), Some("v0.1.0"));
        assert!(parse_reference("https://example.com/x.wasm").is_err());
        assert!(
            is_loopback("127.0.0.1:5000") && is_loopback("localhost") && is_loopback("[::1]:80")
        );
        assert!(!is_loopback("ghcr.io") && !is_loopback("10.0.0.1:5000"));
    }

    #[test]
    fn annotations_like_kwctl_push() {
        let metadata = Metadata::from_yaml(
            "rules: []\nmutating: false\nannotations:\n  io.kubewarden.policy.source: ' https://github.com/o/r '\n  io.kubewarden.policy.usage: \"# Usage\\n\\nmore\\n\"\n  io.kubewarden.policy.description: \"one line\\n\"\n",
        )
        .unwrap();
        let a = oci_annotations(&metadata);
        assert_eq!(
            a,
            BTreeMap::from([
                (
                    "io.kubewarden.policy.description".to_string(),
                    "one line".to_string()
                ),
                (
                    "io.kubewarden.policy.source".to_string(),
                    "https://github.com/o/r".to_string()
                ),
                (
                    ORG_OPENCONTAINERS_IMAGE_SOURCE.to_string(),
                    "https://github.com/o/r".to_string()
                ),
            ])
        );
    }

    #[test]
    fn artifact_layout() {
        let (layer, config, manifest) = artifact(b"\0asm", BTreeMap::new());
        assert_eq!(layer.media_type, WASM_LAYER_MEDIA_TYPE);
        assert_eq!(&config.data[..], b"{}");
        assert_eq!(manifest.config.media_type, WASM_CONFIG_MEDIA_TYPE);
        assert_eq!(manifest.config.digest, sha256_digest(b"{}"));
        assert_eq!(manifest.layers.len(), 1);
        assert_eq!(manifest.layers[0].digest, sha256_digest(b"\0asm"));
        assert_eq!(manifest.layers[0].size, 4);
        assert_eq!(manifest.annotations, None);
        assert_eq!(
            sha256_digest(b"{}"),
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }

    #[test]
    fn unannotated_modules_are_refused() {
        let err = block_on(push(
            b"\0asm\x01\0\0\0",
            "127.0.0.1:9/x:v1",
            Transport::Http,
            false,
        ))
        .unwrap()
        .unwrap_err();
        assert!(err.to_string().contains("not annotated"), "{err}");
    }
}
