//! Image labels: what a server image's config says about the model it serves, read with
//! Kubewarden's `oci/v1/oci_manifest_config` host capability (settings `imageLabels`).
//!
//! The answer is policy-evaluator's `ManifestAndConfigResponse`: `{manifest, digest,
//! config}`, where `config` is the image configuration as the registry stores it, with
//! the labels in `config.Labels` and the environment in `config.Env` (of which the
//! variables the NVIDIA container toolkit checks, [`super::cuda`]). Each distinct image of a request is asked for at most
//! once; nothing is kept between requests (the host caches answers for a minute).

use super::numbers::parse_thousandths;
use crate::cluster::{Cluster, OciManifestConfig};
use crate::inventory::Version;
use crate::workload::At;
use serde::Deserialize;
use serde_json::Value;
use std::cell::RefCell;
use std::collections::BTreeMap;

/// The default label naming the model an image serves.
pub const DEFAULT_MODEL_LABEL: &str = "io.gpu-admission.model";
/// The default label giving the GPU memory (GiB) the image's model needs.
pub const DEFAULT_VRAM_LABEL: &str = "io.gpu-admission.vram-gib";
/// The default label giving the least driver version the image needs.
pub const DEFAULT_MIN_DRIVER_LABEL: &str = "io.gpu-admission.min-driver-version";
/// The default label giving the least CUDA version (of the driver) the image needs.
pub const DEFAULT_MIN_CUDA_LABEL: &str = "io.gpu-admission.min-cuda-version";
/// The most GiB an image label may give (as the registry's `vramGiB`).
const MAX_VRAM_THOUSANDTHS: u64 = 1_000_000_000;

/// Settings `imageLabels`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ImageLabelSettings {
    /// Read the labels (one host call per distinct GPU container image).
    pub enabled: bool,
    pub model_key: String,
    #[serde(rename = "vramGiBKey")]
    pub vram_gib_key: String,
    /// The label giving the least driver version (checked against the nodes with
    /// `nodeInventory`; `""` turns it off).
    pub min_driver_version_key: String,
    /// The label giving the least CUDA version (likewise).
    pub min_cuda_version_key: String,
    /// Check the CUDA requirement of the image's environment (`NVIDIA_REQUIRE_CUDA`,
    /// `CUDA_VERSION`), with the container's `env` over it, against the nodes (with
    /// `nodeInventory`).
    pub cuda_requirement_from_env: bool,
}

impl Default for ImageLabelSettings {
    fn default() -> Self {
        ImageLabelSettings {
            enabled: false,
            model_key: DEFAULT_MODEL_LABEL.into(),
            vram_gib_key: DEFAULT_VRAM_LABEL.into(),
            min_driver_version_key: DEFAULT_MIN_DRIVER_LABEL.into(),
            min_cuda_version_key: DEFAULT_MIN_CUDA_LABEL.into(),
            cuda_requirement_from_env: true,
        }
    }
}

/// What one image's labels say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    pub image: String,
    /// The model the image names.
    pub model: Option<String>,
    /// The GPU memory the image's model needs, in thousandths of a GiB.
    pub vram_gib_thousandths: Option<u64>,
    /// The least driver and CUDA versions the image needs, with the label each is from.
    pub min_versions: [Option<(Version, String)>; 2],
    /// The variables of `config.Env` the NVIDIA container toolkit reads for its
    /// requirements ([`super::cuda::is_read`]), in order; `Err` says why `config.Env`
    /// cannot be read.
    pub cuda_env: Result<Vec<(String, String)>, String>,
}

impl Default for ImageInfo {
    fn default() -> Self {
        ImageInfo {
            image: String::new(),
            model: None,
            vram_gib_thousandths: None,
            min_versions: [None, None],
            cuda_env: Ok(Vec::new()),
        }
    }
}

/// The image configs of one admission request, read on demand.
pub struct Images<'a> {
    settings: &'a ImageLabelSettings,
    cluster: &'a dyn Cluster,
    read: RefCell<BTreeMap<String, Result<ImageInfo, String>>>,
}

impl<'a> Images<'a> {
    pub fn new(settings: &'a ImageLabelSettings, cluster: &'a dyn Cluster) -> Self {
        Images {
            settings,
            cluster,
            read: RefCell::new(BTreeMap::new()),
        }
    }

    /// The label keys, for messages.
    pub fn settings(&self) -> &ImageLabelSettings {
        self.settings
    }

    /// Distinct images asked for so far.
    pub fn calls(&self) -> usize {
        self.read.borrow().len()
    }

    /// The labels of `image`; `Err` is a sentence saying why they cannot be read.
    pub fn info(&self, image: &str) -> Result<ImageInfo, String> {
        if let Some(known) = self.read.borrow().get(image) {
            return known.clone();
        }
        let answer = self
            .cluster
            .oci_manifest_config(&OciManifestConfig {
                image: image.to_string(),
            })
            .map_err(|e| {
                format!(
                    "the config of image {image} cannot be read ({}): check that the image exists and that the policy server can pull from its registry (imageLabels)",
                    crate::cluster::short_error(&e)
                )
            })
            .and_then(|bytes| self.parse(image, &bytes));
        self.read
            .borrow_mut()
            .insert(image.to_string(), answer.clone());
        answer
    }

    fn parse(&self, image: &str, bytes: &[u8]) -> Result<ImageInfo, String> {
        let malformed = |why: String| format!("the config of image {image} is unreadable: {why}");
        let answer: Value = serde_json::from_slice(bytes)
            .map_err(|e| malformed(format!("the host returned no JSON ({e})")))?;
        let cuda_env = cuda_env(answer.at("/config/config/Env"));
        let empty = serde_json::Map::new();
        let labels = match answer.at("/config/config/Labels") {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(map)) => map,
            Some(_) => return Err(malformed("config.Labels is not a map".into())),
        };
        let label = |key: &str| -> Result<Option<String>, String> {
            match labels.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
                Some(other) => Err(format!(
                    "the label {key} of image {image} is {other}, not a string"
                )),
            }
        };
        let model = if self.settings.model_key.is_empty() {
            None
        } else {
            label(&self.settings.model_key)?
        };
        let vram_gib_thousandths = if self.settings.vram_gib_key.is_empty() {
            None
        } else {
            match label(&self.settings.vram_gib_key)? {
                None => None,
                Some(text) => {
                    let t = parse_thousandths(&text)
                        .filter(|t| (1..=MAX_VRAM_THOUSANDTHS).contains(t))
                        .ok_or_else(|| {
                            format!(
                                "the label {} of image {image} is '{text}', not a number of GiB (like 20 or 20.5)",
                                self.settings.vram_gib_key
                            )
                        })?;
                    Some(t)
                }
            }
        };
        let mut min_versions: [Option<(Version, String)>; 2] = [None, None];
        for (slot, key) in min_versions.iter_mut().zip([
            &self.settings.min_driver_version_key,
            &self.settings.min_cuda_version_key,
        ]) {
            if key.is_empty() {
                continue;
            }
            if let Some(text) = label(key)? {
                let v = Version::parse(&text).ok_or_else(|| {
                    format!(
                        "the label {key} of image {image} is '{text}', not a version like 535.104 (dotted whole numbers)"
                    )
                })?;
                *slot = Some((v, format!("label {key} of image {image}")));
            }
        }
        Ok(ImageInfo {
            image: image.to_string(),
            model,
            vram_gib_thousandths,
            min_versions,
            cuda_env,
        })
    }
}

/// The variables of an image config's `Env` (`["NAME=value", ...]`) the NVIDIA container
/// toolkit reads for its requirements.
fn cuda_env(env: Option<&Value>) -> Result<Vec<(String, String)>, String> {
    let entries = match env {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(entries)) => entries,
        Some(_) => return Err("config.Env is not a list".into()),
    };
    let mut out = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let Value::String(entry) = entry else {
            return Err(format!("config.Env[{i}] is {entry}, not a string"));
        };
        if let Some((name, value)) = entry.split_once('=')
            && super::cuda::is_read(name)
        {
            out.push((name.to_string(), value.to_string()));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterRequest;
    use serde_json::json;
    use std::cell::Cell;

    struct Registry {
        answer: Result<Value, String>,
        calls: Cell<usize>,
    }

    impl Cluster for Registry {
        fn call(&self, _: &ClusterRequest) -> Result<Vec<u8>, String> {
            Err("no Kubernetes calls".into())
        }

        fn oci_manifest_config(&self, request: &OciManifestConfig) -> Result<Vec<u8>, String> {
            self.calls.set(self.calls.get() + 1);
            assert_eq!(request.payload(), br#""vllm/vllm-openai:v0.6.3""#);
            self.answer.clone().map(|v| v.to_string().into_bytes())
        }
    }

    fn answer(labels: Value) -> Result<Value, String> {
        Ok(
            json!({"manifest": {"schemaVersion": 2, "config": {}}, "digest": "sha256:0",
                  "config": {"architecture": "amd64", "os": "linux", "config": {"Labels": labels}}}),
        )
    }

    fn info(answer: Result<Value, String>) -> Result<ImageInfo, String> {
        let settings = ImageLabelSettings {
            enabled: true,
            ..ImageLabelSettings::default()
        };
        let registry = Registry {
            answer,
            calls: Cell::new(0),
        };
        let images = Images::new(&settings, &registry);
        let first = images.info("vllm/vllm-openai:v0.6.3");
        assert_eq!(images.info("vllm/vllm-openai:v0.6.3"), first);
        assert_eq!(registry.calls.get(), 1, "one call per image");
        first
    }

    #[test]
    fn labels_name_the_model_and_its_memory() {
        let i = info(answer(
            json!({"io.gpu-admission.model": "meta-llama/Llama-3.1-8B-Instruct",
            "io.gpu-admission.vram-gib": "20.5", "maintainer": "x"}),
        ))
        .unwrap();
        assert_eq!(i.model.as_deref(), Some("meta-llama/Llama-3.1-8B-Instruct"));
        assert_eq!(i.vram_gib_thousandths, Some(20500));
        let versions = info(answer(
            json!({"io.gpu-admission.min-driver-version": "550.54",
            "io.gpu-admission.min-cuda-version": "12.4"}),
        ))
        .unwrap();
        assert_eq!(
            versions.min_versions,
            [
                Some((
                    Version::parse("550.54").unwrap(),
                    "label io.gpu-admission.min-driver-version of image vllm/vllm-openai:v0.6.3"
                        .to_string()
                )),
                Some((
                    Version::parse("12.4").unwrap(),
                    "label io.gpu-admission.min-cuda-version of image vllm/vllm-openai:v0.6.3"
                        .to_string()
                )),
            ]
        );
        assert_eq!(
            info(answer(
                json!({"io.gpu-admission.min-cuda-version": "twelve"})
            ))
            .unwrap_err(),
            "the label io.gpu-admission.min-cuda-version of image vllm/vllm-openai:v0.6.3 is 'twelve', not a version like 535.104 (dotted whole numbers)"
        );
        let none = info(answer(Value::Null)).unwrap();
        assert_eq!((none.model, none.vram_gib_thousandths), (None, None));
    }

    #[test]
    fn the_environment_keeps_the_nvidia_toolkits_variables() {
        let with_env = |env: Value| {
            info(Ok(json!({"config": {"config": {"Env": env}}})))
                .unwrap()
                .cuda_env
        };
        assert_eq!(
            with_env(json!([
                "PATH=/usr/bin",
                "NVIDIA_REQUIRE_CUDA=cuda>=12.4 brand=tesla,driver>=535,driver<536",
                "CUDA_VERSION=12.4.1",
                "NVIDIA_DISABLE_REQUIRE=",
                "NO_VALUE"
            ])),
            Ok(vec![
                (
                    "NVIDIA_REQUIRE_CUDA".into(),
                    "cuda>=12.4 brand=tesla,driver>=535,driver<536".into()
                ),
                ("CUDA_VERSION".into(), "12.4.1".into()),
                ("NVIDIA_DISABLE_REQUIRE".into(), String::new()),
            ])
        );
        assert_eq!(with_env(Value::Null), Ok(Vec::new()));
        assert_eq!(
            with_env(json!("PATH=/bin")),
            Err("config.Env is not a list".into())
        );
        assert_eq!(
            with_env(json!(["A=b", 7])),
            Err("config.Env[1] is 7, not a string".into())
        );
        // An unreadable environment does not hide the labels.
        let i = info(Ok(json!({"config": {"config": {"Env": 5,
            "Labels": {"io.gpu-admission.model": "m"}}}})))
        .unwrap();
        assert_eq!(i.model.as_deref(), Some("m"));
    }

    #[test]
    fn unreadable_answers_are_sentences() {
        assert_eq!(
            info(Err(
                "Host error: Callback evaluation failure: manifest unknown\nmore".into()
            ))
            .unwrap_err(),
            "the config of image vllm/vllm-openai:v0.6.3 cannot be read (manifest unknown): check that the image exists and that the policy server can pull from its registry (imageLabels)"
        );
        assert_eq!(
            info(answer(json!({"io.gpu-admission.vram-gib": "lots"}))).unwrap_err(),
            "the label io.gpu-admission.vram-gib of image vllm/vllm-openai:v0.6.3 is 'lots', not a number of GiB (like 20 or 20.5)"
        );
        assert!(
            info(Ok(json!({"config": {"config": {"Labels": []}}})))
                .unwrap_err()
                .contains("config.Labels is not a map")
        );
        assert!(info(Ok(json!("x"))).unwrap().model.is_none());
    }
}
