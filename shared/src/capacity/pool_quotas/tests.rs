use super::*;
use serde_json::json;

fn names() -> GpuResources<'static> {
    GpuResources::default()
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
