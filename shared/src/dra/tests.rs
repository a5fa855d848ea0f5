use super::*;
use crate::cluster::fake::Objects;
use crate::testing::{fails_starting, says};
use serde_json::{Value, json};

fn template(requests: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
           "metadata": {"name": "t", "namespace": "ml"},
           "spec": {"spec": {"devices": {"requests": requests}}}})
}

/// The counts of `resources`, as a claim or pod adds them up.
fn counts(resources: &[(&str, u64)]) -> GpuCounts {
    resources.iter().map(|(r, n)| (r.to_string(), *n)).collect()
}

fn gpus(requests: Value) -> Result<ClaimGpus, String> {
    claim_object_gpus(&template(requests), &DraSettings::default())
}

fn deployment(claims: Value) -> Workload {
    Workload::from_object(
        &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": 2, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}],
                "resourceClaims": claims}}}}),
        &[],
    )
    .unwrap()
}

#[test]
fn counts_exact_requests_in_gpu_classes() {
    let g = gpus(json!([
        {"name": "a", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 4}},
        {"name": "b", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
        {"name": "nic", "exactly": {"deviceClassName": "rdma.example.com", "count": 8}}
    ]))
    .unwrap();
    assert_eq!(g.gpus, counts(&[("nvidia.com/gpu", 5)]));
}

#[test]
fn reads_v1beta1_inline_requests() {
    let g = gpus(json!([{"name": "a", "deviceClassName": "gpu.amd.com", "count": 2}])).unwrap();
    assert_eq!(g.gpus, counts(&[("amd.com/gpu", 2)]));
}

#[test]
fn first_available_counts_the_largest_alternative() {
    let g = gpus(json!([{"name": "a", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 2},
        {"name": "small", "deviceClassName": "gpu.nvidia.com", "count": 1},
        {"name": "mig", "deviceClassName": "mig.nvidia.com", "count": 3,
         "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}]}
    ]}]))
    .unwrap();
    assert_eq!(
        g.gpus,
        counts(&[("nvidia.com/gpu", 2), ("nvidia.com/mig-1g.10gb", 3)])
    );
}

#[test]
fn selectors_name_products_and_mig_profiles() {
    let g = gpus(json!([
        {"name": "a", "exactly": {"deviceClassName": "gpu.nvidia.com", "selectors": [
            {"cel": {"expression": "device.attributes[\"gpu.nvidia.com\"].productName == \"NVIDIA H100 80GB HBM3\""}}]}},
        {"name": "m", "exactly": {"deviceClassName": "mig.nvidia.com"}}
    ]))
    .unwrap();
    assert!(g.products.contains("NVIDIA H100 80GB HBM3"));
    assert_eq!(
        g.gpus["nvidia.com/mig"], 1,
        "a MIG request without a profile"
    );
}

#[test]
fn uncountable_gpu_requests_are_errors() {
    for (requests, says) in [
        (
            json!([{"name": "a", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}}]),
            "allocationMode: All",
        ),
        (
            json!([{"name": "a", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "Some"}}]),
            "allocationMode 'Some'",
        ),
        (
            json!([{"name": "a", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 0}}]),
            "count from 1",
        ),
        (
            json!([{"name": "a", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 100000}}]),
            "count from 1",
        ),
        (
            json!([{"name": "a", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": "four"}}]),
            "cannot be read",
        ),
    ] {
        let e = gpus(requests.clone()).unwrap_err();
        assert!(e.contains(says), "{requests}: {e}");
    }
    let many: Vec<Value> = (0..10_000)
        .map(|i| json!({"name": format!("r{i}"), "exactly": {"deviceClassName": "gpu.nvidia.com"}}))
        .collect();
    assert!(gpus(Value::Array(many)).unwrap_err().contains("at most 32"));
    // allocationMode All in a class that is not a GPU is not the policies' business.
    assert!(
        gpus(
            json!([{"name": "a", "exactly": {"deviceClassName": "nic", "allocationMode": "All"}}])
        )
        .unwrap()
        .gpus
        .is_empty()
    );
}

#[test]
fn malformed_claims_are_errors_not_panics() {
    for bad in [
        json!({"kind": "ResourceClaim", "spec": {"devices": {"requests": "x"}}}),
        json!({"kind": "ResourceClaim", "spec": {"devices": {"requests": [{"exactly": 5}]}}}),
        json!({"kind": "ResourceClaimTemplate", "spec": {"spec": "x"}}),
    ] {
        assert!(
            claim_object_gpus(&bad, &DraSettings::default()).is_err(),
            "{bad}"
        );
    }
    let empty = json!({"kind": "ResourceClaim", "spec": null});
    assert!(
        claim_object_gpus(&empty, &DraSettings::default())
            .unwrap()
            .gpus
            .is_empty()
    );
}

#[test]
fn settings_map_more_classes_and_unmap_builtins() {
    let mut s = DraSettings::default();
    s.gpu_device_classes
        .insert("tpu.example.com".into(), "example.com/tpu".into());
    s.gpu_device_classes
        .insert("gpu.intel.com".into(), "".into());
    assert_eq!(s.gpu_resource("tpu.example.com"), Some("example.com/tpu"));
    assert_eq!(s.gpu_resource("gpu.intel.com"), None);
    assert_eq!(s.gpu_resource("gpu.nvidia.com"), Some("nvidia.com/gpu"));
    assert!(s.validate("dra").is_ok());
    s.api_version = "v1".into();
    fails_starting(s.validate("dra"), "dra.apiVersion");
    let mut s = DraSettings::default();
    s.gpu_device_classes.insert("a b".into(), "x".into());
    fails_starting(s.validate("dra"), "dra.gpuDeviceClasses");
}

#[test]
fn resolve_reads_each_claim_once_with_a_field_mask() {
    let w = deployment(json!([
        {"name": "gpu", "resourceClaimTemplateName": "four-gpus"},
        {"name": "shared", "resourceClaimName": "team-gpu"}
    ]));
    let cluster = Objects::default()
        .with(
            "ResourceClaimTemplate",
            "four-gpus",
            template(json!([
            {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 4}}])),
        )
        .failing(
            "ResourceClaim",
            "team-gpu",
            "forbidden: not allowed to access resource.k8s.io/v1/ResourceClaim\nbacktrace",
        );
    let book = resolve(&w, "ml", &DraSettings::default(), &cluster);
    let calls = cluster.calls.borrow();
    assert_eq!(calls.len(), 2);
    let ClusterRequest::Get(get) = &calls[0] else {
        panic!()
    };
    assert_eq!(get.namespace.as_deref(), Some("ml"));
    assert_eq!(get.api_version, "resource.k8s.io/v1");
    assert_eq!(
        get.field_masks,
        Some(BTreeSet::from(["spec.spec.devices".to_string()]))
    );
    let four = book
        .get(&ClaimRef::Template("four-gpus".into()))
        .unwrap()
        .as_ref()
        .unwrap();
    assert_eq!(four.gpus["nvidia.com/gpu"], 4);
    let err = book
        .get(&ClaimRef::Claim("team-gpu".into()))
        .unwrap()
        .as_ref()
        .unwrap_err();
    assert!(err.contains("forbidden"), "{err}");
    assert!(!err.contains("backtrace"), "{err}");
    assert_eq!(
        err,
        "cannot be read (forbidden by RBAC: grant the policy-server's ServiceAccount get on resourceclaims (apiGroup resource.k8s.io))"
    );
}

#[test]
fn no_claims_no_calls() {
    let w = deployment(json!(null));
    let cluster = Objects::default();
    assert!(resolve(&w, "ml", &DraSettings::default(), &cluster).is_empty());
    assert!(cluster.calls.borrow().is_empty());
}

#[test]
fn too_many_claims_are_not_all_read() {
    let claims: Vec<Value> = (0..40)
        .map(|i| json!({"name": format!("c{i}"), "resourceClaimName": format!("c{i}")}))
        .collect();
    let w = deployment(Value::Array(claims));
    let cluster = Objects::default();
    let book = resolve(&w, "ml", &DraSettings::default(), &cluster);
    assert_eq!(cluster.calls.borrow().len(), MAX_CLAIMS_PER_OBJECT);
    let last = book.get(&ClaimRef::Claim("c39".into())).unwrap();
    assert!(last.as_ref().unwrap_err().contains("more than 32"));
}

fn pod(labels: Value, claims: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "ml", "labels": labels},
           "spec": {"containers": [{"name": "c", "image": "x",
                     "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "claims": [{"name": "gpu"}]}}],
                    "resourceClaims": claims}})
}

fn create(object: Value) -> crate::admission::AdmissionRequest {
    serde_json::from_value(json!({
        "uid": "1", "operation": "CREATE", "name": "p", "namespace": "ml",
        "kind": {"group": "", "version": "v1", "kind": "Pod"}, "object": object
    }))
    .unwrap()
}

fn four_gpus() -> Objects {
    Objects::default().with(
        "ResourceClaimTemplate",
        "four-gpus",
        template(
            json!([{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 4}}]),
        ),
    )
}

#[test]
fn template_gpus_adds_claim_devices_to_the_pod() {
    let w = deployment(json!([{"name": "gpu", "resourceClaimTemplateName": "four-gpus"}]));
    let names = crate::gpu::GpuResources::default();
    let book = resolve(&w, "ml", &DraSettings::default(), &four_gpus());
    let pod = crate::gpu::template_gpus(&w.templates[0], &names, &book);
    assert_eq!(pod.effective, counts(&[("nvidia.com/gpu", 4)]));
    assert_eq!(pod.claims, pod.effective);
    assert!(pod.problems.is_empty());
    let total = crate::gpu::workload_gpus(&w, &names, &book);
    assert_eq!(total.total["nvidia.com/gpu"], 8, "2 replicas x 4");
    // A claim nobody resolved is a problem, never zero GPUs silently.
    let unresolved = crate::gpu::template_gpus(&w.templates[0], &names, &ClaimBook::default());
    assert!(unresolved.uses_gpu());
    assert!(unresolved.problems[0].to_string().contains("was not read"));
}

#[test]
fn labels_require_labels_of_a_dra_gpu_pod_and_deny_unreadable_claims() {
    let settings = crate::labels::Settings::default();
    let claims = json!([{"name": "gpu", "resourceClaimTemplateName": "four-gpus"}]);
    let v = labels_evaluate(
        &create(pod(json!({}), claims.clone())),
        &settings,
        &four_gpus(),
    );
    assert!(!v.allowed);
    says(&v, "workload-type");
    let labelled = pod(
        json!({"workload-type": "batch", "team": "ml"}),
        claims.clone(),
    );
    assert!(labels_evaluate(&create(labelled.clone()), &settings, &four_gpus()).allowed);
    let v = labels_evaluate(&create(labelled), &settings, &Objects::default());
    assert!(!v.allowed);
    says(
        &v,
        "resource claim 'gpu' (ResourceClaimTemplate four-gpus) cannot be read",
    );
    says(&v, "(not found); create it before the workload");
    // maxGpusPerPod counts DRA devices.
    let capped = crate::labels::Settings {
        max_gpus_per_pod: Some(2),
        ..crate::labels::Settings::default()
    };
    let labelled = pod(json!({"workload-type": "batch", "team": "ml"}), claims);
    assert!(!labels_evaluate(&create(labelled), &capped, &four_gpus()).allowed);
}

#[test]
fn a_claim_in_a_class_that_is_no_gpu_leaves_the_pod_a_non_gpu_pod() {
    let nic = Objects::default().with(
        "ResourceClaim",
        "nic",
        json!({"kind": "ResourceClaim", "spec": {"devices": {"requests": [
            {"name": "n", "exactly": {"deviceClassName": "rdma.example.com"}}]}}}),
    );
    let object = pod(
        json!({}),
        json!([{"name": "gpu", "resourceClaimName": "nic"}]),
    );
    let v = labels_evaluate(&create(object), &crate::labels::Settings::default(), &nic);
    assert!(v.allowed, "{v:?}");
}

#[test]
fn routing_and_capacity_count_claim_gpus() {
    let w = deployment(json!([{"name": "gpu", "resourceClaimTemplateName": "four-gpus"}]));
    let book = resolve(&w, "ml", &DraSettings::default(), &four_gpus());
    let gate: crate::capacity::Settings = serde_json::from_value(json!({
        "pools": [{"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}}}]
    }))
    .unwrap();
    let mut w = w;
    w.templates[0]
        .meta
        .labels
        .insert("gpu-admission/pool".into(), "a100".into());
    let demand = crate::capacity::demand::workload_demand(&w, &gate, &gate.gpu_resources(), &book);
    assert_eq!(demand.per_pool[&0]["nvidia.com/gpu"], 8);
    let unread = crate::capacity::demand::workload_demand(
        &w,
        &gate,
        &gate.gpu_resources(),
        &ClaimBook::default(),
    );
    assert_eq!(unread.uncountable.len(), 1);
    assert!(unread.uses_gpu());
}

#[test]
fn kai_fractional_pods_are_charged_their_share_rounded_up() {
    let object = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": 3, "template": {
            "metadata": {"labels": {"gpu-admission/pool": "a100"}, "annotations": {"gpu-fraction": "0.5"}},
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c"}]}}}});
    let w = Workload::from_object(&object, &[]).unwrap();
    let gate: crate::capacity::Settings = serde_json::from_value(json!({
        "pools": [{"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}}}]
    }))
    .unwrap();
    let demand = crate::capacity::demand::workload_demand(
        &w,
        &gate,
        &gate.gpu_resources(),
        &ClaimBook::default(),
    );
    assert_eq!(demand.per_pool[&0]["nvidia.com/gpu"], 2, "ceil(3 x 0.5)");
    // Every other policy sees one GPU per pod.
    let pod = crate::gpu::template_gpus(
        &w.templates[0],
        &gate.gpu_resources(),
        &ClaimBook::default(),
    );
    assert_eq!(pod.effective["nvidia.com/gpu"], 1);
    assert_eq!(
        pod.share.unwrap().to_string(),
        "0.5 of one GPU through KAI Scheduler"
    );
}

#[test]
fn hami_sizing_resources_are_never_gpus() {
    let extra = ["nvidia.com/*".to_string()];
    let names = crate::gpu::GpuResources::new(&extra);
    let spec: crate::podspec::PodSpec = serde_json::from_value(json!({"containers": [{"name": "c",
        "resources": {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30}}}]}))
    .unwrap();
    let pod = crate::gpu::pod_gpus(&spec, &names);
    assert_eq!(pod.effective, counts(&[("nvidia.com/gpu", 1)]));
}

/// gpu-labels-policy on `request`, with `settings` checked.
fn labels_evaluate(
    request: &crate::admission::AdmissionRequest,
    settings: &crate::labels::Settings,
    cluster: &dyn crate::cluster::Cluster,
) -> crate::admission::Verdict {
    use crate::labels::policy::Labels;
    use crate::policy::{Policy, checked};
    Labels::evaluate(request, &checked::<Labels>(settings), cluster)
}
