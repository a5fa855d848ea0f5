//! The few PodSpec fields the rules read, as lenient serde types.
//!
//! These are deliberately not k8s-openapi's types: they are smaller to compile and to
//! deserialize, they read only what the rules need, and they accept what the API server
//! accepts (a quantity given as a JSON number, a `null` collection). Mutations are made on
//! the original JSON (see [`crate::workload`]) so no field the rules do not model is lost.

use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;

/// A `null` JSON value reads as the type's default (an empty list or map).
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A quantity as it appears in JSON: normally a string, sometimes a bare number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuantityText(pub String);

impl<'de> Deserialize<'de> for QuantityText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // A visitor, not an untagged enum: untagged enums buffer every value first, which
        // made parsing long Pod lists (the capacity gate) several times slower.
        ScalarText::quantity("a quantity (a string like \"2\" or \"16Gi\", or a number)")
            .deserialize(deserializer)
            .map(QuantityText)
    }
}

/// Reads a scalar as text: a string as it is, a number as JSON writes it. `lenient` also
/// reads a bool as `true`/`false`, and null, lists and maps as "" (skipped whole).
pub(crate) struct ScalarText {
    expecting: &'static str,
    lenient: bool,
}

use serde::de::{DeserializeSeed, Unexpected};

impl<'de> DeserializeSeed<'de> for ScalarText {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for ScalarText {
    type Value = String;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(self.expecting)
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<String, E> {
        Ok(v)
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<String, E> {
        if self.lenient {
            return Ok(v.to_string());
        }
        Ok(serde_json::Number::from_f64(v).map_or_else(|| v.to_string(), |n| n.to_string()))
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<String, E> {
        self.lenient(Unexpected::Bool(v))?;
        Ok(v.to_string())
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<String, E> {
        self.lenient(Unexpected::Unit)?;
        Ok(String::new())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<String, A::Error> {
        self.lenient(Unexpected::Seq)?;
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(String::new())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<String, A::Error> {
        self.lenient(Unexpected::Map)?;
        while map
            .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
            .is_some()
        {}
        Ok(String::new())
    }
}

impl ScalarText {
    /// A quantity: a string, or a number as JSON writes it; anything else is an error
    /// saying what was `expecting`.
    pub(crate) fn quantity(expecting: &'static str) -> ScalarText {
        ScalarText {
            expecting,
            lenient: false,
        }
    }

    /// Serde's error for `unexpected` unless lenient.
    fn lenient<E: serde::de::Error>(&self, unexpected: Unexpected) -> Result<(), E> {
        if self.lenient {
            Ok(())
        } else {
            Err(E::invalid_type(unexpected, self))
        }
    }
}

/// Resource name -> quantity text.
pub type ResourceList = BTreeMap<String, QuantityText>;

/// `resources` of a container, or of the pod (pod-level resources).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Resources {
    #[serde(deserialize_with = "null_as_default")]
    pub limits: ResourceList,
    #[serde(deserialize_with = "null_as_default")]
    pub requests: ResourceList,
}

/// The parts of a container the rules read.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Container {
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(deserialize_with = "null_as_default")]
    pub resources: Resources,
    /// `Always` on an init container makes it a sidecar (restartable init container).
    pub restart_policy: Option<String>,
    pub image: Option<String>,
    /// The entrypoint, replacing the image's (Kubernetes does not run it through a shell).
    #[serde(deserialize_with = "words")]
    pub command: Vec<String>,
    /// Arguments to the entrypoint, replacing the image's `CMD`.
    #[serde(deserialize_with = "words")]
    pub args: Vec<String>,
    #[serde(deserialize_with = "null_as_default")]
    pub env: Vec<EnvVar>,
    /// `envFrom` sources (ConfigMaps, Secrets): their variables are not visible at admission.
    #[serde(deserialize_with = "null_as_default")]
    pub env_from: Vec<serde::de::IgnoredAny>,
    pub security_context: Option<SecurityContext>,
}

/// The parts of a container's `securityContext` the rules read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SecurityContext {
    pub privileged: Option<bool>,
}

/// A pod volume; only `hostPath` volumes are read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Volume {
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
    pub host_path: Option<HostPathVolume>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HostPathVolume {
    #[serde(deserialize_with = "null_as_default")]
    pub path: String,
}

/// One `spec.resourceClaims` entry: a pod-level name for a Dynamic Resource Allocation
/// claim, backed by a ResourceClaim (shared, by name) or a ResourceClaimTemplate (one claim
/// per pod). Kubernetes 1.26-1.30 nested the two names under `source`; both spellings
/// are read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodResourceClaim {
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
    pub resource_claim_name: Option<String>,
    pub resource_claim_template_name: Option<String>,
    pub source: Option<PodResourceClaimSource>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodResourceClaimSource {
    pub resource_claim_name: Option<String>,
    pub resource_claim_template_name: Option<String>,
}

impl PodResourceClaim {
    /// The ResourceClaim this entry names, if it names one.
    pub fn claim_name(&self) -> Option<&str> {
        self.resource_claim_name
            .as_deref()
            .or_else(|| self.source.as_ref()?.resource_claim_name.as_deref())
            .filter(|n| !n.is_empty())
    }

    /// The ResourceClaimTemplate this entry names, if it names one.
    pub fn template_name(&self) -> Option<&str> {
        self.resource_claim_template_name
            .as_deref()
            .or_else(|| {
                self.source
                    .as_ref()?
                    .resource_claim_template_name
                    .as_deref()
            })
            .filter(|n| !n.is_empty())
    }
}

/// A list of command-line words. The API server takes only strings; an object that is not
/// (a custom resource before its schema is checked) is read leniently, so a policy that
/// never looks at the words does not deny it: numbers and booleans as their text, `null`,
/// lists and maps as an empty word.
fn words<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    struct Word(String);
    impl<'de> Deserialize<'de> for Word {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            let text = ScalarText {
                expecting: "a command-line word",
                lenient: true,
            };
            text.deserialize(deserializer).map(Word)
        }
    }
    Ok(Option::<Vec<Word>>::deserialize(deserializer)?
        .unwrap_or_default()
        .into_iter()
        .map(|w| w.0)
        .collect())
}

/// One `env` entry of a container. Only a literal `value` can be read at admission:
/// `valueFrom` (ConfigMaps, Secrets, the downward API) is resolved by the kubelet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EnvVar {
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
    pub value: Option<String>,
    /// True when the value comes from elsewhere (`valueFrom`, whose content is not read).
    #[serde(deserialize_with = "present")]
    pub value_from: bool,
}

/// True for a present, non-null value of any shape.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    Ok(Option::<serde::de::IgnoredAny>::deserialize(deserializer)?.is_some())
}

/// A toleration. An empty key with `Exists` tolerates every taint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Toleration {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

/// One `matchExpressions` entry of a node selector term.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeSelectorRequirement {
    #[serde(deserialize_with = "null_as_default")]
    pub key: String,
    #[serde(deserialize_with = "null_as_default")]
    pub operator: String,
    #[serde(deserialize_with = "null_as_default")]
    pub values: Vec<String>,
}

/// A node selector term: all its expressions must hold (terms are ORed).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeSelectorTerm {
    #[serde(deserialize_with = "null_as_default")]
    pub match_expressions: Vec<NodeSelectorRequirement>,
    #[serde(deserialize_with = "null_as_default")]
    pub match_fields: Vec<NodeSelectorRequirement>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeSelector {
    #[serde(deserialize_with = "null_as_default")]
    pub node_selector_terms: Vec<NodeSelectorTerm>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeAffinity {
    pub required_during_scheduling_ignored_during_execution: Option<NodeSelector>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Affinity {
    pub node_affinity: Option<NodeAffinity>,
}

/// The parts of a PodSpec the rules read.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodSpec {
    #[serde(deserialize_with = "null_as_default")]
    pub containers: Vec<Container>,
    #[serde(deserialize_with = "null_as_default")]
    pub init_containers: Vec<Container>,
    #[serde(deserialize_with = "null_as_default")]
    pub ephemeral_containers: Vec<Container>,
    /// Pod-level resources (Kubernetes 1.32+ `PodLevelResources`).
    pub resources: Option<Resources>,
    #[serde(deserialize_with = "null_as_default")]
    pub node_selector: BTreeMap<String, String>,
    pub affinity: Option<Affinity>,
    #[serde(deserialize_with = "null_as_default")]
    pub tolerations: Vec<Toleration>,
    pub priority_class_name: Option<String>,
    pub node_name: Option<String>,
    pub scheduler_name: Option<String>,
    pub runtime_class_name: Option<String>,
    pub service_account_name: Option<String>,
    #[serde(deserialize_with = "null_as_default")]
    pub volumes: Vec<Volume>,
    /// Dynamic Resource Allocation claims of the pod (see [`crate::dra`]).
    #[serde(deserialize_with = "null_as_default")]
    pub resource_claims: Vec<PodResourceClaim>,
}

impl PodSpec {
    /// The required node selector terms (empty when the pod has no required node affinity).
    pub fn required_node_terms(&self) -> &[NodeSelectorTerm] {
        self.affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| {
                n.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(|s| s.node_selector_terms.as_slice())
            .unwrap_or(&[])
    }
}

/// Labels and annotations of a pod template (or of the object, for a bare Pod).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectMeta {
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(deserialize_with = "null_as_default")]
    pub namespace: String,
    #[serde(deserialize_with = "null_as_default")]
    pub labels: BTreeMap<String, String>,
    #[serde(deserialize_with = "null_as_default")]
    pub annotations: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_containers_resources_and_scheduling() {
        let spec: PodSpec = serde_json::from_value(json!({
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 2, "cpu": "1"}}}],
            "initContainers": [{"name": "s", "restartPolicy": "Always"}],
            "nodeSelector": {"pool": "a"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}]}}},
            "priorityClassName": "high",
            "unknownField": {"ignored": true}
        }))
        .unwrap();
        assert_eq!(
            spec.containers[0].resources.limits["nvidia.com/gpu"],
            QuantityText("2".into())
        );
        assert_eq!(
            spec.init_containers[0].restart_policy.as_deref(),
            Some("Always")
        );
        assert_eq!(spec.node_selector["pool"], "a");
        assert_eq!(spec.tolerations[0].operator.as_deref(), Some("Exists"));
        assert_eq!(
            spec.required_node_terms()[0].match_expressions[0].values,
            vec!["v"]
        );
        assert_eq!(spec.priority_class_name.as_deref(), Some("high"));
    }

    #[test]
    fn reads_command_args_and_env() {
        let spec: PodSpec = serde_json::from_value(json!({"containers": [{
            "name": "vllm", "image": "vllm/vllm-openai:v0.6.3",
            "command": ["vllm", "serve"], "args": ["m", "--max-model-len", "$(LEN)"],
            "env": [{"name": "LEN", "value": "8192"},
                    {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "t"}}},
                    {"name": "EMPTY"}]
        }, {"name": "bare", "args": null, "env": null}]}))
        .unwrap();
        let c = &spec.containers[0];
        assert_eq!(c.image.as_deref(), Some("vllm/vllm-openai:v0.6.3"));
        assert_eq!(c.command, ["vllm", "serve"]);
        assert_eq!(c.args, ["m", "--max-model-len", "$(LEN)"]);
        assert_eq!(c.env[0].value.as_deref(), Some("8192"));
        assert!(c.env[1].value.is_none() && c.env[1].value_from);
        assert!(c.env[2].value.is_none() && !c.env[2].value_from);
        assert!(spec.containers[1].args.is_empty() && spec.containers[1].env.is_empty());
    }

    #[test]
    fn command_words_of_other_types_are_read_leniently() {
        let c: Container = serde_json::from_value(json!({
            "command": ["vllm", 7], "args": ["--max-model-len", 8192, true, null, {"a": [1]}, [2], 0.5]
        }))
        .unwrap();
        assert_eq!(c.command, ["vllm", "7"]);
        assert_eq!(
            c.args,
            ["--max-model-len", "8192", "true", "", "", "", "0.5"]
        );
        assert!(
            serde_json::from_value::<Container>(json!({"args": 5})).is_err(),
            "a word where a list is expected is an error"
        );
    }

    #[test]
    fn reads_device_access_fields_and_claims() {
        let spec: PodSpec = serde_json::from_value(json!({
            "containers": [{"name": "c", "securityContext": {"privileged": true},
                            "envFrom": [{"configMapRef": {"name": "x"}}]}],
            "volumes": [{"name": "dev", "hostPath": {"path": "/dev/nvidia0"}}, {"name": "cfg", "configMap": {"name": "x"}}],
            "runtimeClassName": "nvidia", "schedulerName": "kai-scheduler", "serviceAccountName": "sa",
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
                               {"name": "old", "source": {"resourceClaimName": "shared"}},
                               {"name": "none"}]
        }))
        .unwrap();
        let c = &spec.containers[0];
        assert_eq!(c.security_context.as_ref().unwrap().privileged, Some(true));
        assert_eq!(c.env_from.len(), 1);
        assert_eq!(
            spec.volumes[0].host_path.as_ref().unwrap().path,
            "/dev/nvidia0"
        );
        assert!(spec.volumes[1].host_path.is_none());
        assert_eq!(spec.runtime_class_name.as_deref(), Some("nvidia"));
        assert_eq!(spec.scheduler_name.as_deref(), Some("kai-scheduler"));
        assert_eq!(spec.resource_claims[0].template_name(), Some("one-gpu"));
        assert_eq!(spec.resource_claims[0].claim_name(), None);
        assert_eq!(spec.resource_claims[1].claim_name(), Some("shared"));
        assert_eq!(spec.resource_claims[2].claim_name(), None);
        assert_eq!(spec.resource_claims[2].template_name(), None);
    }

    #[test]
    fn nulls_read_as_empty() {
        let spec: PodSpec = serde_json::from_value(json!({
            "containers": null, "nodeSelector": null, "tolerations": null,
            "initContainers": [{"name": null, "resources": null}]
        }))
        .unwrap();
        assert!(spec.containers.is_empty());
        assert!(spec.node_selector.is_empty());
        assert!(spec.init_containers[0].resources.limits.is_empty());
        assert!(spec.required_node_terms().is_empty());
    }

    #[test]
    fn wrong_types_are_errors_not_panics() {
        for bad in [
            json!({"containers": "nope"}),
            json!({"containers": [{"resources": {"limits": {"nvidia.com/gpu": true}}}]}),
            json!({"nodeSelector": ["a"]}),
            json!({"tolerations": [{"key": 5}]}),
            json!("spec"),
        ] {
            assert!(
                serde_json::from_value::<PodSpec>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }
}
