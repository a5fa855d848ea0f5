//! Every annotated policy pushed to a real OCI registry (the
//! CNCF distribution registry, Debian's `docker-registry`, started here on a free
//! 127.0.0.1 port and stopped when the test ends, pass or fail), pulled back by
//! tag and by digest, and the artifact checked byte for byte, also with plain
//! HTTP requests that do not go through oci-client.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gpu_dist::oci::{self, CONFIG_BLOB, ORG_OPENCONTAINERS_IMAGE_SOURCE, Transport, sha256_digest};
use gpu_e2e::metadata::ANNOTATION_SOURCE;
use gpu_e2e::{Policy, read_kubewarden_metadata};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE};
use serde_json::Value;

use crate::common::policies;

/// Environment variable naming the registry binary (default `docker-registry`).
const REGISTRY_BIN_ENV: &str = "GPU_DIST_REGISTRY_BIN";
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// A `docker-registry serve` process with filesystem storage in a temporary
/// directory; killed and cleaned up on drop (also when the test panics).
pub(crate) struct Registry {
    child: Child,
    pub(crate) dir: PathBuf,
    pub(crate) addr: SocketAddr,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("cannot find a free port on 127.0.0.1")
}

impl Registry {
    pub(crate) fn start() -> Registry {
        let bin = std::env::var(REGISTRY_BIN_ENV).unwrap_or_else(|_| "docker-registry".into());
        let mut last_error = String::new();
        for attempt in 0..3 {
            // One folder per registry: several tests of this process may each start one.
            static STARTED: AtomicUsize = AtomicUsize::new(0);
            let n = STARTED.fetch_add(1, Ordering::Relaxed);
            let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
                .join(format!("registry-{}-{n}-{attempt}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
            let config = format!(
                "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n",
                dir.join("data").display()
            );
            std::fs::write(dir.join("config.yml"), config).unwrap();
            let log = std::fs::File::create(dir.join("registry.log")).unwrap();
            let child = Command::new(&bin)
                .arg("serve")
                .arg(dir.join("config.yml"))
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| {
                    panic!(
                        "cannot start {bin}: {e}. Install the CNCF distribution registry (`apt-get install docker-registry`, done by scripts/setup.sh) or set {REGISTRY_BIN_ENV}"
                    )
                });
            let mut registry = Registry { child, dir, addr };
            let deadline = Instant::now() + READY_TIMEOUT;
            loop {
                if let Ok(Some(status)) = registry.child.try_wait() {
                    last_error = format!(
                        "{bin} exited with {status}: {}",
                        std::fs::read_to_string(registry.dir.join("registry.log"))
                            .unwrap_or_default()
                    );
                    break; // e.g. the port was taken meanwhile: try another one
                }
                if http(addr, "/v2/", "*/*").is_ok_and(|r| r.status == 200) {
                    return registry;
                }
                if Instant::now() > deadline {
                    panic!(
                        "{bin} did not answer on {addr} within {READY_TIMEOUT:?}: {}",
                        std::fs::read_to_string(registry.dir.join("registry.log"))
                            .unwrap_or_default()
                    );
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("cannot start the registry: {last_error}");
    }
}

pub(crate) struct Response {
    pub(crate) status: u16,
    headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The registry's answer to a GET of manifest `reference` (a tag or a digest) of
/// `repository`, asked for as an OCI image manifest.
pub(crate) fn get_manifest(addr: SocketAddr, repository: &str, reference: &str) -> Response {
    http(
        addr,
        &format!("/v2/{repository}/manifests/{reference}"),
        OCI_IMAGE_MEDIA_TYPE,
    )
    .unwrap()
}

/// The registry's answer to a GET of blob `digest` of `repository`.
pub(crate) fn get_blob(addr: SocketAddr, repository: &str, digest: &str) -> Response {
    http(addr, &format!("/v2/{repository}/blobs/{digest}"), "*/*").unwrap()
}

/// A plain HTTP/1.0 GET (no chunked encoding, the server closes the connection).
pub(crate) fn http(addr: SocketAddr, path: &str, accept: &str) -> std::io::Result<Response> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: {accept}\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no end of headers"))?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status line"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Ok(Response {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    })
}

/// `gpu-dist` with `args`, as `make push` runs it; fails unless it succeeds.
fn gpu_dist(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-dist"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

#[test]
fn every_policy_round_trips_through_a_real_registry() {
    let started = Instant::now();
    let registry = Registry::start();
    let addr = registry.addr;
    eprintln!("registry up on {addr} in {}", ms(started.elapsed()));

    let mut checked = 0;
    for policy in policies() {
        let name = &policy.name;
        let annotated = std::fs::read(policy.annotated_path())
            .unwrap_or_else(|e| panic!("{name}: {e}: run `make annotate` first"));
        let metadata = oci::embedded_metadata(&annotated)
            .unwrap()
            .unwrap_or_else(|| panic!("{name}: annotated-policy.wasm is not annotated"));
        let version = metadata
            .annotation("io.kubewarden.policy.version")
            .unwrap_or_else(|| panic!("{name}: no version annotation"));
        let repository = format!("gpu-admission/{name}");
        let tag = format!("v{version}");
        let uri = format!("registry://{addr}/{repository}:{tag}");

        // push
        let t = Instant::now();
        let pushed = oci::block_on(oci::push(&annotated, &uri, Transport::Auto, false))
            .unwrap()
            .unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let push_time = t.elapsed();
        assert_eq!(
            pushed.immutable_ref,
            format!("{addr}/{repository}@{}", pushed.manifest_digest)
        );
        let expected_annotations = oci::oci_annotations(&metadata);
        assert_eq!(
            expected_annotations.get(ORG_OPENCONTAINERS_IMAGE_SOURCE),
            metadata
                .annotation(ANNOTATION_SOURCE)
                .map(|s| s.trim().to_string())
                .as_ref(),
            "{name}: org.opencontainers.image.source"
        );
        assert!(
            !expected_annotations.contains_key("io.kubewarden.policy.usage"),
            "{name}: the README (multi-line) must not be a manifest annotation"
        );

        // pull by tag, then by digest
        let mut pull_times = Vec::new();
        for reference in [uri.clone(), format!("registry://{}", pushed.immutable_ref)] {
            let t = Instant::now();
            let pulled = oci::block_on(oci::pull(&reference, Transport::Auto))
                .unwrap()
                .unwrap_or_else(|e| panic!("{name}: {e:#}"));
            pull_times.push(t.elapsed());
            assert!(
                pulled.module == annotated,
                "{name}: {reference}: the pulled module differs"
            );
            assert_eq!(
                pulled.layer_media_type, WASM_LAYER_MEDIA_TYPE,
                "{reference}"
            );
            assert_eq!(pulled.config, CONFIG_BLOB, "{reference}");
            assert_eq!(
                pulled.config_media_type, WASM_CONFIG_MEDIA_TYPE,
                "{reference}"
            );
            assert_eq!(
                pulled.manifest_digest, pushed.manifest_digest,
                "{reference}"
            );
            assert_eq!(
                pulled.manifest.annotations.as_ref(),
                Some(&expected_annotations),
                "{reference}"
            );
            // The pulled module is the policy, with its metadata.
            let policy = Policy::from_bytes(&reference, &pulled.module).unwrap();
            assert_eq!(
                policy.metadata(),
                read_kubewarden_metadata(&annotated).as_ref()
            );
        }

        // The same, read without oci-client.
        let manifest = get_manifest(addr, &repository, &tag);
        assert_eq!(manifest.status, 200, "{name}: GET manifest");
        assert_eq!(manifest.header("Content-Type"), Some(OCI_IMAGE_MEDIA_TYPE));
        assert_eq!(
            manifest.header("Docker-Content-Digest"),
            Some(pushed.manifest_digest.as_str())
        );
        assert_eq!(sha256_digest(&manifest.body), pushed.manifest_digest);
        let m: Value = serde_json::from_slice(&manifest.body).unwrap();
        assert_eq!(m["schemaVersion"], 2);
        assert_eq!(m["config"]["mediaType"], WASM_CONFIG_MEDIA_TYPE);
        assert_eq!(m["config"]["digest"], sha256_digest(CONFIG_BLOB));
        assert_eq!(m["config"]["size"], CONFIG_BLOB.len());
        let layers = m["layers"].as_array().unwrap();
        assert_eq!(layers.len(), 1, "{name}: one layer");
        assert_eq!(layers[0]["mediaType"], WASM_LAYER_MEDIA_TYPE);
        assert_eq!(layers[0]["digest"], sha256_digest(&annotated));
        assert_eq!(layers[0]["size"], annotated.len());
        assert_eq!(
            m["annotations"],
            serde_json::to_value(&expected_annotations).unwrap()
        );
        let blob = get_blob(addr, &repository, &sha256_digest(&annotated));
        assert_eq!(blob.status, 200);
        assert!(blob.body == annotated, "{name}: the layer blob differs");
        let tags = http(addr, &format!("/v2/{repository}/tags/list"), "*/*").unwrap();
        let tags: Value = serde_json::from_slice(&tags.body).unwrap();
        assert_eq!(tags["tags"], serde_json::json!([tag]));

        eprintln!(
            "{name}: {} bytes, push {}, pull by tag {}, by digest {} -> {}",
            annotated.len(),
            ms(push_time),
            ms(pull_times[0]),
            ms(pull_times[1]),
            pushed.immutable_ref
        );
        checked += 1;
    }
    assert!(checked > 0);

    // The CLI, as `make push` runs it, prints kwctl's JSON.
    let first = policies().remove(0);
    let uri = format!("registry://{addr}/cli/{}:v0.0.0-test", first.name);
    let annotated = first.annotated_path();
    let out = gpu_dist(&["push", "-o", "json", annotated.to_str().unwrap(), &uri]);
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let immutable = printed["immutable_ref"].as_str().unwrap().to_string();
    assert!(
        immutable.starts_with(&format!("{addr}/cli/{}@sha256:", first.name)),
        "{immutable}"
    );
    let pulled_path = registry.dir.join("pulled.wasm");
    let out = gpu_dist(&["pull", "-o", pulled_path.to_str().unwrap(), &immutable]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        immutable.rsplit('@').next().unwrap()
    );
    assert!(std::fs::read(&pulled_path).unwrap() == std::fs::read(first.annotated_path()).unwrap());

    // What must fail does.
    let missing = oci::block_on(oci::pull(
        &format!("{addr}/gpu-admission/{}:v9.9.9", first.name),
        Transport::Auto,
    ))
    .unwrap();
    assert!(missing.is_err(), "pulling a tag that was never pushed");
    let raw = std::fs::read(gpu_e2e::module_path(&first.package().unwrap().name).unwrap()).unwrap();
    let unannotated = oci::block_on(oci::push(
        &raw,
        &format!("{addr}/x/y:v1"),
        Transport::Auto,
        false,
    ))
    .unwrap();
    assert!(unannotated.is_err(), "pushing an unannotated module");

    eprintln!("registry test done in {}", ms(started.elapsed()));
    drop(registry);
}
