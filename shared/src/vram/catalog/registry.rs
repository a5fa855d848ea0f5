//! The model registry: which model a workload serves, and finding its entry in the
//! settings (`models`) or in a ConfigMap read with Kubewarden's `get_resource`.
//!
//! Lookup, for each candidate id in order (a KServe `hf://org/name:rev` URI gives the
//! URI, `org/name:rev` and `org/name`): an exact id or alias, first in the ConfigMap
//! (operators update it without redeploying the policy, so it overrides) and then in
//! the settings; then the same ignoring ASCII case. Only the matching entry is checked,
//! so one broken ConfigMap entry denies the workloads of that model, not every workload.

use super::model::{Model, ModelEntry, ModelSpec};
use super::yaml;
use crate::cluster::{Cluster, ClusterRequest, FailureClass, GetResource, call};
use crate::settings::FieldError;
use crate::vram::settings::invalid_settings;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::cell::OnceCell;
use std::collections::BTreeMap;

/// ConfigMap keys tried, in order, when `modelRegistry.key` is not set.
pub const DEFAULT_REGISTRY_KEYS: [&str; 2] = ["models.yaml", "models.json"];

/// Where the registry ConfigMap is (settings `modelRegistry`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct RegistryRef {
    pub namespace: String,
    pub name: String,
    /// The data key holding the models; default `models.yaml`, then `models.json`.
    pub key: Option<String>,
}

impl RegistryRef {
    fn what(&self) -> String {
        format!("ConfigMap {}/{}", self.namespace, self.name)
    }

    /// The host call that reads the ConfigMap.
    pub fn request(&self) -> ClusterRequest {
        ClusterRequest::Get(GetResource::config_map(&self.namespace, &self.name))
    }
}

/// Candidate registry ids for a model reference: the reference, and for `hf://` URIs the
/// repository id with and without its `:revision`.
pub fn candidates(reference: &str) -> Vec<String> {
    let mut out = vec![reference.to_string()];
    if let Some(repo) = reference.strip_prefix("hf://") {
        let repo = repo.trim_end_matches('/');
        out.push(repo.to_string());
        if let Some((base, _revision)) = repo.split_once(':') {
            out.push(base.to_string());
        }
    }
    out.dedup();
    out
}

/// The registry ConfigMap, read: the data key used and its entries.
type Loaded = (String, Map<String, Value>);

/// A registry entry that matched, before it is checked.
enum Hit<'a> {
    Settings(&'a str, &'a ModelEntry),
    ConfigMap(&'a str, &'a Value),
}

/// A found model: its registry id and its checked entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundModel {
    /// The id it is registered under.
    pub id: String,
    pub model: Model,
    /// `settings` or `ConfigMap ns/name`.
    pub source: String,
}

/// The registry for one admission request; the ConfigMap is read at most once, and only
/// when a model has to be looked up.
pub struct Registry<'a> {
    settings: &'a BTreeMap<String, ModelEntry>,
    configmap: Option<&'a RegistryRef>,
    cluster: &'a dyn Cluster,
    loaded: OnceCell<Result<Loaded, String>>,
}

impl<'a> Registry<'a> {
    pub fn new(
        settings: &'a BTreeMap<String, ModelEntry>,
        configmap: Option<&'a RegistryRef>,
        cluster: &'a dyn Cluster,
    ) -> Self {
        Registry {
            settings,
            configmap,
            cluster,
            loaded: OnceCell::new(),
        }
    }

    /// The model for `reference`: `Ok(None)` when no entry matches; `Err` when the
    /// ConfigMap cannot be read or the matching entry is invalid (a message to deny with).
    pub fn lookup(&self, reference: &str) -> Result<Option<FoundModel>, String> {
        let configmap = match self.configmap {
            Some(r) => Some((r, self.load(r)?)),
            None => None,
        };
        let cm_entries = configmap.as_ref().map(|(_, (_, map))| map);
        for candidate in candidates(reference) {
            for exact in [true, false] {
                let same = |a: &str| {
                    if exact {
                        a == candidate
                    } else {
                        a.eq_ignore_ascii_case(&candidate)
                    }
                };
                let hit = cm_entries
                    .and_then(|m| {
                        m.iter()
                            .find(|(k, v)| same(k) || value_aliases(v).any(same))
                            .map(|(k, v)| Hit::ConfigMap(k, v))
                    })
                    .or_else(|| self.in_settings(&candidate, exact));
                if let Some(hit) = hit {
                    return self.check(hit, configmap.as_ref()).map(Some);
                }
            }
        }
        Ok(None)
    }

    /// The settings entry whose id or alias is `name` (`exact`, or ignoring ASCII case).
    /// Ids are compared first: an entry's aliases are read from its text only when no id
    /// matches. `validate_settings` rejects two entries sharing a name in any case, so at
    /// most one entry matches and the order cannot change which.
    fn in_settings(&self, name: &str, exact: bool) -> Option<Hit<'_>> {
        let by_id = if exact {
            self.settings.get_key_value(name)
        } else {
            self.settings
                .iter()
                .find(|(id, _)| id.eq_ignore_ascii_case(name))
        };
        by_id
            .or_else(|| {
                self.settings
                    .iter()
                    .find(|(_, entry)| entry.has_alias(name, exact))
            })
            .map(|(id, entry)| Hit::Settings(id, entry))
    }

    fn check(
        &self,
        hit: Hit<'_>,
        configmap: Option<&(&RegistryRef, &Loaded)>,
    ) -> Result<FoundModel, String> {
        match hit {
            Hit::Settings(id, entry) => Ok(FoundModel {
                id: id.to_string(),
                model: entry.model(id).as_ref().map_err(invalid_settings)?.clone(),
                source: "settings".into(),
            }),
            Hit::ConfigMap(id, value) => {
                let (r, (key, _)) = configmap.ok_or_else(|| "no registry ConfigMap".to_string())?;
                let field = format!("{key}[{id}]");
                let invalid = |e: String| {
                    format!(
                        "the model registry {} has an invalid entry: {e}; fix the entry",
                        r.what()
                    )
                };
                let model = FieldError::read_value::<ModelSpec>(|| field.clone(), value)
                    .and_then(|spec| spec.resolve(&field))
                    .map_err(|e| invalid(e.to_string()))?;
                Ok(FoundModel {
                    id: id.to_string(),
                    model,
                    source: r.what(),
                })
            }
        }
    }

    fn load(&self, r: &RegistryRef) -> Result<&Loaded, String> {
        self.loaded
            .get_or_init(|| fetch(self.cluster, r))
            .as_ref()
            .map_err(Clone::clone)
    }
}

fn value_aliases(v: &Value) -> impl Iterator<Item = &str> {
    v.get("aliases")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// Reads and parses the registry ConfigMap: `(data key, entries)`.
fn fetch(cluster: &dyn Cluster, r: &RegistryRef) -> Result<Loaded, String> {
    let what = r.what();
    let bytes = call(cluster, &r.request()).map_err(|failure| match failure.class() {
        FailureClass::NotFound => format!(
            "the model registry {what} cannot be read (not found): create it, or name another in settings.modelRegistry"
        ),
        FailureClass::Other => format!(
            "the model registry {what} cannot be read ({}; the host said: {}) (settings.modelRegistry)",
            failure.reason(),
            crate::cluster::short_error(&failure.raw(usize::MAX))
        ),
        _ => format!(
            "the model registry {what} cannot be read ({}) (settings.modelRegistry)",
            failure.reason()
        ),
    })?;
    let malformed = |reason: String| {
        format!("the model registry {what} is malformed: {reason}; fix the ConfigMap")
    };
    let object: Value = serde_json::from_slice(&bytes)
        .map_err(|e| malformed(format!("the host returned no JSON object ({e})")))?;
    let data = object.get("data").and_then(Value::as_object);
    let keys: Vec<&str> = match r.key.as_deref().filter(|k| !k.is_empty()) {
        Some(k) => vec![k],
        None => DEFAULT_REGISTRY_KEYS.to_vec(),
    };
    let Some((key, text)) = keys.iter().find_map(|k| {
        data.and_then(|d| d.get(*k))
            .and_then(Value::as_str)
            .map(|t| (k.to_string(), t))
    }) else {
        let present: Vec<&str> = data
            .map(|d| d.keys().map(String::as_str).collect())
            .unwrap_or_default();
        return Err(malformed(format!(
            "it has no data key {} (keys present: {})",
            keys.join(" or "),
            if present.is_empty() {
                "none".to_string()
            } else {
                present.join(", ")
            }
        )));
    };
    match yaml::parse(text).map_err(|e| malformed(format!("{key}: {e}")))? {
        Value::Object(map) => Ok((key, map)),
        Value::Null => Ok((key, Map::new())),
        other => Err(malformed(format!(
            "{key}: must map model ids to entries, got {}",
            match other {
                Value::Array(_) => "a list",
                Value::String(_) => "a string",
                _ => "a scalar",
            }
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fake::Objects;
    use rstest::rstest;
    use serde_json::json;

    /// The cluster whose ConfigMap gpu-models answers `answer` (and records the calls).
    fn fake(answer: Result<Value, String>) -> Objects {
        match answer {
            Ok(object) => Objects::default().with("ConfigMap", "gpu-models", object),
            Err(e) => Objects::default().failing("ConfigMap", "gpu-models", &e),
        }
    }

    fn configmap(data: Value) -> Result<Value, String> {
        Ok(json!({"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "gpu-models", "namespace": "gpu-system"}, "data": data}))
    }

    /// Looks each of `ids` up in a registry with no settings models, its ConfigMap at `r`
    /// answering `answer`: whether it is found, or why it cannot be.
    fn lookups(
        answer: Result<Value, String>,
        r: &RegistryRef,
        ids: &[&str],
    ) -> Vec<Result<bool, String>> {
        let models = BTreeMap::new();
        let cluster = fake(answer);
        let registry = Registry::new(&models, Some(r), &cluster);
        ids.iter()
            .map(|id| registry.lookup(id).map(|found| found.is_some()))
            .collect()
    }

    fn settings_models() -> BTreeMap<String, ModelEntry> {
        serde_json::from_value(json!({
            "meta-llama/Llama-3.1-8B-Instruct": {"vramGiB": 20, "aliases": ["llama-3.1-8b"]},
            "mistralai/Mistral-7B-v0.1": {"vramGiB": 16}
        }))
        .unwrap()
    }

    fn reference() -> RegistryRef {
        RegistryRef {
            namespace: "gpu-system".into(),
            name: "gpu-models".into(),
            key: None,
        }
    }

    #[rstest]
    #[case::plain("llama-3.1-8b", &["llama-3.1-8b"])]
    #[case::hf("hf://meta-llama/Llama-3.1-8B", &["hf://meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B"])]
    #[case::hf_revision("hf://org/m:abc123", &["hf://org/m:abc123", "org/m:abc123", "org/m"])]
    #[case::s3("s3://bucket/llama/", &["s3://bucket/llama/"])]
    fn candidate_ids(#[case] reference: &str, #[case] expected: &[&str]) {
        assert_eq!(candidates(reference), expected);
    }

    #[rstest]
    #[case::exact(
        "meta-llama/Llama-3.1-8B-Instruct",
        Some("meta-llama/Llama-3.1-8B-Instruct")
    )]
    #[case::alias("llama-3.1-8b", Some("meta-llama/Llama-3.1-8B-Instruct"))]
    #[case::case_insensitive("LLAMA-3.1-8B", Some("meta-llama/Llama-3.1-8B-Instruct"))]
    #[case::hf_uri("hf://mistralai/Mistral-7B-v0.1", Some("mistralai/Mistral-7B-v0.1"))]
    #[case::unknown("gpt-2", None)]
    fn settings_lookup_makes_no_host_call(#[case] reference: &str, #[case] id: Option<&str>) {
        let models = settings_models();
        let cluster = fake(Err("must not be called".into()));
        let registry = Registry::new(&models, None, &cluster);
        let found = registry.lookup(reference).unwrap();
        assert_eq!(found.map(|f| f.id).as_deref(), id);
        assert_eq!(cluster.calls.borrow().len(), 0);
    }

    #[test]
    fn configmap_overrides_settings_and_is_read_once() {
        let models = settings_models();
        let cluster = fake(configmap(json!({
            "models.yaml": "meta-llama/Llama-3.1-8B-Instruct:\n  vramGiB: 24\nqwen: {vramGiB: 18, aliases: [qwen2.5-7b]}\n"
        })));
        let r = reference();
        let registry = Registry::new(&models, Some(&r), &cluster);
        let llama = registry
            .lookup("meta-llama/Llama-3.1-8B-Instruct")
            .unwrap()
            .unwrap();
        assert_eq!(llama.source, "ConfigMap gpu-system/gpu-models");
        assert_eq!(llama.model.estimate(1).total_mib, 24 * 1024);
        let qwen = registry.lookup("qwen2.5-7b").unwrap().unwrap();
        assert_eq!(qwen.id, "qwen");
        let mistral = registry
            .lookup("mistralai/Mistral-7B-v0.1")
            .unwrap()
            .unwrap();
        assert_eq!(
            mistral.source, "settings",
            "settings still answer what the ConfigMap lacks"
        );
        assert_eq!(cluster.calls.borrow().len(), 1);
    }

    #[test]
    fn json_key_is_the_fallback_and_a_named_key_is_used() {
        let json = configmap(json!({"models.json": "{\"m\": {\"vramGiB\": 2}}"}));
        assert_eq!(lookups(json, &reference(), &["m"]), [Ok(true)]);
        let named = RegistryRef {
            key: Some("llm".into()),
            ..reference()
        };
        let llm = configmap(json!({"llm": "m: {vramGiB: 2}"}));
        assert_eq!(lookups(llm, &named, &["m"]), [Ok(true)]);
    }

    #[rstest]
    #[case::not_found(Err("Cannot find v1/ConfigMap named 'gpu-models' inside of namespace 'gpu-system'\nbacktrace...".to_string()),
        "the model registry ConfigMap gpu-system/gpu-models cannot be read (not found): create it, or name another in settings.modelRegistry")]
    #[case::not_found_through_policy_evaluator(Err("Host error: Callback evaluation failure: Cannot find v1/ConfigMap named 'gpu-models' inside of namespace 'gpu-system'".to_string()),
        "the model registry ConfigMap gpu-system/gpu-models cannot be read (not found): create it, or name another in settings.modelRegistry")]
    #[case::not_granted(Err("Policy has not been granted access to Kubernetes resource: v1/ConfigMap".to_string()),
        "the model registry ConfigMap gpu-system/gpu-models cannot be read (not granted to this policy: add {apiVersion: v1, kind: ConfigMap} to the ClusterAdmissionPolicy's contextAwareResources) (settings.modelRegistry)")]
    #[case::unreachable(Err("error trying to connect: tcp connect error: Connection refused (os error 111)".to_string()),
        "the model registry ConfigMap gpu-system/gpu-models cannot be read (API server unreachable (connection refused): policy-server could not read the cluster; the next request retries) (settings.modelRegistry)")]
    #[case::no_key(configmap(json!({"other": "x"})),
        "the model registry ConfigMap gpu-system/gpu-models is malformed: it has no data key models.yaml or models.json (keys present: other); fix the ConfigMap")]
    #[case::no_data(
        configmap(Value::Null),
        "the model registry ConfigMap gpu-system/gpu-models is malformed: it has no data key models.yaml or models.json (keys present: none); fix the ConfigMap"
    )]
    #[case::bad_yaml(configmap(json!({"models.yaml": "m: {vramGiB: 2\n"})),
        "the model registry ConfigMap gpu-system/gpu-models is malformed: models.yaml: line 1: expected ',' or '}' in a flow mapping; fix the ConfigMap")]
    #[case::a_list(configmap(json!({"models.yaml": "- a\n"})),
        "the model registry ConfigMap gpu-system/gpu-models is malformed: models.yaml: must map model ids to entries, got a list; fix the ConfigMap")]
    #[case::invalid_entry(configmap(json!({"models.yaml": "m: {parametersBillions: 7, dtype: q3}\n"})),
        "the model registry ConfigMap gpu-system/gpu-models has an invalid entry: models.yaml[m].dtype: 'q3' is not a dtype; use one of fp32, bf16, fp16, fp8, int8, int4; fix the entry")]
    #[case::unknown_field(configmap(json!({"models.yaml": "m: {vram: 7}\n"})),
        "the model registry ConfigMap gpu-system/gpu-models has an invalid entry: models.yaml[m]: unknown field `vram`, expected one of `vramGiB`, `parametersBillions`, `dtype`, `layers`, `kvHeads`, `headDim`, `contextLength`, `concurrency`, `kvCacheDtype`, `overheadPercent`, `attentionHeads`, `aliases`; fix the entry")]
    #[case::wrong_type_inside(configmap(json!({"models.yaml": "m: {parametersBillions: 7, layers: [32]}\n"})),
        "the model registry ConfigMap gpu-system/gpu-models has an invalid entry: models.yaml[m].layers: invalid type: sequence, expected a number or a string; fix the entry")]
    fn registry_problems_are_clear_denials(
        #[case] answer: Result<Value, String>,
        #[case] message: &str,
    ) {
        assert_eq!(
            lookups(answer, &reference(), &["m"]),
            [Err(message.to_string())]
        );
    }

    #[test]
    fn a_broken_entry_only_affects_its_model() {
        let yaml = configmap(json!({"models.yaml": "bad: {dtype: x}\ngood: {vramGiB: 3}\n"}));
        let found = lookups(yaml, &reference(), &["good", "bad", "other"]);
        assert_eq!(found[0], Ok(true));
        assert!(found[1].is_err(), "{found:?}");
        assert_eq!(found[2], Ok(false));
    }

    #[test]
    fn the_request_matches_the_sdk_wire_format() {
        assert_eq!(
            String::from_utf8(reference().request().payload()).unwrap(),
            r#"{"api_version":"v1","kind":"ConfigMap","name":"gpu-models","namespace":"gpu-system","disable_cache":false,"field_masks":null}"#
        );
    }
}
