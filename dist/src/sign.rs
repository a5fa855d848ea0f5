//! Cosign signatures of pushed policies, key-based, in the layout `cosign sign --key`
//! writes and that `cosign verify`, `kwctl verify`, policy-server's verification config
//! and Artifact Hub read:
//!
//! - the signed artifact is the module's manifest, named by its immutable digest;
//! - the signature is an OCI image in the same repository, tagged
//!   `sha256-<hex of that digest>.sig`, one layer per signature of media type
//!   `application/vnd.dev.cosign.simplesigning.v1+json`: the simple-signing payload
//!   (`critical.image.docker-manifest-digest` = the digest, `optional` = the signer's
//!   annotations) with the ECDSA P-256 / SHA-256 signature of those bytes, DER and
//!   base64, in the layer's `dev.cosignproject.cosign/signature` annotation;
//! - signing again with another key adds a layer (as cosign does); the same key and
//!   annotations give the same layer (RFC 6979 signatures are deterministic), so signing
//!   twice changes nothing.
//!
//! No transparency log entry (Rekor bundle) is written: key-based verification by kwctl and
//! policy-server does not need one; `cosign verify` asks for `--insecure-ignore-tlog=true`.
//!
//! Keys: ECDSA P-256 private keys as PKCS#8 PEM (`PRIVATE KEY`, `openssl genpkey`), SEC1 PEM
//! (`EC PRIVATE KEY`) or cosign's encrypted format (`ENCRYPTED SIGSTORE PRIVATE KEY`, from
//! `cosign generate-key-pair` or `gpu-dist keygen`: scrypt + NaCl secretbox, password in
//! `COSIGN_PASSWORD`). Public keys are SubjectPublicKeyInfo PEM (`PUBLIC KEY`), the form
//! `kwctl verify -k` and the verification config's `kind: pubKey` take.

use std::collections::BTreeMap;

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use oci_client::Reference;
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{
    IMAGE_CONFIG_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest,
};
use p256::ecdsa::signature::{Signer, Verifier};
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{
    DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey, LineEnding,
};
use rand_core::{OsRng, RngCore};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::oci::{self, Transport, sha256_digest};

/// Media type of a simple-signing payload layer.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// `critical.type` of a cosign container image signature.
pub const SIMPLE_SIGNING_TYPE: &str = "cosign container image signature";
/// The password of an encrypted private key, as cosign reads it.
pub const PASSWORD_ENV: &str = "COSIGN_PASSWORD";

const COSIGN_KEY_LABELS: [&str; 2] = [
    "ENCRYPTED SIGSTORE PRIVATE KEY",
    "ENCRYPTED COSIGN PRIVATE KEY",
];
const SCRYPT_LOG_N: u8 = 15; // N = 32768, cosign's default
const SCRYPT_R: u32 = 8;
const SCRYPT_P: u32 = 1;

/// The tag of the signatures of the manifest `digest` (`sha256:<hex>`).
pub fn signature_tag(digest: &str) -> Result<String> {
    if !oci::is_sha256_digest(digest) {
        bail!("{digest:?} is not a sha256:<64 hex> manifest digest");
    }
    Ok(format!("{}.sig", digest.replacen(':', "-", 1)))
}

/// The simple-signing payload cosign signs for `docker_reference` (`registry/repository`)
/// at manifest `digest`, with the signer's annotations (`optional`, null when none).
pub fn payload(
    docker_reference: &str,
    digest: &str,
    annotations: &BTreeMap<String, String>,
) -> Vec<u8> {
    let optional = if annotations.is_empty() {
        Value::Null
    } else {
        json!(annotations)
    };
    serde_json::to_vec(&json!({
        "critical": {
            "identity": { "docker-reference": docker_reference },
            "image": { "docker-manifest-digest": digest },
            "type": SIMPLE_SIGNING_TYPE,
        },
        "optional": optional,
    }))
    .expect("a JSON value serializes")
}

/// The base64 DER ECDSA P-256 / SHA-256 signature of `bytes`.
pub fn sign_bytes(key: &SigningKey, bytes: &[u8]) -> String {
    let signature: Signature = key.sign(bytes);
    BASE64.encode(signature.to_der().as_bytes())
}

/// Whether `signature` (base64 DER, as in the annotation) is `key`'s over `bytes`.
pub fn verify_bytes(key: &VerifyingKey, bytes: &[u8], signature: &str) -> bool {
    let Ok(der) = BASE64.decode(signature.trim()) else {
        return false;
    };
    let Ok(signature) = Signature::from_der(&der) else {
        return false;
    };
    key.verify(bytes, &signature).is_ok()
}

/// A new random key pair.
pub fn generate_key() -> SigningKey {
    SigningKey::random(&mut OsRng)
}

/// The SubjectPublicKeyInfo PEM of `key`'s public key.
pub fn public_key_pem(key: &SigningKey) -> Result<String> {
    key.verifying_key()
        .to_public_key_pem(LineEnding::LF)
        .map_err(|e| anyhow!("cannot encode the public key: {e}"))
}

/// Reads a public key (`-----BEGIN PUBLIC KEY-----`, ECDSA P-256).
pub fn read_public_key(pem: &str) -> Result<VerifyingKey> {
    VerifyingKey::from_public_key_pem(pem.trim())
        .map_err(|e| anyhow!("not an ECDSA P-256 public key in PEM (BEGIN PUBLIC KEY): {e}"))
}

#[derive(Serialize, Deserialize)]
struct CosignScryptParams {
    #[serde(rename = "N")]
    n: u64,
    r: u32,
    p: u32,
}

#[derive(Serialize, Deserialize)]
struct CosignKdf {
    name: String,
    params: CosignScryptParams,
    salt: String,
}

#[derive(Serialize, Deserialize)]
struct CosignCipher {
    name: String,
    nonce: String,
}

/// The JSON inside cosign's `ENCRYPTED SIGSTORE PRIVATE KEY` PEM.
#[derive(Serialize, Deserialize)]
struct CosignEncryptedKey {
    kdf: CosignKdf,
    cipher: CosignCipher,
    ciphertext: String,
}

fn secretbox_key(password: &[u8], salt: &[u8], log_n: u8, r: u32, p: u32) -> Result<[u8; 32]> {
    let params =
        scrypt::Params::new(log_n, r, p, 32).map_err(|e| anyhow!("bad scrypt parameters: {e}"))?;
    let mut key = [0u8; 32];
    scrypt::scrypt(password, salt, &params, &mut key).map_err(|e| anyhow!("scrypt: {e}"))?;
    Ok(key)
}

/// `key` in cosign's encrypted format (scrypt N=32768 r=8 p=1, NaCl secretbox), which
/// `cosign sign --key` reads with the same password.
pub fn encrypt_cosign_key(key: &SigningKey, password: &[u8]) -> Result<String> {
    use crypto_secretbox::aead::{Aead, KeyInit};
    let der = key
        .to_pkcs8_der()
        .map_err(|e| anyhow!("cannot encode the private key: {e}"))?;
    let mut salt = [0u8; 32];
    let mut nonce = [0u8; 24];
    OsRng.fill_bytes(&mut salt);
    OsRng.fill_bytes(&mut nonce);
    let box_key = secretbox_key(password, &salt, SCRYPT_LOG_N, SCRYPT_R, SCRYPT_P)?;
    let cipher = crypto_secretbox::XSalsa20Poly1305::new(&box_key.into());
    let ciphertext = cipher
        .encrypt(&nonce.into(), der.as_bytes())
        .map_err(|e| anyhow!("cannot encrypt the private key: {e}"))?;
    let body = CosignEncryptedKey {
        kdf: CosignKdf {
            name: "scrypt".into(),
            params: CosignScryptParams {
                n: 1 << SCRYPT_LOG_N,
                r: SCRYPT_R,
                p: SCRYPT_P,
            },
            salt: BASE64.encode(salt),
        },
        cipher: CosignCipher {
            name: "nacl/secretbox".into(),
            nonce: BASE64.encode(nonce),
        },
        ciphertext: BASE64.encode(ciphertext),
    };
    Ok(pem_encode(
        COSIGN_KEY_LABELS[0],
        &serde_json::to_vec(&body)?,
    ))
}

fn decrypt_cosign_key(body: &[u8], password: &[u8]) -> Result<SigningKey> {
    use crypto_secretbox::aead::{Aead, KeyInit};
    let key: CosignEncryptedKey =
        serde_json::from_slice(body).context("the encrypted key is not cosign's JSON")?;
    if key.kdf.name != "scrypt" || key.cipher.name != "nacl/secretbox" {
        bail!(
            "unsupported key encryption {} / {} (cosign uses scrypt / nacl/secretbox)",
            key.kdf.name,
            key.cipher.name
        );
    }
    let n = key.kdf.params.n;
    if !n.is_power_of_two() || !(1 << 10..=1 << 20).contains(&n) {
        bail!("unsupported scrypt N {n}");
    }
    let salt = BASE64
        .decode(&key.kdf.salt)
        .context("kdf.salt is not base64")?;
    let nonce: [u8; 24] = BASE64
        .decode(&key.cipher.nonce)
        .context("cipher.nonce is not base64")?
        .try_into()
        .map_err(|_| anyhow!("cipher.nonce is not 24 bytes"))?;
    let ciphertext = BASE64
        .decode(&key.ciphertext)
        .context("ciphertext is not base64")?;
    let box_key = secretbox_key(
        password,
        &salt,
        n.trailing_zeros() as u8,
        key.kdf.params.r,
        key.kdf.params.p,
    )?;
    let cipher = crypto_secretbox::XSalsa20Poly1305::new(&box_key.into());
    let der = cipher
        .decrypt(&nonce.into(), ciphertext.as_slice())
        .map_err(|_| anyhow!("cannot decrypt the private key: wrong password ({PASSWORD_ENV})?"))?;
    SigningKey::from_pkcs8_der(&der)
        .map_err(|e| anyhow!("the decrypted key is not an ECDSA P-256 PKCS#8 key: {e}"))
}

fn pem_encode(label: &str, bytes: &[u8]) -> String {
    let b64 = BASE64.encode(bytes);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).expect("base64 is ASCII"));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// The label and base64-decoded body of a single PEM block.
fn pem_decode(text: &str) -> Result<(String, Vec<u8>)> {
    let begin = text
        .find("-----BEGIN ")
        .context("no -----BEGIN ...----- line: not a PEM key")?;
    let rest = &text[begin + 11..];
    let label_end = rest.find("-----").context("unterminated BEGIN line")?;
    let label = rest[..label_end].to_string();
    let end_line = format!("-----END {label}-----");
    let body_start = label_end + 5;
    let body_end = rest[body_start..]
        .find(&end_line)
        .with_context(|| format!("no {end_line} line"))?;
    let b64: String = rest[body_start..body_start + body_end]
        .split_whitespace()
        .collect();
    let bytes = BASE64
        .decode(b64)
        .with_context(|| format!("the {label} block is not base64"))?;
    Ok((label, bytes))
}

/// Reads an ECDSA P-256 private key: PKCS#8 (`PRIVATE KEY`), SEC1 (`EC PRIVATE KEY`) or
/// cosign's encrypted format, decrypted with `password`.
pub fn read_private_key(text: &str, password: &[u8]) -> Result<SigningKey> {
    let (label, body) = pem_decode(text)?;
    match label.as_str() {
        "PRIVATE KEY" => SigningKey::from_pkcs8_der(&body)
            .map_err(|e| anyhow!("not an ECDSA P-256 PKCS#8 private key: {e}")),
        "EC PRIVATE KEY" => p256::SecretKey::from_sec1_der(&body)
            .map(SigningKey::from)
            .map_err(|e| anyhow!("not an ECDSA P-256 SEC1 private key: {e}")),
        l if COSIGN_KEY_LABELS.contains(&l) => decrypt_cosign_key(&body, password),
        "ENCRYPTED PRIVATE KEY" => bail!(
            "encrypted PKCS#8 keys are not read: use cosign's format (gpu-dist keygen, cosign generate-key-pair) or an unencrypted PKCS#8 key"
        ),
        other => bail!("a {other} is not an ECDSA P-256 private key"),
    }
}

/// Reads the private key file `path` (password from `COSIGN_PASSWORD` when encrypted).
pub fn load_private_key(path: &std::path::Path) -> Result<SigningKey> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the signing key {}", path.display()))?;
    let password = std::env::var(PASSWORD_ENV).unwrap_or_default();
    read_private_key(&text, password.as_bytes()).with_context(|| format!("{}", path.display()))
}

/// A module's manifest, named by digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    /// `registry/repository@sha256:...`: what was signed.
    pub immutable_ref: String,
    /// `registry/repository:sha256-<hex>.sig`: where the signature is.
    pub signature_ref: String,
    /// Whether the signature was already there (signing again changes nothing).
    pub already_signed: bool,
}

/// `registry/repository` of a reference, as cosign names the signed image.
fn docker_reference(reference: &Reference) -> String {
    format!("{}/{}", reference.registry(), reference.repository())
}

/// The manifest digest `uri` names: its own digest, or what its tag points to now.
async fn resolve(client: &oci_client::Client, reference: &Reference) -> Result<String> {
    if let Some(digest) = reference.digest() {
        return Ok(digest.to_string());
    }
    client
        .fetch_manifest_digest(reference, &oci::auth())
        .await
        .map_err(|e| anyhow!("cannot resolve {reference} to a digest: {e}"))
}

fn not_found(e: &OciDistributionError) -> bool {
    match e {
        OciDistributionError::RegistryError { envelope, .. } => envelope.errors.iter().any(|e| {
            matches!(
                e.code,
                OciErrorCode::ManifestUnknown | OciErrorCode::NameUnknown
            )
        }),
        OciDistributionError::ServerError { code, .. } => *code == 404,
        OciDistributionError::ImageManifestNotFoundError(_) => true,
        _ => false,
    }
}

/// The signature manifest at `sig_ref`, if any.
async fn signature_manifest(
    client: &oci_client::Client,
    sig_ref: &Reference,
) -> Result<Option<OciImageManifest>> {
    match client
        .pull_manifest_raw(sig_ref, &oci::auth(), &[OCI_IMAGE_MEDIA_TYPE])
        .await
    {
        Ok((bytes, _)) => serde_json::from_slice(&bytes)
            .map(Some)
            .with_context(|| format!("{sig_ref} is not an OCI image manifest")),
        Err(e) if not_found(&e) => Ok(None),
        Err(e) => Err(anyhow!("cannot read {sig_ref}: {e}")),
    }
}

/// The config blob cosign writes for a signature image with these layers.
fn signature_config(layers: &[OciDescriptor]) -> Vec<u8> {
    let diff_ids: Vec<&str> = layers.iter().map(|l| l.digest.as_str()).collect();
    serde_json::to_vec(&json!({
        "architecture": "",
        "created": "0001-01-01T00:00:00Z",
        "history": [{ "created": "0001-01-01T00:00:00Z" }],
        "os": "",
        "rootfs": { "type": "layers", "diff_ids": diff_ids },
        "config": {},
    }))
    .expect("a JSON value serializes")
}

/// Where the signature of the manifest `uri` names lives: the reference, its registry's
/// client, the manifest's digest (a tag resolved to the digest it points to now) and the image
/// `sha256-<hex>.sig` beside it.
async fn signature_image(
    uri: &str,
    transport: Transport,
) -> Result<(Reference, oci_client::Client, String, Reference)> {
    let reference = oci::parse_reference(uri)?;
    let client = oci::client(&reference, transport);
    let digest = resolve(&client, &reference).await?;
    let sig_ref = Reference::with_tag(
        reference.registry().to_string(),
        reference.repository().to_string(),
        signature_tag(&digest)?,
    );
    Ok((reference, client, digest, sig_ref))
}

/// Signs the manifest `uri` names (by digest; a tag is resolved to the digest it points
/// to now, and that digest is signed) with `key`, adding the signature to the image at
/// `sha256-<hex>.sig`.
pub async fn sign(
    key: &SigningKey,
    uri: &str,
    annotations: &BTreeMap<String, String>,
    transport: Transport,
) -> Result<Signed> {
    let (reference, client, digest, sig_ref) = signature_image(uri, transport).await?;
    let payload = payload(&docker_reference(&reference), &digest, annotations);
    let payload_digest = sha256_digest(&payload);
    let signature = sign_bytes(key, &payload);
    let layer = OciDescriptor {
        media_type: SIMPLE_SIGNING_MEDIA_TYPE.to_string(),
        digest: payload_digest.clone(),
        size: payload.len() as i64,
        annotations: Some(BTreeMap::from([(
            SIGNATURE_ANNOTATION.to_string(),
            signature,
        )])),
        ..Default::default()
    };
    let mut layers = match signature_manifest(&client, &sig_ref).await? {
        Some(existing) => existing.layers,
        None => Vec::new(),
    };
    let immutable_ref = format!("{}@{digest}", docker_reference(&reference));
    let signature_ref = format!(
        "{}:{}",
        docker_reference(&reference),
        signature_tag(&digest)?
    );
    if layers
        .iter()
        .any(|l| l.digest == layer.digest && l.annotations == layer.annotations)
    {
        return Ok(Signed {
            immutable_ref,
            signature_ref,
            already_signed: true,
        });
    }
    layers.push(layer);
    let config = signature_config(&layers);
    let config_descriptor = OciDescriptor {
        media_type: IMAGE_CONFIG_MEDIA_TYPE.to_string(),
        digest: sha256_digest(&config),
        size: config.len() as i64,
        ..Default::default()
    };
    client
        .push_blob(&sig_ref, payload, &payload_digest)
        .await
        .map_err(|e| anyhow!("cannot push the signature payload to {sig_ref}: {e}"))?;
    client
        .push_blob(&sig_ref, config, &config_descriptor.digest)
        .await
        .map_err(|e| anyhow!("cannot push the signature config to {sig_ref}: {e}"))?;
    let manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(OCI_IMAGE_MEDIA_TYPE.to_string()),
        config: config_descriptor,
        layers,
        subject: None,
        artifact_type: None,
        annotations: None,
    };
    client
        .push_manifest(&sig_ref, &manifest.into())
        .await
        .map_err(|e| anyhow!("cannot push the signature manifest {sig_ref}: {e}"))?;
    Ok(Signed {
        immutable_ref,
        signature_ref,
        already_signed: false,
    })
}

/// What [`verify`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// `registry/repository@sha256:...`: the manifest whose signature verified.
    pub immutable_ref: String,
    /// The `optional` annotations of the signature that verified.
    pub annotations: BTreeMap<String, String>,
}

/// Checks, as `kwctl verify -k` does, that the manifest `uri` names (a tag: the one it
/// points to now) has a signature layer by `key` whose payload names that digest and
/// carries `required` among its annotations.
pub async fn verify(
    key: &VerifyingKey,
    uri: &str,
    required: &BTreeMap<String, String>,
    transport: Transport,
) -> Result<Verified> {
    let (reference, client, digest, sig_ref) = signature_image(uri, transport).await?;
    let manifest = signature_manifest(&client, &sig_ref)
        .await?
        .with_context(|| format!("{uri}: no signature ({sig_ref} does not exist)"))?;
    let mut rejected = Vec::new();
    for layer in manifest.layers.iter() {
        if layer.media_type != SIMPLE_SIGNING_MEDIA_TYPE {
            continue;
        }
        let mut payload = Vec::new();
        client
            .pull_blob(&sig_ref, layer, &mut payload)
            .await
            .map_err(|e| anyhow!("cannot read {} of {sig_ref}: {e}", layer.digest))?;
        match check_layer(key, layer, &payload, &digest, required) {
            Ok(annotations) => {
                return Ok(Verified {
                    immutable_ref: format!("{}@{digest}", docker_reference(&reference)),
                    annotations,
                });
            }
            Err(e) => rejected.push(format!("{}: {e}", layer.digest)),
        }
    }
    if rejected.is_empty() {
        bail!("{uri}: {sig_ref} has no simple-signing layer");
    }
    bail!(
        "{uri}: no signature by the key verifies ({})",
        rejected.join("; ")
    )
}

/// One signature layer against `key`, the signed `digest` and the `required` annotations;
/// the payload's annotations when it verifies.
pub fn check_layer(
    key: &VerifyingKey,
    layer: &OciDescriptor,
    payload: &[u8],
    digest: &str,
    required: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>> {
    if sha256_digest(payload) != layer.digest {
        bail!("the payload does not match the layer digest");
    }
    let signature = layer
        .annotations
        .as_ref()
        .and_then(|a| a.get(SIGNATURE_ANNOTATION))
        .with_context(|| format!("no {SIGNATURE_ANNOTATION} annotation"))?;
    if !verify_bytes(key, payload, signature) {
        bail!("not signed by this key");
    }
    let body: Value = serde_json::from_slice(payload).context("the payload is not JSON")?;
    if body["critical"]["type"] != SIMPLE_SIGNING_TYPE {
        bail!("critical.type is not {SIMPLE_SIGNING_TYPE:?}");
    }
    let signed = body["critical"]["image"]["docker-manifest-digest"]
        .as_str()
        .unwrap_or_default();
    if signed != digest {
        bail!("the signature is of {signed}, not of {digest}");
    }
    let annotations: BTreeMap<String, String> = body["optional"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
        .collect();
    for (k, v) in required {
        if annotations.get(k) != Some(v) {
            bail!("annotation {k}={v} is not in the signature");
        }
    }
    Ok(annotations)
}

/// The name of the verification ConfigMap in `deploy/` and of its one key (the key the
/// Kubewarden controller mounts as policy-server's `--verification-path`).
pub const VERIFICATION_CONFIG_MAP: &str = "gpu-admission-verification";
/// See [`VERIFICATION_CONFIG_MAP`].
pub const VERIFICATION_CONFIG_ENTRY: &str = "verification-config";

/// A verification config (policy-server's `--verification-path`, `kwctl verify
/// --verification-config-path`) that requires a signature by `public_pem`, with `annotations`.
pub fn verification_config(
    public_pem: &str,
    owner: &str,
    annotations: &BTreeMap<String, String>,
) -> Result<String> {
    read_public_key(public_pem)?;
    let mut out = String::from("apiVersion: v1\nallOf:\n  - kind: pubKey\n");
    out.push_str(&format!("    owner: {}\n", serde_json::to_string(owner)?));
    out.push_str("    key: |\n");
    for line in public_pem.trim().lines() {
        out.push_str(&format!("      {}\n", line.trim()));
    }
    if !annotations.is_empty() {
        out.push_str("    annotations:\n");
        for (k, v) in annotations {
            out.push_str(&format!(
                "      {}: {}\n",
                serde_json::to_string(k)?,
                serde_json::to_string(v)?
            ));
        }
    }
    Ok(out)
}

/// The ConfigMap (namespace `namespace`) a PolicyServer's `spec.verificationConfig` names,
/// holding `config` (a [`verification_config`]).
pub fn verification_config_map(config: &str, namespace: &str) -> String {
    let mut out = format!(
        "# Generated by `make verification-config` from deploy/signing-key.pub: the public key the\n\
         # gpu-admission modules are signed with. policy-server (PolicyServer gpu-admission,\n\
         # spec.verificationConfig) loads no module without a signature by it.\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {VERIFICATION_CONFIG_MAP}\n  namespace: {namespace}\n\
         \x20 labels:\n    app.kubernetes.io/part-of: gpu-admission\ndata:\n  {VERIFICATION_CONFIG_ENTRY}: |\n"
    );
    for line in config.lines() {
        out.push_str(&format!("    {line}\n"));
    }
    out
}

/// `key=value` annotations (`-a`), in order.
pub fn parse_annotations(pairs: &[String]) -> Result<BTreeMap<String, String>> {
    pairs
        .iter()
        .map(|p| {
            p.split_once('=')
                .filter(|(k, _)| !k.is_empty())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .with_context(|| format!("annotation {p:?} is not key=value"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a";

    #[test]
    fn signature_tags_name_the_digest() {
        assert_eq!(
            signature_tag(DIGEST).unwrap(),
            "sha256-44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a.sig"
        );
        assert!(signature_tag("v0.1.0").is_err());
        assert!(signature_tag("sha256:abc").is_err());
    }

    #[test]
    fn payload_is_cosigns_simple_signing() {
        let p = payload("127.0.0.1:5000/gpu/x", DIGEST, &BTreeMap::new());
        assert_eq!(
            String::from_utf8(p).unwrap(),
            format!(
                r#"{{"critical":{{"identity":{{"docker-reference":"127.0.0.1:5000/gpu/x"}},"image":{{"docker-manifest-digest":"{DIGEST}"}},"type":"cosign container image signature"}},"optional":null}}"#
            )
        );
        let a = BTreeMap::from([("env".to_string(), "prod".to_string())]);
        let v: Value = serde_json::from_slice(&payload("r/x", DIGEST, &a)).unwrap();
        assert_eq!(v["optional"], json!({"env": "prod"}));
    }

    fn layer_for(key: &SigningKey, payload: &[u8]) -> OciDescriptor {
        OciDescriptor {
            media_type: SIMPLE_SIGNING_MEDIA_TYPE.into(),
            digest: sha256_digest(payload),
            size: payload.len() as i64,
            annotations: Some(BTreeMap::from([(
                SIGNATURE_ANNOTATION.to_string(),
                sign_bytes(key, payload),
            )])),
            ..Default::default()
        }
    }

    #[test]
    fn layers_verify_only_with_their_key_digest_and_annotations() {
        let key = generate_key();
        let other = generate_key();
        let a = BTreeMap::from([("env".to_string(), "prod".to_string())]);
        let p = payload("r/x", DIGEST, &a);
        let layer = layer_for(&key, &p);
        let vk = *key.verifying_key();
        assert_eq!(check_layer(&vk, &layer, &p, DIGEST, &a).unwrap(), a);
        assert!(check_layer(&vk, &layer, &p, DIGEST, &BTreeMap::new()).is_ok());
        let err = |r: Result<BTreeMap<String, String>>| r.unwrap_err().to_string();
        assert!(
            err(check_layer(other.verifying_key(), &layer, &p, DIGEST, &a))
                .contains("not signed by this key")
        );
        let other_digest = DIGEST.replace("441", "000");
        assert!(err(check_layer(&vk, &layer, &p, &other_digest, &a)).contains("not of"));
        let want = BTreeMap::from([("env".to_string(), "dev".to_string())]);
        assert!(err(check_layer(&vk, &layer, &p, DIGEST, &want)).contains("env=dev"));
        // A payload changed after signing, with its layer digest updated to match.
        let forged = payload("r/x", &other_digest, &a);
        let mut forged_layer = layer.clone();
        forged_layer.digest = sha256_digest(&forged);
        assert!(
            err(check_layer(&vk, &forged_layer, &forged, &other_digest, &a))
                .contains("not signed by this key")
        );
        assert!(err(check_layer(&vk, &layer, &forged, DIGEST, &a)).contains("layer digest"));
    }

    #[test]
    fn signatures_are_deterministic_der() {
        let key = generate_key();
        let s1 = sign_bytes(&key, b"payload");
        assert_eq!(s1, sign_bytes(&key, b"payload"), "RFC 6979");
        let der = BASE64.decode(&s1).unwrap();
        assert_eq!(der[0], 0x30, "an ASN.1 SEQUENCE");
        assert!(verify_bytes(key.verifying_key(), b"payload", &s1));
        assert!(!verify_bytes(key.verifying_key(), b"payload!", &s1));
        assert!(!verify_bytes(key.verifying_key(), b"payload", "not base64"));
    }

    #[test]
    fn keys_round_trip_in_every_format() {
        let key = generate_key();
        let public = public_key_pem(&key).unwrap();
        assert!(
            public.starts_with("-----BEGIN PUBLIC KEY-----\n"),
            "{public}"
        );
        assert_eq!(read_public_key(&public).unwrap(), *key.verifying_key());

        let pkcs8 = key.to_pkcs8_pem(LineEnding::LF).unwrap();
        assert_eq!(read_private_key(&pkcs8, b"").unwrap(), key);
        let sec1 = p256::SecretKey::from_bytes(&key.to_bytes())
            .unwrap()
            .to_sec1_der()
            .unwrap();
        assert_eq!(
            read_private_key(&pem_encode("EC PRIVATE KEY", &sec1), b"").unwrap(),
            key
        );

        let encrypted = encrypt_cosign_key(&key, b"s3cret").unwrap();
        assert!(encrypted.starts_with("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n"));
        assert_eq!(read_private_key(&encrypted, b"s3cret").unwrap(), key);
        let wrong = read_private_key(&encrypted, b"guess")
            .unwrap_err()
            .to_string();
        assert!(wrong.contains("wrong password"), "{wrong}");
        let old_label = encrypted.replace("SIGSTORE", "COSIGN");
        assert_eq!(read_private_key(&old_label, b"s3cret").unwrap(), key);
    }

    #[test]
    fn verification_configs_hold_the_key() {
        let key = generate_key();
        let public = public_key_pem(&key).unwrap();
        let a = BTreeMap::from([("env".to_string(), "prod".to_string())]);
        let config = verification_config(&public, "gpu-admission", &a).unwrap();
        assert!(config.starts_with("apiVersion: v1\nallOf:\n  - kind: pubKey\n    owner: \"gpu-admission\"\n    key: |\n      -----BEGIN PUBLIC KEY-----\n"), "{config}");
        assert!(
            config.ends_with(
                "      -----END PUBLIC KEY-----\n    annotations:\n      \"env\": \"prod\"\n"
            ),
            "{config}"
        );
        let map = verification_config_map(&config, "kubewarden");
        assert!(
            map.contains("\ndata:\n  verification-config: |\n    apiVersion: v1\n    allOf:\n"),
            "{map}"
        );
        assert!(
            map.contains(
                "\n  name: gpu-admission-verification\n  namespace: kubewarden\n  labels:\n"
            ),
            "{map}"
        );
        assert!(verification_config("not a key", "x", &a).is_err());
    }

    #[test]
    fn bad_keys_are_named() {
        let e = |t: &str| read_private_key(t, b"").unwrap_err().to_string();
        assert!(e("hello").contains("not a PEM key"));
        assert!(
            e("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n")
                .contains("RSA PRIVATE KEY")
        );
        assert!(
            e("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n").contains("PKCS#8")
        );
        assert!(
            read_public_key("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
                .is_err()
        );
        assert!(parse_annotations(&["a=b".into(), "c==d".into()]).unwrap()["c"] == "=d");
        assert!(parse_annotations(&["novalue".into()]).is_err());
    }
}
