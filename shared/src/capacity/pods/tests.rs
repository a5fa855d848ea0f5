use super::*;
use crate::pools::nodes::parse_nodes;
use rstest::rstest;
use serde_json::json;

fn names() -> GpuResources<'static> {
    GpuResources::default()
}

fn pod(spec: serde_json::Value) -> serde_json::Value {
    json!({"spec": spec})
}

fn gpu(n: &str) -> serde_json::Value {
    json!({"resources": {"limits": {"nvidia.com/gpu": n}}})
}

#[test]
fn pods_sum_effective_requests() {
    let list = json!({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "1"}, "items": [
        pod(json!({"containers": [gpu("2"), gpu("1")]})),
        pod(json!({"containers": [gpu("1")], "initContainers": [gpu("4")]})),
        pod(json!({"containers": [gpu("1")], "initContainers": [{"restartPolicy": "Always", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]})),
        pod(json!({"containers": [{"resources": {"requests": {"nvidia.com/mig-1g.10gb": "3"}}}]})),
        pod(json!({"containers": [{"resources": {"limits": {"cpu": "1"}}}]})),
        pod(json!({"containers": [{}], "resources": {"limits": {"amd.com/gpu": "2"}}})),
        {"metadata": {"name": "no-spec"}},
        pod(json!(null)),
    ]});
    let t = parse_pods(list.to_string().as_bytes(), &names()).unwrap();
    assert_eq!(t.pods, 8);
    assert_eq!(
        t.used,
        GpuCounts::from([
            ("amd.com/gpu".to_string(), 2),
            ("nvidia.com/gpu".to_string(), 3 + 4 + 2),
            ("nvidia.com/mig-1g.10gb".to_string(), 3),
        ])
    );
}

#[rstest]
#[case::empty_items(r#"{"items": []}"#, 0)]
#[case::null_items(r#"{"items": null}"#, 0)]
#[case::no_items(r#"{"kind": "PodList"}"#, 0)]
#[case::items_last(r#"{"metadata": {"x": [1, {"y": 2}]}, "items": [{"spec": {}}]}"#, 1)]
fn pod_list_shapes(#[case] text: &str, #[case] pods: u64) {
    assert_eq!(parse_pods(text.as_bytes(), &names()).unwrap().pods, pods);
}

#[test]
fn replicas_with_the_same_spec_are_each_counted() {
    let spec = r#"{"containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}"#;
    let other = r#"{"containers": [{"resources": {"limits": {"nvidia.com/gpu": "3"}}}]}"#;
    // Same text read once, counted per pod; a different text is read on its own, and a
    // spec that reads the same but is spelled differently is still counted right.
    let spaced = r#"{ "containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}"#;
    let text = format!(
        r#"{{"items": [{{"spec": {spec}}}, {{"spec": {other}}}, {{"spec": {spec}}}, {{"spec": {spaced}}}, {{"spec": {spec}}}]}}"#
    );
    let t = parse_pods(text.as_bytes(), &names()).unwrap();
    assert_eq!(t.pods, 5);
    assert_eq!(
        t.used,
        GpuCounts::from([("nvidia.com/gpu".to_string(), 2 * 4 + 3)])
    );
}

#[test]
fn a_bad_spec_is_an_error_even_after_good_copies_of_others() {
    let good = r#"{"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}"#;
    let text = format!(
        r#"{{"items": [{{"spec": {good}}}, {{"spec": {good}}}, {{"spec": {{"containers": 7}}}}]}}"#
    );
    assert!(parse_pods(text.as_bytes(), &names()).is_err());
}

#[rstest]
#[case::not_json("Cannot list")]
#[case::array("[]")]
#[case::bad_items(r#"{"items": 5}"#)]
#[case::bad_spec(r#"{"items": [{"spec": {"containers": "x"}}]}"#)]
#[case::trailing(r#"{"items": []} x"#)]
fn unreadable_pod_lists_are_errors(#[case] text: &str) {
    assert!(parse_pods(text.as_bytes(), &names()).is_err());
}

#[test]
fn pod_quantities_as_numbers_and_escaped_keys() {
    // JSON numbers and escaped key characters read the same as plain strings; fractions
    // round up and garbage counts 0, as in the shared effective-request rule.
    let text = r#"{"items": [
        {"spec": {"containers": [{"resources": {"limits": {"nvidia.com\/gpu": 2, "cpu": 1.5}}}]}},
        {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 1.5}}}]}},
        {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "lots"}}}]}},
        {"spec": {"containers": [{"resources": {"limits": null, "requests": {"amd.com/gpu": "1"}}, "restartPolicy": null}]}}
    ]}"#;
    let t = parse_pods(text.as_bytes(), &names()).unwrap();
    assert_eq!(t.pods, 4);
    assert_eq!(
        t.used,
        GpuCounts::from([
            ("amd.com/gpu".to_string(), 1),
            ("nvidia.com/gpu".to_string(), 2 + 2),
        ])
    );
}

#[test]
fn extra_gpu_resources_are_counted_in_pods_and_nodes() {
    let extra = ["habana.ai/gaudi".to_string()];
    let names = GpuResources::new(&extra);
    let pods = r#"{"items": [{"spec": {"containers": [{"resources": {"limits": {"habana.ai/gaudi": "4"}}}]}}]}"#;
    let nodes = r#"{"items": [{"status": {"allocatable": {"habana.ai/gaudi": "8"}}}]}"#;
    assert_eq!(
        parse_pods(pods.as_bytes(), &names).unwrap().used["habana.ai/gaudi"],
        4
    );
    assert_eq!(
        parse_nodes(nodes.as_bytes(), &names).unwrap().allocatable["habana.ai/gaudi"],
        8
    );
    assert!(
        parse_pods(pods.as_bytes(), &GpuResources::default())
            .unwrap()
            .used
            .is_empty()
    );
}

#[test]
fn nodes_are_named_and_pods_are_counted_per_node() {
    // The name is read from metadata (escapes decoded), never from a label.
    let nodes = r#"{"items": [
        {"metadata": {"labels": {"name": "not-this"}, "name": "gpu-\u0030"}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}},
        {"status": {"allocatable": {"nvidia.com/gpu": "4"}}}
    ]}"#;
    let t = parse_nodes(nodes.as_bytes(), &names()).unwrap();
    let named: Vec<(&str, u64)> = t
        .per_node
        .iter()
        .map(|n| (n.name.as_str(), n.allocatable["nvidia.com/gpu"]))
        .collect();
    assert_eq!(named, vec![("gpu-0", 8), ("", 4)]);
    // Replicas of one spec on different nodes share a memo entry, and are each counted
    // on their own node.
    let pods = json!({"items": [
        pod(json!({"containers": [gpu("2")], "nodeName": "a"})),
        pod(json!({"containers": [gpu("2")], "nodeName": "b"})),
        pod(json!({"containers": [gpu("2")], "nodeName": "a"})),
        pod(json!({"containers": [gpu("2")], "nodeName": null})),
        pod(json!({"containers": [gpu("2")]})),
        pod(json!({"containers": [{"resources": {"limits": {"cpu": "1"}}}], "nodeName": "c"}))
    ]});
    let t = parse_pods(pods.to_string().as_bytes(), &names()).unwrap();
    assert_eq!((t.pods, t.used["nvidia.com/gpu"]), (6, 10));
    let mut per_node: Vec<(&str, u64)> = t
        .per_node
        .iter()
        .map(|(k, v)| (k.as_str(), v["nvidia.com/gpu"]))
        .collect();
    per_node.sort();
    assert_eq!(per_node, vec![("a", 4), ("b", 2)]);
    // A nodeName that is not a string makes the list unreadable.
    let bad = json!({"items": [pod(json!({"containers": [gpu("1")], "nodeName": 5}))]});
    assert!(parse_pods(bad.to_string().as_bytes(), &names()).is_err());
}

#[test]
fn pods_are_counted_per_value_of_a_label() {
    let pod = |pool: Option<&str>, gpus: &str| {
        let mut p = json!({"metadata": {"name": "p", "labels": {"app": "x"}},
                           "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": gpus}}}]}});
        if let Some(v) = pool {
            p["metadata"]["labels"]["gpu-admission/pool"] = json!(v);
        }
        p
    };
    let list = json!({"items": [pod(Some("a100"), "2"), pod(Some("a100"), "2"), pod(Some("h100"), "4"),
                                pod(None, "1"), pod(Some("a100"), "0"),
                                {"metadata": {"name": "no-labels"}, "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "3"}}}]}}]});
    let used =
        parse_pods_by_label(list.to_string().as_bytes(), &names(), "gpu-admission/pool").unwrap();
    assert_eq!(used.pods, 6);
    assert_eq!(used.used["nvidia.com/gpu"], 12);
    assert_eq!(used.of_value("a100").unwrap()["nvidia.com/gpu"], 4);
    assert_eq!(used.of_value("h100").unwrap()["nvidia.com/gpu"], 4);
    assert_eq!(used.per_value.len(), 2);
    // The pool path is unchanged by the label count.
    assert_eq!(
        parse_pods(list.to_string().as_bytes(), &names())
            .unwrap()
            .used["nvidia.com/gpu"],
        12
    );
    // A label value that is not a string makes the list unreadable.
    let bad = json!({"items": [{"metadata": {"labels": {"gpu-admission/pool": 7}},
                                "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}]});
    assert!(
        parse_pods_by_label(bad.to_string().as_bytes(), &names(), "gpu-admission/pool").is_err()
    );
}
