//! Each device-access rule, allowed and denied, its settings, the node-agent exemption,
//! and what KAI Scheduler's webhook writes (accepted) against the same fields spoofed.

use super::*;
use crate::admission::{AdmissionRequest, Verdict};
use rstest::rstest;
use serde_json::{Value, json};

use crate::labels::tests::{evaluate, parse};
use crate::testing::{message, says, starts_saying};

fn labels() -> Value {
    json!({"workload-type": "interactive", "team": "ml"})
}

/// A labelled, well-formed container holding `gpus` nvidia.com/gpu (none for "0").
fn app(gpus: &str) -> Value {
    let mut limits = json!({"cpu": "1", "memory": "1Gi"});
    if gpus != "0" {
        limits["nvidia.com/gpu"] = json!(gpus);
    }
    json!({"name": "app", "image": "x", "resources": {"limits": limits}})
}

fn with(mut container: Value, key: &str, value: Value) -> Value {
    container[key] = value;
    container
}

fn env(name: &str, value: &str) -> Value {
    json!([{"name": name, "value": value}])
}

fn pod_in(namespace: &str, metadata_extra: Value, spec: Value) -> AdmissionRequest {
    let mut metadata = json!({"name": "p", "namespace": namespace, "labels": labels()});
    if let Value::Object(extra) = metadata_extra {
        for (k, v) in extra {
            metadata[k] = v;
        }
    }
    request(
        namespace,
        "alice",
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}),
    )
}

fn request(namespace: &str, user: &str, object: Value) -> AdmissionRequest {
    serde_json::from_value(json!({
        "uid": "u", "operation": "CREATE", "namespace": namespace,
        "kind": {"group": "", "version": "v1", "kind": object["kind"]},
        "userInfo": {"username": user}, "object": object
    }))
    .unwrap()
}

fn pod(spec: Value) -> AdmissionRequest {
    pod_in("ml", json!({}), spec)
}

fn decide(spec: Value) -> Verdict {
    evaluate(&pod(spec), &Settings::default())
}

fn one_problem(v: &Verdict) -> &str {
    let m = message(v);
    assert!(!v.allowed, "accepted");
    m.strip_prefix("Pod 'p' breaks the GPU admission rules (1 problem): 1) ")
        .unwrap_or_else(|| panic!("not one problem: {m}"))
}

fn gpu_toleration() -> Value {
    json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
}

// --- 1. Device-runtime variables --------------------------------------------------------

#[test]
fn all_gpus_through_the_env_var_on_a_one_gpu_pod_is_denied() {
    let v = decide(
        json!({"containers": [with(app("1"), "env", env("NVIDIA_VISIBLE_DEVICES", "all"))]}),
    );
    assert_eq!(
        one_problem(&v),
        "container 'app' sets NVIDIA_VISIBLE_DEVICES=all, which makes the container runtime hand it the GPUs that value names, uncounted by any GPU request: remove NVIDIA_VISIBLE_DEVICES and request the GPUs as a resource (e.g. nvidia.com/gpu: 1 in resources.limits); the device plugin sets NVIDIA_VISIBLE_DEVICES to the GPUs it allocates (only void or none may be written)"
    );
}

#[rstest]
#[case::indices("NVIDIA_VISIBLE_DEVICES", "0,1", "nvidia.com/gpu")]
#[case::uuid(
    "NVIDIA_VISIBLE_DEVICES",
    "GPU-3f1d2c4e-8a9b-4c5d-9e0f-123456789abc",
    "nvidia.com/gpu"
)]
#[case::amd("AMD_VISIBLE_DEVICES", "all", "amd.com/gpu")]
#[case::habana("HABANA_VISIBLE_DEVICES", "0", "habana.ai/gaudi")]
#[case::case_matters("NVIDIA_VISIBLE_DEVICES", "None", "nvidia.com/gpu")]
fn device_variables_without_a_gpu_request_are_denied(
    #[case] name: &str,
    #[case] value: &str,
    #[case] resource: &str,
) {
    let v = decide(json!({"containers": [with(app("0"), "env", env(name, value))]}));
    let p = one_problem(&v);
    assert!(
        p.starts_with(&format!("container 'app' sets {name}={value}, which")),
        "{p}"
    );
    assert!(
        p.contains(&format!("(e.g. {resource}: 1 in resources.limits)")),
        "{p}"
    );
}

#[rstest]
#[case::void("NVIDIA_VISIBLE_DEVICES", "void")]
#[case::none("NVIDIA_VISIBLE_DEVICES", "none")]
#[case::empty("AMD_VISIBLE_DEVICES", "")]
#[case::cuda_narrows("CUDA_VISIBLE_DEVICES", "0")]
#[case::rocr_narrows("ROCR_VISIBLE_DEVICES", "0,1")]
#[case::capabilities("NVIDIA_DRIVER_CAPABILITIES", "all")]
#[case::other_case("nvidia_visible_devices", "all")]
fn values_that_expose_nothing_and_narrowing_variables_pass(
    #[case] name: &str,
    #[case] value: &str,
) {
    for gpus in ["0", "1"] {
        let v = decide(json!({"containers": [with(app(gpus), "env", env(name, value))]}));
        assert_eq!(v, Verdict::accept(), "{gpus} GPUs: {}", message(&v));
    }
    let no_value = json!([{"name": name}]);
    assert!(decide(json!({"containers": [with(app("1"), "env", no_value)]})).allowed);
}

#[test]
fn every_container_role_is_checked() {
    let set = |c: Value| with(c, "env", env("NVIDIA_VISIBLE_DEVICES", "all"));
    let spec = json!({
        "containers": [app("1")],
        "initContainers": [set(json!({"name": "warmup"})),
                           set(json!({"name": "proxy", "restartPolicy": "Always"}))],
        "ephemeralContainers": [set(json!({"name": "debug"}))]
    });
    let v = decide(spec);
    let m = message(&v);
    assert!(m.starts_with("Pod 'p' breaks the GPU admission rules (3 problems): 1) init container 'warmup' sets NVIDIA_VISIBLE_DEVICES=all"), "{m}");
    assert!(
        m.contains("2) sidecar container 'proxy' sets NVIDIA_VISIBLE_DEVICES=all"),
        "{m}"
    );
    assert!(
        m.contains("3) ephemeral container 'debug' sets NVIDIA_VISIBLE_DEVICES=all"),
        "{m}"
    );
}

#[rstest]
#[case::secret(json!({"secretKeyRef": {"name": "gpus", "key": "list"}}), "Secret 'gpus' key 'list'")]
#[case::config_map(json!({"configMapKeyRef": {"name": "gpus", "key": "NVIDIA_VISIBLE_DEVICES"}}), "ConfigMap 'gpus' key 'NVIDIA_VISIBLE_DEVICES'")]
#[case::field(json!({"fieldRef": {"fieldPath": "metadata.annotations['gpus']"}}), "a reference")]
fn a_device_variable_from_elsewhere_cannot_be_read_and_is_denied(
    #[case] from: Value,
    #[case] source: &str,
) {
    let e = json!([{"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": from}]);
    let v = decide(json!({"containers": [with(app("1"), "env", e)]}));
    assert_eq!(
        one_problem(&v),
        format!(
            "container 'app' sets NVIDIA_VISIBLE_DEVICES from {source} (valueFrom), which the policy cannot read at admission and the container runtime obeys: remove NVIDIA_VISIBLE_DEVICES and request the GPUs as a resource (e.g. nvidia.com/gpu: 1 in resources.limits); the device plugin sets NVIDIA_VISIBLE_DEVICES to the GPUs it allocates"
        )
    );
}

#[test]
fn long_values_are_cut_in_the_message() {
    let long = "GPU-".repeat(100);
    let v = decide(
        json!({"containers": [with(app("0"), "env", env("NVIDIA_VISIBLE_DEVICES", &long))]}),
    );
    let p = one_problem(&v);
    assert!(
        p.contains(&format!("NVIDIA_VISIBLE_DEVICES={}..., which", &long[..64])),
        "{p}"
    );
}

/// A rule's list configured (`configure`) catches what the defaults let through, and the rule
/// switched off (`switch_off`) lets it through again.
#[rstest]
#[case::device_env_vars(
    json!({"containers": [with(app("0"), "env", json!([
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}, {"name": "MY_DEVICES", "value": "3"}]))]}),
    |s: &mut Settings| s.device_access.device_env_vars.names = vec!["MY_DEVICES".into()],
    "container 'app' sets MY_DEVICES=3, which",
    |s: &mut Settings| s.device_access.device_env_vars.enabled = false,
)]
#[case::device_host_paths(
    json!({"containers": [app("1")], "volumes": [
        {"name": "a", "hostPath": {"path": "/dev/nvidia0"}}, {"name": "b", "hostPath": {"path": "/dev/hl0"}}]}),
    |s: &mut Settings| s.device_access.device_host_paths.paths = vec!["/dev/hl".into()],
    "volume 'b' mounts the host path /dev/hl0, a GPU device",
    |s: &mut Settings| s.device_access.device_host_paths.enabled = false,
)]
fn a_rule_is_configurable_and_switchable(
    #[case] spec: Value,
    #[case] configure: fn(&mut Settings),
    #[case] problem: &str,
    #[case] switch_off: fn(&mut Settings),
) {
    let mut s = Settings::default();
    configure(&mut s);
    let v = evaluate(&pod(spec.clone()), &s);
    assert!(one_problem(&v).starts_with(problem), "{v:?}");
    switch_off(&mut s);
    assert_eq!(evaluate(&pod(spec), &s), Verdict::accept());
}

// --- 2. Privileged containers and device host paths -------------------------------------

#[test]
fn a_privileged_gpu_pod_is_denied() {
    let v = decide(
        json!({"containers": [with(app("1"), "securityContext", json!({"privileged": true}))]}),
    );
    assert_eq!(
        one_problem(&v),
        "container 'app' is privileged (securityContext.privileged: true) in a pod that requests GPUs: it sees every device of the node, every GPU included, not only the GPUs it requests; remove privileged: true and request the GPUs as a resource, or, for GPU tooling, list its namespace or service account in deviceAccess.privileged.allowNamespaces or allowServiceAccounts"
    );
}

#[rstest]
#[case::tolerates(json!({"tolerations": gpu_toleration()}), "in a pod that tolerates the GPU taint nvidia.com/gpu:")]
#[case::selects(json!({"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}}),
    "in a pod that selects GPU nodes with nodeSelector nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB:")]
fn a_privileged_pod_on_gpu_nodes_is_denied_next_to_the_node_rule(
    #[case] extra: Value,
    #[case] reason: &str,
) {
    let mut spec =
        json!({"containers": [with(app("0"), "securityContext", json!({"privileged": true}))]});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    let v = decide(spec);
    let m = message(&v);
    assert!(
        m.starts_with(
            "Pod 'p' breaks the GPU admission rules (2 problems): 1) the pod requests no GPU but"
        ),
        "{m}"
    );
    assert!(
        m.contains(&format!(
            "2) container 'app' is privileged (securityContext.privileged: true) {reason}"
        )),
        "{m}"
    );
    // With the node rule off, the device rule still holds.
    let s = Settings {
        deny_non_gpu_pods_on_gpu_nodes: false,
        ..Settings::default()
    };
    let mut spec =
        json!({"containers": [with(app("0"), "securityContext", json!({"privileged": true}))]});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    let v = evaluate(&pod(spec), &s);
    assert!(one_problem(&v).contains(reason), "{}", message(&v));
}

#[rstest]
#[case::off_gpu_nodes(json!({"containers": [with(app("0"), "securityContext", json!({"privileged": true}))]}))]
#[case::not_privileged(json!({"containers": [with(app("1"), "securityContext", json!({"privileged": false}))]}))]
#[case::other_toleration(json!({"containers": [with(app("0"), "securityContext", json!({"privileged": true}))],
    "tolerations": [{"key": "spot", "operator": "Exists"}]}))]
#[case::host_path_elsewhere(json!({"containers": [app("1")], "volumes": [
    {"name": "logs", "hostPath": {"path": "/var/log"}}, {"name": "shm", "hostPath": {"path": "/dev/shm"}},
    {"name": "fuse", "hostPath": {"path": "/dev/fuse"}}, {"name": "cfg", "configMap": {"name": "c"}}]}))]
#[case::privileged_off_gpu_nodes_with_other_host_paths(json!({"containers": [with(app("0"), "securityContext", json!({"privileged": true}))],
    "volumes": [{"name": "run", "hostPath": {"path": "/run/containerd"}}, {"name": "dev-nvme", "hostPath": {"path": "/dev/nvme0n1"}}]}))]
#[case::persistent_volume_claim(json!({"containers": [app("0")],
    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "host-dev"}}]}))]
fn privileged_and_host_paths_away_from_gpus_pass(#[case] spec: Value) {
    assert_eq!(decide(spec), Verdict::accept());
}

/// Where a device host path is denied: on GPU nodes (a pod that tolerates the GPU taint), and
/// in a pod that targets no GPU, since a device path is GPU access by itself: a pod that requests
/// no GPU, tolerates no GPU taint and selects no GPU node lands on any untainted GPU node and
/// opens its GPUs there.
#[derive(Debug, Clone, Copy)]
enum Target {
    GpuNodes,
    NoGpu,
}

#[rstest]
#[case::device(
    "/dev/nvidia0",
    "/dev/nvidia0, a GPU device (deviceAccess.deviceHostPaths: /dev/nvidia)"
)]
#[case::control(
    "/dev/nvidiactl",
    "/dev/nvidiactl, a GPU device (deviceAccess.deviceHostPaths: /dev/nvidia)"
)]
#[case::render_node(
    "/dev/dri/renderD128",
    "/dev/dri/renderD128, a GPU device (deviceAccess.deviceHostPaths: /dev/dri)"
)]
#[case::kfd(
    "/dev/kfd",
    "/dev/kfd, a GPU device (deviceAccess.deviceHostPaths: /dev/kfd)"
)]
#[case::accel(
    "/dev/accel/accel0",
    "/dev/accel/accel0, a GPU device (deviceAccess.deviceHostPaths: /dev/accel)"
)]
#[case::dev(
    "/dev",
    "/dev, which contains GPU devices (deviceAccess.deviceHostPaths: /dev/nvidia)"
)]
#[case::root(
    "/",
    "/, which contains GPU devices (deviceAccess.deviceHostPaths: /dev/nvidia)"
)]
#[case::dotted(
    "/dev/./nvidia0",
    "/dev/./nvidia0, a GPU device (deviceAccess.deviceHostPaths: /dev/nvidia)"
)]
#[case::backsteps(
    "/var/../dev/",
    "/var/../dev/, which contains GPU devices (deviceAccess.deviceHostPaths: /dev/nvidia)"
)]
#[case::double_slash(
    "//dev//dri",
    "//dev//dri, a GPU device (deviceAccess.deviceHostPaths: /dev/dri)"
)]
#[case::uvm(
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm, a GPU device (deviceAccess.deviceHostPaths: /dev/nvidia)"
)]
#[case::dri(
    "/dev/dri",
    "/dev/dri, a GPU device (deviceAccess.deviceHostPaths: /dev/dri)"
)]
#[case::accel_accel0(
    "/dev/accel0",
    "/dev/accel0, a GPU device (deviceAccess.deviceHostPaths: /dev/accel)"
)]
fn device_host_paths_are_denied(
    #[case] path: &str,
    #[case] what: &str,
    #[values(Target::GpuNodes, Target::NoGpu)] target: Target,
) {
    match target {
        Target::GpuNodes => {
            let v = decide(
                json!({"containers": [app("0")], "tolerations": gpu_toleration(),
                "volumes": [{"name": "dev", "hostPath": {"path": path, "type": "CharDevice"}}]}),
            );
            let m = message(&v);
            assert!(
                m.contains(&format!(
                    "2) volume 'dev' mounts the host path {what}, into a pod that tolerates the GPU taint nvidia.com/gpu: every container that mounts it reaches GPUs no request counts; remove the volume and request the GPUs as a resource, or, for GPU tooling, list its namespace or service account in deviceAccess.privileged.allowNamespaces or allowServiceAccounts"
                )),
                "{m}"
            );
        }
        Target::NoGpu => {
            let v = decide(json!({"containers": [app("0")],
                "volumes": [{"name": "dev", "hostPath": {"path": path}}]}));
            assert_eq!(
                one_problem(&v),
                format!(
                    "volume 'dev' mounts the host path {what}, into a pod that requests no GPU but can be scheduled onto any GPU node without a taint: every container that mounts it reaches GPUs no request counts; remove the volume and request the GPUs as a resource, or, for GPU tooling, list its namespace or service account in deviceAccess.privileged.allowNamespaces or allowServiceAccounts"
                )
            );
        }
    }
}

#[test]
fn device_host_paths_without_gpu_targeting_keep_the_exemptions() {
    let spec = json!({"containers": [app("0")], "volumes": [{"name": "dev", "hostPath": {"path": "/dev"}}]});
    // The GPU-tooling allow-list, by namespace and by service account.
    let mut s = Settings::default();
    s.device_access.privileged.allow_namespaces = crate::settings::NamespaceList(vec!["ml".into()]);
    assert_eq!(evaluate(&pod(spec.clone()), &s), Verdict::accept());
    let mut s = Settings::default();
    s.device_access.privileged.allow_service_accounts = vec!["ml:default".into()];
    assert_eq!(evaluate(&pod(spec.clone()), &s), Verdict::accept());
    // Exempt namespaces.
    let s = Settings {
        exempt_namespaces: crate::settings::NamespaceList(vec!["ml".into()]),
        ..Settings::default()
    };
    let v = evaluate(&pod(spec.clone()), &s);
    assert!(
        v.allowed && v.audit_annotations.contains_key("exempt"),
        "{v:?}"
    );
    // A node agent (a DaemonSet) that mounts /dev and targets no GPU node.
    let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "node-exporter", "namespace": "monitoring"},
        "spec": {"template": {"metadata": {"labels": {"app": "ne"}}, "spec": spec}}});
    assert_eq!(
        evaluate(&request("monitoring", "alice", ds), &Settings::default()),
        Verdict::accept()
    );
    // The rule switched off.
    let mut s = Settings::default();
    s.device_access.device_host_paths.enabled = false;
    assert_eq!(evaluate(&pod(spec), &s), Verdict::accept());
}

#[test]
fn the_privileged_rule_is_switchable() {
    let spec =
        json!({"containers": [with(app("1"), "securityContext", json!({"privileged": true}))]});
    let mut s = Settings::default();
    s.device_access.privileged.enabled = false;
    assert_eq!(evaluate(&pod(spec), &s), Verdict::accept());
}

fn tooling_spec(service_account: Option<&str>) -> Value {
    let mut spec = json!({"containers": [with(app("1"), "securityContext", json!({"privileged": true}))],
        "volumes": [{"name": "dev", "hostPath": {"path": "/dev"}}]});
    if let Some(sa) = service_account {
        spec["serviceAccountName"] = json!(sa);
    }
    spec
}

#[rstest]
#[case::exact_namespace("gpu-tools", None, true)]
#[case::namespace_prefix("gpu-ops-dcgm", None, true)]
#[case::other_namespace("ml", None, false)]
#[case::service_account("ml", Some("dcgm"), true)]
#[case::same_name_other_namespace("web", Some("dcgm"), false)]
#[case::default_account("batch", None, true)]
#[case::other_account("batch", Some("runner"), false)]
fn gpu_tooling_is_allow_listed_by_namespace_or_service_account(
    #[case] namespace: &str,
    #[case] account: Option<&str>,
    #[case] allowed: bool,
) {
    let mut s = Settings::default();
    s.device_access.privileged.allow_namespaces =
        crate::settings::NamespaceList(vec!["gpu-tools".into(), "gpu-ops-*".into()]);
    s.device_access.privileged.allow_service_accounts =
        vec!["ml:dcgm".into(), "batch:default".into()];
    let v = evaluate(&pod_in(namespace, json!({}), tooling_spec(account)), &s);
    assert_eq!(v.allowed, allowed, "{}", message(&v));
    if !allowed {
        says(&v, "(2 problems)");
    }
}

#[test]
fn the_allow_list_does_not_cover_device_variables() {
    let mut s = Settings::default();
    s.device_access.privileged.allow_namespaces = crate::settings::NamespaceList(vec!["ml".into()]);
    let v = evaluate(
        &pod(json!({"containers": [with(app("1"), "env", env("NVIDIA_VISIBLE_DEVICES", "all"))]})),
        &s,
    );
    assert!(!v.allowed);
}

// --- 3. GPU runtime classes --------------------------------------------------------------

#[test]
fn a_gpu_runtime_class_without_a_gpu_is_denied() {
    let v = decide(json!({"containers": [app("0")], "runtimeClassName": "nvidia"}));
    assert_eq!(
        one_problem(&v),
        "the pod requests no GPU but sets runtimeClassName: nvidia, a GPU runtime (deviceAccess.gpuRuntimeClasses) that can hand it GPUs no request counts: remove runtimeClassName, or, if it needs a GPU, request one (e.g. nvidia.com/gpu: 1 in resources.limits)"
    );
    for class in ["nvidia-cdi", "nvidia-legacy"] {
        assert!(!decide(json!({"containers": [app("0")], "runtimeClassName": class})).allowed);
    }
}

#[rstest]
#[case::gpu_pod(json!({"containers": [app("1")], "runtimeClassName": "nvidia"}))]
#[case::other_class(json!({"containers": [app("0")], "runtimeClassName": "kata"}))]
#[case::empty(json!({"containers": [app("0")], "runtimeClassName": ""}))]
fn other_runtime_classes_and_gpu_pods_pass(#[case] spec: Value) {
    assert_eq!(decide(spec), Verdict::accept());
}

#[test]
fn runtime_classes_are_configurable_and_switchable() {
    let spec = json!({"containers": [app("0")], "runtimeClassName": "amd"});
    let mut s = Settings::default();
    assert!(evaluate(&pod(spec.clone()), &s).allowed);
    s.device_access.gpu_runtime_classes.names.push("amd".into());
    assert!(!evaluate(&pod(spec.clone()), &s).allowed);
    s.device_access.gpu_runtime_classes.enabled = false;
    assert!(evaluate(&pod(spec), &s).allowed);
}

// --- 4. envFrom ----------------------------------------------------------------------------

const ENV_FROM_WARNING: &str = "container 'app' takes variables from ConfigMap 'settings' (envFrom), which the GPU admission policy cannot read: a device variable such as NVIDIA_VISIBLE_DEVICES set there is not checked; set such variables in env instead";

fn env_from() -> Value {
    json!([{"configMapRef": {"name": "settings"}}])
}

#[test]
fn env_from_on_a_gpu_pod_is_allowed_with_a_warning() {
    let v = decide(json!({"containers": [with(app("1"), "envFrom", env_from())]}));
    assert!(v.allowed && v.message.is_none());
    assert_eq!(v.warnings, vec![ENV_FROM_WARNING]);
}

#[test]
fn the_warning_stays_when_the_pod_is_denied() {
    let v = decide(
        json!({"containers": [with(with(app("1"), "envFrom", env_from()), "securityContext", json!({"privileged": true}))]}),
    );
    assert!(!v.allowed);
    assert_eq!(v.warnings, vec![ENV_FROM_WARNING]);
}

#[test]
fn env_from_sources_are_named_and_counted() {
    let two =
        json!([{"configMapRef": {"name": "a"}}, {"secretRef": {"name": "b"}, "prefix": "X_"}]);
    let three = json!([{"secretRef": {"name": "s"}}, {"configMapRef": {"name": "a"}}, {"configMapRef": {"name": "b"}}]);
    let v = decide(json!({"containers": [with(app("1"), "envFrom", two)],
        "initContainers": [with(json!({"name": "init"}), "envFrom", three)]}));
    assert_eq!(v.warnings.len(), 2);
    assert!(
        v.warnings[0].starts_with(
            "container 'app' takes variables from ConfigMap 'a' and Secret 'b' (envFrom)"
        ),
        "{:?}",
        v.warnings
    );
    assert!(
        v.warnings[1].starts_with(
            "init container 'init' takes variables from Secret 's' and 2 more (envFrom)"
        ),
        "{:?}",
        v.warnings
    );
    let many: Vec<Value> = (0..12)
        .map(|i| {
            with(
                with(app("0"), "name", json!(format!("c{i}"))),
                "envFrom",
                env_from(),
            )
        })
        .collect();
    let mut spec = json!({"containers": many});
    spec["containers"][0] = with(app("1"), "envFrom", env_from());
    let v = decide(spec);
    assert_eq!(v.warnings.len(), 11);
    assert_eq!(
        v.warnings[10],
        "and 2 more containers with envFrom, not listed here"
    );
    for w in &v.warnings {
        assert!(w.len() <= 256, "{w}");
    }
}

#[rstest]
#[case::off_gpu_nodes(json!({"containers": [with(app("0"), "envFrom", env_from())]}), true)]
#[case::tolerating(json!({"containers": [with(app("0"), "envFrom", env_from())], "tolerations": gpu_toleration()}), false)]
fn env_from_is_only_warned_about_on_gpu_nodes(#[case] spec: Value, #[case] silent: bool) {
    let v = decide(spec);
    assert_eq!(v.warnings.is_empty(), silent, "{v:?}");
}

#[test]
fn the_env_from_warning_is_switchable() {
    let mut s = Settings::default();
    s.device_access.warn_on_env_from = false;
    let v = evaluate(
        &pod(json!({"containers": [with(app("1"), "envFrom", env_from())]})),
        &s,
    );
    assert_eq!(v, Verdict::accept());
}

#[test]
fn an_unchanged_update_keeps_the_warning() {
    let object = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ml"},
        "spec": {"template": {"metadata": {"labels": {}}, "spec": {"containers": [with(app("1"), "envFrom", env_from())]}}}});
    let mut r = request("ml", "alice", object.clone());
    r.operation = "UPDATE".into();
    r.old_object = object;
    let v = evaluate(&r, &Settings::default());
    assert!(v.allowed);
    assert!(
        v.warnings[0].contains("this update is allowed"),
        "{:?}",
        v.warnings
    );
    assert_eq!(v.warnings.last().unwrap(), ENV_FROM_WARNING);
}

// --- 5. Exemptions -------------------------------------------------------------------------

/// A GPU Operator-like node agent: privileged, `/dev` and `/` from the host, every GPU
/// through the variable, the nvidia runtime, envFrom.
fn gpu_operator_agent_spec() -> Value {
    json!({
        "containers": [{"name": "dcgm-exporter", "image": "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.8",
            "securityContext": {"privileged": true},
            "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
            "envFrom": [{"configMapRef": {"name": "dcgm-config"}}]}],
        "volumes": [{"name": "dev", "hostPath": {"path": "/dev"}}, {"name": "host-root", "hostPath": {"path": "/"}}],
        "runtimeClassName": "nvidia",
        "tolerations": gpu_toleration()
    })
}

#[test]
fn node_agents_are_exempt_unless_configured_otherwise() {
    let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "dcgm", "namespace": "gpu-operator"},
        "spec": {"template": {"metadata": {"labels": {"app": "dcgm"}}, "spec": gpu_operator_agent_spec()}}});
    let r = request("gpu-operator", "alice", ds);
    assert_eq!(evaluate(&r, &Settings::default()), Verdict::accept());
    let strict = Settings {
        allow_daemon_sets_on_gpu_nodes: false,
        ..Settings::default()
    };
    let v = evaluate(&r, &strict);
    let m = message(&v);
    assert!(m.starts_with("DaemonSet 'dcgm' breaks the GPU admission rules (6 problems): 1) the pod template requests no GPU but tolerates"), "{m}");
    for part in [
        "sets NVIDIA_VISIBLE_DEVICES=all",
        "is privileged",
        "mounts the host path /dev,",
        "mounts the host path /,",
        "runtimeClassName: nvidia",
    ] {
        assert!(m.contains(part), "{part}: {m}");
    }
    assert_eq!(v.warnings.len(), 1);
}

fn daemon_set_pod(user: &str) -> AdmissionRequest {
    request(
        "gpu-operator",
        user,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "dcgm-x", "namespace": "gpu-operator",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "dcgm", "uid": "1", "controller": true}]},
            "spec": gpu_operator_agent_spec()}),
    )
}

#[test]
fn daemon_set_pods_are_exempt_only_from_the_controller() {
    let ok = daemon_set_pod("system:serviceaccount:kube-system:daemon-set-controller");
    assert_eq!(evaluate(&ok, &Settings::default()), Verdict::accept());
    let spoofed = evaluate(&daemon_set_pod("alice"), &Settings::default());
    assert!(!spoofed.allowed);
    says(&spoofed, "is privileged");
}

#[test]
fn exempt_namespaces_skip_the_device_rules() {
    let s = Settings {
        exempt_namespaces: crate::settings::NamespaceList(vec!["ml".into()]),
        ..Settings::default()
    };
    let v = evaluate(&pod(gpu_operator_agent_spec()), &s);
    assert!(v.allowed && v.warnings.is_empty(), "{v:?}");
}

#[test]
fn every_template_is_checked_gpu_or_not() {
    let cronjob = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj", "namespace": "ml"},
        "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [with(app("0"), "env", env("NVIDIA_VISIBLE_DEVICES", "0"))]}}}}}});
    let v = evaluate(&request("ml", "alice", cronjob), &Settings::default());
    starts_saying(
        &v,
        "CronJob 'cj' breaks the GPU admission rules (1 problem): 1) container 'app' sets NVIDIA_VISIBLE_DEVICES=0",
    );
}

// --- 6. KAI Scheduler ------------------------------------------------------------------------

const KAI_PREFIX: &str = "gpu-sharing-bq7kx2z-shared-gpu";

/// KAI's published gpu-sharing example (docs/gpu-sharing/gpu-sharing.yaml, with the GPU
/// toleration and our labels), as its admission webhook leaves it: the ConfigMap prefix
/// annotation, the three variables from `<prefix>-0`, envFrom `<prefix>-0-evar`, the
/// ConfigMap volume and the nvidia runtime class.
fn kai_pod(annotations: Value, scheduler: Option<&str>, container: Value) -> AdmissionRequest {
    let mut spec = json!({
        "containers": [container],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        "volumes": [{"name": format!("{KAI_PREFIX}-0-vol"), "configMap": {"name": format!("{KAI_PREFIX}-0")}}],
        "runtimeClassName": "nvidia"
    });
    if let Some(s) = scheduler {
        spec["schedulerName"] = json!(s);
    }
    let mut metadata = json!({"name": "gpu-sharing", "namespace": "ml",
        "labels": {"kai.scheduler/queue": "default-queue", "workload-type": "interactive", "team": "ml"}});
    metadata["annotations"] = annotations;
    request(
        "ml",
        "alice",
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}),
    )
}

fn push(list: &mut Value, item: Value) {
    list.as_array_mut().unwrap().push(item);
}

fn kai_annotations() -> Value {
    json!({"gpu-fraction": "0.5", "runai/shared-gpu-configmap": KAI_PREFIX})
}

fn kai_env(config_map: &str) -> Value {
    let from = |key: &str| json!({"name": key, "valueFrom": {"configMapKeyRef": {"key": key, "name": config_map}}});
    json!([
        from("NVIDIA_VISIBLE_DEVICES"),
        from("RUNAI_NUM_OF_GPUS"),
        from("GPU_PORTION")
    ])
}

fn kai_container(name: &str, config_map: &str) -> Value {
    json!({"name": name, "image": "nvidia/cuda:13.0.2-base-ubi8", "command": ["nvidia-smi"], "args": ["-L"],
        "env": kai_env(config_map),
        "envFrom": [{"configMapRef": {"name": format!("{config_map}-evar"), "optional": false}}]})
}

/// The Pod as KAI's webhook writes it: its annotations, scheduler and fraction container.
fn kai_written() -> AdmissionRequest {
    kai_pod(
        kai_annotations(),
        Some("kai-scheduler"),
        kai_container("gpu-workload", &format!("{KAI_PREFIX}-0")),
    )
}

#[test]
fn what_kais_webhook_writes_is_accepted() {
    let r = kai_written();
    assert_eq!(evaluate(&r, &Settings::default()), Verdict::accept());
}

#[test]
fn the_same_fields_without_kais_scheduler_and_annotation_are_denied() {
    let container = kai_container("gpu-workload", &format!("{KAI_PREFIX}-0"));
    for (annotations, scheduler) in [
        (json!({}), None),
        (kai_annotations(), None),
        (kai_annotations(), Some("default-scheduler")),
        (
            json!({"runai/shared-gpu-configmap": KAI_PREFIX}),
            Some("kai-scheduler"),
        ),
    ] {
        let v = evaluate(
            &kai_pod(annotations.clone(), scheduler, container.clone()),
            &Settings::default(),
        );
        let m = message(&v);
        assert!(!v.allowed, "{annotations} {scheduler:?}");
        assert!(
            m.contains(&format!("container 'gpu-workload' sets NVIDIA_VISIBLE_DEVICES from ConfigMap '{KAI_PREFIX}-0' key 'NVIDIA_VISIBLE_DEVICES' (valueFrom)")),
            "{m}"
        );
        assert!(
            v.warnings[0].contains(&format!("ConfigMap '{KAI_PREFIX}-0-evar'")),
            "{:?}",
            v.warnings
        );
    }
}

#[rstest]
#[case::other_config_map(kai_annotations(), kai_container("gpu-workload", "my-gpus"))]
#[case::other_index(kai_annotations(), kai_container("gpu-workload", &format!("{KAI_PREFIX}-1")))]
#[case::handwritten_prefix(json!({"gpu-fraction": "0.5", "runai/shared-gpu-configmap": "mine"}), kai_container("gpu-workload", "mine-0"))]
#[case::prefix_with_vowels(json!({"gpu-fraction": "0.5", "runai/shared-gpu-configmap": "x-aeiouaa-shared-gpu"}), kai_container("gpu-workload", "x-aeiouaa-shared-gpu-0"))]
#[case::other_key(kai_annotations(), with(kai_container("gpu-workload", &format!("{KAI_PREFIX}-0")), "env",
    json!([{"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {"configMapKeyRef": {"key": "ALL", "name": format!("{KAI_PREFIX}-0")}}}])))]
#[case::literal(kai_annotations(), with(kai_container("gpu-workload", &format!("{KAI_PREFIX}-0")), "env", env("NVIDIA_VISIBLE_DEVICES", "all")))]
fn a_kai_pod_gets_only_what_kai_writes(#[case] annotations: Value, #[case] container: Value) {
    let v = evaluate(
        &kai_pod(annotations, Some("kai-scheduler"), container),
        &Settings::default(),
    );
    assert!(!v.allowed);
    says(&v, "sets NVIDIA_VISIBLE_DEVICES");
}

#[test]
fn kais_variable_in_another_container_is_denied() {
    let mut r = kai_written();
    push(
        &mut r.object["spec"]["containers"],
        kai_container("sidecar", &format!("{KAI_PREFIX}-0")),
    );
    let v = evaluate(&r, &Settings::default());
    starts_saying(
        &v,
        "Pod 'gpu-sharing' breaks the GPU admission rules (1 problem): 1) container 'sidecar' sets NVIDIA_VISIBLE_DEVICES from ConfigMap",
    );
}

#[test]
fn kais_fraction_container_is_found_by_name_init_containers_first() {
    // docs/gpu-sharing/gpu-sharing-non-default-container.yaml: the second container.
    let mut annotations = kai_annotations();
    annotations["gpu-fraction-container-name"] = json!("gpu-workload");
    let mut r = kai_pod(
        annotations.clone(),
        Some("kai-scheduler"),
        json!({"name": "sidecar", "image": "busybox"}),
    );
    push(
        &mut r.object["spec"]["containers"],
        kai_container("gpu-workload", &format!("{KAI_PREFIX}-1")),
    );
    assert_eq!(evaluate(&r, &Settings::default()), Verdict::accept());
    // docs/gpu-sharing/gpu-sharing-init-container.yaml: init containers are `i<index>`.
    annotations["gpu-fraction-container-name"] = json!("gpu-init");
    let mut r = kai_pod(
        annotations,
        Some("kai-scheduler"),
        json!({"name": "main-app", "image": "ubuntu"}),
    );
    r.object["spec"]["initContainers"] =
        json!([kai_container("gpu-init", &format!("{KAI_PREFIX}-i0"))]);
    assert_eq!(evaluate(&r, &Settings::default()), Verdict::accept());
    r.object["spec"]["initContainers"] =
        json!([kai_container("gpu-init", &format!("{KAI_PREFIX}-0"))]);
    assert!(!evaluate(&r, &Settings::default()).allowed);
}

#[test]
fn kai_is_only_recognized_when_configured() {
    let r = kai_written();
    let mut s = Settings::default();
    s.fractional_gpus.kai.enabled = false;
    assert!(!evaluate(&r, &s).allowed);
    s.fractional_gpus.kai.enabled = true;
    s.fractional_gpus.kai.scheduler_names = vec!["kai".into()];
    assert!(!evaluate(&r, &s).allowed);
}

#[test]
fn other_env_from_on_a_kai_pod_is_still_warned_about() {
    let mut c = kai_container("gpu-workload", &format!("{KAI_PREFIX}-0"));
    c["envFrom"]
        .as_array_mut()
        .unwrap()
        .push(json!({"configMapRef": {"name": "settings"}}));
    let v = evaluate(
        &kai_pod(kai_annotations(), Some("kai-scheduler"), c),
        &Settings::default(),
    );
    assert!(v.allowed);
    assert_eq!(
        v.warnings,
        vec![
            "container 'gpu-workload' takes variables from ConfigMap 'settings' (envFrom), which the GPU admission policy cannot read: a device variable such as NVIDIA_VISIBLE_DEVICES set there is not checked; set such variables in env instead"
        ]
    );
}

#[test]
fn the_unlabelled_kai_example_is_a_gpu_pod() {
    let mut r = kai_written();
    r.object["metadata"]["labels"] = json!({"kai.scheduler/queue": "default-queue"});
    let v = evaluate(&r, &Settings::default());
    starts_saying(
        &v,
        "Pod 'gpu-sharing' breaks the GPU admission rules (2 problems): 1) label 'workload-type' is missing",
    );
}

#[rstest]
#[case::generated("gpu-sharing-bq7kx2z-shared-gpu", true)]
#[case::no_base("-bq7kx2z-shared-gpu", true)]
#[case::dashed_base("my-job-x-27xx9zz-shared-gpu", true)]
#[case::six_chars("gpu-sharing-bq7kx2-shared-gpu", false)]
#[case::vowel("gpu-sharing-bq7kx2a-shared-gpu", false)]
#[case::no_dash("gpu-sharingbq7kx2z-shared-gpu", false)]
#[case::no_suffix("gpu-sharing-bq7kx2z", false)]
#[case::empty("", false)]
fn kais_generated_prefix(#[case] prefix: &str, #[case] ok: bool) {
    assert_eq!(is_kai_prefix(prefix), ok);
}

// --- Paths ----------------------------------------------------------------------------------

#[rstest]
#[case::plain("/dev/nvidia0", "/dev/nvidia0")]
#[case::trailing("/dev/", "/dev")]
#[case::dots("/./dev/../dev/./dri/", "/dev/dri")]
#[case::above_root("/../../dev", "/dev")]
#[case::relative("dev/kfd", "/dev/kfd")]
#[case::root("/", "/")]
#[case::empty("", "/")]
fn host_paths_are_normalized(#[case] path: &str, #[case] normal: &str) {
    assert_eq!(normalize(path), normal);
}

#[test]
fn device_mounts() {
    let d = DeviceAccess::default().device_host_paths.paths;
    for (path, mount) in [
        ("/dev/nvidia-uvm", Some(DeviceMount::Device("/dev/nvidia"))),
        (
            "/dev/nvidia-caps/nvidia-cap1",
            Some(DeviceMount::Device("/dev/nvidia")),
        ),
        ("/dev", Some(DeviceMount::Contains("/dev/nvidia"))),
        ("/", Some(DeviceMount::Contains("/dev/nvidia"))),
        ("/de", None),
        ("/dev/shm", None),
        ("/run/nvidia", None),
    ] {
        assert_eq!(device_mount(path, &d), mount, "{path}");
    }
}

// --- Settings --------------------------------------------------------------------------------

#[test]
fn defaults_turn_every_rule_on() {
    let s = parse(json!({})).unwrap();
    let d = &s.device_access;
    assert!(d.device_env_vars.enabled && d.privileged.enabled && d.device_host_paths.enabled);
    assert!(d.gpu_runtime_classes.enabled && d.warn_on_env_from);
    assert_eq!(d.device_env_vars.names, DEFAULT_DEVICE_ENV_VARS);
    assert_eq!(d.device_host_paths.paths, DEFAULT_DEVICE_HOST_PATHS);
    assert_eq!(d.gpu_runtime_classes.names, DEFAULT_GPU_RUNTIME_CLASSES);
    assert!(
        d.privileged.allow_namespaces.0.is_empty()
            && d.privileged.allow_service_accounts.is_empty()
    );
}

#[test]
fn a_full_device_access_block_round_trips() {
    let v = json!({
        "deviceEnvVars": {"enabled": true, "names": ["NVIDIA_VISIBLE_DEVICES"]},
        "privileged": {"enabled": true, "allowNamespaces": ["gpu-operator", "gpu-tools-*"], "allowServiceAccounts": ["monitoring:dcgm-exporter"]},
        "deviceHostPaths": {"enabled": false, "paths": []},
        "gpuRuntimeClasses": {"enabled": true, "names": ["nvidia", "amd"]},
        "warnOnEnvFrom": false
    });
    let s = parse(json!({"deviceAccess": v})).unwrap();
    assert_eq!(serde_json::to_value(&s.device_access).unwrap(), v);
    // A partial block keeps the defaults of what it leaves out.
    let s = parse(json!({"deviceAccess": {"privileged": {"allowNamespaces": ["gpu-operator"]}}}))
        .unwrap();
    assert!(s.device_access.privileged.enabled);
    assert_eq!(
        s.device_access.device_env_vars.names,
        DEFAULT_DEVICE_ENV_VARS
    );
}

#[rstest]
#[case::unknown(json!({"deviceAccess": {"deviceEnvVar": {}}}), "unknown field `deviceEnvVar`")]
#[case::unknown_inner(json!({"deviceAccess": {"privileged": {"allowNamespace": []}}}), "unknown field `allowNamespace`")]
#[case::wrong_type(json!({"deviceAccess": {"warnOnEnvFrom": "yes"}}), "invalid type")]
#[case::bad_env_name(json!({"deviceAccess": {"deviceEnvVars": {"names": ["NVIDIA VISIBLE"]}}}), "deviceAccess.deviceEnvVars.names[0]: 'NVIDIA VISIBLE' is not an environment variable name")]
#[case::digit_env_name(json!({"deviceAccess": {"deviceEnvVars": {"names": ["A", "1GPU"]}}}), "deviceAccess.deviceEnvVars.names[1]: ")]
#[case::duplicate_env_name(json!({"deviceAccess": {"deviceEnvVars": {"names": ["A", "A"]}}}), "deviceAccess.deviceEnvVars.names[1]: 'A' is listed twice")]
#[case::no_env_names(json!({"deviceAccess": {"deviceEnvVars": {"names": []}}}), "deviceAccess.deviceEnvVars.names: give at least one variable, or set deviceAccess.deviceEnvVars.enabled: false")]
#[case::bad_namespace(json!({"deviceAccess": {"privileged": {"allowNamespaces": ["*"]}}}), "deviceAccess.privileged.allowNamespaces[0]: ")]
#[case::bad_account(json!({"deviceAccess": {"privileged": {"allowServiceAccounts": ["dcgm"]}}}), "deviceAccess.privileged.allowServiceAccounts[0]: 'dcgm' is not namespace:name")]
#[case::bad_account_namespace(json!({"deviceAccess": {"privileged": {"allowServiceAccounts": ["a:b", "GPU:x"]}}}), "deviceAccess.privileged.allowServiceAccounts[1]: ")]
#[case::duplicate_account(json!({"deviceAccess": {"privileged": {"allowServiceAccounts": ["a:b", "a:b"]}}}), "deviceAccess.privileged.allowServiceAccounts[1]: 'a:b' is listed twice")]
#[case::root_path(json!({"deviceAccess": {"deviceHostPaths": {"paths": ["/"]}}}), "deviceAccess.deviceHostPaths.paths[0]: '/' would deny every hostPath volume")]
#[case::relative_path(json!({"deviceAccess": {"deviceHostPaths": {"paths": ["dev/nvidia"]}}}), "deviceAccess.deviceHostPaths.paths[0]: 'dev/nvidia' is not an absolute path")]
#[case::trailing_slash(json!({"deviceAccess": {"deviceHostPaths": {"paths": ["/dev/dri/"]}}}), "deviceAccess.deviceHostPaths.paths[0]: ")]
#[case::dotdot(json!({"deviceAccess": {"deviceHostPaths": {"paths": ["/dev/../etc"]}}}), "deviceAccess.deviceHostPaths.paths[0]: ")]
#[case::no_paths(json!({"deviceAccess": {"deviceHostPaths": {"paths": []}}}), "deviceAccess.deviceHostPaths.paths: give at least one device path, or set deviceAccess.deviceHostPaths.enabled: false")]
#[case::bad_class(json!({"deviceAccess": {"gpuRuntimeClasses": {"names": ["NVIDIA"]}}}), "deviceAccess.gpuRuntimeClasses.names[0]: 'NVIDIA' is not a RuntimeClass name")]
#[case::no_classes(json!({"deviceAccess": {"gpuRuntimeClasses": {"names": []}}}), "deviceAccess.gpuRuntimeClasses.names: give at least one RuntimeClass")]
#[case::fractional(json!({"fractionalGpus": {"kai": {"schedulerNames": []}}}), "fractionalGpus.kai.schedulerNames: ")]
fn invalid_device_settings_name_the_field(#[case] v: Value, #[case] expected: &str) {
    let err = parse(v).unwrap_err();
    assert!(err.contains(expected), "{err}");
    if expected.starts_with("deviceAccess.") || expected.starts_with("fractionalGpus.") {
        assert!(err.starts_with(expected), "{err}");
    }
}

#[test]
fn a_rule_that_is_off_needs_no_list() {
    assert!(
        parse(json!({"deviceAccess": {
            "deviceEnvVars": {"enabled": false, "names": []},
            "deviceHostPaths": {"enabled": false, "paths": []},
            "gpuRuntimeClasses": {"enabled": false, "names": []}}}))
        .is_ok()
    );
}

#[rstest]
#[case::not_a_map(json!([]), "invalid type: sequence, expected a map")]
#[case::unknown(json!({"deviceEnvVar": {}}), "unknown field `deviceEnvVar`, expected one of `deviceEnvVars`, `privileged`, `deviceHostPaths`, `gpuRuntimeClasses`, `warnOnEnvFrom`")]
#[case::unknown_in_block(json!({"gpuRuntimeClasses": {"name": []}}), "gpuRuntimeClasses: unknown field `name`, expected one of `enabled`, `names`")]
#[case::not_a_bool(json!({"privileged": {"enabled": "yes"}}), "privileged.enabled: invalid type: string \"yes\", expected a boolean")]
#[case::top_bool(json!({"warnOnEnvFrom": 1}), "warnOnEnvFrom: invalid type: integer `1`, expected a boolean")]
#[case::not_a_list(json!({"deviceHostPaths": {"paths": "/dev"}}), "deviceHostPaths.paths: invalid type: string \"/dev\", expected a sequence")]
#[case::not_a_string(json!({"deviceEnvVars": {"names": ["A", -1]}}), "deviceEnvVars.names[1]: invalid type: integer `-1`, expected a string")]
#[case::block_not_a_map(json!({"privileged": true}), "privileged: invalid type: boolean `true`, expected a map")]
fn the_device_access_reader_names_the_field(#[case] v: Value, #[case] expected: &str) {
    assert_eq!(DeviceAccess::from_json(&v).unwrap_err(), expected);
}

#[test]
fn nulls_read_as_defaults() {
    assert_eq!(
        DeviceAccess::from_json(&Value::Null).unwrap(),
        DeviceAccess::default()
    );
    let d = DeviceAccess::from_json(&json!({"privileged": null, "deviceEnvVars": {"names": null}}))
        .unwrap();
    assert!(d.privileged.enabled && d.device_env_vars.names.is_empty());
}
