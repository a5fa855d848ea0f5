//! Property tests of the rules crate's foundations: generated quantities, pods and
//! objects. (Run natively; the unit tests also run in wasm.)
#![cfg(not(target_arch = "wasm32"))]

mod json_gen;

use json_gen::json_tree;

use gpu_rules::admission::AdmissionRequest;
use gpu_rules::cluster::NoCluster;
use gpu_rules::gpu::{GpuResources, pod_gpus};
use gpu_rules::labels::Settings as LabelSettings;
use gpu_rules::labels::devices::{DeviceAccess, device_mount, normalize};
use gpu_rules::policies::Labels;
use gpu_rules::policy::Policy;

/// gpu-labels-policy on `request`, with `settings` checked.
fn labels_evaluate(
    request: &gpu_rules::admission::AdmissionRequest,
    settings: &LabelSettings,
    cluster: &dyn gpu_rules::cluster::Cluster,
) -> gpu_rules::admission::Verdict {
    let checked = Labels::check(Box::new(settings.clone())).expect("valid settings");
    Labels::evaluate(request, &checked, cluster)
}
use gpu_rules::podspec::PodSpec;
use gpu_rules::quantity::Quantity;
use gpu_rules::workload::{Workload, presets};
use proptest::prelude::*;
use serde_json::{Value, json};

const SUFFIXES: &[(&str, i128)] = &[
    ("", 1),
    ("k", 1_000),
    ("M", 1_000_000),
    ("G", 1_000_000_000),
    ("Ki", 1 << 10),
    ("Mi", 1 << 20),
    ("Gi", 1 << 30),
    ("Ti", 1 << 40),
];

fn gpu_names() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "nvidia.com/gpu",
        "nvidia.com/mig-1g.10gb",
        "nvidia.com/mig-3g.40gb",
        "amd.com/gpu",
        "gpu.intel.com/xe",
        "cpu",
        "memory",
    ])
    .prop_map(str::to_string)
}

fn container(i: usize) -> impl Strategy<Value = Value> {
    (
        prop::collection::btree_map(gpu_names(), 0u32..5, 0..3),
        prop::collection::btree_map(gpu_names(), 0u32..5, 0..3),
    )
        .prop_map(move |(limits, requests)| {
            let q = |m: std::collections::BTreeMap<String, u32>| -> Value {
                m.into_iter().map(|(k, v)| (k, json!(v.to_string()))).collect()
            };
            json!({"name": format!("c{i}"), "resources": {"limits": q(limits), "requests": q(requests)}})
        })
}

fn containers(max: usize) -> impl Strategy<Value = Vec<Value>> {
    prop::collection::vec(0..max, 0..max).prop_flat_map(|idx| {
        idx.into_iter()
            .enumerate()
            .map(|(i, _)| container(i))
            .collect::<Vec<_>>()
    })
}

/// Arbitrary JSON, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-zA-Z0-9./-]{0,12}".prop_map(Value::String),
    ];
    json_tree(
        leaf,
        &[
            "requests",
            "replicas",
            "predictor",
            "leaderWorkerTemplate",
            "size",
            "name",
        ],
        6,
        6,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn quantity_parse_never_panics(s in ".{0,80}") {
        let _ = Quantity::parse(&s);
    }

    #[test]
    fn quantity_parse_never_panics_on_quantity_like_text(s in "[+-]?[0-9]{0,25}(\\.[0-9]{0,12})?([eE][+-]?[0-9]{1,4}|[numkMGTPE]|[KMGTPE]i)?") {
        let _ = Quantity::parse(&s);
    }

    #[test]
    fn integer_with_suffix_is_exact(n in 0i64..1_000_000, i in 0..SUFFIXES.len()) {
        let (suffix, mult) = SUFFIXES[i];
        let q = Quantity::parse(&format!("{n}{suffix}")).unwrap();
        prop_assert_eq!(q.nanos(), i128::from(n) * mult * 1_000_000_000);
    }

    #[test]
    fn canonical_form_round_trips(nanos in 0i128..(1i128 << 62)) {
        let text = format!("{nanos}n");
        let q = Quantity::parse(&text).unwrap();
        prop_assert_eq!(q.nanos(), nanos);
        prop_assert_eq!(Quantity::parse(&q.to_string()).unwrap(), q);
    }

    #[test]
    fn milli_and_whole_forms_agree(n in 0i64..1_000_000_000) {
        prop_assert_eq!(Quantity::parse(&n.to_string()).unwrap(), Quantity::parse(&format!("{}m", i128::from(n) * 1000)).unwrap());
        prop_assert_eq!(Quantity::parse_count(&format!("{n}e0")).unwrap(), n as u64);
    }

    #[test]
    fn gpu_demand_is_invariant_under_reordering(apps in containers(6), shift in 0usize..6) {
        let mut rotated = apps.clone();
        if !rotated.is_empty() {
            let k = shift % rotated.len();
            rotated.rotate_left(k);
        }
        let reversed: Vec<Value> = apps.iter().rev().cloned().collect();
        let names = GpuResources::default();
        let demand = |cs: &[Value]| {
            let spec: PodSpec = serde_json::from_value(json!({"containers": cs})).unwrap();
            pod_gpus(&spec, &names).effective
        };
        let base = demand(&apps);
        prop_assert_eq!(&base, &demand(&rotated));
        prop_assert_eq!(&base, &demand(&reversed));
    }

    #[test]
    fn effective_demand_covers_every_container(apps in containers(4), inits in containers(4)) {
        let spec: PodSpec = serde_json::from_value(json!({"containers": apps, "initContainers": inits})).unwrap();
        let p = pod_gpus(&spec, &GpuResources::default());
        for c in &p.containers {
            for (name, n) in &c.gpus {
                prop_assert!(p.effective.get(name).copied().unwrap_or(0) >= *n, "{} {} {:?}", name, n, p);
            }
        }
    }

    #[test]
    fn workload_extraction_never_panics(
        kind in prop::sample::select(vec![
            ("v1", "Pod"), ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("batch/v1", "CronJob"),
            ("serving.kserve.io/v1beta1", "InferenceService"), ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
            ("ray.io/v1", "RayCluster"), ("kubeflow.org/v1", "PyTorchJob"),
        ]),
        spec in any_json(),
        metadata in any_json(),
    ) {
        let object = json!({"apiVersion": kind.0, "kind": kind.1, "metadata": metadata, "spec": spec});
        if let Ok(w) = Workload::from_object(&object, &presets::all()) {
            let names = GpuResources::default();
            for t in &w.templates {
                let _ = pod_gpus(&t.spec, &names);
            }
            let _ = w.pods();
        }
    }

    // gpu-labels-policy device access (deviceAccess).

    #[test]
    fn a_device_variable_passes_only_when_it_exposes_nothing(
        value in prop_oneof![
            Just(String::new()), Just("void".to_string()), Just("none".to_string()),
            Just("all".to_string()), "[0-9,]{1,8}", "GPU-[0-9a-f-]{8,36}", ".{0,40}",
        ],
        name in prop::sample::select(vec!["NVIDIA_VISIBLE_DEVICES", "AMD_VISIBLE_DEVICES", "HABANA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"]),
        gpus in 0u32..3,
    ) {
        let mut limits = json!({"cpu": "1", "memory": "1Gi"});
        if gpus > 0 {
            limits["nvidia.com/gpu"] = json!(gpus.to_string());
        }
        let spec = json!({"containers": [{"name": "c", "resources": {"limits": limits},
            "env": [{"name": name, "value": value}]}]});
        let v = labels_evaluate(&labelled_pod(spec), &LabelSettings::default(), &NoCluster);
        let exposes = name != "CUDA_VISIBLE_DEVICES" && !["", "void", "none"].contains(&value.as_str());
        prop_assert_eq!(v.allowed, !exposes, "{} {:?}", value, v.message);
    }

    #[test]
    fn host_paths_are_judged_as_the_node_resolves_them(
        segments in prop::collection::vec(prop::sample::select(vec!["dev", "nvidia0", "dri", "var", ".", "..", "", "kfd", "log"]), 0..8),
    ) {
        let path = format!("/{}", segments.join("/"));
        let devices = DeviceAccess::default().device_host_paths.paths;
        let normal = normalize(&path);
        prop_assert_eq!(normalize(&normal), normal.clone());
        prop_assert!(!normal.contains("//") && !normal.split('/').any(|s| s == "." || s == ".."));
        prop_assert_eq!(device_mount(&path, &devices), device_mount(&normal, &devices));
        // Every spelling of a path that starts with a device path is denied.
        if devices.iter().any(|d| normal.starts_with(d.as_str())) {
            prop_assert!(device_mount(&path, &devices).is_some());
        }
    }

    #[test]
    fn the_labels_rules_never_panic_on_device_fields(
        env in any_json(), env_from in any_json(), volumes in any_json(), security in any_json(),
        runtime in prop::option::of("[a-z-]{0,12}"), tolerate in any::<bool>(),
    ) {
        let mut spec = json!({"containers": [{"name": "c", "env": env, "envFrom": env_from, "securityContext": security}],
            "volumes": volumes});
        if let Some(r) = runtime {
            spec["runtimeClassName"] = json!(r);
        }
        if tolerate {
            spec["tolerations"] = json!([{"operator": "Exists"}]);
        }
        let v = labels_evaluate(&labelled_pod(spec), &LabelSettings::default(), &NoCluster);
        prop_assert!(v.warnings.len() <= 11);
        prop_assert!(v.allowed || v.message.is_some());
    }

    #[test]
    fn device_access_settings_round_trip_or_name_the_field(block in any_json()) {
        match DeviceAccess::from_json(&block) {
            Ok(d) => {
                let again = DeviceAccess::from_json(&serde_json::to_value(&d).unwrap()).unwrap();
                prop_assert_eq!(again, d);
            }
            Err(e) => prop_assert!(!e.is_empty()),
        }
    }
}

/// A labelled Pod in namespace `ml`, created by alice.
fn labelled_pod(spec: Value) -> AdmissionRequest {
    serde_json::from_value(json!({
        "uid": "u", "operation": "CREATE", "namespace": "ml",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "userInfo": {"username": "alice"},
        "object": {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "p", "namespace": "ml", "labels": {"workload-type": "batch", "team": "ml"}},
                   "spec": spec}
    }))
    .unwrap()
}
