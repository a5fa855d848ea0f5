use super::*;
use crate::cluster::fake::Script;
use crate::cluster::{ClusterRequest, FailureClass};
use crate::testing::fails_starting;
use rstest::rstest;
use serde_json::{Value, json};

/// A GFD-labelled NVIDIA node: `gpus` whole GPUs of `product` reporting `mib` each, driver
/// `driver` (`535.104.05`), CUDA 12.2, and the other labels GFD writes.
pub(crate) fn gfd_node(name: &str, product: &str, mib: u64, gpus: u64, driver: &str) -> Value {
    let mut parts = driver.split('.');
    let mut labels = json!({
        "kubernetes.io/hostname": name,
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.memory": mib.to_string(),
        "nvidia.com/gpu.count": gpus.to_string(),
        "nvidia.com/gpu.family": "ampere",
        "nvidia.com/gpu.compute.major": "8",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/cuda.runtime.major": "12",
        "nvidia.com/cuda.runtime.minor": "2",
        "nvidia.com/gfd.timestamp": "1733300000",
    });
    for key in ["major", "minor", "rev"] {
        if let Some(p) = parts.next() {
            labels[format!("nvidia.com/cuda.driver.{key}")] = json!(p);
        }
    }
    json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {"allocatable": {"cpu": "96", "nvidia.com/gpu": gpus.to_string()}}
    })
}

pub(crate) fn node_list(nodes: &[Value]) -> String {
    json!({"apiVersion": "v1", "kind": "NodeList", "items": nodes}).to_string()
}

fn parse(nodes: &[Value]) -> Inventory {
    parse_inventory(
        node_list(nodes).as_bytes(),
        &LabelKeys::default(),
        &GpuResources::default(),
    )
    .unwrap()
}

fn demand(products: &[&str], gpus: &[(&str, u64)]) -> Demand {
    Demand {
        products: (!products.is_empty()).then(|| products.iter().map(|p| p.to_string()).collect()),
        gpus: gpus.iter().map(|(r, n)| (r.to_string(), *n)).collect(),
        ..Demand::default()
    }
}

const KEY: &str = "nvidia.com/gpu.product";

/// The inventory settings reading the nodes labelled nvidia.com/gpu.present=true.
fn gpu_present() -> InventorySettings {
    InventorySettings {
        node_selector: LabelSelector::from_labels([(
            "nvidia.com/gpu.present".to_string(),
            "true".to_string(),
        )]),
        ..InventorySettings::default()
    }
}

/// [`super::check`] with the refusal's message.
fn check(inventory: &Inventory, demand: &Demand, key: &str) -> Result<(), String> {
    super::check(inventory, demand, key).map_err(|r| r.message().to_string())
}

#[test]
fn no_node_of_the_product_is_told_apart_from_what_its_nodes_lack() {
    let inv = parse(&[gfd_node("l1", "NVIDIA-L4", 23034, 1, "535.104.05")]);
    let absent = super::check(
        &inv,
        &demand(&["NVIDIA-H100-80GB-HBM3"], &[("nvidia.com/gpu", 1)]),
        KEY,
    );
    assert!(
        matches!(absent, Err(Refusal::NoMatchingNode(_))),
        "{absent:?}"
    );
    let none = super::check(&parse(&[]), &demand(&[], &[("nvidia.com/gpu", 1)]), KEY);
    assert!(matches!(none, Err(Refusal::NoMatchingNode(_))), "{none:?}");
    let too_many = super::check(&inv, &demand(&["NVIDIA-L4"], &[("nvidia.com/gpu", 2)]), KEY);
    assert!(matches!(too_many, Err(Refusal::Denied(_))), "{too_many:?}");
    let mig = super::check(&inv, &demand(&[], &[("nvidia.com/mig-1g.10gb", 1)]), KEY);
    assert!(matches!(mig, Err(Refusal::Denied(_))), "{mig:?}");
}

#[test]
fn mig_memory_labels_are_read_per_profile() {
    let mut a = gfd_node("a", "NVIDIA-A100-SXM4-80GB", 81920, 0, "550.54");
    let labels = a["metadata"]["labels"].as_object_mut().unwrap();
    labels.insert("nvidia.com/mig.strategy".into(), json!("mixed"));
    labels.insert("nvidia.com/mig-1g.10gb.memory".into(), json!("9728"));
    labels.insert("nvidia.com/mig-1g.10gb.count".into(), json!("7"));
    labels.insert("nvidia.com/mig-3g.40gb.memory".into(), json!("40192"));
    labels.insert("nvidia.com/mig-2g.20gb.memory".into(), json!("none"));
    a["status"]["allocatable"] =
        json!({"nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-3g.40gb": "1"});
    let mut b = a.clone();
    b["metadata"]["name"] = json!("b");
    b["metadata"]["labels"]["nvidia.com/mig-1g.10gb.memory"] = json!("9856");
    let inv = parse(&[a, b]);
    assert_eq!(
        inv.gpu_nodes[0].mig_memory,
        BTreeMap::from([
            ("1g.10gb".to_string(), 9728),
            ("3g.40gb".to_string(), 40192)
        ]),
        "the count label and a value that is not a number are skipped"
    );
    assert_eq!(
        inv.reported_mig_mib("1g.10gb"),
        Some((9728, 2)),
        "the smallest, by 2 nodes"
    );
    assert_eq!(
        inv.reported_mig_mib("03g.40gb"),
        Some((40192, 2)),
        "NVIDIA's spelling"
    );
    assert_eq!(inv.reported_mig_mib("7g.80gb"), None);
    let keys = LabelKeys {
        mig_memory: String::new(),
        ..LabelKeys::default()
    };
    let off = parse_inventory(node_list(&[]).as_bytes(), &keys, &GpuResources::default()).unwrap();
    assert_eq!(off.reported_mig_mib("1g.10gb"), None);
    for (bad, why) in [
        ("nvidia.com/mig.memory", "must hold <profile> once"),
        ("nvidia.com/<profile>/<profile>", "must hold <profile> once"),
        ("bad key!<profile>", ""),
    ] {
        let e = LabelKeys {
            mig_memory: bad.into(),
            ..LabelKeys::default()
        }
        .validate("nodeInventory.labelKeys")
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("nodeInventory.labelKeys.migMemory") && e.contains(why),
            "{e}"
        );
    }
}

#[test]
fn a_single_product_narrows_the_nodes_read() {
    let settings = gpu_present();
    assert_eq!(
        settings
            .narrowed(KEY, "NVIDIA-L4")
            .map(|s| s.to_query())
            .as_deref(),
        Some("nvidia.com/gpu.present=true,nvidia.com/gpu.product=NVIDIA-L4")
    );
    assert!(
        settings.narrowed("example.com/gpu", "L4").is_none(),
        "not a product label the inventory reads"
    );
    let fixed = InventorySettings {
        node_selector: LabelSelector::from_labels([(KEY.to_string(), "NVIDIA-L4".to_string())]),
        ..InventorySettings::default()
    };
    assert!(
        fixed.narrowed(KEY, "NVIDIA-A10G").is_none(),
        "nodeSelector fixes the product already"
    );
}

#[test]
fn gfd_labels_are_read() {
    let inv = parse(&[
        gfd_node("a1", "NVIDIA-A100-SXM4-40GB", 40960, 8, "535.104.05"),
        gfd_node("a2", "NVIDIA-A100-SXM4-40GB", 40536, 8, "550.54.15"),
        gfd_node("l1", "NVIDIA-L4", 23034, 1, "535.104.05"),
    ]);
    assert_eq!(inv.nodes, 3);
    let a1 = &inv.gpu_nodes[0];
    assert_eq!(a1.name, "a1");
    assert_eq!(a1.product.as_deref(), Some("NVIDIA-A100-SXM4-40GB"));
    assert_eq!(a1.memory_mib, Some(40960));
    assert_eq!(a1.mig_strategy.as_deref(), Some("single"));
    assert_eq!(a1.driver, Version::parse("535.104.5"));
    assert_eq!(a1.cuda, Version::parse("12.2"));
    assert_eq!(a1.allocatable.get("nvidia.com/gpu"), Some(&8));
    assert_eq!(a1.allocatable.get("cpu"), None, "GPU resources only");
    assert_eq!(
        inv.reported_mib("NVIDIA-A100-SXM4-40GB"),
        Some((40536, 2)),
        "the smallest reported, and how many report"
    );
    assert_eq!(inv.reported_mib("NVIDIA-H100-80GB-HBM3"), None);
    let products = inv.products();
    assert_eq!(products["NVIDIA-L4"].nodes, 1);
    assert_eq!(products["NVIDIA-A100-SXM4-40GB"].smallest_mib, Some(40536));
}

#[test]
fn amd_and_intel_labels_are_read() {
    let inv = parse(&[
        json!({"metadata": {"name": "mi", "labels": {
            "amd.com/gpu.product-name": "AMD_Instinct_MI300X", "amd.com/gpu.vram": "191G",
            "amd.com/gpu.driver-version": "6.8.5"}},
            "status": {"allocatable": {"amd.com/gpu": "8"}}}),
        json!({"metadata": {"name": "max", "labels": {
            "gpu.intel.com/product": "Max_1550", "gpu.intel.com/memory.max": "274877906944",
            "gpu.intel.com/device.count": "2"}},
            "status": {"allocatable": {"gpu.intel.com/i915": "2"}}}),
    ]);
    let mi = &inv.gpu_nodes[0];
    assert_eq!(mi.product.as_deref(), Some("AMD_Instinct_MI300X"));
    assert_eq!(mi.memory_mib, Some(191 * 1024));
    assert_eq!(mi.driver, Version::parse("6.8.5"));
    let max = &inv.gpu_nodes[1];
    assert_eq!(max.product.as_deref(), Some("Max_1550"));
    assert_eq!(max.memory_mib, Some(128 * 1024), "256 GiB over 2 GPUs");
}

#[test]
fn label_keys_are_configurable() {
    let keys = LabelKeys {
        product: "example.com/gpu-model".into(),
        memory: String::new(),
        ..LabelKeys::default()
    };
    let mut node = gfd_node("n", "NVIDIA-L4", 23034, 1, "550.54");
    node["metadata"]["labels"]["example.com/gpu-model"] = json!("L4-custom");
    let inv = parse_inventory(
        node_list(&[node]).as_bytes(),
        &keys,
        &GpuResources::default(),
    )
    .unwrap();
    assert_eq!(inv.gpu_nodes[0].product.as_deref(), Some("L4-custom"));
    assert_eq!(inv.gpu_nodes[0].memory_mib, None, "memory key turned off");
    assert!(keys.validate("nodeInventory.labelKeys").is_ok());
    let bad = LabelKeys {
        memory: "not a key!".into(),
        ..LabelKeys::default()
    };
    fails_starting(
        bad.validate("nodeInventory.labelKeys"),
        "nodeInventory.labelKeys.memory",
    );
}

#[test]
fn device_plugin_down_nodes_are_named_and_not_counted() {
    let mut down = gfd_node("down-1", "NVIDIA-H100-80GB-HBM3", 81559, 8, "550.54");
    down["status"]["allocatable"]["nvidia.com/gpu"] = json!("0");
    let mut absent = gfd_node("down-2", "NVIDIA-H100-80GB-HBM3", 81559, 8, "550.54");
    absent["status"]["allocatable"] = json!({"cpu": "96"});
    let cpu = json!({"metadata": {"name": "cpu", "labels": {"kubernetes.io/os": "linux"}},
                     "status": {"allocatable": {"cpu": "8"}}});
    let mut cordoned = gfd_node("cordoned", "NVIDIA-H100-80GB-HBM3", 81559, 8, "550.54");
    cordoned["spec"]["unschedulable"] = json!(true);
    let inv = parse(&[down, absent, cpu, cordoned]);
    assert_eq!(inv.nodes, 4);
    assert!(inv.gpu_nodes.is_empty());
    assert_eq!(
        inv.plugin_down,
        vec!["down-1", "down-2"],
        "not the CPU node, not the cordoned one"
    );
    assert_eq!(
        inv.plugin_down_names(1).as_deref(),
        Some("down-1 (+1 more)")
    );
    let e = check(
        &inv,
        &demand(&["NVIDIA-H100-80GB-HBM3"], &[("nvidia.com/gpu", 1)]),
        KEY,
    )
    .unwrap_err();
    assert_eq!(
        e,
        "no schedulable node offers GPUs (4 nodes read; with GPU labels but no allocatable GPU: down-1, down-2)"
    );
}

#[test]
fn reading_uses_the_pools_node_query_and_its_failure_wording() {
    let selector = LabelSelector::from_labels([("gpu".to_string(), "true".to_string())]);
    let query = nodes_by(&selector);
    let ClusterRequest::ListAll(list) = &query else {
        panic!("a list")
    };
    assert_eq!(list.label_selector.as_deref(), Some("gpu=true"));
    assert_eq!(
        list.field_masks
            .as_ref()
            .unwrap()
            .iter()
            .collect::<Vec<_>>(),
        vec!["spec.taints", "spec.unschedulable", "status.allocatable"]
    );
    let read = |cluster: &Script| {
        read_inventory(
            cluster,
            &selector,
            &LabelKeys::default(),
            &GpuResources::default(),
        )
    };
    let ok = Script::new(vec![(
        query.clone(),
        Ok(node_list(&[gfd_node("n", "NVIDIA-L4", 23034, 1, "550.54")])),
    )]);
    let inv = read(&ok).unwrap();
    assert_eq!(inv.gpu_nodes.len(), 1);
    assert!(ok.done());

    let denied = Script::new(vec![(
        query.clone(),
        Err("Policy has not been granted access to Kubernetes v1/Node resources. The violation has been reported.".into()),
    )]);
    let f = read(&denied).unwrap_err();
    assert_eq!(f.class(), FailureClass::NotGranted);
    assert_eq!(
        f.explanation(),
        "cannot list v1/Node: not granted to this policy: add {apiVersion: v1, kind: Node} to the ClusterAdmissionPolicy's contextAwareResources"
    );
    let garbled = Script::new(vec![(query, Ok(r#"{"items": [{"metadata": 3}]}"#.into()))]);
    let f = read(&garbled).unwrap_err();
    assert_eq!(f.class(), FailureClass::Unreadable);
}

fn cluster() -> Inventory {
    let mut mig = gfd_node("mig", "NVIDIA-A100-SXM4-80GB", 81920, 0, "550.54.15");
    mig["metadata"]["labels"]["nvidia.com/mig.strategy"] = json!("mixed");
    mig["status"]["allocatable"] =
        json!({"nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-3g.40gb": "2"});
    parse(&[
        gfd_node("a1", "NVIDIA-A100-SXM4-40GB", 40536, 8, "535.104.05"),
        gfd_node("a2", "NVIDIA-A100-SXM4-40GB", 40536, 4, "535.104.05"),
        gfd_node("l1", "NVIDIA-L4", 23034, 1, "550.54.15"),
        mig,
    ])
}

#[test]
fn offered_selections_pass() {
    let inv = cluster();
    for d in [
        demand(&["NVIDIA-A100-SXM4-40GB"], &[("nvidia.com/gpu", 8)]),
        demand(
            &["NVIDIA-L4", "NVIDIA-H100-80GB-HBM3"],
            &[("nvidia.com/gpu", 1)],
        ),
        demand(&[], &[("nvidia.com/gpu", 2)]),
        demand(&[], &[("nvidia.com/mig-3g.40gb", 2)]),
    ] {
        assert_eq!(check(&inv, &d, KEY), Ok(()), "{d:?}");
    }
}

#[rstest]
#[case::a_product_no_node_offers_is_named_with_what_is_there(&["NVIDIA-H100-80GB-HBM3"], ("nvidia.com/gpu", 1),
    "no node offers GPU product 'NVIDIA-H100-80GB-HBM3' (nvidia.com/gpu.product); the nodes offer NVIDIA-A100-SXM4-40GB (2 nodes), NVIDIA-A100-SXM4-80GB (1 node), NVIDIA-L4 (1 node)")]
#[case::a_product_misspelt(&["nvidia-a100-sxm4-40G"], ("nvidia.com/gpu", 1),
    "no node offers GPU product 'nvidia-a100-sxm4-40G' (nvidia.com/gpu.product) (did you mean 'NVIDIA-A100-SXM4-40GB'?); the nodes offer NVIDIA-A100-SXM4-40GB (2 nodes), NVIDIA-A100-SXM4-80GB (1 node), NVIDIA-L4 (1 node)")]
#[case::a_product_offered_only_as_mig_devices_says_so(&["NVIDIA-A100-SXM4-80GB"], ("nvidia.com/gpu", 1),
    "no node of NVIDIA-A100-SXM4-80GB offers nvidia.com/gpu; they offer nvidia.com/mig-1g.10gb (up to 7 per node), nvidia.com/mig-3g.40gb (up to 2 per node)")]
#[case::an_absent_mig_profile_is_named_with_the_profiles_there(&[], ("nvidia.com/mig-7g.80gb", 1),
    "no node offers MIG profile 7g.80gb (nvidia.com/mig-7g.80gb); they offer 1g.10gb, 3g.40gb")]
#[case::a_mig_profile_of_a_product_without_mig(&["NVIDIA-L4"], ("nvidia.com/mig-1g.10gb", 1),
    "no node of NVIDIA-L4 offers MIG profile 1g.10gb (nvidia.com/mig-1g.10gb); they offer no MIG device (MIG strategy: single)")]
#[case::more_gpus_per_pod_than_any_node_has_is_denied(&["NVIDIA-A100-SXM4-40GB"], ("nvidia.com/gpu", 16),
    "the pod asks for 16 nvidia.com/gpu, and no node of NVIDIA-A100-SXM4-40GB has more than 8 allocatable: ask for at most 8 per pod and split the work over more pods")]
fn what_no_node_offers_is_named_with_what_is_there(
    #[case] products: &[&str],
    #[case] gpus: (&str, u64),
    #[case] message: &str,
) {
    assert_eq!(
        check(&cluster(), &demand(products, &[gpus]), KEY),
        Err(message.to_string())
    );
}

#[test]
fn driver_and_cuda_versions_are_checked_on_the_nodes_that_fit() {
    let inv = cluster();
    let mut d = demand(&["NVIDIA-A100-SXM4-40GB"], &[("nvidia.com/gpu", 4)]);
    d.min_driver = Some((Version::parse("535.104").unwrap(), "label x".into()));
    assert_eq!(check(&inv, &d, KEY), Ok(()));
    d.min_driver = Some((
        Version::parse("550").unwrap(),
        "annotation gpu-admission/min-driver-version".into(),
    ));
    assert_eq!(
        check(&inv, &d, KEY).unwrap_err(),
        "the pod needs driver version 550 or later (annotation gpu-admission/min-driver-version), and the newest driver on the nodes of NVIDIA-A100-SXM4-40GB that offer its GPUs is 535.104.05"
    );
    // The L4 node has driver 550, but not 4 GPUs.
    d.products = None;
    assert!(
        check(&inv, &d, KEY)
            .unwrap_err()
            .contains("newest driver on the nodes that offer its GPUs is 535.104.05")
    );
    d.min_driver = None;
    d.min_cuda = Some((Version::parse("12.4").unwrap(), "label c".into()));
    assert_eq!(
        check(&inv, &d, KEY).unwrap_err(),
        "the pod needs CUDA version 12.4 or later (label c), and the newest CUDA on the nodes that offer its GPUs is 12.2"
    );
    let mut bare = gfd_node("bare", "NVIDIA-L4", 23034, 1, "");
    bare["metadata"]["labels"] = json!({"nvidia.com/gpu.product": "NVIDIA-L4"});
    let mut d = demand(&[], &[("nvidia.com/gpu", 1)]);
    d.min_driver = Some((Version::parse("535").unwrap(), "label x".into()));
    assert_eq!(
        check(&parse(&[bare]), &d, KEY).unwrap_err(),
        "the pod needs driver version 535 or later (label x), and no node that offers its GPUs reports its driver version"
    );
}

#[cfg(not(target_arch = "wasm32"))]
mod properties {
    use super::*;
    use proptest::prelude::*;

    const PRODUCTS: [&str; 3] = [
        "NVIDIA-L4",
        "NVIDIA-A100-SXM4-40GB",
        "NVIDIA-H100-80GB-HBM3",
    ];
    const DRIVERS: [&str; 3] = ["525.60.13", "535.104.05", "550.54.15"];

    fn node() -> impl Strategy<Value = (usize, u64, usize)> {
        (0..PRODUCTS.len(), 0u64..=8, 0..DRIVERS.len())
    }

    fn build(i: usize, (p, gpus, d): (usize, u64, usize)) -> Value {
        gfd_node(
            &format!("n{i}"),
            PRODUCTS[p],
            20000 + 1000 * p as u64,
            gpus,
            DRIVERS[d],
        )
    }

    proptest! {
        /// Adding a node that offers the selected product never turns an acceptance into a
        /// denial.
        #[test]
        fn adding_a_node_of_the_selected_product_never_denies(
            nodes in prop::collection::vec(node(), 0..6),
            added in node(),
            gpus in 1u64..=8,
            driver in prop::option::of(0..DRIVERS.len()),
        ) {
            let mut d = demand(&[PRODUCTS[added.0]], &[("nvidia.com/gpu", gpus)]);
            d.min_driver = driver.map(|i| (Version::parse(DRIVERS[i]).unwrap(), "label".into()));
            let mut items: Vec<Value> = nodes.iter().enumerate().map(|(i, n)| build(i, *n)).collect();
            let before = check(&parse(&items), &d, KEY);
            items.push(build(99, added));
            let after = check(&parse(&items), &d, KEY);
            prop_assert!(before.is_err() || after.is_ok(), "before {:?}, after {:?}", before, after);
        }
    }
}

#[test]
fn the_whole_list_is_read_only_when_the_narrowed_one_has_no_gpu_node() {
    let settings = gpu_present();
    let names = GpuResources::default();
    let narrow = nodes_by(&settings.narrowed(KEY, "NVIDIA-L4").unwrap());
    let wide = nodes_by(&settings.node_selector);
    let l4 = node_list(&[gfd_node("l1", "NVIDIA-L4", 23034, 1, "550.54")]);
    let found = Script::new(vec![(narrow.clone(), Ok(l4.clone()))]);
    let inv = read_for(&found, &settings, &names, Some((KEY, "NVIDIA-L4"))).unwrap();
    assert_eq!(
        (inv.gpu_nodes.len(), *found.calls.borrow()),
        (1, 1),
        "one list"
    );
    let mut down = gfd_node("l2", "NVIDIA-L4", 23034, 1, "550.54");
    down["status"]["allocatable"]["nvidia.com/gpu"] = json!("0");
    let empty = Script::new(vec![
        (narrow, Ok(node_list(&[down]))),
        (wide.clone(), Ok(l4.clone())),
    ]);
    let inv = read_for(&empty, &settings, &names, Some((KEY, "NVIDIA-L4"))).unwrap();
    assert!(empty.done(), "then the whole list, to name what there is");
    assert_eq!(inv.gpu_nodes.len(), 1);
    let unnarrowed = Script::new(vec![(wide, Ok(l4))]);
    read_for(&unnarrowed, &settings, &names, None).unwrap();
    assert!(unnarrowed.done());
}
