//! Every annotated policy pushed to a real OCI registry (docker-registry on 127.0.0.1) and
//! signed by its digest with `gpu_dist::sign` (what `make push` and `make sign` run), then
//! checked: the signature is where cosign, kwctl and Artifact Hub look for it, it verifies
//! with the public key only, and not once the module behind the tag changed. A key pair is
//! generated here, for this test only. Kubewarden's own kwctl and policy-server check the
//! same signatures in e2e/kubewarden/test_signatures.py (`make signatures-test`).

use std::collections::BTreeMap;
use std::time::Duration;

use gpu_dist::oci::{self, Transport, sha256_digest};
use gpu_dist::sign::{self, SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE};
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::{IMAGE_CONFIG_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde_json::Value;

use super::registry::{Registry, get_blob, get_manifest};
use crate::common::{policies, root};

fn run<F: std::future::Future>(f: F) -> F::Output {
    oci::block_on(f).unwrap()
}

/// `sign::verify` of `uri` with the public half of `key`, requiring `required`.
fn verify(
    key: &p256::ecdsa::SigningKey,
    uri: &str,
    required: &BTreeMap<String, String>,
) -> anyhow::Result<sign::Verified> {
    run(sign::verify(
        key.verifying_key(),
        uri,
        required,
        Transport::Auto,
    ))
}

/// [`verify`] fails, saying `expected`.
fn refused(
    key: &p256::ecdsa::SigningKey,
    uri: &str,
    required: &BTreeMap<String, String>,
    expected: &str,
) {
    match verify(key, uri, required) {
        Ok(_) => panic!("{uri} verified"),
        Err(e) => assert!(e.to_string().contains(expected), "{uri}: {e:#}"),
    }
}

/// The module with one more (empty) custom section: the same policy, another digest.
fn changed(module: &[u8]) -> Vec<u8> {
    let mut out = module.to_vec();
    out.extend([0u8, 8, 7]);
    out.extend(b"changed");
    out
}

fn version(annotated: &[u8]) -> String {
    oci::embedded_metadata(annotated)
        .unwrap()
        .and_then(|m| {
            m.annotation("io.kubewarden.policy.version")
                .map(|v| v.to_string())
        })
        .expect("an annotated module with a version")
}

#[test]
fn every_policy_is_signed_by_digest_and_verifies_only_as_pushed() {
    let registry = Registry::start();
    let addr = registry.addr;
    let key = sign::generate_key();
    let other = sign::generate_key();
    let none = BTreeMap::new();

    let mut checked = 0;
    for policy in policies() {
        let name = &policy.name;
        let annotated = std::fs::read(policy.annotated_path())
            .unwrap_or_else(|e| panic!("{name}: {e}: run `make annotate` first"));
        let repository = format!("gpu-admission/{name}");
        let uri = format!("{addr}/{repository}:v{}", version(&annotated));
        let pushed = run(oci::push(&annotated, &uri, Transport::Auto, false))
            .unwrap_or_else(|e| panic!("{name}: {e:#}"));

        let signed = run(sign::sign(
            &key,
            &pushed.immutable_ref,
            &none,
            Transport::Auto,
        ))
        .unwrap_or_else(|e| panic!("{name}: {e:#}"));
        assert_eq!(signed.immutable_ref, pushed.immutable_ref, "{name}");
        assert!(!signed.already_signed, "{name}");
        let sig_tag = sign::signature_tag(&pushed.manifest_digest).unwrap();
        assert_eq!(
            signed.signature_ref,
            format!("{addr}/{repository}:{sig_tag}")
        );

        // Verifies by tag and by digest, with the public key.
        for reference in [&uri, &pushed.immutable_ref] {
            let verified = verify(&key, reference, &none)
                .unwrap_or_else(|e| panic!("{name}: {reference}: {e:#}"));
            assert_eq!(verified.immutable_ref, pushed.immutable_ref);
        }
        // Not with another key.
        refused(&other, &uri, &none, "not signed by this key");
        // Signing again changes nothing (RFC 6979: the same signature).
        let again = run(sign::sign(&key, &uri, &none, Transport::Auto)).unwrap();
        assert!(again.already_signed, "{name}: signing twice added a layer");

        // Where cosign, kwctl and Artifact Hub (HasCosignSignature: the image's digest ->
        // sha256-<hex>.sig -> a simple-signing layer) find it, read without oci-client.
        let manifest = get_manifest(addr, &repository, &sig_tag);
        assert_eq!(manifest.status, 200, "{name}: GET {sig_tag}");
        let m: Value = serde_json::from_slice(&manifest.body).unwrap();
        assert_eq!(m["mediaType"], OCI_IMAGE_MEDIA_TYPE);
        assert_eq!(m["config"]["mediaType"], IMAGE_CONFIG_MEDIA_TYPE);
        let layers = m["layers"].as_array().unwrap();
        assert_eq!(layers.len(), 1, "{name}: one signature");
        assert_eq!(layers[0]["mediaType"], SIMPLE_SIGNING_MEDIA_TYPE);
        let signature = layers[0]["annotations"][SIGNATURE_ANNOTATION]
            .as_str()
            .unwrap();
        let payload = get_blob(addr, &repository, layers[0]["digest"].as_str().unwrap()).body;
        assert_eq!(sha256_digest(&payload), layers[0]["digest"]);
        assert!(sign::verify_bytes(key.verifying_key(), &payload, signature));
        let p: Value = serde_json::from_slice(&payload).unwrap();
        assert_eq!(
            p["critical"]["image"]["docker-manifest-digest"],
            pushed.manifest_digest
        );
        assert_eq!(
            p["critical"]["identity"]["docker-reference"],
            format!("{addr}/{repository}")
        );
        assert_eq!(p["critical"]["type"], "cosign container image signature");
        let config = get_blob(addr, &repository, m["config"]["digest"].as_str().unwrap()).body;
        let config: Value = serde_json::from_slice(&config).unwrap();
        assert_eq!(
            config["rootfs"]["diff_ids"],
            serde_json::json!([layers[0]["digest"]])
        );
        checked += 1;
    }
    assert!(checked > 0);

    let first = policies().remove(0);
    let annotated = std::fs::read(first.annotated_path()).unwrap();

    // A second signer adds a layer beside the first; each key verifies its own.
    let uri = format!("{addr}/x/cosigned:v1");
    run(oci::push(&annotated, &uri, Transport::Auto, false)).unwrap();
    run(sign::sign(&key, &uri, &none, Transport::Auto)).unwrap();
    let annotations = BTreeMap::from([("env".to_string(), "prod".to_string())]);
    run(sign::sign(&other, &uri, &annotations, Transport::Auto)).unwrap();
    verify(&key, &uri, &none).unwrap();
    let v = verify(&other, &uri, &annotations).unwrap();
    assert_eq!(v.annotations, annotations);
    let wrong = BTreeMap::from([("env".to_string(), "dev".to_string())]);
    refused(&other, &uri, &wrong, "env=dev");

    // Never signed.
    let uri = format!("{addr}/x/unsigned:v1");
    run(oci::push(&annotated, &uri, Transport::Auto, false)).unwrap();
    refused(&key, &uri, &none, "no signature");

    // Changed after signing: the tag now names another manifest, which has no signature...
    let uri = format!("{addr}/x/changed:v1");
    let before = run(oci::push(&annotated, &uri, Transport::Auto, false)).unwrap();
    run(sign::sign(&key, &uri, &none, Transport::Auto)).unwrap();
    let after = run(oci::push(
        &changed(&annotated),
        &uri,
        Transport::Auto,
        false,
    ))
    .unwrap();
    assert_ne!(before.manifest_digest, after.manifest_digest);
    refused(&key, &uri, &none, "no signature");
    // ...and the old signature copied to the new digest's tag names the old digest.
    let client = Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        read_timeout: Some(Duration::from_secs(60)),
        ..Default::default()
    });
    let tag = |digest: &str| {
        Reference::with_tag(
            addr.to_string(),
            "x/changed".into(),
            sign::signature_tag(digest).unwrap(),
        )
    };
    let (old_sig, _) = run(client.pull_manifest_raw(
        &tag(&before.manifest_digest),
        &RegistryAuth::Anonymous,
        &[OCI_IMAGE_MEDIA_TYPE],
    ))
    .unwrap();
    run(client.push_manifest_raw(
        &tag(&after.manifest_digest),
        old_sig,
        OCI_IMAGE_MEDIA_TYPE.parse().unwrap(),
    ))
    .unwrap();
    refused(
        &key,
        &uri,
        &none,
        &format!("not of {}", after.manifest_digest),
    );
    // The old digest still verifies: its signature is untouched.
    verify(&key, &before.immutable_ref, &none).unwrap();
    drop(registry);
}

/// deploy/verification-config.yaml is `make verification-config`'s output for
/// deploy/signing-key.pub, and the PolicyServer of deploy/ reads it.
#[test]
fn the_deploy_verification_config_trusts_the_project_key() {
    let root = root();
    let public = std::fs::read_to_string(root.join("deploy/signing-key.pub"))
        .expect("deploy/signing-key.pub: the project's public signing key");
    sign::read_public_key(&public).expect("deploy/signing-key.pub");
    let config = sign::verification_config(&public, "gpu-admission", &BTreeMap::new()).unwrap();
    let expected = sign::verification_config_map(&config, "kubewarden");
    let committed = std::fs::read_to_string(root.join("deploy/verification-config.yaml")).unwrap();
    assert!(
        committed == expected,
        "deploy/verification-config.yaml is not the verification config of deploy/signing-key.pub: run `make verification-config`"
    );
    let server = crate::common::dedicated_policy_server().unwrap();
    assert_eq!(
        server["spec"]["verificationConfig"],
        sign::VERIFICATION_CONFIG_MAP,
        "the PolicyServer must name the verification ConfigMap (spec.verificationConfig)"
    );
}
