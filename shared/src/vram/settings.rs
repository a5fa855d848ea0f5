//! The policy's settings and their checks. [`Settings::check`] checks everything
//! (`validate_settings`) and gives the [`Config`] the rule runs on; [`Checked`] holds both,
//! as the rules take them.

use super::catalog::model::ModelEntry;
use super::catalog::products::GpuCatalog;
use super::catalog::registry::RegistryRef;
use super::image::ImageLabelSettings;
use super::numbers::NumText;
use crate::gpu::{MIG_PREFIX, MigProfile};
use crate::inventory::InventorySettings;
use crate::settings::{
    CheckedForm, FieldError, ValidateSettings, policy_settings, validate_label_key,
    validate_label_value,
};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

pub use crate::settings::Action;

/// The default pod-template label (and annotation) naming the model.
pub const DEFAULT_MODEL_KEY: &str = "gpu-admission/model";
/// GFD's product label.
pub const DEFAULT_PRODUCT_LABEL_KEY: &str = "nvidia.com/gpu.product";
pub use crate::settings::DEFAULT_POOL_LABEL_KEY;
/// vLLM's default `--gpu-memory-utilization` (0.9), as a percentage.
pub const DEFAULT_USABLE_MEMORY_PERCENT: u64 = 90;
/// GPUs per pod considered when suggesting a count (a node rarely has more than 8).
pub const DEFAULT_MAX_GPUS_PER_POD: u64 = 8;

/// Caps on model memory by the value of a pod-template label (e.g. interactive models at
/// most 40 GiB).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct MemoryCaps {
    /// The label whose value picks the cap, e.g. `gpu-admission/workload-type`.
    pub label_key: String,
    /// Label value -> the most GPU memory (GiB) a model may need.
    #[serde(rename = "maxGiB")]
    pub max_gib: BTreeMap<String, NumText>,
}

/// Caps on the GPU memory a workload asks for (GPUs x memory per GPU), by the value of a
/// pod-template label, whether or not it names a model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct RequestedCaps {
    /// The label whose value picks the cap, e.g. `gpu-admission/workload-type`.
    pub label_key: String,
    /// Label value -> the most GPU memory (GiB) one serving unit may ask for.
    #[serde(rename = "maxGiB")]
    pub max_gib: BTreeMap<String, NumText>,
    /// Appended to the rejection (e.g. `Need more VRAM? Talk to the platform team.`).
    pub message: String,
}

/// Requested-memory caps, checked: the label key, value -> MiB, the message suffix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestedCapsConfig {
    pub label_key: String,
    pub max_mib: BTreeMap<String, u64>,
    pub message: String,
}

policy_settings! {
    /// Settings of gpu-vram-fit-policy. Every field has a default that works out of the box.
    #[derive(Debug, Clone, Deserialize)]
    pub struct Settings {
        /// Pod-template label naming the model (`""` turns it off).
        pub model_label_key: String = DEFAULT_MODEL_KEY.into(),
        /// Pod-template annotation naming the model, for ids with `/` (`""` turns it off).
        pub model_annotation_key: String = DEFAULT_MODEL_KEY.into(),
        /// The model registry: id -> `{vramGiB}` or a description, each read when a
        /// request names it.
        pub models: BTreeMap<String, ModelEntry> = BTreeMap::new(),
        /// A ConfigMap holding more registry entries (read with `get_resource`).
        pub model_registry: Option<RegistryRef> = None,
        /// GPU products (GFD names) -> MiB per GPU, added to or overriding the catalog.
        pub gpu_products: BTreeMap<String, NumText> = BTreeMap::new(),
        /// MIG profiles (`3g.40gb`) -> MiB per device, overriding the nominal size.
        pub mig_profiles: BTreeMap<String, NumText> = BTreeMap::new(),
        /// Node label holding the GPU product.
        pub product_label_key: String = DEFAULT_PRODUCT_LABEL_KEY.into(),
        /// Pod-template label (or node label) naming the GPU pool (`""` turns pools off).
        pub pool_label_key: String = DEFAULT_POOL_LABEL_KEY.into(),
        /// Pool -> GPU product of its nodes.
        pub pool_products: BTreeMap<String, String> = BTreeMap::new(),
        /// Percent of each GPU's memory the server may use (vLLM: 90).
        pub usable_memory_percent: NumText = DEFAULT_USABLE_MEMORY_PERCENT.into(),
        /// The most GPUs per pod a suggestion may ask for.
        pub max_gpus_per_pod: NumText = DEFAULT_MAX_GPUS_PER_POD.into(),
        /// Products suggestions may name (default: the pools' products, else the catalog).
        pub suggest_products: Vec<String> = Vec::new(),
        /// A GPU workload whose GPU product cannot be told.
        pub unknown_gpu: Action = Action::Deny,
        /// A GPU workload naming a model that is not in the registry.
        pub unknown_model: Action = Action::Deny,
        /// A GPU workload naming no model.
        pub no_model: Action = Action::Allow,
        /// Caps on model memory by label value.
        pub model_memory_caps: Option<MemoryCaps> = None,
        /// Caps on the GPU memory asked for, by label value.
        pub requested_memory_caps: Option<RequestedCaps> = None,
        /// A pod-template label naming one model and the server arguments (or image label)
        /// another.
        pub model_mismatch: Action = Action::Deny,
        /// A model that fits in at most half the GPU memory asked for.
        pub overprovision: Action = Action::Warn,
        /// Read the model and its memory from labels of the server image's config.
        pub image_labels: ImageLabelSettings = ImageLabelSettings::default(),
        /// Read the GPU nodes (opt-in): the memory per GPU they report, and a workload
        /// that selects what no node offers is denied.
        pub node_inventory: InventorySettings = InventorySettings::default(),
        @shared + exceptions;
    }
}

/// The settings checked, in the form the rules take: the settings, with their [`Config`]
/// (the `models` entries are read when a request names one: [`ModelEntry::model`]).
#[derive(Debug, Clone)]
pub struct Checked {
    settings: Box<Settings>,
    pub config: Config,
}

impl CheckedForm<Settings> for Checked {
    fn check(settings: Box<Settings>) -> Result<Box<Checked>, FieldError> {
        let config = settings.check()?;
        Ok(Box::new(Checked { settings, config }))
    }

    /// Every check but that of the `models` entries: each is read and checked when a
    /// request names it ([`super::catalog::model::ModelEntry::model`]), once per instance.
    /// Reading one costs about 17k x86 instructions, for entries the request does not name.
    fn prepare(settings: Box<Settings>) -> Result<Box<Checked>, FieldError> {
        let config = settings.config()?;
        Ok(Box::new(Checked { settings, config }))
    }
}

crate::settings::holds_settings!(Checked => Settings);

/// Settings, checked and ready to use (the `models` entries apart: see [`ModelEntry`]).
#[derive(Debug, Clone)]
pub struct Config {
    pub catalog: GpuCatalog,
    pub usable_percent: u64,
    pub max_gpus_per_pod: u64,
    /// Label value -> cap in MiB, with the label key.
    pub caps: Option<(String, BTreeMap<String, u64>)>,
    /// Caps on the GPU memory asked for.
    pub requested_caps: Option<RequestedCapsConfig>,
    /// Where suggestions' targets come from; [`Config::targets`] lists them.
    target_source: TargetSource,
    targets: std::cell::OnceCell<Vec<Target>>,
}

/// What suggestions may name, as settings give it: the pools with their products, else
/// `suggestProducts`, else the catalog's whole-GPU products.
#[derive(Debug, Clone)]
enum TargetSource {
    Pools(Vec<(String, String)>),
    Products(Vec<String>),
    Catalog,
}

/// Something a suggestion can point at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub pool: Option<String>,
    pub product: String,
    pub mib: u64,
}

const MAX_DEVICE_MIB: u64 = 16 * 1024 * 1024; // 16 TiB per GPU: catches unit mistakes
const MAX_CAP_GIB: u64 = 1_000_000;

/// The denial for settings found invalid while judging a request (`validate_settings`
/// refuses them first, so only settings that never went through it get here).
pub fn invalid_settings(e: &FieldError) -> String {
    format!("gpu-vram-fit-policy has invalid settings: {e}")
}

impl Settings {
    /// Checks everything (`validate_settings`); errors start with the field path.
    pub fn check(&self) -> Result<Config, FieldError> {
        self.check_models()?;
        self.config()
    }

    /// Every `models` entry read and checked, and no two sharing an id or alias (ignoring
    /// case).
    pub fn check_models(&self) -> Result<(), FieldError> {
        // Id or alias, lowercased -> the id it belongs to.
        let mut names: BTreeMap<String, &String> = BTreeMap::new();
        for (id, entry) in &self.models {
            if id.trim().is_empty() {
                return Err(FieldError::new("models", "a model id must not be empty"));
            }
            entry.model(id).as_ref().map_err(Clone::clone)?;
            for (i, name) in std::iter::once(id).chain(entry.aliases()).enumerate() {
                if let Some(other) = names.insert(name.to_ascii_lowercase(), id)
                    && other != id
                {
                    let at = match i {
                        0 => format!("models[{id}]"),
                        _ => format!("models[{id}].aliases[{}]", i - 1),
                    };
                    return Err(FieldError::new(
                        at,
                        format!(
                            "'{name}' is also the id or an alias of models[{other}] (ids and aliases are matched ignoring case)"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Checks everything but the `models` entries ([`Settings::check_models`]).
    fn config(&self) -> Result<Config, FieldError> {
        for (field, key) in [
            ("modelLabelKey", &self.model_label_key),
            ("modelAnnotationKey", &self.model_annotation_key),
            ("poolLabelKey", &self.pool_label_key),
        ] {
            if !key.is_empty() {
                validate_label_key(field, key)?;
            }
        }
        validate_label_key("productLabelKey", &self.product_label_key)?;
        self.node_inventory.validate("nodeInventory")?;
        if let Some(r) = self.registry() {
            check_registry(r)?;
        }

        let mut products = BTreeMap::new();
        for (name, mib) in &self.gpu_products {
            let field = label_value_entry("gpuProducts", "product", name)?;
            products.insert(name.clone(), mib.whole(&field, 1, MAX_DEVICE_MIB)?);
        }
        let mut migs = BTreeMap::new();
        for (profile, mib) in &self.mig_profiles {
            let field = format!("migProfiles[{profile}]");
            if MigProfile::from_resource_name(&format!("{MIG_PREFIX}{profile}")).is_none() {
                return Err(FieldError::new(
                    field,
                    format!(
                        "'{profile}' is not a MIG profile like 3g.40gb (the part after nvidia.com/mig-)"
                    ),
                ));
            }
            migs.insert(profile.clone(), mib.whole(&field, 1, MAX_DEVICE_MIB)?);
        }
        let catalog = GpuCatalog::new(products, migs);

        for (pool, product) in &self.pool_products {
            let field = label_value_entry("poolProducts", "pool", pool)?;
            known_product(&catalog, &field, product)?;
        }
        if !self.pool_products.is_empty() && self.pool_label_key.is_empty() {
            return Err(FieldError::new(
                "poolLabelKey",
                "must be set when poolProducts is given (e.g. gpu-admission/pool)",
            ));
        }
        for (i, product) in self.suggest_products.iter().enumerate() {
            known_product(&catalog, &format!("suggestProducts[{i}]"), product)?;
        }

        let usable_percent = {
            let text = self.usable_memory_percent.0.trim();
            if text.starts_with("0.") || text == "1.0" {
                return Err(FieldError::new(
                    "usableMemoryPercent",
                    format!(
                        "give a whole percentage such as 90 (for vLLM's --gpu-memory-utilization 0.9), got '{text}'"
                    ),
                ));
            }
            self.usable_memory_percent
                .whole("usableMemoryPercent", 1, 100)?
        };
        let max_gpus_per_pod = self.max_gpus_per_pod.whole("maxGpusPerPod", 1, 64)?;
        let image = &self.image_labels;
        for (field, key) in [
            ("imageLabels.modelKey", &image.model_key),
            ("imageLabels.vramGiBKey", &image.vram_gib_key),
            (
                "imageLabels.minDriverVersionKey",
                &image.min_driver_version_key,
            ),
            ("imageLabels.minCudaVersionKey", &image.min_cuda_version_key),
        ] {
            if key.len() > 253 || key.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(FieldError::new(
                    field,
                    format!(
                        "'{key}' is not an image label key (at most 253 characters, no spaces), like io.gpu-admission.model"
                    ),
                ));
            }
        }
        if image.enabled && image.model_key.is_empty() && image.vram_gib_key.is_empty() {
            return Err(FieldError::new(
                "imageLabels",
                "enabled, but modelKey and vramGiBKey are both empty: name at least one label",
            ));
        }

        let caps = match &self.model_memory_caps {
            None => None,
            Some(c) => label_caps("modelMemoryCaps", &c.label_key, &c.max_gib)?
                .map(|caps| (c.label_key.clone(), caps)),
        };

        let requested_caps = match &self.requested_memory_caps {
            None => None,
            Some(c) => match label_caps("requestedMemoryCaps", &c.label_key, &c.max_gib)? {
                None => None,
                Some(max_mib) => {
                    if c.message.len() > 1024 {
                        return Err(FieldError::new(
                            "requestedMemoryCaps.message",
                            format!("at most 1024 characters, got {}", c.message.len()),
                        ));
                    }
                    Some(RequestedCapsConfig {
                        label_key: c.label_key.clone(),
                        max_mib,
                        message: c.message.trim().to_string(),
                    })
                }
            },
        };

        self.validate_shared()?;
        crate::exceptions::HasExceptions::validate_exceptions(self, &RULE_NAMES)?;

        let target_source = if !self.pool_products.is_empty() {
            TargetSource::Pools(
                self.pool_products
                    .iter()
                    .map(|(pool, p)| (pool.clone(), p.clone()))
                    .collect(),
            )
        } else if !self.suggest_products.is_empty() {
            TargetSource::Products(self.suggest_products.clone())
        } else {
            TargetSource::Catalog
        };
        Ok(Config {
            catalog,
            usable_percent,
            max_gpus_per_pod,
            caps,
            requested_caps,
            target_source,
            targets: std::cell::OnceCell::new(),
        })
    }

    /// The registry ConfigMap, unless unset or left empty (no name and no namespace).
    pub fn registry(&self) -> Option<&RegistryRef> {
        self.model_registry
            .as_ref()
            .filter(|r| !(r.name.is_empty() && r.namespace.is_empty()))
    }
}

impl Config {
    /// Targets suggestions may name, smallest memory first: the pools (with their
    /// products) when pools are configured; else `suggestProducts`; else every whole-GPU
    /// product of the catalog. Built the first time a suggestion needs them.
    pub fn targets(&self) -> &[Target] {
        self.targets.get_or_init(|| {
            let catalog = &self.catalog;
            let mib = |p: &str| catalog.product(p).map(|d| d.mib).unwrap_or(0);
            let mut targets: Vec<Target> = match &self.target_source {
                TargetSource::Pools(pools) => pools
                    .iter()
                    .filter(|(_, p)| catalog.product(p).is_some_and(|d| !d.shared))
                    .map(|(pool, p)| Target {
                        pool: Some(pool.clone()),
                        product: p.clone(),
                        mib: mib(p),
                    })
                    .collect(),
                TargetSource::Products(products) => {
                    let unique: BTreeSet<&String> = products.iter().collect();
                    unique
                        .into_iter()
                        .map(|p| Target {
                            pool: None,
                            product: p.clone(),
                            mib: mib(p),
                        })
                        .collect()
                }
                TargetSource::Catalog => catalog
                    .suggestable()
                    .into_iter()
                    .map(|(product, mib)| Target {
                        pool: None,
                        product,
                        mib,
                    })
                    .collect(),
            };
            targets.sort_by(|a, b| {
                a.mib
                    .cmp(&b.mib)
                    .then_with(|| a.product.cmp(&b.product))
                    .then_with(|| a.pool.cmp(&b.pool))
            });
            targets
        })
    }
}

/// The field `<map>[<key>]` of a map keyed by label values (`gpuProducts`,
/// `poolProducts`), its key checked: a `<what>` name, not empty, and a label value.
fn label_value_entry(map: &str, what: &str, key: &str) -> Result<String, FieldError> {
    if key.is_empty() {
        return Err(FieldError::new(
            map,
            format!("a {what} name must not be empty"),
        ));
    }
    let field = format!("{map}[{key}]");
    validate_label_value(&field, key)?;
    Ok(field)
}

/// A block of caps by label value (`modelMemoryCaps`, `requestedMemoryCaps`, named `name`),
/// checked: value -> cap in MiB, or none when the block is empty (what a settings form
/// leaves behind).
fn label_caps(
    name: &str,
    label_key: &str,
    max_gib: &BTreeMap<String, NumText>,
) -> Result<Option<BTreeMap<String, u64>>, FieldError> {
    if label_key.is_empty() && max_gib.is_empty() {
        return Ok(None);
    }
    validate_label_key(&format!("{name}.labelKey"), label_key)?;
    if max_gib.is_empty() {
        return Err(FieldError::new(
            format!("{name}.maxGiB"),
            "give at least one label value and its cap, e.g. interactive: 40",
        ));
    }
    let mut caps = BTreeMap::new();
    for (value, gib) in max_gib {
        let field = format!("{name}.maxGiB[{value}]");
        validate_label_value(&field, value)?;
        caps.insert(value.clone(), gib.whole(&field, 1, MAX_CAP_GIB)? * 1024);
    }
    Ok(Some(caps))
}

fn known_product(catalog: &GpuCatalog, field: &str, product: &str) -> Result<(), FieldError> {
    if catalog.product(product).is_none() {
        return Err(FieldError::new(
            field,
            format!(
                "GPU product '{product}' is not in the catalog; add it to gpuProducts with its memory in MiB (nvidia.com/gpu.memory on its nodes)"
            ),
        ));
    }
    Ok(())
}

fn check_registry(r: &RegistryRef) -> Result<(), FieldError> {
    crate::settings::validate_config_map_ref(
        "modelRegistry",
        &r.namespace,
        &r.name,
        r.key.as_deref(),
    )
}

impl ValidateSettings for Settings {
    fn validate(&self) -> Result<(), FieldError> {
        self.check().map(|_| ())
    }
}

/// The rule names `exceptions[].rules` may give.
pub const RULE_NAMES: [&str; 1] = ["vramFit"];

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{Value, json};

    fn settings(v: Value) -> Settings {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn defaults_work_out_of_the_box() {
        let s = settings(json!({}));
        let c = s.check().unwrap();
        assert_eq!(s.model_label_key, "gpu-admission/model");
        assert_eq!(s.model_annotation_key, "gpu-admission/model");
        assert_eq!(s.product_label_key, "nvidia.com/gpu.product");
        assert_eq!(s.pool_label_key, "gpu-admission/pool");
        assert_eq!((c.usable_percent, c.max_gpus_per_pod), (90, 8));
        assert_eq!(
            (&s.unknown_gpu, &s.unknown_model, &s.no_model),
            (&Action::Deny, &Action::Deny, &Action::Allow)
        );
        assert!(c.caps.is_none() && c.requested_caps.is_none());
        assert_eq!(
            (&s.model_mismatch, &s.overprovision),
            (&Action::Deny, &Action::Warn)
        );
        assert!(!s.image_labels.enabled);
        assert_eq!(s.image_labels.model_key, "io.gpu-admission.model");
        assert_eq!(s.image_labels.vram_gib_key, "io.gpu-admission.vram-gib");
        assert!(
            c.targets()
                .iter()
                .any(|t| t.product == "NVIDIA-H100-80GB-HBM3")
        );
        assert!(c.targets().iter().all(|t| t.pool.is_none()));
    }

    #[test]
    fn a_full_configuration_is_valid() {
        let s = settings(json!({
            "modelLabelKey": "example.com/model",
            "modelAnnotationKey": "",
            "models": {
                "meta-llama/Llama-3.1-70B-Instruct": {"parametersBillions": 70.6, "dtype": "bf16",
                    "layers": 80, "kvHeads": 8, "headDim": 128, "contextLength": 8192,
                    "concurrency": 8, "attentionHeads": 64, "aliases": ["llama-3.1-70b"]},
                "embedder": {"vramGiB": 2.5}
            },
            "modelRegistry": {"namespace": "gpu-system", "name": "gpu-models", "key": "models.yaml"},
            "gpuProducts": {"NVIDIA-RTX-PRO-6000": 97887},
            "migProfiles": {"1g.12gb": 11008},
            "poolProducts": {"a10g": "NVIDIA-A10G", "h100": "NVIDIA-H100-80GB-HBM3", "rtx": "NVIDIA-RTX-PRO-6000"},
            "usableMemoryPercent": 85,
            "maxGpusPerPod": 4,
            "unknownGpu": "warn", "unknownModel": "allow", "noModel": "deny",
            "modelMemoryCaps": {"labelKey": "gpu-admission/workload-type", "maxGiB": {"interactive": 40}},
            "requestedMemoryCaps": {"labelKey": "gpu-admission/workload-type", "maxGiB": {"interactive": 40},
                "message": "Need more VRAM? Talk to the platform team."},
            "modelMismatch": "warn",
            "overprovision": "deny",
            "imageLabels": {"enabled": true, "modelKey": "org.example.model", "vramGiBKey": ""},
            "extraGpuResources": ["example.com/tpu"],
            "customKinds": crate::workload::presets::all(),
            "exemptNamespaces": ["kube-system"]
        }));
        let c = s.check().unwrap();
        assert_eq!(c.usable_percent, 85);
        assert_eq!(
            c.caps,
            Some((
                "gpu-admission/workload-type".to_string(),
                BTreeMap::from([("interactive".to_string(), 40 * 1024)])
            ))
        );
        assert_eq!(
            c.requested_caps,
            Some(RequestedCapsConfig {
                label_key: "gpu-admission/workload-type".into(),
                max_mib: BTreeMap::from([("interactive".to_string(), 40 * 1024)]),
                message: "Need more VRAM? Talk to the platform team.".into(),
            })
        );
        let pools: Vec<(&str, u64)> = c
            .targets()
            .iter()
            .map(|t| (t.pool.as_deref().unwrap(), t.mib))
            .collect();
        assert_eq!(
            pools,
            vec![("a10g", 23028), ("h100", 81559), ("rtx", 97887)]
        );
    }

    #[test]
    fn empty_registry_and_caps_are_unset() {
        let s = settings(
            json!({"modelRegistry": {"namespace": "", "name": "", "key": ""},
            "modelMemoryCaps": {"labelKey": "", "maxGiB": {}}}),
        );
        let c = s.check().unwrap();
        assert!(s.registry().is_none());
        assert!(c.caps.is_none());
        let s = settings(json!({"modelRegistry": {"namespace": "gpu", "name": "m", "key": ""}}));
        s.check().unwrap();
        assert_eq!(s.registry().map(|r| r.name.as_str()), Some("m"));
    }

    #[test]
    fn suggest_products_replace_the_catalog() {
        let c = settings(
            json!({"suggestProducts": ["NVIDIA-L4", "NVIDIA-H100-80GB-HBM3", "NVIDIA-L4"]}),
        )
        .check()
        .unwrap();
        let names: Vec<&str> = c.targets().iter().map(|t| t.product.as_str()).collect();
        assert_eq!(names, vec!["NVIDIA-L4", "NVIDIA-H100-80GB-HBM3"]);
    }

    #[rstest]
    #[case::action(json!({"unknownGpu": "block"}))]
    #[case::action_model(json!({"unknownModel": "Deny"}))]
    #[case::no_model(json!({"noModel": ""}))]
    #[case::mismatch(json!({"modelMismatch": "block"}))]
    #[case::overprovision(json!({"overprovision": "error"}))]
    fn actions_are_deny_warn_or_allow(#[case] v: Value) {
        let err = serde_json::from_value::<Settings>(v)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("expected one of `deny`, `warn`, `allow`"),
            "{err}"
        );
    }

    #[rstest]
    #[case::model_key(json!({"modelLabelKey": "bad key"}), "modelLabelKey:")]
    #[case::product_key(json!({"productLabelKey": ""}), "productLabelKey:")]
    #[case::model_entry(json!({"models": {"m": {"parametersBillions": 7, "dtype": "bf17"}}}), "models[m].dtype: 'bf17' is not a dtype")]
    #[case::zero_layers(json!({"models": {"m": {"parametersBillions": 7, "dtype": "bf16", "layers": 0, "kvHeads": 8, "headDim": 128, "contextLength": 4096}}}), "models[m].layers: must be a whole number from 1 to 10000, got '0'")]
    #[case::negative_vram(json!({"models": {"m": {"vramGiB": -1}}}), "models[m].vramGiB: must be a number")]
    #[case::model_unknown_field(json!({"models": {"m": {"vram": 7}}}), "models[m]: unknown field `vram`, expected one of `vramGiB`,")]
    #[case::model_wrong_type(json!({"models": {"m": {"parametersBillions": 7, "dtype": "bf16", "layers": [32]}}}), "models[m].layers: invalid type: sequence, expected a number")]
    #[case::model_not_a_map(json!({"models": {"m": 7}}), "models[m]: invalid type: integer `7`, expected struct ModelSpec")]
    #[case::alias_type(json!({"models": {"m": {"vramGiB": 1, "aliases": [1]}}}), "models[m].aliases[0]: invalid type: integer `1`, expected a string")]
    #[case::empty_id(json!({"models": {"": {"vramGiB": 1}}}), "models: a model id must not be empty")]
    #[case::alias_clash(json!({"models": {"a": {"vramGiB": 1}, "b": {"vramGiB": 1, "aliases": ["A"]}}}), "models[b].aliases[0]: 'A' is also the id or an alias of models[a]")]
    #[case::registry_namespace(json!({"modelRegistry": {"namespace": "Gpu", "name": "m"}}), "modelRegistry.namespace: 'Gpu' is not a namespace name")]
    #[case::registry_name(json!({"modelRegistry": {"namespace": "gpu", "name": ""}}), "modelRegistry.name: '' is not a ConfigMap name")]
    #[case::registry_half_empty(json!({"modelRegistry": {"namespace": "", "name": "m"}}), "modelRegistry.namespace: '' is not a namespace name")]
    #[case::registry_key(json!({"modelRegistry": {"namespace": "gpu", "name": "m", "key": "a/b"}}), "modelRegistry.key: 'a/b' is not a ConfigMap data key")]
    #[case::product_memory(json!({"gpuProducts": {"X": 0}}), "gpuProducts[X]: must be a whole number from 1 to 16777216, got '0'")]
    #[case::product_name(json!({"gpuProducts": {"has space": 1}}), "gpuProducts[has space]:")]
    #[case::mig_name(json!({"migProfiles": {"big": 1}}), "migProfiles[big]: 'big' is not a MIG profile like 3g.40gb")]
    #[case::pool_product(json!({"poolProducts": {"a": "NVIDIA-Z1"}}), "poolProducts[a]: GPU product 'NVIDIA-Z1' is not in the catalog; add it to gpuProducts")]
    #[case::pool_without_key(json!({"poolLabelKey": "", "poolProducts": {"a": "NVIDIA-L4"}}), "poolLabelKey: must be set when poolProducts is given")]
    #[case::suggest(json!({"suggestProducts": ["Z"]}), "suggestProducts[0]: GPU product 'Z' is not in the catalog")]
    #[case::fraction(json!({"usableMemoryPercent": 0.9}), "usableMemoryPercent: give a whole percentage such as 90 (for vLLM's --gpu-memory-utilization 0.9), got '0.9'")]
    #[case::zero_percent(json!({"usableMemoryPercent": 0}), "usableMemoryPercent: must be a whole number from 1 to 100, got '0'")]
    #[case::over_percent(json!({"usableMemoryPercent": 101}), "usableMemoryPercent: must be a whole number from 1 to 100, got '101'")]
    #[case::max_gpus(json!({"maxGpusPerPod": 0}), "maxGpusPerPod: must be a whole number from 1 to 64, got '0'")]
    #[case::caps_key(json!({"modelMemoryCaps": {"labelKey": "", "maxGiB": {"a": 1}}}), "modelMemoryCaps.labelKey:")]
    #[case::caps_empty(json!({"modelMemoryCaps": {"labelKey": "t"}}), "modelMemoryCaps.maxGiB: give at least one label value")]
    #[case::caps_value(json!({"modelMemoryCaps": {"labelKey": "t", "maxGiB": {"interactive": -40}}}), "modelMemoryCaps.maxGiB[interactive]: must be a whole number from 1 to 1000000, got '-40'")]
    #[case::requested_key(json!({"requestedMemoryCaps": {"labelKey": "bad key", "maxGiB": {"a": 1}}}), "requestedMemoryCaps.labelKey:")]
    #[case::requested_empty(json!({"requestedMemoryCaps": {"labelKey": "t"}}), "requestedMemoryCaps.maxGiB: give at least one label value")]
    #[case::requested_value(json!({"requestedMemoryCaps": {"labelKey": "t", "maxGiB": {"interactive": 0}}}), "requestedMemoryCaps.maxGiB[interactive]: must be a whole number from 1 to 1000000, got '0'")]
    #[case::image_key(json!({"imageLabels": {"modelKey": "a b"}}), "imageLabels.modelKey: 'a b' is not an image label key")]
    #[case::image_no_keys(json!({"imageLabels": {"enabled": true, "modelKey": "", "vramGiBKey": ""}}), "imageLabels: enabled, but modelKey and vramGiBKey are both empty")]
    #[case::extra(json!({"extraGpuResources": ["tpu"]}), "extraGpuResources[0]:")]
    #[case::namespaces(json!({"exemptNamespaces": ["*"]}), "exemptNamespaces[0]:")]
    #[case::custom_kind(json!({"customKinds": [{"group": "", "kind": "X", "templates": []}]}), "customKinds[0].group:")]
    fn invalid_settings_name_the_field(#[case] v: Value, #[case] prefix: &str) {
        let err = settings(v).validate().unwrap_err().to_string();
        assert!(err.starts_with(prefix), "{err}");
    }

    #[test]
    fn unknown_fields_and_wrong_types_are_refused() {
        assert!(serde_json::from_value::<Settings>(json!({"modelLabel": "x"})).is_err());
        assert!(serde_json::from_value::<Settings>(json!({"models": []})).is_err());
    }
}
