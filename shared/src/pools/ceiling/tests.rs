use super::*;
use rstest::rstest;
use serde_json::json;

fn names() -> GpuResources<'static> {
    GpuResources::default()
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
