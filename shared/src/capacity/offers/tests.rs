use super::*;
use crate::gpu::GpuResources;
use crate::inventory::parse_inventory;
use crate::inventory::tests::{gfd_node, node_list};
use crate::pools::Ceiling;
use serde_json::json;

fn spec(value: serde_json::Value) -> PodSpec {
    serde_json::from_value(value).unwrap()
}

fn meta(labels: serde_json::Value, annotations: serde_json::Value) -> ObjectMeta {
    serde_json::from_value(json!({"labels": labels, "annotations": annotations})).unwrap()
}

fn gpus(pairs: &[(&str, u64)]) -> GpuCounts {
    pairs.iter().map(|(r, n)| (r.to_string(), *n)).collect()
}

#[test]
fn a_template_selects_a_product_by_the_first_product_key_it_restricts() {
    let s = selection(
        &spec(json!({"nodeSelector": {"amd.com/gpu.product-name": "AMD-Instinct-MI300X"}})),
        &meta(json!({}), json!({})),
        "spec",
        &gpus(&[("amd.com/gpu", 1)]),
    )
    .unwrap()
    .unwrap();
    assert_eq!(s.product_key, "amd.com/gpu.product-name");
    assert_eq!(
        s.demand.products,
        Some(["AMD-Instinct-MI300X".to_string()].into())
    );
    // Nothing the labels tell: no selection.
    assert_eq!(
        selection(
            &spec(json!({"nodeSelector": {"gpu-admission/pool": "a100"}})),
            &meta(json!({}), json!({})),
            "spec",
            &gpus(&[("nvidia.com/gpu", 8)]),
        ),
        None
    );
    // A MIG profile, or a version (label, else annotation), is a selection.
    let mig = selection(
        &spec(json!({})),
        &meta(json!({}), json!({})),
        "spec",
        &gpus(&[("nvidia.com/mig-1g.10gb", 1)]),
    );
    assert!(matches!(
        mig,
        Some(Ok(Selection {
            demand: Demand { products: None, .. },
            ..
        }))
    ));
    let cuda = selection(
        &spec(json!({})),
        &meta(json!({}), json!({"gpu-admission/min-cuda-version": "12.4"})),
        "spec",
        &gpus(&[("nvidia.com/gpu", 1)]),
    )
    .unwrap()
    .unwrap();
    let (v, source) = cuda.demand.min_cuda.unwrap();
    assert_eq!(
        (v.to_string(), source.as_str()),
        (
            "12.4".into(),
            "annotation gpu-admission/min-cuda-version on spec"
        )
    );
    let bad = selection(
        &spec(json!({})),
        &meta(
            json!({"gpu-admission/min-driver-version": "new"}),
            json!({}),
        ),
        "spec",
        &gpus(&[("nvidia.com/gpu", 1)]),
    );
    assert!(matches!(bad, Some(Err(e)) if e.contains("'new', not a version")));
}

fn inventory(nodes: &[serde_json::Value]) -> Inventory {
    parse_inventory(
        node_list(nodes).as_bytes(),
        &LabelKeys::default(),
        &GpuResources::default(),
    )
    .unwrap()
}

/// A template at `location` of one pod of one `nvidia.com/gpu` with `node_selector`.
fn shape(
    location: &'static str,
    node_selector: serde_json::Value,
) -> (&'static str, Option<Result<Selection, String>>) {
    (
        location,
        selection(
            &spec(json!({"nodeSelector": node_selector})),
            &meta(json!({}), json!({})),
            location,
            &gpus(&[("nvidia.com/gpu", 1)]),
        ),
    )
}

fn selected<'a>(
    shapes: &'a [(&'static str, Option<Result<Selection, String>>)],
) -> impl Iterator<Item = Selected<'a>> {
    shapes.iter().map(|(l, s)| (*l, s.as_ref()))
}

#[test]
fn each_template_gets_its_clause_and_a_pool_without_gpu_nodes_none() {
    let inv = inventory(&[gfd_node("l4-0", "NVIDIA-L4", 23034, 1, "535.104.05")]);
    let shapes = [
        shape(
            "spec.template.spec",
            json!({"nvidia.com/gpu.product": "NVIDIA-L4"}),
        ),
        shape(
            "spec.workers.template.spec",
            json!({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
        ),
        shape("spec.head.template.spec", json!({})),
    ];
    assert_eq!(
        check(&inv, selected(&shapes)),
        vec!["spec.workers.template.spec: no node offers GPU product 'NVIDIA-H100-80GB-HBM3' (nvidia.com/gpu.product); the nodes offer NVIDIA-L4 (1 node)".to_string()]
    );
    assert!(check(&inventory(&[]), selected(&shapes)).is_empty());
}

#[test]
fn deny_becomes_a_warning_on_a_pool_with_a_ceiling() {
    let inv = inventory(&[gfd_node("l4-0", "NVIDIA-L4", 23034, 1, "535.104.05")]);
    let shapes = [shape(
        "spec",
        json!({"nvidia.com/gpu.product": "NVIDIA-L40S"}),
    )];
    let denied = Found::of(&inv, selected(&shapes), Action::Deny, None);
    assert!(denied.denies());
    assert!(denied.warning("l4").is_none());
    let ceiling = Ceiling {
        gpus: gpus(&[("nvidia.com/gpu", 8)]),
        source: CeilingSource::NodePool("l4".into()),
        node_shape: None,
    };
    let warned = Found::of(&inv, selected(&shapes), Action::Deny, Some(grows(&ceiling)));
    assert!(!warned.denies());
    assert!(warned.denial("l4").is_none());
    assert!(
        warned.warning("l4").unwrap().contains("(the pool can add nodes (Karpenter NodePool l4) whose labels are unknown, so this only warns (nodeOffers: deny))"),
        "{warned:?}"
    );
    // warn and allow are kept as they are on any pool.
    assert_eq!(
        Found::of(&inv, selected(&shapes), Action::Warn, Some(grows(&ceiling))).action,
        Action::Warn
    );
    assert_eq!(
        Found::of(&inv, selected(&shapes), Action::Allow, None).action,
        Action::Allow
    );
    assert!(
        Found::of(&inv, selected(&shapes), Action::Allow, None)
            .warning("l4")
            .is_none()
    );
}
