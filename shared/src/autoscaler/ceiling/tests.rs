use super::*;
use crate::cluster::ClusterRequest;
use crate::cluster::fake::Script;
use crate::pools::ceiling::node_pool_query;
use crate::pools::nodes::node_query;
use crate::pools::{CheckedPool, Pool, PoolForm};
use rstest::rstest;
use serde_json::{Value, json};

fn counts(pairs: &[(&str, u64)]) -> GpuCounts {
    pairs.iter().map(|(r, n)| (r.to_string(), *n)).collect()
}

fn pool(v: Value) -> Pool {
    serde_json::from_value(v).unwrap()
}

#[rstest]
#[case::two_per_replica(&[("nvidia.com/gpu", 2)], &[("nvidia.com/gpu", 64)], Some((32, "nvidia.com/gpu")))]
#[case::rounded_down(&[("nvidia.com/gpu", 3)], &[("nvidia.com/gpu", 64)], Some((21, "nvidia.com/gpu")))]
#[case::the_scarcer_resource_binds(
    &[("nvidia.com/mig-1g.10gb", 1), ("nvidia.com/gpu", 1)],
    &[("nvidia.com/gpu", 64), ("nvidia.com/mig-1g.10gb", 7)],
    Some((7, "nvidia.com/mig-1g.10gb"))
)]
#[case::a_resource_the_pool_lacks_fits_nothing(&[("amd.com/gpu", 1)], &[("nvidia.com/gpu", 64)], Some((0, "amd.com/gpu")))]
#[case::no_gpus(&[], &[("nvidia.com/gpu", 1)], None)]
fn the_binding_resource_decides(
    #[case] per_replica: &[(&str, u64)],
    #[case] ceiling: &[(&str, u64)],
    #[case] replicas: Option<(u64, &str)>,
) {
    assert_eq!(
        fit(&counts(per_replica), &counts(ceiling)),
        replicas.map(|(n, resource)| (n, resource.to_string()))
    );
}

const A100: &str =
    r#"{"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}}}"#;

fn a100(extra: Value) -> Pool {
    let mut v: Value = serde_json::from_str(A100).unwrap();
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    pool(v)
}

fn node_list(gpus: &[(u64, bool)]) -> String {
    let items: Vec<Value> = gpus
        .iter()
        .enumerate()
        .map(|(i, (n, schedulable))| {
            json!({"metadata": {"name": format!("n{i}")}, "spec": {"unschedulable": !schedulable},
                   "status": {"allocatable": {"nvidia.com/gpu": n.to_string()}}})
        })
        .collect();
    json!({ "items": items }).to_string()
}

fn bound(pool: &Pool, answers: Vec<(ClusterRequest, Result<String, String>)>) -> Bound {
    let cluster = Script::new(answers);
    let form = PoolForm::new(pool);
    let b = read(
        &cluster,
        CheckedPool::new(pool, &form),
        &GpuResources::default(),
    )
    .unwrap();
    assert!(cluster.done(), "calls left unmade");
    b
}

#[test]
fn declared_pools_make_no_call_and_node_pools_sum_schedulable_nodes() {
    let declared = pool(json!({"name": "burst", "capacity": {"nvidia.com/gpu": 128}}));
    let b = bound(&declared, vec![]);
    assert_eq!(b.gpus(), counts(&[("nvidia.com/gpu", 128)]));
    assert_eq!(
        b.describe("nvidia.com/gpu"),
        "128 nvidia.com/gpu declared as its capacity in the policy settings"
    );
    assert_eq!(
        b.describe("amd.com/gpu"),
        "its capacity in the policy settings declares no amd.com/gpu"
    );
    assert_eq!(b.audit(), "128 nvidia.com/gpu (declared)");
    assert!(!b.from_nodes("nvidia.com/gpu"));

    let p = a100(json!({}));
    let b = bound(
        &p,
        vec![(node_query(&p), Ok(node_list(&[(8, true), (8, false)])))],
    );
    assert_eq!(b.gpus(), counts(&[("nvidia.com/gpu", 8)]));
    assert_eq!(
        b.describe("nvidia.com/gpu"),
        "8 nvidia.com/gpu allocatable on its 1 schedulable node of 2"
    );
    assert_eq!(b.audit(), "8 nvidia.com/gpu (nodes)");
    assert!(b.from_nodes("nvidia.com/gpu"));
    let b = bound(&p, vec![(node_query(&p), Ok(node_list(&[(8, true); 7])))]);
    assert_eq!(
        b.describe("nvidia.com/gpu"),
        "56 nvidia.com/gpu allocatable on its 7 nodes"
    );
    let b = bound(&p, vec![(node_query(&p), Ok(node_list(&[])))]);
    assert_eq!(
        b.describe("nvidia.com/gpu"),
        "no node matches gpu-admission/pool=a100"
    );

    let cluster = Script::new(vec![(node_query(&p), Ok("{not json".into()))]);
    let form = PoolForm::new(&p);
    let failure = read(
        &cluster,
        CheckedPool::new(&p, &form),
        &GpuResources::default(),
    )
    .unwrap_err();
    assert!(
        failure
            .explanation()
            .starts_with("cannot list v1/Node: the answer could not be read"),
        "{}",
        failure.explanation()
    );
}

/// A pool scaled to zero nodes holds what its ceiling says, whichever kind of ceiling it
/// has; a pool whose Nodes offer more than its ceiling holds what they offer.
#[rstest]
#[case::max_allocatable(json!({"maxAllocatable": {"nvidia.com/gpu": 64}}), None, "64 nvidia.com/gpu from maxAllocatable in settings", "64 nvidia.com/gpu (maxAllocatable)")]
#[case::node_pool(json!({"karpenterNodePool": "a100"}), Some(r#"{"spec": {"limits": {"cpu": "1000", "nvidia.com/gpu": "64"}}}"#), "64 nvidia.com/gpu from NodePool a100 spec.limits", "64 nvidia.com/gpu (NodePool a100)")]
#[case::cluster_autoscaler(json!({"clusterAutoscaler": {"maxNodes": 8, "gpusPerNode": {"nvidia.com/gpu": 8}}}), None, "64 nvidia.com/gpu from clusterAutoscaler: 8 nodes x 8 nvidia.com/gpu", "64 nvidia.com/gpu (clusterAutoscaler)")]
fn a_pool_at_zero_nodes_holds_its_ceiling(
    #[case] ceiling: Value,
    #[case] node_pool: Option<&str>,
    #[case] describe: &str,
    #[case] audit: &str,
) {
    let p = a100(ceiling);
    let mut answers = vec![(node_query(&p), Ok(node_list(&[])))];
    if let Some(limits) = node_pool {
        answers.push((node_pool_query("a100"), Ok(limits.to_string())));
    }
    let b = bound(&p, answers.clone());
    assert_eq!(b.gpus(), counts(&[("nvidia.com/gpu", 64)]));
    assert_eq!(b.describe("nvidia.com/gpu"), describe);
    assert_eq!(b.audit(), audit);
    assert!(!b.from_nodes("nvidia.com/gpu"));
    // 80 GPUs on its nodes now: more than the ceiling, and what it is judged against.
    answers[0].1 = Ok(node_list(&[(8, true); 10]));
    let b = bound(&p, answers);
    assert_eq!(b.gpus(), counts(&[("nvidia.com/gpu", 80)]));
    assert_eq!(
        b.describe("nvidia.com/gpu"),
        "80 nvidia.com/gpu allocatable on its 10 nodes"
    );
    assert_eq!(b.audit(), "80 nvidia.com/gpu (nodes)");
}

#[test]
fn a_node_pool_without_a_gpu_limit_leaves_the_nodes() {
    let p = a100(json!({"karpenterNodePool": "a100"}));
    let b = bound(
        &p,
        vec![
            (node_query(&p), Ok(node_list(&[(8, true)]))),
            (
                node_pool_query("a100"),
                Ok(r#"{"spec": {"limits": {"cpu": "1000"}}}"#.into()),
            ),
        ],
    );
    assert_eq!(b.gpus(), counts(&[("nvidia.com/gpu", 8)]));
    assert!(b.from_nodes("nvidia.com/gpu"));
    assert_eq!(b.audit(), "8 nvidia.com/gpu (nodes)");
}
