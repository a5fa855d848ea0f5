use super::*;
use crate::cluster::ListInNamespace;
use crate::selector::LabelSelector;
use rstest::rstest;
use serde_json::json;

fn pool() -> Pool {
    Pool {
        name: "a100".into(),
        node_selector: serde_json::from_value::<LabelSelector>(json!({
            "matchLabels": {"gpu-admission/pool": "a100"},
            "matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "Exists"}]
        }))
        .unwrap(),
        threshold_percent: 90,
        ..Pool::default()
    }
}

fn names() -> GpuResources<'static> {
    GpuResources::default()
}

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

#[test]
fn pod_query_is_exact() {
    let ClusterRequest::ListAll(q) = pod_query("gpu-admission/pool", &pool()) else {
        panic!("not a list_resources_all");
    };
    assert_eq!((q.api_version.as_str(), q.kind.as_str()), ("v1", "Pod"));
    assert_eq!(q.label_selector.as_deref(), Some("gpu-admission/pool=a100"));
    assert_eq!(
        q.field_selector.as_deref(),
        Some("status.phase!=Succeeded,status.phase!=Failed")
    );
    assert_eq!(
        q.field_masks.unwrap().into_iter().collect::<Vec<_>>(),
        vec![
            "spec.containers.resources",
            "spec.ephemeralContainers.resources",
            "spec.initContainers.resources",
            "spec.initContainers.restartPolicy",
            "spec.nodeName",
            "spec.resources"
        ]
    );
}

#[test]
fn parent_query_is_exact() {
    assert_eq!(
        String::from_utf8(parent_query("apps/v1", "Deployment", "llama", "ml").payload()).unwrap(),
        r#"{"api_version":"apps/v1","kind":"Deployment","name":"llama","namespace":"ml","disable_cache":false,"field_masks":["spec.template.metadata.annotations.gpu-fraction","spec.template.metadata.annotations.gpu-fraction-num-devices","spec.template.metadata.annotations.gpu-memory","spec.template.metadata.labels","spec.template.spec.affinity.nodeAffinity","spec.template.spec.containers.resources","spec.template.spec.ephemeralContainers.resources","spec.template.spec.initContainers.resources","spec.template.spec.initContainers.restartPolicy","spec.template.spec.nodeSelector","spec.template.spec.priorityClassName","spec.template.spec.resourceClaims","spec.template.spec.resources","spec.template.spec.schedulerName"]}"#
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

#[rstest]
#[case::not_json("nope")]
#[case::bad_allocatable(r#"{"items": [{"status": {"allocatable": [1]}}]}"#)]
fn unreadable_node_lists_are_errors(#[case] text: &str) {
    assert!(parse_nodes(text.as_bytes(), &names()).is_err());
}

/// [`read_pool`] of [`pool`] (namespace `ml`, no demand) on a cluster answering `answers`
/// in order; every answer must be asked for.
fn read_scripted(
    answers: Vec<(ClusterRequest, Result<String, String>)>,
) -> Result<PoolSnapshot, PoolError> {
    let settings = Settings {
        pools: vec![pool()],
        ..Settings::default()
    };
    let cluster = crate::cluster::fake::Script::new(answers);
    let read = read_pool(
        &cluster,
        &settings,
        &pool(),
        &names(),
        "ml",
        &GpuCounts::new(),
    );
    assert!(cluster.done(), "calls left unmade");
    read
}

#[test]
fn read_pool_lists_nodes_then_pods() {
    let s = read_scripted(vec![
        (
            node_query(&pool()),
            Ok(json!({"items": [
                {"metadata": {"name": "gpu-0", "labels": {"a": "b"}}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}},
                {"metadata": {"name": "gpu-1"}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}},
                {"metadata": {"name": "gpu-2"}, "spec": {"unschedulable": true}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
            ]}).to_string()),
        ),
        (
            pod_query("gpu-admission/pool", &pool()),
            Ok(json!({"items": [
                pod(json!({"containers": [gpu("3")], "nodeName": "gpu-1"})),
                pod(json!({"containers": [gpu("2")]})),
                pod(json!({"nodeName": "gpu-1", "containers": [gpu("1")]})),
                pod(json!({"containers": [gpu("4")], "nodeName": "gpu-2"})),
                pod(json!({"containers": [gpu("4")], "nodeName": "elsewhere"}))
            ]}).to_string()),
        ),
    ])
    .unwrap();
    assert_eq!(
        s,
        PoolSnapshot {
            nodes: 3,
            schedulable_nodes: 2,
            allocatable: GpuCounts::from([("nvidia.com/gpu".to_string(), 16)]),
            pods: 5,
            // Every pod counts, wherever it is bound (pending, on a cordoned node, or on
            // a node the list does not have); per node only the listed schedulable ones.
            used: GpuCounts::from([("nvidia.com/gpu".to_string(), 14)]),
            per_node: Some(vec![
                NodeUse {
                    name: "gpu-0".into(),
                    allocatable: GpuCounts::from([("nvidia.com/gpu".to_string(), 8)]).into(),
                    used: GpuCounts::new(),
                },
                NodeUse {
                    name: "gpu-1".into(),
                    allocatable: GpuCounts::from([("nvidia.com/gpu".to_string(), 8)]).into(),
                    used: GpuCounts::from([("nvidia.com/gpu".to_string(), 4)]),
                },
            ]),
            per_node_used: true,
            ..PoolSnapshot::default()
        }
    );
}

#[test]
fn read_pool_stops_at_the_first_failure() {
    let Err(PoolError::Host(f)) = read_scripted(vec![(node_query(&pool()), Err("boom".into()))])
    else {
        panic!("not a host failure");
    };
    assert_eq!(*f.request, node_query(&pool()));
    assert_eq!(f.error, HostError::Call("boom".into()));

    let Err(PoolError::Host(f)) = read_scripted(vec![
        (node_query(&pool()), Ok(r#"{"items": []}"#.into())),
        (
            pod_query("gpu-admission/pool", &pool()),
            Ok("not json".into()),
        ),
    ]) else {
        panic!("not a host failure");
    };
    assert!(matches!(f.error, HostError::Unreadable(_)), "{f:?}");
    assert!(
        f.explanation()
            .starts_with("cannot list v1/Pod: the answer could not be read ("),
        "{}",
        f.explanation()
    );
}

#[rstest]
#[case::not_granted(
    node_query(&pool()),
    "Policy has not been granted access to Kubernetes v1/Node resources. The violation has been reported.",
    "cannot list v1/Node: add {apiVersion: v1, kind: Node} to the ClusterAdmissionPolicy's contextAwareResources"
)]
#[case::forbidden(
    pod_query("gpu-admission/pool", &pool()),
    "pods is forbidden: User \"system:serviceaccount:kubewarden:policy-server-default\" cannot list resource \"pods\" in API group \"\" at the cluster scope",
    "cannot list v1/Pod: grant the policy-server's ServiceAccount list and watch on pods"
)]
#[case::other(
    node_query(&pool()),
    "connection refused",
    "cannot list v1/Node: add {apiVersion: v1, kind: Node} to the ClusterAdmissionPolicy's contextAwareResources and grant the policy-server's ServiceAccount list and watch on nodes"
)]
#[case::get_forbidden(
    parent_query("apps/v1", "StatefulSet", "llama", "ml"),
    "Forbidden",
    "cannot get apps/v1/StatefulSet ml/llama: grant the policy-server's ServiceAccount get on statefulsets (apiGroup apps)"
)]
#[case::node_pool_not_found(
    node_pool_query("a100"),
    "Callback evaluation failure: Cannot find karpenter.sh/v1/NodePool named 'a100' inside of namespace 'None'",
    "cannot get karpenter.sh/v1/NodePool a100: it does not exist"
)]
#[case::node_pool_forbidden(
    node_pool_query("a100"),
    "nodepools.karpenter.sh \"a100\" is forbidden",
    "cannot get karpenter.sh/v1/NodePool a100: grant the policy-server's ServiceAccount get on nodepools (apiGroup karpenter.sh)"
)]
#[case::node_pool_not_granted(
    node_pool_query("a100"),
    "Policy has not been granted access to Kubernetes karpenter.sh/v1/NodePool resources. The violation has been reported.",
    "cannot get karpenter.sh/v1/NodePool a100: add {apiVersion: karpenter.sh/v1, kind: NodePool} to the ClusterAdmissionPolicy's contextAwareResources"
)]
#[case::namespaced_list(
    ClusterRequest::ListInNamespace(ListInNamespace { api_version: "apps/v1".into(), kind: "Deployment".into(), namespace: "ml".into(), label_selector: None, field_selector: None, field_masks: None }),
    "has not been granted access",
    "cannot list apps/v1/Deployment: add {apiVersion: apps/v1, kind: Deployment} to the ClusterAdmissionPolicy's contextAwareResources"
)]
fn failures_name_what_is_missing(
    #[case] request: ClusterRequest,
    #[case] raw: &str,
    #[case] explanation: &str,
) {
    let f = HostFailure {
        request: Box::new(request),
        error: HostError::Call(raw.into()),
    };
    assert_eq!(f.explanation(), explanation);
    assert_eq!(f.raw(10_000), raw);
}

#[test]
fn raw_errors_are_truncated_at_a_character_boundary() {
    let f = HostFailure {
        request: Box::new(node_query(&pool())),
        error: HostError::Call("ééééé".into()),
    };
    assert_eq!(f.raw(5), "éé...");
    assert_eq!(f.raw(4), "éé...");
    assert_eq!(f.raw(100), "ééééé");
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
fn node_pool_query_is_exact() {
    let ClusterRequest::Get(q) = node_pool_query("gpu-a100") else {
        panic!("not a get_resource");
    };
    assert_eq!(
        (q.api_version.as_str(), q.kind.as_str(), q.name.as_str()),
        ("karpenter.sh/v1", "NodePool", "gpu-a100")
    );
    assert_eq!(q.namespace, None);
    assert!(!q.disable_cache);
    assert_eq!(
        q.field_masks.unwrap().into_iter().collect::<Vec<_>>(),
        vec!["spec.limits"]
    );
}

#[rstest]
#[case::gpus(json!({"spec": {"limits": {"cpu": "1000", "memory": "1000Gi", "nvidia.com/gpu": "64", "amd.com/gpu": 8}}}), Ok(vec![("amd.com/gpu", 8), ("nvidia.com/gpu", 64)]))]
#[case::no_gpu_limit(json!({"spec": {"limits": {"cpu": "1000"}}}), Ok(vec![]))]
#[case::no_limits(json!({"spec": {}}), Ok(vec![]))]
#[case::masked_to_nothing(json!({"metadata": {"name": "a100"}}), Ok(vec![]))]
#[case::fraction(json!({"spec": {"limits": {"nvidia.com/gpu": "500m"}}}), Err("spec.limits.nvidia.com/gpu: '500m' must be a whole number"))]
#[case::not_an_object(json!([1]), Err("expected an object, got [1]"))]
fn node_pool_limits(
    #[case] answer: serde_json::Value,
    #[case] expected: Result<Vec<(&str, u64)>, &str>,
) {
    let got = parse_node_pool_limits(answer.to_string().as_bytes(), &names());
    match expected {
        Ok(pairs) => assert_eq!(
            got.unwrap(),
            pairs
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect::<GpuCounts>()
        ),
        Err(start) => assert!(got.unwrap_err().starts_with(start)),
    }
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
fn team_and_namespace_queries_are_exact() {
    assert_eq!(
        String::from_utf8(namespace_quota_query("ml").payload()).unwrap(),
        r#"{"api_version":"v1","kind":"ResourceQuota","namespace":"ml","label_selector":null,"field_selector":null,"field_masks":["metadata.name","spec.hard","spec.scopeSelector","spec.scopes","status.used"]}"#
    );
    assert_eq!(
        namespace_quota_query("ml").operation(),
        "list_resources_by_namespace"
    );
    let team = String::from_utf8(team_pod_query("ml-a").payload()).unwrap();
    assert!(
        team.starts_with(r#"{"api_version":"v1","kind":"Pod","label_selector":"gpu-admission/team=ml-a","field_selector":"status.phase!=Succeeded,status.phase!=Failed","field_masks":["spec.containers.resources""#),
        "{team}"
    );
    let ns = String::from_utf8(namespace_pod_query("ml-dev").payload()).unwrap();
    assert!(
        ns.starts_with(r#"{"api_version":"v1","kind":"Pod","namespace":"ml-dev","label_selector":null,"field_selector":"status.phase!=Succeeded,status.phase!=Failed""#),
        "{ns}"
    );
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

#[test]
fn quotas_keep_their_gpu_limits_and_the_keys_kubernetes_never_counts() {
    let list = json!({"items": [{"metadata": {"name": "q", "namespace": "ml"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "16", "limits.nvidia.com/gpu": "16", "amd.com/gpu": 2, "requests.cpu": "64"}},
        "status": {"used": {"requests.nvidia.com/gpu": "3"}}}]});
    let quotas = parse_quotas(list.to_string().as_bytes(), &names()).unwrap();
    assert_eq!(
        quotas[0].hard,
        GpuCounts::from([("nvidia.com/gpu".to_string(), 16)])
    );
    assert_eq!(
        quotas[0].used,
        GpuCounts::from([("nvidia.com/gpu".to_string(), 3)])
    );
    assert_eq!(
        quotas[0].unenforced,
        // In the order of the quota's keys (`json!` writes them sorted).
        vec![
            ("amd.com/gpu".to_string(), "amd.com/gpu".to_string()),
            (
                "limits.nvidia.com/gpu".to_string(),
                "nvidia.com/gpu".to_string()
            )
        ]
    );
    let bad = json!({"items": [{"metadata": {"name": "q", "namespace": "ml"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "1.5"}}}]});
    assert_eq!(
        parse_quotas(bad.to_string().as_bytes(), &names())
            .unwrap_err()
            .to_string(),
        "ResourceQuota ml/q: spec.hard.requests.nvidia.com/gpu: '1.5' must be a whole number"
    );
}
