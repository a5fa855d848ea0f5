//! GPU nodes are for GPU work: a pod that requests no GPU must neither tolerate a GPU
//! taint nor select GPU nodes (nodeSelector, or required node affinity `In` / `Exists` /
//! `Gt` / `Lt` on a GPU node label), or it can fill expensive nodes with work that could
//! run anywhere and leave GPUs idle for lack of cpu, memory or pod slots.

use super::problems::{Problem, Subject};
use super::settings::Settings;
use crate::podspec::{PodSpec, Toleration};
use crate::scheduling::{TaintPattern, selected_label_keys, tolerates};

/// `tolerations[0] (key: nvidia.com/gpu, operator: Exists)`.
fn describe_toleration(index: usize, t: &Toleration) -> String {
    let mut fields = Vec::new();
    if let Some(k) = t.key.as_deref().filter(|k| !k.is_empty()) {
        fields.push(format!("key: {k}"));
    }
    if let Some(o) = &t.operator {
        fields.push(format!("operator: {o}"));
    }
    if let Some(v) = t.value.as_deref().filter(|v| !v.is_empty()) {
        fields.push(format!("value: {v}"));
    }
    if let Some(e) = t.effect.as_deref().filter(|e| !e.is_empty()) {
        fields.push(format!("effect: {e}"));
    }
    let everything = t.key.as_deref().unwrap_or("").is_empty();
    format!(
        "tolerations[{index}] ({}){}",
        fields.join(", "),
        if everything {
            ", which tolerates every taint"
        } else {
            ""
        }
    )
}

/// `nvidia.com/gpu`, `nvidia.com/gpu=present:NoSchedule`.
pub fn describe_taint(t: &TaintPattern) -> String {
    let mut s = t.key.clone();
    if let Some(v) = &t.value {
        s.push('=');
        s.push_str(v);
    }
    if let Some(e) = &t.effect {
        s.push(':');
        s.push_str(e);
    }
    s
}

/// How a pod (template) reaches GPU nodes: the GPU taints (of `gpuTaints`) it tolerates
/// and the GPU node labels (of `gpuNodeLabelKeys`) it selects, in settings order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuNodeTargets<'s> {
    pub tolerated: Vec<TaintPattern>,
    pub selected: Vec<&'s str>,
}

impl GpuNodeTargets<'_> {
    /// True when the pod tolerates a GPU taint or selects GPU nodes.
    pub fn any(&self) -> bool {
        !self.tolerated.is_empty() || !self.selected.is_empty()
    }
}

/// The GPU taints `spec` tolerates and the GPU node labels it selects. The GPU-node rule
/// below and the device-access rules ([`super::devices`]) both read GPU nodes this way.
pub fn targets<'s>(spec: &PodSpec, settings: &'s Settings) -> GpuNodeTargets<'s> {
    GpuNodeTargets {
        tolerated: settings
            .gpu_taints
            .iter()
            .map(|t| t.pattern())
            .filter(|p| spec.tolerations.iter().any(|t| tolerates(t, p)))
            .collect(),
        selected: selected_label_keys(spec, &settings.gpu_node_label_keys),
    }
}

/// `nodeSelector nvidia.com/gpu.product: NVIDIA-L4`, `required node affinity on nvidia.com/gpu.present`.
pub fn describe_selector(spec: &PodSpec, key: &str) -> String {
    match spec.node_selector.get(key) {
        Some(value) => format!("nodeSelector {key}: {value}"),
        None => format!("required node affinity on {key}"),
    }
}

/// The GPU-node problems of a pod (template) that requests no GPU.
pub fn check(spec: &PodSpec, subject: Subject, settings: &Settings) -> Vec<Problem> {
    let mut problems = Vec::new();
    let targets = targets(spec, settings);
    if !targets.tolerated.is_empty() {
        problems.push(Problem::ToleratesGpuTaint {
            subject,
            taints: targets.tolerated.iter().map(describe_taint).collect(),
            tolerations: spec
                .tolerations
                .iter()
                .enumerate()
                .filter(|(_, t)| targets.tolerated.iter().any(|p| tolerates(t, p)))
                .map(|(i, t)| describe_toleration(i, t))
                .collect(),
        });
    }
    if !targets.selected.is_empty() {
        problems.push(Problem::SelectsGpuNodes {
            subject,
            selectors: targets
                .selected
                .iter()
                .map(|key| describe_selector(spec, key))
                .collect(),
        });
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::settings::GpuTaint;
    use rstest::rstest;
    use serde_json::{Value, json};

    fn run(spec: Value, settings: &Settings) -> Vec<String> {
        let spec: PodSpec = serde_json::from_value(spec).unwrap();
        check(&spec, Subject::Template, settings)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn affinity(expr: Value) -> Value {
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [expr]}]}}})
    }

    #[rstest]
    #[case::plain(json!({"containers": [{"name": "web"}]}))]
    #[case::other_taint(json!({"tolerations": [{"key": "spot", "operator": "Exists"}]}))]
    #[case::other_node_label(json!({"nodeSelector": {"zone": "a"}}))]
    #[case::gpu_label_negated(json!({"affinity": affinity(json!({"key": "nvidia.com/gpu.present", "operator": "DoesNotExist"}))}))]
    #[case::other_effect_only(json!({"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}]}))]
    fn pods_that_stay_off_gpu_nodes_pass(#[case] spec: Value) {
        let settings = Settings {
            gpu_taints: vec![GpuTaint {
                key: "nvidia.com/gpu".into(),
                value: None,
                effect: Some("NoSchedule".into()),
            }],
            ..Settings::default()
        };
        assert_eq!(run(spec, &settings), Vec::<String>::new());
    }

    #[test]
    fn tolerating_the_gpu_taint_is_named() {
        let spec = json!({"tolerations": [
            {"key": "spot", "operator": "Exists"},
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        ]});
        assert_eq!(
            run(spec, &Settings::default()),
            vec![
                "the pod template requests no GPU but tolerates the GPU taint nvidia.com/gpu with tolerations[1] (key: nvidia.com/gpu, operator: Exists, effect: NoSchedule): GPU nodes are for GPU work, so remove the toleration, or, if it needs a GPU, request one (e.g. nvidia.com/gpu: 1 in resources.limits)"
            ]
        );
    }

    #[test]
    fn a_tolerate_everything_toleration_says_so() {
        let out = run(
            json!({"tolerations": [{"operator": "Exists"}]}),
            &Settings::default(),
        );
        assert_eq!(out.len(), 1);
        assert!(
            out[0].contains("with tolerations[0] (operator: Exists), which tolerates every taint:"),
            "{}",
            out[0]
        );
    }

    #[test]
    fn a_specific_taint_value_is_matched_as_kubernetes_does() {
        let settings = Settings {
            gpu_taints: vec![GpuTaint {
                key: "nvidia.com/gpu".into(),
                value: Some("present".into()),
                effect: Some("NoSchedule".into()),
            }],
            ..Settings::default()
        };
        let equal_other_value =
            json!({"tolerations": [{"key": "nvidia.com/gpu", "value": "true"}]});
        assert!(run(equal_other_value, &settings).is_empty());
        let equal_same_value =
            json!({"tolerations": [{"key": "nvidia.com/gpu", "value": "present"}]});
        let out = run(equal_same_value, &settings);
        assert!(
            out[0].contains("tolerates the GPU taint nvidia.com/gpu=present:NoSchedule with tolerations[0] (key: nvidia.com/gpu, value: present)"),
            "{}",
            out[0]
        );
    }

    #[rstest]
    #[case::node_selector(json!({"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}}),
        "selects GPU nodes with nodeSelector nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB:")]
    #[case::affinity_exists(json!({"affinity": affinity(json!({"key": "nvidia.com/gpu.present", "operator": "Exists"}))}),
        "selects GPU nodes with required node affinity on nvidia.com/gpu.present:")]
    #[case::both(json!({"nodeSelector": {"nvidia.com/gpu.present": "true"}, "affinity": affinity(json!({"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-L4"]}))}),
        "selects GPU nodes with required node affinity on nvidia.com/gpu.product and nodeSelector nvidia.com/gpu.present: true:")]
    fn selecting_gpu_nodes_is_named(#[case] spec: Value, #[case] expected: &str) {
        let out = run(spec, &Settings::default());
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(out[0].contains(expected), "{}", out[0]);
        assert!(out[0].ends_with("so remove the selector, or, if it needs a GPU, request one (e.g. nvidia.com/gpu: 1 in resources.limits)"));
    }

    #[test]
    fn targets_name_the_tolerated_taints_and_selected_labels() {
        let spec: PodSpec = serde_json::from_value(json!({
            "tolerations": [{"operator": "Exists"}],
            "nodeSelector": {"nvidia.com/gpu.present": "true", "zone": "a"}
        }))
        .unwrap();
        let settings = Settings::default();
        let t = targets(&spec, &settings);
        assert!(t.any());
        assert_eq!(
            t.tolerated.iter().map(describe_taint).collect::<Vec<_>>(),
            ["nvidia.com/gpu"]
        );
        assert_eq!(t.selected, ["nvidia.com/gpu.present"]);
        assert!(!targets(&PodSpec::default(), &settings).any());
    }

    #[test]
    fn configured_cloud_labels_count_as_gpu_node_labels() {
        let settings = Settings {
            gpu_node_label_keys: vec!["cloud.google.com/gke-accelerator".into()],
            ..Settings::default()
        };
        let spec = json!({"nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"}});
        assert_eq!(run(spec, &settings).len(), 1);
    }
}
