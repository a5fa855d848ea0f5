use super::*;
use crate::capacity::queries::pod_query;
use crate::pools::fixtures::{names, pool};
use crate::pools::nodes::node_query;
use serde_json::json;

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
    let (pool, form) = (pool(), crate::pools::PoolForm::new(&pool()));
    let read = read_pool(
        &cluster,
        &settings,
        crate::pools::CheckedPool::new(&pool, &form),
        &names(),
        "ml",
        &GpuCounts::new(),
        false,
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

fn pod(spec: serde_json::Value) -> serde_json::Value {
    json!({"spec": spec})
}

fn gpu(n: &str) -> serde_json::Value {
    json!({"resources": {"limits": {"nvidia.com/gpu": n}}})
}
