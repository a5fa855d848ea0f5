//! A live cluster through a kubeconfig, read-only: the calls policy-server makes for
//! context-aware policies (get one object; list a kind, in all namespaces or one, with label
//! and field selectors), as plain GETs on the API server.
//!
//! Selectors are left to the API server; `field_masks` prune the answers as policy-server
//! does. The kubeconfig's current context gives the server, its CA
//! (`certificate-authority[-data]`, or `insecure-skip-tls-verify`) and the user: a bearer
//! token (`token`, `tokenFile`), a client certificate (`client-certificate[-data]` and
//! `client-key[-data]`) or basic auth. Exec and auth-provider plugins are not run: such a
//! kubeconfig is refused with a message saying so.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use gpu_e2e::{Call, CallbackRequest, HostResponder};
use serde::Deserialize;
use serde_json::Value;

use crate::cluster::{apply_field_masks, not_found};
use crate::request::{group_version, is_namespaced, resource_of};

/// How requests authenticate.
#[derive(Debug, Clone)]
enum Auth {
    None,
    Bearer(String),
    Basic(String, String),
}

/// A live cluster's API server.
pub struct LiveCluster {
    server: String,
    auth: Auth,
    client: reqwest::Client,
    runtime: tokio::runtime::Runtime,
}

impl std::fmt::Debug for LiveCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveCluster")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// `data` (base64) or the file `path` names (relative to the kubeconfig's folder).
fn bytes_of(entry: &Value, data: &str, path: &str, dir: &Path) -> Result<Option<Vec<u8>>, String> {
    if let Some(d) = entry[data].as_str() {
        return STANDARD
            .decode(d.trim())
            .map(Some)
            .map_err(|e| format!("{data} is not base64: {e}"));
    }
    if let Some(p) = entry[path].as_str() {
        let file = dir.join(p);
        return std::fs::read(&file)
            .map(Some)
            .map_err(|e| format!("{path} {}: {e}", file.display()));
    }
    Ok(None)
}

fn named<'a>(config: &'a Value, list: &str, name: &str, field: &str) -> Result<&'a Value, String> {
    config[list]
        .as_array()
        .and_then(|l| l.iter().find(|e| e["name"] == name))
        .map(|e| &e[field])
        .ok_or_else(|| format!("the kubeconfig has no {field} named {name:?} in {list}"))
}

impl LiveCluster {
    /// Reads the kubeconfig's current context.
    pub fn from_kubeconfig(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
        let config = Value::deserialize(yaml_serde::Deserializer::from_str(&text))
            .map_err(|e| format!("not a kubeconfig: {e}"))?;
        let dir = path
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let context_name = config["current-context"]
            .as_str()
            .ok_or("the kubeconfig has no current-context")?;
        let context = named(&config, "contexts", context_name, "context")?;
        let cluster = named(
            &config,
            "clusters",
            context["cluster"].as_str().unwrap_or_default(),
            "cluster",
        )?;
        let user = match context["user"].as_str() {
            Some(u) => named(&config, "users", u, "user")?.clone(),
            None => Value::Null,
        };
        if !user["exec"].is_null() || !user["auth-provider"].is_null() {
            return Err(
                "the kubeconfig's user authenticates with an exec or auth-provider plugin, which is not run here: give a token or a client certificate (e.g. a ServiceAccount token with read access)".into(),
            );
        }
        let server = cluster["server"]
            .as_str()
            .ok_or("the kubeconfig's cluster has no server")?
            .trim_end_matches('/')
            .to_string();
        // reqwest is built with rustls without a default crypto provider (as for the OCI
        // client): install ring's. An error only means one is set.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(10))
            .timeout(std::time::Duration::from_secs(60));
        if let Some(ca) = bytes_of(
            cluster,
            "certificate-authority-data",
            "certificate-authority",
            &dir,
        )? {
            let certs = reqwest::Certificate::from_pem_bundle(&ca)
                .map_err(|e| format!("certificate-authority: {e}"))?;
            builder = builder.tls_certs_only(certs);
        }
        if cluster["insecure-skip-tls-verify"] == true {
            builder = builder.tls_danger_accept_invalid_certs(true);
        }
        let cert = bytes_of(&user, "client-certificate-data", "client-certificate", &dir)?;
        let key = bytes_of(&user, "client-key-data", "client-key", &dir)?;
        if let (Some(mut cert), Some(key)) = (cert, key) {
            cert.push(b'\n');
            cert.extend(key);
            let identity = reqwest::Identity::from_pem(&cert)
                .map_err(|e| format!("client certificate: {e}"))?;
            builder = builder.identity(identity);
        }
        let auth = if let Some(token) = user["token"].as_str() {
            Auth::Bearer(token.to_string())
        } else if let Some(file) = user["tokenFile"].as_str() {
            Auth::Bearer(
                std::fs::read_to_string(dir.join(file))
                    .map_err(|e| format!("tokenFile {file}: {e}"))?
                    .trim()
                    .to_string(),
            )
        } else if let (Some(u), Some(p)) = (user["username"].as_str(), user["password"].as_str()) {
            Auth::Basic(u.to_string(), p.to_string())
        } else {
            Auth::None
        };
        let client = builder
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the async runtime: {e}"))?;
        Ok(Self {
            server,
            auth,
            client,
            runtime,
        })
    }

    /// The API path of a kind's objects (`/api/v1/namespaces/ns/pods`, `/apis/apps/v1/...`).
    fn collection(api_version: &str, kind: &str, namespace: Option<&str>) -> String {
        let (group, version) = group_version(api_version);
        let prefix = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let resource = resource_of(kind);
        match namespace {
            Some(ns) if is_namespaced(kind) => format!("{prefix}/namespaces/{ns}/{resource}"),
            _ => format!("{prefix}/{resource}"),
        }
    }

    /// GET `path` with `query`: the status and the body.
    fn get(&self, path: &str, query: &[(&str, &str)]) -> Result<(u16, Value), String> {
        let mut request = self
            .client
            .get(format!("{}{path}", self.server))
            .query(query)
            .header("Accept", "application/json");
        request = match &self.auth {
            Auth::None => request,
            Auth::Bearer(t) => request.bearer_auth(t),
            Auth::Basic(u, p) => request.basic_auth(u, Some(p)),
        };
        self.runtime.block_on(async {
            let response = request
                .send()
                .await
                .map_err(|e| format!("GET {path}: {e}"))?;
            let status = response.status().as_u16();
            let body = response
                .bytes()
                .await
                .map_err(|e| format!("GET {path}: {e}"))?;
            let value = serde_json::from_slice(&body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
            Ok((status, value))
        })
    }
}

/// The API server's message in a failed response (a `Status`), or the body.
fn failure(status: u16, body: &Value) -> String {
    body["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| format!("HTTP {status}: {body}"))
}

impl HostResponder for LiveCluster {
    fn answer(&self, request: &CallbackRequest) -> Result<Vec<u8>, String> {
        let list = match request.call() {
            Call::Get(get) => {
                let collection = Self::collection(get.api_version, get.kind, get.namespace);
                let (status, mut body) = self.get(&format!("{collection}/{}", get.name), &[])?;
                return match status {
                    200 => {
                        apply_field_masks(&mut body, get.field_masks);
                        Ok(serde_json::to_vec(&body).unwrap_or_default())
                    }
                    404 => Err(not_found(&get)),
                    _ => Err(failure(status, &body)),
                };
            }
            Call::List(list) => list,
            Call::Image(image) => {
                return Err(format!(
                    "Cannot fetch manifest and config of {image}: image registries are not read by gpu-admission check"
                ));
            }
        };
        let path = Self::collection(list.api_version, list.kind, list.namespace);
        let mut params = Vec::new();
        if let Some(l) = list.label_selector {
            params.push(("labelSelector", l));
        }
        if let Some(f) = list.field_selector {
            params.push(("fieldSelector", f));
        }
        let (status, mut body) = self.get(&path, &params)?;
        if status != 200 {
            return Err(failure(status, &body));
        }
        // The API server leaves apiVersion and kind out of list items.
        if let Some(items) = body["items"].as_array_mut() {
            for o in items.iter_mut().filter_map(Value::as_object_mut) {
                o.entry("apiVersion")
                    .or_insert_with(|| Value::String(list.api_version.to_string()));
                o.entry("kind")
                    .or_insert_with(|| Value::String(list.kind.to_string()));
            }
            for o in items.iter_mut() {
                apply_field_masks(o, list.field_masks);
            }
        }
        Ok(serde_json::to_vec(&body).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_paths() {
        assert_eq!(
            LiveCluster::collection("v1", "Pod", Some("ml")),
            "/api/v1/namespaces/ml/pods"
        );
        assert_eq!(
            LiveCluster::collection("v1", "Node", Some("x")),
            "/api/v1/nodes"
        );
        assert_eq!(
            LiveCluster::collection("apps/v1", "Deployment", None),
            "/apis/apps/v1/deployments"
        );
    }

    #[test]
    fn plugins_are_refused_by_name() {
        let dir = gpu_e2e::kwctl::TempDir::new("check-kube");
        let path = dir.write(
            "config",
            "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\nclusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {exec: {command: aws}}}]\n",
        );
        let err = LiveCluster::from_kubeconfig(&path).unwrap_err();
        assert!(err.contains("exec or auth-provider plugin"), "{err}");
        std::fs::write(&path, "current-context: missing\n").unwrap();
        assert_eq!(
            LiveCluster::from_kubeconfig(&path).unwrap_err(),
            "the kubeconfig has no context named \"missing\" in contexts"
        );
    }
}
