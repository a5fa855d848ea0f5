use super::*;
use crate::pools::fixtures::{names, pool};
use rstest::rstest;
use serde_json::json;

#[test]
fn node_query_is_exact() {
    let ClusterRequest::ListAll(q) = node_query(&pool()) else {
        panic!("not a list_resources_all");
    };
    assert_eq!(q.api_version, "v1");
    assert_eq!(q.kind, "Node");
    assert_eq!(
        q.label_selector.as_deref(),
        Some("gpu-admission/pool=a100,nvidia.com/gpu.present")
    );
    assert_eq!(q.field_selector, None);
    assert_eq!(
        q.field_masks.unwrap().into_iter().collect::<Vec<_>>(),
        vec!["spec.taints", "spec.unschedulable", "status.allocatable"]
    );
}

fn node(allocatable: serde_json::Value, spec: serde_json::Value) -> serde_json::Value {
    json!({"spec": spec, "status": {"allocatable": allocatable}})
}

#[test]
fn nodes_sum_gpu_allocatable_of_schedulable_nodes() {
    let list = json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": [
        node(json!({"nvidia.com/gpu": "8", "cpu": "96", "memory": "1Ti"}), json!({})),
        node(json!({"nvidia.com/gpu": "8"}), json!(null)),
        node(json!({"nvidia.com/gpu": "8"}), json!({"unschedulable": true})),
        node(json!({"nvidia.com/gpu": "8"}), json!({"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]})),
        node(json!({"nvidia.com/gpu": "8"}), json!({"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]})),
        node(json!({"nvidia.com/gpu": "8"}), json!({"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]})),
        node(json!({"nvidia.com/gpu": "8"}), json!({"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "PreferNoSchedule"}]})),
        node(json!({"nvidia.com/mig-3g.40gb": "2", "nvidia.com/mig-1g.10gb": 7}), json!({})),
        node(json!({"nvidia.com/gpu": "lots"}), json!({})),
        {"metadata": {"name": "masked-away"}},
    ]});
    let t = parse_nodes(list.to_string().as_bytes(), &names()).unwrap();
    assert_eq!(t.nodes, 10);
    assert_eq!(t.schedulable, 7);
    assert_eq!(
        t.allocatable,
        GpuCounts::from([
            ("nvidia.com/gpu".to_string(), 32),
            ("nvidia.com/mig-1g.10gb".to_string(), 7),
            ("nvidia.com/mig-3g.40gb".to_string(), 2),
        ])
    );
}

#[test]
fn identical_nodes_are_each_counted_and_cordoning_one_is_seen() {
    let same = || node(json!({"nvidia.com/gpu": "8"}), json!({}));
    let list = json!({"items": [
        same(),
        same(),
        node(json!({"nvidia.com/gpu": "8"}), json!({"unschedulable": true})),
        same(),
        node(json!({"nvidia.com/gpu": "8"}), json!({"unschedulable": true})),
    ]});
    let t = parse_nodes(list.to_string().as_bytes(), &names()).unwrap();
    assert_eq!((t.nodes, t.schedulable), (5, 3));
    assert_eq!(t.allocatable["nvidia.com/gpu"], 24);
}

#[test]
fn time_sliced_nodes_report_replicas() {
    // A node with 8 GPUs and 4 time-slicing replicas advertises 32 nvidia.com/gpu.
    let list = json!({"items": [node(json!({"nvidia.com/gpu": "32"}), json!({}))]});
    let t = parse_nodes(list.to_string().as_bytes(), &names()).unwrap();
    assert_eq!(t.allocatable["nvidia.com/gpu"], 32);
}

#[rstest]
#[case::not_json("nope")]
#[case::bad_allocatable(r#"{"items": [{"status": {"allocatable": [1]}}]}"#)]
fn unreadable_node_lists_are_errors(#[case] text: &str) {
    assert!(parse_nodes(text.as_bytes(), &names()).is_err());
}
