//! Settings of gpu-labels-policy, their defaults and their validation.

pub use super::devices::DeviceAccess;
pub use super::lifecycle::WorkloadRules;
pub use super::tenancy::{GpuSharing, SharingModel, SharingRule};
use crate::scheduling::TaintPattern;
use crate::settings::wildcard::validate_pattern;
use crate::settings::{
    CheckedForm, FieldError, ValidateSettings, policy_settings, validate_label_key,
    validate_label_value,
};
use serde::{Deserialize, Serialize};

/// The label that says what kind of GPU work a pod does.
pub const WORKLOAD_TYPE_LABEL: &str = "workload-type";
/// The label that says who owns a GPU workload.
pub const TEAM_LABEL: &str = "team";
/// Default values of [`WORKLOAD_TYPE_LABEL`].
pub const WORKLOAD_TYPES: [&str; 3] = ["interactive", "batch", "training"];
/// Node labels that GPU Feature Discovery / the GPU Operator put on GPU nodes.
pub const DEFAULT_GPU_NODE_LABEL_KEYS: [&str; 2] =
    ["nvidia.com/gpu.product", "nvidia.com/gpu.present"];
/// The conventional GPU taint key (any value, any effect).
pub const DEFAULT_GPU_TAINT_KEY: &str = "nvidia.com/gpu";

/// One label every GPU pod must carry.
///
/// Without `allowedValues` or `pattern` the label must be present and non-empty. An empty
/// value always counts as missing: a label that says nothing cannot route or account.
/// An empty `allowedValues` list or an empty `pattern` means unset (forms such as Rancher's
/// send them for untouched fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RequiredLabel {
    pub key: String,
    /// The only values allowed (case-sensitive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_values: Option<Vec<String>>,
    /// An anchored glob: `*` any characters, `?` one character (see [`crate::settings::wildcard`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
}

impl RequiredLabel {
    /// A label that must be present and non-empty.
    pub fn present(key: &str) -> RequiredLabel {
        RequiredLabel {
            key: key.into(),
            allowed_values: None,
            pattern: None,
        }
    }

    /// A label that must hold one of `values`.
    pub fn one_of(key: &str, values: &[&str]) -> RequiredLabel {
        RequiredLabel {
            key: key.into(),
            allowed_values: Some(values.iter().map(|v| v.to_string()).collect()),
            pattern: None,
        }
    }

    /// A label whose value must match the glob `pattern`.
    pub fn matching(key: &str, pattern: &str) -> RequiredLabel {
        RequiredLabel {
            key: key.into(),
            allowed_values: None,
            pattern: Some(pattern.into()),
        }
    }

    /// The allowed values, `None` when unset or empty.
    pub fn allowed(&self) -> Option<&[String]> {
        self.allowed_values.as_deref().filter(|v| !v.is_empty())
    }

    /// The pattern, `None` when unset or empty.
    pub fn glob(&self) -> Option<&str> {
        self.pattern.as_deref().filter(|p| !p.is_empty())
    }

    pub(crate) fn validate(
        &self,
        field: &str,
        earlier: &[RequiredLabel],
    ) -> Result<(), FieldError> {
        validate_label_key(&format!("{field}.key"), &self.key)?;
        if let Some(i) = earlier.iter().position(|r| r.key == self.key) {
            return Err(FieldError::new(
                format!("{field}.key"),
                format!(
                    "'{}' is already required by requiredLabels[{i}]; merge the two entries",
                    self.key
                ),
            ));
        }
        match (self.allowed(), self.glob()) {
            (Some(_), Some(_)) => Err(FieldError::new(
                field,
                "give allowedValues or pattern, not both (a value would have to satisfy both; put the values in allowedValues, or widen the pattern)",
            )),
            (Some(values), None) => {
                for (j, v) in values.iter().enumerate() {
                    let f = format!("{field}.allowedValues[{j}]");
                    if v.is_empty() {
                        return Err(FieldError::new(
                            f,
                            "an empty value cannot be allowed: an empty label counts as missing",
                        ));
                    }
                    validate_label_value(&f, v)?;
                    if values.iter().take(j).any(|earlier| earlier == v) {
                        return Err(FieldError::new(f, format!("'{v}' is listed twice")));
                    }
                }
                Ok(())
            }
            (None, Some(p)) => Ok(validate_pattern(&format!("{field}.pattern"), p)?),
            (None, None) => Ok(()),
        }
    }
}

/// A taint that marks GPU nodes. `value` / `effect` unset (or empty): any value / any effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GpuTaint {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
}

impl GpuTaint {
    /// The taint as the scheduling module matches it.
    pub fn pattern(&self) -> TaintPattern {
        let set = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
        TaintPattern {
            key: self.key.clone(),
            value: set(&self.value),
            effect: set(&self.effect),
        }
    }
}

const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

policy_settings! {
    /// The settings of gpu-labels-policy. Every rule is on by default.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Settings {
        /// Labels every GPU pod (template) must carry.
        pub required_labels: Vec<RequiredLabel> = vec![
            RequiredLabel::one_of(WORKLOAD_TYPE_LABEL, &WORKLOAD_TYPES),
            RequiredLabel::present(TEAM_LABEL),
        ],
        /// A GPU in `requests` must also be in `limits`.
        pub require_gpu_limits: bool = true,
        /// A GPU request must equal its limit.
        pub require_requests_equal_limits: bool = true,
        /// GPU quantities must be whole numbers (`0.5` and `500m` are denied).
        pub require_whole_gpus: bool = true,
        /// Containers holding GPUs must request cpu and memory.
        pub require_cpu_and_memory_requests: bool = true,
        /// The most GPUs (all GPU resources together) one pod may hold; unset: no limit.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub max_gpus_per_pod: Option<u64> = None,
        /// The most GPUs one container may hold; unset: no limit.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub max_gpus_per_container: Option<u64> = None,
        /// Deny pods that request no GPU but tolerate a GPU taint or select GPU nodes.
        pub deny_non_gpu_pods_on_gpu_nodes: bool = true,
        /// Node label keys that only GPU nodes carry.
        pub gpu_node_label_keys: Vec<String> = DEFAULT_GPU_NODE_LABEL_KEYS
            .iter()
            .map(|k| k.to_string())
            .collect(),
        /// Taints that keep non-GPU pods off GPU nodes.
        pub gpu_taints: Vec<GpuTaint> = vec![GpuTaint {
            key: DEFAULT_GPU_TAINT_KEY.into(),
            value: None,
            effect: None,
        }],
        /// DaemonSets (node agents: CNI, kube-proxy, monitoring, the GPU Operator's own
        /// components) may tolerate GPU taints and select GPU nodes without requesting a GPU.
        pub allow_daemon_sets_on_gpu_nodes: bool = true,
        @shared + exceptions;
        /// Serving and training hygiene by workload type; every rule off unless configured.
        /// Boxed: the rules are half the size of the settings, which are read on the stack.
        #[serde(skip_serializing_if = "WorkloadRules::is_boxed_default")]
        pub workload_rules: Box<WorkloadRules> = Box::default(),
        /// How pods may reach GPUs other than by requesting them: device-runtime variables,
        /// privileged containers and device `hostPath` volumes on GPU nodes, GPU runtime
        /// classes without a GPU, `envFrom` (a warning). Every rule on by default.
        pub device_access: DeviceAccess = DeviceAccess::default(),
        /// GPUs only in namespaces whose Namespace carries this label (read with
        /// `get_resource`); unset: every namespace ([`super::tenancy`]).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub gpu_access_label: Option<RequiredLabel> = None,
        /// Which GPU sharing models (time-slicing, MIG, KAI and HAMi fractions) which
        /// workload types and namespaces may use; off by default ([`super::tenancy`]).
        #[serde(skip_serializing_if = "GpuSharing::is_default")]
        pub gpu_sharing: GpuSharing = GpuSharing::default(),
    }
}

/// The rule names `exceptions[].rules` may give: the required labels; how GPUs are asked
/// for (limits, requests equal to limits, whole GPUs, maxGpusPerPod and
/// maxGpusPerContainer, cpu and memory requests); non-GPU pods on GPU nodes; device
/// access; the serving and training hygiene of `workloadRules`; GPUs in a namespace
/// without `gpuAccessLabel`; a sharing model `gpuSharing` does not allow.
pub const RULE_NAMES: [&str; 7] = [
    "requiredLabels",
    "gpuRequests",
    "gpuNodes",
    "deviceAccess",
    "workloadRules",
    super::tenancy::GPU_ACCESS_RULE,
    super::tenancy::GPU_SHARING_RULE,
];

impl ValidateSettings for Settings {
    fn validate(&self) -> Result<(), FieldError> {
        for (i, r) in self.required_labels.iter().enumerate() {
            let earlier = self.required_labels.get(..i).unwrap_or(&[]);
            r.validate(&format!("requiredLabels[{i}]"), earlier)?;
        }
        for (field, max) in [
            ("maxGpusPerPod", self.max_gpus_per_pod),
            ("maxGpusPerContainer", self.max_gpus_per_container),
        ] {
            if max == Some(0) {
                return Err(FieldError::new(
                    field,
                    "0 would deny every GPU pod; give at least 1, or leave it unset for no limit",
                ));
            }
        }
        if let (Some(pod), Some(container)) = (self.max_gpus_per_pod, self.max_gpus_per_container)
            && container > pod
        {
            return Err(FieldError::new(
                "maxGpusPerContainer",
                format!(
                    "{container} is more than maxGpusPerPod ({pod}); a container cannot hold more GPUs than its pod, so lower it to at most {pod}"
                ),
            ));
        }
        for (i, key) in self.gpu_node_label_keys.iter().enumerate() {
            validate_label_key(&format!("gpuNodeLabelKeys[{i}]"), key)?;
        }
        for (i, t) in self.gpu_taints.iter().enumerate() {
            let field = format!("gpuTaints[{i}]");
            validate_label_key(&format!("{field}.key"), &t.key)?;
            if let Some(v) = &t.value {
                validate_label_value(&format!("{field}.value"), v)?;
            }
            if let Some(e) = t.effect.as_deref().filter(|e| !e.is_empty())
                && !TAINT_EFFECTS.contains(&e)
            {
                return Err(FieldError::new(
                    format!("{field}.effect"),
                    format!(
                        "'{e}' is not a taint effect; use NoSchedule, PreferNoSchedule or NoExecute, or leave it unset for any effect"
                    ),
                ));
            }
        }
        if self.deny_non_gpu_pods_on_gpu_nodes
            && self.gpu_node_label_keys.is_empty()
            && self.gpu_taints.is_empty()
        {
            return Err(FieldError::new(
                "denyNonGpuPodsOnGpuNodes",
                "the rule needs gpuNodeLabelKeys or gpuTaints to recognise GPU nodes; list them, or set denyNonGpuPodsOnGpuNodes: false",
            ));
        }
        self.validate_shared()?;
        let allowed = self
            .required_labels
            .iter()
            .find(|r| r.key == self.workload_rules.label_key)
            .and_then(RequiredLabel::allowed);
        self.workload_rules.validate(allowed)?;
        self.device_access.validate("deviceAccess")?;
        super::tenancy::validate_access_label(&self.gpu_access_label)?;
        self.gpu_sharing.validate()?;
        crate::exceptions::HasExceptions::validate_exceptions(self, &RULE_NAMES)?;
        Ok(())
    }
}

/// The labels policy's rules take its settings as read: every field is typed by serde, and
/// nothing in them is read differently per request.
impl CheckedForm<Settings> for Settings {
    /// The settings as read (a host sends only settings that checked).
    fn prepare(settings: Box<Settings>) -> Result<Box<Settings>, FieldError> {
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::tests::parse;
    use rstest::rstest;
    use serde_json::{Value, json};

    /// The taint `nvidia.com/gpu`, any value, any effect.
    fn any_gpu_taint() -> TaintPattern {
        TaintPattern {
            key: DEFAULT_GPU_TAINT_KEY.into(),
            value: None,
            effect: None,
        }
    }

    #[test]
    fn defaults_work_out_of_the_box() {
        let s = parse(json!({})).unwrap();
        assert_eq!(s, Settings::default());
        assert_eq!(
            s.required_labels,
            vec![
                RequiredLabel::one_of("workload-type", &["interactive", "batch", "training"]),
                RequiredLabel::present("team"),
            ]
        );
        assert!(s.require_gpu_limits && s.require_requests_equal_limits);
        assert!(s.require_whole_gpus && s.require_cpu_and_memory_requests);
        assert!(s.deny_non_gpu_pods_on_gpu_nodes && s.allow_daemon_sets_on_gpu_nodes);
        assert_eq!(s.max_gpus_per_pod, None);
        assert!(s.exceptions.is_empty());
        assert_eq!(s.max_exception_days, 90);
        assert_eq!(
            s.gpu_node_label_keys,
            vec!["nvidia.com/gpu.product", "nvidia.com/gpu.present"]
        );
        assert_eq!(s.gpu_taints[0].pattern(), any_gpu_taint());
    }

    #[test]
    fn a_full_configuration_round_trips() {
        let v = json!({
            "requiredLabels": [
                {"key": "workload-type", "allowedValues": ["inference", "training"]},
                {"key": "example.com/cost-center", "pattern": "cc-????"},
                {"key": "team"}
            ],
            "requireGpuLimits": false, "requireRequestsEqualLimits": false,
            "requireWholeGpus": false, "requireCpuAndMemoryRequests": false,
            "maxGpusPerPod": 8, "maxGpusPerContainer": 4,
            "denyNonGpuPodsOnGpuNodes": true,
            "gpuNodeLabelKeys": ["cloud.google.com/gke-accelerator"],
            "gpuTaints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
            "allowDaemonSetsOnGpuNodes": false,
            "extraGpuResources": ["habana.ai/gaudi"],
            "customKinds": [crate::workload::presets::ray_cluster()],
            "exemptNamespaces": ["gpu-operator"],
            "dra": {"gpuDeviceClasses": {"tpu.example.com": "example.com/tpu"},
                    "apiVersion": "resource.k8s.io/v1"},
            "fractionalGpus": {
                "kai": {"enabled": true, "schedulerNames": ["kai-scheduler"]},
                "hami": {"enabled": false, "memoryResource": "nvidia.com/gpumem",
                         "memoryPercentageResource": "nvidia.com/gpumem-percentage",
                         "coresResource": "nvidia.com/gpucores"}
            },
            "deviceAccess": {
                "deviceEnvVars": {"enabled": true, "names": ["NVIDIA_VISIBLE_DEVICES"]},
                "privileged": {"enabled": true, "allowNamespaces": ["gpu-tools"],
                               "allowServiceAccounts": ["monitoring:dcgm-exporter"]},
                "deviceHostPaths": {"enabled": true, "paths": ["/dev/nvidia"]},
                "gpuRuntimeClasses": {"enabled": false, "names": []},
                "warnOnEnvFrom": false
            },
            "maxExceptionDays": 30
        });
        let s = parse(v.clone()).unwrap();
        assert_eq!(s.max_gpus_per_pod, Some(8));
        assert!(!s.allow_daemon_sets_on_gpu_nodes);
        assert_eq!(serde_json::to_value(&s).unwrap(), v);
    }

    #[test]
    fn empty_optional_fields_from_forms_mean_unset() {
        let s = parse(json!({
            "requiredLabels": [{"key": "team", "allowedValues": [], "pattern": ""}],
            "gpuTaints": [{"key": "nvidia.com/gpu", "value": "", "effect": ""}]
        }))
        .unwrap();
        assert_eq!(s.required_labels[0].allowed(), None);
        assert_eq!(s.required_labels[0].glob(), None);
        assert_eq!(s.gpu_taints[0].pattern(), any_gpu_taint());
    }

    #[test]
    fn no_required_labels_is_allowed() {
        assert!(parse(json!({"requiredLabels": []})).is_ok());
    }

    #[rstest]
    #[case::unknown_top_level(json!({"requiredLabel": []}), "unknown field `requiredLabel`")]
    #[case::unknown_in_label(json!({"requiredLabels": [{"key": "team", "values": ["a"]}]}), "unknown field `values`")]
    #[case::unknown_in_taint(json!({"gpuTaints": [{"key": "k", "operator": "Exists"}]}), "unknown field `operator`")]
    #[case::label_without_key(json!({"requiredLabels": [{"allowedValues": ["a"]}]}), "missing field `key`")]
    #[case::negative_max(json!({"maxGpusPerPod": -1}), "invalid value")]
    fn typos_and_wrong_types_are_errors(#[case] v: Value, #[case] expected: &str) {
        let err = parse(v).unwrap_err();
        assert!(err.contains(expected), "{err}");
    }

    #[rstest]
    #[case::bad_key(json!({"requiredLabels": [{"key": "Team Name"}]}), "requiredLabels[0].key: ")]
    #[case::duplicate_key(json!({"requiredLabels": [{"key": "team"}, {"key": "team"}]}), "requiredLabels[1].key: 'team' is already required by requiredLabels[0]")]
    #[case::both(json!({"requiredLabels": [{"key": "team", "allowedValues": ["a"], "pattern": "a*"}]}), "requiredLabels[0]: give allowedValues or pattern, not both")]
    #[case::empty_value(json!({"requiredLabels": [{"key": "t", "allowedValues": ["a", ""]}]}), "requiredLabels[0].allowedValues[1]: an empty value")]
    #[case::bad_value(json!({"requiredLabels": [{"key": "t", "allowedValues": ["a b"]}]}), "requiredLabels[0].allowedValues[0]: ")]
    #[case::duplicate_value(json!({"requiredLabels": [{"key": "t", "allowedValues": ["a", "a"]}]}), "requiredLabels[0].allowedValues[1]: 'a' is listed twice")]
    #[case::bad_pattern(json!({"requiredLabels": [{"key": "k"}, {"key": "t", "pattern": "team-.+"}]}), "requiredLabels[1].pattern: ")]
    #[case::zero_per_pod(json!({"maxGpusPerPod": 0}), "maxGpusPerPod: 0 would deny every GPU pod")]
    #[case::zero_per_container(json!({"maxGpusPerContainer": 0}), "maxGpusPerContainer: 0 would deny")]
    #[case::container_above_pod(json!({"maxGpusPerPod": 4, "maxGpusPerContainer": 8}), "maxGpusPerContainer: 8 is more than maxGpusPerPod (4)")]
    #[case::bad_node_key(json!({"gpuNodeLabelKeys": ["ok", "bad key"]}), "gpuNodeLabelKeys[1]: ")]
    #[case::bad_taint_key(json!({"gpuTaints": [{"key": ""}]}), "gpuTaints[0].key: ")]
    #[case::bad_taint_value(json!({"gpuTaints": [{"key": "k", "value": "a b"}]}), "gpuTaints[0].value: ")]
    #[case::bad_effect(json!({"gpuTaints": [{"key": "k", "effect": "NoScheduling"}]}), "gpuTaints[0].effect: 'NoScheduling' is not a taint effect")]
    #[case::rule_without_targets(json!({"gpuNodeLabelKeys": [], "gpuTaints": []}), "denyNonGpuPodsOnGpuNodes: the rule needs")]
    #[case::bad_resource(json!({"extraGpuResources": ["tpu"]}), "extraGpuResources[0]: ")]
    #[case::bad_custom_kind(json!({"customKinds": [{"group": "", "kind": "X", "templates": []}]}), "customKinds[0].group: ")]
    #[case::exempt_everything(json!({"exemptNamespaces": ["*"]}), "exemptNamespaces[0]: ")]
    #[case::device_access(json!({"deviceAccess": {"deviceHostPaths": {"paths": ["/"]}}}), "deviceAccess.deviceHostPaths.paths[0]: ")]
    #[case::exception_without_owner(json!({"exceptions": [{"name": "lab", "namespaces": ["ml"], "expires": "2026-12-31"}]}), "exceptions[0].owner: exception 'lab' has no owner")]
    #[case::exception_of_no_rule(json!({"exceptions": [{"name": "lab", "namespaces": ["ml"], "owner": "a", "rules": ["labels"], "expires": "2026-12-31"}]}), "exceptions[0].rules[0]: 'labels' is not a rule of this policy; use one of requiredLabels, gpuRequests, gpuNodes, deviceAccess, workloadRules, gpuAccess, gpuSharing")]
    #[case::exception_too_long(json!({"exceptions": [{"name": "lab", "namespaces": ["ml"], "owner": "a", "expires": "2999-12-31"}]}), "exceptions[0].expires: 2999-12-31 is more than 90 days (maxExceptionDays) from now")]
    #[case::max_exception_days(json!({"maxExceptionDays": 0}), "maxExceptionDays: 0 is not from 1 to 366")]
    fn invalid_settings_name_the_field(#[case] v: Value, #[case] prefix: &str) {
        let err = parse(v).unwrap_err();
        assert!(err.starts_with(prefix), "{err}");
    }

    #[test]
    fn the_node_rule_can_be_off_without_targets() {
        assert!(
            parse(
                json!({"denyNonGpuPodsOnGpuNodes": false, "gpuNodeLabelKeys": [], "gpuTaints": []})
            )
            .is_ok()
        );
    }
}
