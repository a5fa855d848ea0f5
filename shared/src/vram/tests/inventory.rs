//! `nodeInventory`: the memory the nodes report, and workloads that select what no node
//! offers.

use super::*;
use crate::inventory::tests::{gfd_node, node_list};

fn with_nodes(extra: Value) -> Settings {
    merged(
        json!({"nodeInventory": {"enabled": true},
            "models": {"big": {"vramGiB": 70}, "mid": {"vramGiB": 21}, "small": {"vramGiB": 8.8}}}),
        extra,
    )
}

/// The settings with the node inventory off: the catalog's memory only.
fn catalog_only() -> Settings {
    with_nodes(json!({"nodeInventory": {"enabled": false}}))
}

/// With the node inventory on, the LeaderWorkerSet among the custom kinds.
fn with_nodes_and_lws() -> Settings {
    let mut settings = with_nodes(json!({}));
    settings.custom_kinds = serde_json::from_value(
        json!([{"group": "leaderworkerset.x-k8s.io", "kind": "LeaderWorkerSet"}]),
    )
    .unwrap();
    settings
}

/// A LeaderWorkerSet of `mid`: a leader on `leader` and a worker on `gpus` x `worker`.
fn lws_of_mid(leader: &str, gpus: u64, worker: &str) -> Value {
    json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "lws", "namespace": "ml"},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2,
            "leaderTemplate": {"metadata": {"labels": {"gpu-admission/model": "mid"}},
                "spec": pod_spec("nvidia.com/gpu", 1, Some(leader))},
            "workerTemplate": {"metadata": {"labels": {"gpu-admission/model": "mid"}},
                "spec": pod_spec("nvidia.com/gpu", gpus, Some(worker))}}}})
}

/// The API server's side of a Node list: the items whose labels match the label selector
/// (`k=v` terms, as the policy writes them), recording each selector asked for; image
/// configs from `images`.
struct NodeApi {
    items: Vec<Value>,
    selectors: RefCell<Vec<String>>,
    images: FakeCluster,
}

impl NodeApi {
    fn selectors(&self) -> Vec<String> {
        self.selectors.borrow().clone()
    }

    fn calls(&self) -> usize {
        self.selectors.borrow().len()
    }
}

impl Cluster for NodeApi {
    fn call(&self, request: &ClusterRequest) -> Result<Vec<u8>, String> {
        let ClusterRequest::ListAll(list) = request else {
            return Err(format!("not a Node list: {request:?}"));
        };
        assert_eq!(list.kind, "Node");
        let selector = list.label_selector.clone().unwrap_or_default();
        self.selectors.borrow_mut().push(selector.clone());
        let terms: Vec<(&str, &str)> = selector
            .split(',')
            .filter(|t| !t.is_empty())
            .map(|t| t.split_once('=').expect("k=v terms"))
            .collect();
        let matching: Vec<Value> = self
            .items
            .iter()
            .filter(|n| {
                terms
                    .iter()
                    .all(|(k, v)| n["metadata"]["labels"][*k] == json!(v))
            })
            .cloned()
            .collect();
        Ok(node_list(&matching).into_bytes())
    }

    fn oci_manifest_config(
        &self,
        request: &crate::cluster::OciManifestConfig,
    ) -> Result<Vec<u8>, String> {
        self.images.oci_manifest_config(request)
    }
}

fn nodes(items: &[Value]) -> NodeApi {
    NodeApi {
        items: items.to_vec(),
        selectors: RefCell::new(Vec::new()),
        images: FakeCluster::none(),
    }
}

fn judged(settings: &Settings, cluster: &dyn Cluster, object: Value) -> Verdict {
    evaluate(&request("CREATE", object), settings, cluster)
}

/// The policy, with the node inventory on, listing the nodes of `cluster`.
fn on_nodes(cluster: &dyn Cluster, object: Value) -> Verdict {
    judged(&with_nodes(json!({})), cluster, object)
}

/// One GPU on an A100-SXM4-80GB or an L4 (required node affinity).
fn two_products() -> Value {
    let mut spec = pod_spec("nvidia.com/gpu", 1, None);
    spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In",
          "values": ["NVIDIA-A100-SXM4-80GB", "NVIDIA-L4"]}]}]}}});
    spec
}

fn a100_80(mib: u64) -> Vec<Value> {
    vec![
        gfd_node("a1", "NVIDIA-A100-SXM4-80GB", mib, 8, "550.54.15"),
        gfd_node("a2", "NVIDIA-A100-SXM4-80GB", mib + 100, 8, "550.54.15"),
        gfd_node("l1", "NVIDIA-L4", 23034, 1, "535.104.05"),
    ]
}

#[test]
fn the_memory_the_nodes_report_replaces_the_catalogs() {
    let object = model_on("big", 1, "NVIDIA-A100-SXM4-80GB");
    // The catalog's 81,920 MiB x 90% holds 70 GiB; the 73,000 MiB the nodes report do not.
    let catalog = judged(&catalog_only(), &FakeCluster::none(), object.clone());
    assert!(catalog.allowed, "{catalog:?}");
    let cluster = nodes(&a100_80(73000));
    let v = on_nodes(&cluster, object);
    denies_starting(
        &v,
        "model big needs 70 GiB GPU memory (as given in the model registry); the pod asks for 1 x NVIDIA-A100-SXM4-80GB (73000 MiB per GPU, reported by 2 nodes) = 64 GiB usable at 90%.",
    );
    assert_eq!(cluster.calls(), 1, "one Node list");
}

#[test]
fn nodes_reporting_more_than_the_catalog_admit_what_it_would_deny() {
    let object = model_on("mid", 1, "NVIDIA-L4");
    assert!(!run(&catalog_only(), object.clone()).allowed);
    let mut l4 = gfd_node("l1", "NVIDIA-L4", 24576, 1, "550.54");
    l4["metadata"]["labels"]["nvidia.com/gpu.memory"] = json!("24576");
    let v = on_nodes(&nodes(&[l4]), object);
    allows_recording(
        &v,
        AUDIT_FIT,
        "model mid needs 21 GiB; the pod asks for 1 x NVIDIA-L4 (24576 MiB per GPU, reported by 1 node) = 21 GiB usable at 90%",
    );
}

#[test]
fn the_catalog_is_used_when_no_node_reports_the_memory_and_the_message_says_so() {
    let mut h100 = gfd_node("h1", "NVIDIA-H100-80GB-HBM3", 0, 8, "550.54");
    h100["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("nvidia.com/gpu.memory");
    let object = model_on("big", 1, "NVIDIA-H100-80GB-HBM3");
    let v = on_nodes(&nodes(&[h100]), object);
    allows_noting(
        &v,
        AUDIT_FIT,
        "1 x NVIDIA-H100-80GB-HBM3 (81559 MiB per GPU from the catalog: no node reports it)",
    );
}

#[test]
fn a_product_not_in_the_catalog_is_sized_by_the_nodes() {
    let object = model_on("big", 1, "NVIDIA-RTX-PRO-6000");
    let unknown = run(&catalog_only(), object.clone());
    says(&unknown, "is not in the policy's catalog");
    let v = on_nodes(
        &nodes(&[gfd_node("rtx", "NVIDIA-RTX-PRO-6000", 97887, 4, "575.51")]),
        object,
    );
    assert!(v.allowed, "{v:?}");
}

#[rstest]
#[case::wrong_product(pod_spec("nvidia.com/gpu", 1, Some("NVIDIA-H100-80GB-HBM3")), json!({}),
    "no node offers GPU product 'NVIDIA-H100-80GB-HBM3' (nvidia.com/gpu.product); the nodes offer NVIDIA-A100-SXM4-80GB (2 nodes), NVIDIA-L4 (1 node)")]
#[case::typo(pod_spec("nvidia.com/gpu", 1, Some("NVIDIA-A100-SXM4-80G")), json!({}),
    "no node offers GPU product 'NVIDIA-A100-SXM4-80G' (nvidia.com/gpu.product) (did you mean 'NVIDIA-A100-SXM4-80GB'?); the nodes offer NVIDIA-A100-SXM4-80GB (2 nodes), NVIDIA-L4 (1 node)")]
#[case::mig_profile_absent(pod_spec("nvidia.com/mig-3g.40gb", 1, None), json!({}),
    "no node offers MIG profile 3g.40gb (nvidia.com/mig-3g.40gb); they offer no MIG device (MIG strategy: single)")]
#[case::too_many_gpus_per_pod(pod_spec("nvidia.com/gpu", 2, Some("NVIDIA-L4")), json!({}),
    "the pod asks for 2 nvidia.com/gpu, and no node of NVIDIA-L4 has more than 1 allocatable: ask for at most 1 per pod and split the work over more pods")]
#[case::driver_too_old(pod_spec("nvidia.com/gpu", 1, Some("NVIDIA-L4")), json!({"gpu-admission/min-driver-version": "550"}),
    "the pod needs driver version 550 or later (annotation gpu-admission/min-driver-version on spec.template.spec), and the newest driver on the nodes of NVIDIA-L4 that offer its GPUs is 535.104.05")]
#[case::cuda_too_old(pod_spec("nvidia.com/gpu", 1, None), json!({"gpu-admission/min-cuda-version": "12.8"}),
    "the pod needs CUDA version 12.8 or later (annotation gpu-admission/min-cuda-version on spec.template.spec), and the newest CUDA on the nodes that offer its GPUs is 12.2")]
#[case::not_a_version(pod_spec("nvidia.com/gpu", 1, None), json!({"gpu-admission/min-driver-version": "latest"}),
    "annotation gpu-admission/min-driver-version on spec.template.spec is 'latest', not a version like 535.104 (dotted whole numbers)")]
fn a_selection_no_node_offers_is_denied_with_what_is_there(
    #[case] spec: Value,
    #[case] annotations: Value,
    #[case] message: &str,
) {
    let object = deployment(json!({"gpu-admission/model": "mid"}), annotations, spec);
    let deny = with_nodes(json!({"nodeInventory": {"enabled": true, "noMatchingNodes": "deny"}}));
    let v = judged(&deny, &nodes(&a100_80(81920)), object);
    denies(&v, message);
}

#[test]
fn a_driver_the_nodes_meet_is_admitted() {
    let object = deployment(
        json!({"gpu-admission/model": "mid", "gpu-admission/min-driver-version": "550.54"}),
        json!({}),
        pod_spec("nvidia.com/gpu", 1, Some("NVIDIA-A100-SXM4-80GB")),
    );
    let v = on_nodes(&nodes(&a100_80(81920)), object);
    assert!(v.allowed, "{v:?}");
}

#[test]
fn device_plugin_down_nodes_are_named_in_a_warning() {
    let mut items = a100_80(81920);
    let mut down = gfd_node("h-down", "NVIDIA-H100-80GB-HBM3", 81559, 8, "550.54");
    down["status"]["allocatable"]["nvidia.com/gpu"] = json!("0");
    items.push(down);
    let warning = "GPU nodes with GPU labels but no allocatable GPU (is their device plugin down?), not counted: h-down";
    // Selecting two products: every GPU node is read.
    let any = labelled("small", two_products());
    let v = on_nodes(&nodes(&items), any);
    assert!(v.allowed, "{v:?}");
    assert_eq!(v.warnings, vec![warning]);
    // Selecting the A100s: only their nodes are read, and none of them is down.
    let a100 = model_on("big", 1, "NVIDIA-A100-SXM4-80GB");
    let v = on_nodes(&nodes(&items), a100);
    assert!(v.allowed, "{v:?}");
    assert!(v.warnings.is_empty(), "{:?}", v.warnings);
    // Selecting the H100s: their one node is down, so every node is read; none offers
    // H100s, which noMatchingNodes (warn by default) lets through with a warning.
    let h100 = model_on("mid", 1, "NVIDIA-H100-80GB-HBM3");
    let cluster = nodes(&items);
    let v = on_nodes(&cluster, h100.clone());
    assert!(v.allowed, "{v:?}");
    assert_eq!(
        v.warnings,
        vec![
            "no node offers GPU product 'NVIDIA-H100-80GB-HBM3' (nvidia.com/gpu.product); the nodes offer NVIDIA-A100-SXM4-80GB (2 nodes), NVIDIA-L4 (1 node): accepted without checking the nodes, as a node pool that scales from zero may create them (nodeInventory.noMatchingNodes: warn)",
            warning
        ]
    );
    assert_eq!(cluster.calls(), 2);
    let deny = with_nodes(json!({"nodeInventory": {"enabled": true, "noMatchingNodes": "deny"}}));
    let denied = judged(&deny, &nodes(&items), h100);
    assert!(!denied.allowed, "the H100s are not counted");
}

#[test]
fn one_known_product_narrows_the_list_and_the_whole_list_names_what_is_there() {
    let items = a100_80(81920);
    let q = |p: &str| format!("nvidia.com/gpu.product={p}");
    let selected = |product: Option<&str>| match product {
        Some(_) => labelled("mid", pod_spec("nvidia.com/gpu", 1, product)),
        None => labelled("small", two_products()),
    };
    for (product, allowed, selectors) in [
        // In the catalog and on the nodes: the narrowed list only.
        (
            Some("NVIDIA-A100-SXM4-80GB"),
            true,
            vec![q("NVIDIA-A100-SXM4-80GB")],
        ),
        // In the catalog, on no node: the narrowed list, then the whole one.
        (
            Some("NVIDIA-H100-80GB-HBM3"),
            true,
            vec![q("NVIDIA-H100-80GB-HBM3"), String::new()],
        ),
        // Not a name the policy knows (a typo): never a selector of its own.
        (Some("NVIDIA-A100-SXM4-80G"), false, vec![String::new()]),
        // Two products selected: the whole list.
        (None, true, vec![String::new()]),
    ] {
        let cluster = nodes(&items);
        let v = on_nodes(&cluster, selected(product));
        assert_eq!(v.allowed, allowed, "{product:?}: {v:?}");
        assert_eq!(cluster.selectors(), selectors, "{product:?}");
    }
    // Two pods selecting different products: the whole list, once.
    let object = lws_of_mid("NVIDIA-A100-SXM4-80GB", 1, "NVIDIA-L4");
    let cluster = nodes(&items);
    judged(&with_nodes_and_lws(), &cluster, object);
    assert_eq!(cluster.selectors(), vec![String::new()]);
}

#[test]
fn a_product_of_gpu_products_narrows_too() {
    let items = vec![gfd_node("rtx", "NVIDIA-RTX-PRO-6000", 97887, 4, "575.51")];
    let object = model_on("big", 1, "NVIDIA-RTX-PRO-6000");
    let cluster = nodes(&items);
    assert!(on_nodes(&cluster, object.clone()).allowed);
    assert_eq!(
        cluster.selectors(),
        vec![String::new()],
        "unknown: the whole list"
    );
    let cluster = nodes(&items);
    let listed = with_nodes(json!({"gpuProducts": {"NVIDIA-RTX-PRO-6000": 97887}}));
    assert!(judged(&listed, &cluster, object).allowed);
    assert_eq!(
        cluster.selectors(),
        vec!["nvidia.com/gpu.product=NVIDIA-RTX-PRO-6000"]
    );
}

#[rstest]
#[case::warn(json!({}), true, Some("no schedulable node offers GPUs (1 nodes read): accepted without checking the nodes, as a node pool that scales from zero may create them (nodeInventory.noMatchingNodes: warn)"))]
#[case::allow(json!({"noMatchingNodes": "allow"}), true, None)]
#[case::deny(json!({"noMatchingNodes": "deny"}), false, None)]
fn a_cluster_with_no_gpu_node_now_follows_no_matching_nodes(
    #[case] inventory: Value,
    #[case] allowed: bool,
    #[case] warning: Option<&str>,
) {
    let mut inv = json!({"enabled": true});
    for (k, v) in inventory.as_object().unwrap() {
        inv[k] = v.clone();
    }
    let settings = with_nodes(json!({"nodeInventory": inv}));
    let cpu =
        json!({"metadata": {"name": "cpu", "labels": {}}, "status": {"allocatable": {"cpu": "8"}}});
    // A known product and no GPU node (a Karpenter pool scaled to zero): sized by the catalog.
    let object = model_on("big", 1, "NVIDIA-A100-SXM4-80GB");
    let v = judged(&settings, &nodes(std::slice::from_ref(&cpu)), object);
    assert_eq!(v.allowed, allowed, "{v:?}");
    if !allowed {
        denies(&v, "no schedulable node offers GPUs (1 nodes read)");
        return;
    }
    assert_eq!(v.warnings, warning.into_iter().collect::<Vec<_>>());
    allows_noting(
        &v,
        AUDIT_FIT,
        "(81920 MiB per GPU from the catalog: no node reports it)",
    );
    if warning.is_none() {
        allows_noting(
            &v,
            AUDIT_FIT,
            "not checked against the nodes (nodeInventory.noMatchingNodes: allow)",
        );
    }
    // A product neither on the nodes nor known to the policy is denied whatever it says.
    let typo = model_on("mid", 1, "NVIDIA-A100-SXM4-80G");
    let v = judged(&settings, &nodes(&[cpu]), typo);
    assert!(!v.allowed, "{v:?}");
}

#[test]
fn mig_devices_are_sized_by_the_memory_the_nodes_report() {
    let mut mig = gfd_node("mig", "NVIDIA-A100-SXM4-80GB", 81920, 0, "550.54");
    mig["metadata"]["labels"]["nvidia.com/mig.strategy"] = json!("mixed");
    mig["metadata"]["labels"]["nvidia.com/mig-1g.10gb.memory"] = json!("9728");
    mig["status"]["allocatable"] =
        json!({"nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-2g.20gb": "1"});
    let settings = with_nodes(json!({}));
    let one = |resource: &str| labelled("small", pod_spec(resource, 1, None));
    // The catalog's 10,240 MiB x 90% hold 8.8 GiB; the 9,728 the nodes report do not.
    assert!(
        judged(
            &catalog_only(),
            &FakeCluster::none(),
            one("nvidia.com/mig-1g.10gb")
        )
        .allowed
    );
    let v = judged(
        &settings,
        &nodes(&[mig.clone()]),
        one("nvidia.com/mig-1g.10gb"),
    );
    denies_saying(
        &v,
        "the pod asks for 1 x MIG 1g.10gb (9728 MiB per device, reported by 1 node) = 8.5 GiB usable at 90%. Request nvidia.com/mig-1g.12gb: 1, or",
    );
    // No node reports 2g.20gb: the catalog's size, and the message says so.
    let v = judged(&settings, &nodes(&[mig]), one("nvidia.com/mig-2g.20gb"));
    allows_noting(
        &v,
        AUDIT_FIT,
        "1 x MIG 2g.20gb (20480 MiB per device from the catalog: no node reports it)",
    );
}

#[test]
fn nodes_that_cannot_be_read_deny_with_what_to_grant() {
    let cluster = FakeCluster {
        answer: Err("Policy has not been granted access to Kubernetes v1/Node resources. The violation has been reported.".into()),
        ..FakeCluster::none()
    };
    let object = model_on("mid", 1, "NVIDIA-L4");
    let v = on_nodes(&cluster, object);
    denies(
        &v,
        "cannot list v1/Node: not granted to this policy: add {apiVersion: v1, kind: Node} to the ClusterAdmissionPolicy's contextAwareResources. gpu-vram-fit-policy denies what it cannot check (nodeInventory.enabled); the host's error is in the audit annotation host-error.",
    );
    assert!(audit(&v, AUDIT_HOST_ERROR).starts_with("Policy has not been granted"));
}

#[test]
fn no_list_without_gpus_or_with_the_inventory_off_or_on_an_unchanged_update() {
    let cluster = nodes(&a100_80(81920));
    let cpu = deployment(
        json!({}),
        json!({}),
        json!({"containers": [{"name": "web", "image": "nginx"}]}),
    );
    assert!(on_nodes(&cluster, cpu).allowed);
    let object = model_on("big", 1, "NVIDIA-A100-SXM4-80GB");
    assert!(judged(&catalog_only(), &cluster, object.clone()).allowed);
    let mut update = request("UPDATE", object.clone());
    update.old_object = object;
    assert!(evaluate(&update, &with_nodes(json!({})), &cluster).allowed);
    assert_eq!(cluster.calls(), 0);
}

#[test]
fn node_inventory_settings_are_checked() {
    use crate::policy::Policy;
    let check = |extra: Value| {
        policy::VramFit::check(Box::new(with_nodes(extra)))
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    assert_eq!(
        check(
            json!({"nodeInventory": {"enabled": true, "nodeSelector": {"nvidia.com/gpu.present": "true"}}})
        ),
        Ok(())
    );
    let e =
        check(json!({"nodeInventory": {"enabled": true, "labelKeys": {"product": "bad key!"}}}))
            .unwrap_err();
    assert!(e.starts_with("nodeInventory.labelKeys.product"), "{e}");
    let e = check(json!({"nodeInventory": {"minDriverVersionKey": "-x"}})).unwrap_err();
    assert!(e.starts_with("nodeInventory.minDriverVersionKey"), "{e}");
    let unknown: Result<Settings, _> =
        serde_json::from_value(json!({"nodeInventory": {"enable": true}}));
    assert!(
        unknown
            .unwrap_err()
            .to_string()
            .contains("unknown field `enable`")
    );
}

#[test]
fn the_image_labels_ask_for_a_driver_and_cuda_version_too() {
    let settings = with_nodes(json!({"imageLabels": {"enabled": true}}));
    let object = |annotations: Value| {
        deployment(
            json!({"gpu-admission/model": "mid"}),
            annotations,
            pod_spec("nvidia.com/gpu", 1, Some("NVIDIA-A100-SXM4-80GB")),
        )
    };
    let api = |labels: Value| NodeApi {
        images: FakeCluster::images(vec![("vllm/vllm-openai", Ok(labels))]),
        ..nodes(&a100_80(81920))
    };
    // The image's labels and the template's annotations, on the A100s.
    let asking =
        |labels: Value, annotations: Value| judged(&settings, &api(labels), object(annotations));
    // The A100s run driver 550.54.15 and CUDA 12.2.
    denies(
        &asking(
            json!({"io.gpu-admission.min-driver-version": "560"}),
            json!({}),
        ),
        "the pod needs driver version 560 or later (label io.gpu-admission.min-driver-version of image vllm/vllm-openai), and the newest driver on the nodes of NVIDIA-A100-SXM4-80GB that offer its GPUs is 550.54.15",
    );
    starts_saying(
        &asking(
            json!({"io.gpu-admission.min-cuda-version": "12.4"}),
            json!({}),
        ),
        "the pod needs CUDA version 12.4 or later (label io.gpu-admission.min-cuda-version of image vllm/vllm-openai)",
    );
    // The higher of the image's and the template's asks counts.
    says(
        &asking(
            json!({"io.gpu-admission.min-driver-version": "535"}),
            json!({"gpu-admission/min-driver-version": "555"}),
        ),
        "(annotation gpu-admission/min-driver-version on spec.template.spec)",
    );
    let v = asking(
        json!({"io.gpu-admission.min-driver-version": "550.54"}),
        json!({"gpu-admission/min-driver-version": "535"}),
    );
    assert!(v.allowed, "{v:?}");
    // Without imageLabels the image is not read.
    let off = api(json!({"io.gpu-admission.min-driver-version": "560"}));
    assert!(on_nodes(&off, object(json!({}))).allowed);
    assert!(off.images.image_calls.borrow().is_empty());
}

#[test]
fn every_pod_of_a_unit_is_matched_against_the_nodes() {
    // The leader's product is on no node (warn); the worker asks for more L4s than a node has.
    let object = lws_of_mid("NVIDIA-H100-80GB-HBM3", 2, "NVIDIA-L4");
    let v = judged(&with_nodes_and_lws(), &nodes(&a100_80(81920)), object);
    denies_saying(
        &v,
        "the pod asks for 2 nvidia.com/gpu, and no node of NVIDIA-L4 has more than 1 allocatable",
    );
    assert!(
        v.warnings
            .iter()
            .any(|w| w.contains("no node offers GPU product 'NVIDIA-H100-80GB-HBM3'")),
        "{:?}",
        v.warnings
    );
}

mod cuda_env;
