//! `imageLabels.cudaRequirementFromEnv`: the CUDA requirement of the image's environment
//! (and the container's `env` over it) against the nodes that offer the pod's GPUs.

use super::*;
use crate::vram::cuda::requirement::tests::CUDA_12_4_1;

const IMAGE: &str = "vllm/vllm-openai";

/// Two A100-80GB with driver 545 (CUDA 12.3), one L4 with driver 550 (CUDA 12.4).
fn cluster(env: Value) -> NodeApi {
    let mut items = vec![
        gfd_node("a1", "NVIDIA-A100-SXM4-80GB", 81920, 8, "545.23.08"),
        gfd_node("a2", "NVIDIA-A100-SXM4-80GB", 81920, 8, "545.23.08"),
        gfd_node("l1", "NVIDIA-L4", 23034, 1, "550.54.15"),
    ];
    for (node, minor) in items.iter_mut().zip(["3", "3", "4"]) {
        node["metadata"]["labels"]["nvidia.com/cuda.runtime.minor"] = json!(minor);
    }
    with_images(items, env)
}

fn with_images(items: Vec<Value>, env: Value) -> NodeApi {
    NodeApi {
        images: FakeCluster {
            envs: vec![(IMAGE, env)],
            ..FakeCluster::images(vec![(IMAGE, Ok(json!({})))])
        },
        ..nodes(&items)
    }
}

fn cuda_image() -> Value {
    json!([
        "PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/bin:/bin",
        format!("NVIDIA_REQUIRE_CUDA={CUDA_12_4_1}"),
        "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
        "CUDA_VERSION=12.4.1"
    ])
}

/// `imageLabels` and `nodeInventory` on (and no over-provisioning warning: the small model
/// fits an A100 many times).
fn settings() -> Settings {
    with_nodes(json!({"imageLabels": {"enabled": true}, "overprovision": "allow"}))
}

/// The small model on one GPU of `product` (any of the nodes' when `None`), the server
/// container's `env` set to `env`.
fn object(product: Option<&str>, env: Value) -> Value {
    let mut spec = match product {
        Some(p) => pod_spec("nvidia.com/gpu", 1, Some(p)),
        None => two_products(),
    };
    spec["containers"][0]["env"] = env;
    labelled("small", spec)
}

const ON_A100: &str = "container server runs image vllm/vllm-openai, which requires cuda>=12.4 (NVIDIA_REQUIRE_CUDA of the image; none of its 30 other alternatives is met either), and no node that offers its GPUs meets it: NVIDIA-A100-SXM4-80GB with CUDA 12.3 and driver 545.23.08 (2 nodes). The NVIDIA container toolkit refuses to start it there: use an image built for CUDA 12.3 or older, or update the nodes' driver";

#[test]
fn an_image_needing_a_newer_cuda_than_the_nodes_have_is_denied() {
    let api = cluster(cuda_image());
    let v = judged(
        &settings(),
        &api,
        object(Some("NVIDIA-A100-SXM4-80GB"), json!([])),
    );
    denies(&v, ON_A100);
    // One Node list, one image config: no call of its own.
    assert_eq!(api.calls(), 1);
    assert_eq!(api.images.image_calls.borrow().as_slice(), [IMAGE]);
    // The L4's driver supports CUDA 12.4; a pod that may run on either product may run there.
    for product in [Some("NVIDIA-L4"), None] {
        let v = judged(
            &settings(),
            &cluster(cuda_image()),
            object(product, json!([])),
        );
        assert!(v.allowed, "{product:?}: {v:?}");
        assert!(v.warnings.is_empty(), "{v:?}");
    }
}

#[test]
fn a_listed_driver_branch_may_run_it_with_cudas_forward_compatibility() {
    // Driver 535 (CUDA 12.2) is one of the image's brand=...,driver>=535,driver<536
    // alternatives; the GPU's brand is not read, so the node may meet it.
    let items = vec![gfd_node(
        "a1",
        "NVIDIA-A100-SXM4-80GB",
        81920,
        8,
        "535.104.05",
    )];
    let v = judged(
        &settings(),
        &with_images(items.clone(), cuda_image()),
        object(Some("NVIDIA-A100-SXM4-80GB"), json!([])),
    );
    assert!(v.allowed, "{v:?}");
    // Without the alternatives (a legacy image: CUDA_VERSION only), it may not.
    let v = judged(
        &settings(),
        &with_images(items, json!(["CUDA_VERSION=12.4.1"])),
        object(Some("NVIDIA-A100-SXM4-80GB"), json!([])),
    );
    denies_starting(
        &v,
        "container server runs image vllm/vllm-openai, which requires cuda>=12.4 (CUDA_VERSION 12.4.1 of the image), and no node that offers its GPUs meets it: NVIDIA-A100-SXM4-80GB with CUDA 12.2 and driver 535.104.05 (1 node).",
    );
}

#[test]
fn the_containers_env_overrides_the_images() {
    let a100 = Some("NVIDIA-A100-SXM4-80GB");
    // Asking for less, or turning the toolkit's check off, is the pod's own business.
    for env in [
        json!([{"name": "NVIDIA_REQUIRE_CUDA", "value": "cuda>=12.3"}]),
        json!([{"name": "NVIDIA_DISABLE_REQUIRE", "value": "true"}]),
        // Unknown at admission: not checked.
        json!([{"name": "NVIDIA_REQUIRE_CUDA", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]),
    ] {
        let v = judged(
            &settings(),
            &cluster(cuda_image()),
            object(a100, env.clone()),
        );
        assert!(v.allowed, "{env}: {v:?}");
    }
    // Asking for more is checked too, naming the container's env.
    let v = judged(
        &settings(),
        &cluster(json!([])),
        object(
            Some("NVIDIA-L4"),
            json!([{"name": "NVIDIA_REQUIRE_CUDA", "value": "cuda>=12.8"}]),
        ),
    );
    denies(
        &v,
        "container server runs image vllm/vllm-openai, which requires cuda>=12.8 (NVIDIA_REQUIRE_CUDA in the container's env), and no node that offers its GPUs meets it: NVIDIA-L4 with CUDA 12.4 and driver 550.54.15 (1 node). The NVIDIA container toolkit refuses to start it there: use an image built for CUDA 12.4 or older, or update the nodes' driver",
    );
    // NVIDIA_DISABLE_REQUIRE false leaves the image's requirement.
    let v = judged(
        &settings(),
        &cluster(cuda_image()),
        object(
            a100,
            json!([{"name": "NVIDIA_DISABLE_REQUIRE", "value": "false"}]),
        ),
    );
    denies(&v, ON_A100);
}

#[test]
fn an_unreadable_requirement_is_a_warning() {
    let v = judged(
        &settings(),
        &cluster(json!([
            "NVIDIA_REQUIRE_CUDA=cuda>=12.4 brand=tesla,driver=>535"
        ])),
        object(Some("NVIDIA-A100-SXM4-80GB"), json!([])),
    );
    assert!(v.allowed, "{v:?}");
    assert_eq!(
        v.warnings,
        [
            "container server (image vllm/vllm-openai): NVIDIA_REQUIRE_CUDA of the image cannot be read: 'driver=>535' has the operator '=>', not one of =, !=, <, <=, >, >=; its CUDA requirement is not checked against the nodes (imageLabels.cudaRequirementFromEnv)"
        ]
    );
    let v = judged(
        &settings(),
        &cluster(json!("PATH=/bin")),
        object(Some("NVIDIA-A100-SXM4-80GB"), json!([])),
    );
    assert!(v.allowed, "{v:?}");
    assert_eq!(
        v.warnings,
        [
            "the config of image vllm/vllm-openai is unreadable: config.Env is not a list; its CUDA requirement is not checked against the nodes (imageLabels.cudaRequirementFromEnv)"
        ]
    );
}

#[test]
fn the_check_needs_image_labels_and_node_inventory_and_can_be_turned_off() {
    let object = || object(Some("NVIDIA-A100-SXM4-80GB"), json!([]));
    let off =
        with_nodes(json!({"imageLabels": {"enabled": true, "cudaRequirementFromEnv": false}}));
    assert!(judged(&off, &cluster(cuda_image()), object()).allowed);
    // Without imageLabels no image is read.
    let api = cluster(cuda_image());
    assert!(judged(&with_nodes(json!({})), &api, object()).allowed);
    assert!(api.images.image_calls.borrow().is_empty());
    // Without nodeInventory there is nothing to check against.
    let mut no_nodes = settings();
    no_nodes.node_inventory.enabled = false;
    let api = cluster(cuda_image());
    assert!(judged(&no_nodes, &api, object()).allowed);
    assert_eq!(api.calls(), 0);
}

#[test]
fn an_update_changing_the_containers_env_is_checked_again() {
    let old = object(
        Some("NVIDIA-A100-SXM4-80GB"),
        json!([{"name": "NVIDIA_DISABLE_REQUIRE", "value": "true"}]),
    );
    let new = object(Some("NVIDIA-A100-SXM4-80GB"), json!([]));
    let mut r = request("UPDATE", new);
    r.old_object = old;
    let v = evaluate(&r, &settings(), &cluster(cuda_image()));
    denies(&v, ON_A100);
}
