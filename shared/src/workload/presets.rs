//! Ready-made descriptions of common AI custom resources, for documentation and tests.
//! Policies do not enable them unless their settings list them.

use super::*;

fn factor(path: &str, default: u64, subtract: u64, at_least: u64) -> ReplicaFactor {
    ReplicaFactor {
        path: path.into(),
        default,
        subtract,
        at_least,
    }
}

fn location(
    path: &str,
    spec: &[&str],
    meta: &[&str],
    replicas: Vec<ReplicaFactor>,
) -> TemplateLocation {
    let many = |v: &[&str]| OneOrMany::Many(v.iter().map(|s| s.to_string()).collect());
    TemplateLocation {
        path: path.into(),
        pod_spec: many(spec),
        metadata: many(meta),
        replicas,
        containers: Vec::new(),
    }
}

/// KServe predictor fields that hold one container each (the model-server shortcuts).
pub const KSERVE_MODEL_CONTAINERS: &[&str] = &[
    "model",
    "huggingface",
    "pytorch",
    "triton",
    "tensorflow",
    "onnx",
    "sklearn",
    "xgboost",
    "lightgbm",
    "paddle",
    "pmml",
];

/// KServe InferenceService: the predictor is an inline PodSpec whose model-server
/// shortcuts (`model`, `huggingface`, ...) are containers too; multi-node serving adds
/// `workerSpec` with `pipelineParallelSize - 1` worker pods per replica. Pods carry the
/// InferenceService's labels. Scale-to-zero (`minReplicas: 0`) is counted as one replica.
pub fn kserve_inference_service() -> CustomKind {
    let mut predictor = location(
        "$.spec.predictor",
        &[""],
        &["$.metadata"],
        vec![factor("minReplicas", 1, 0, 1)],
    );
    predictor.containers = KSERVE_MODEL_CONTAINERS
        .iter()
        .map(|s| s.to_string())
        .collect();
    CustomKind {
        group: "serving.kserve.io".into(),
        kind: "InferenceService".into(),
        templates: vec![
            predictor,
            location(
                "$.spec.predictor.workerSpec",
                &[""],
                &["$.metadata"],
                vec![
                    factor("$.spec.predictor.minReplicas", 1, 0, 1),
                    factor("pipelineParallelSize", 2, 1, 1),
                ],
            ),
        ],
    }
}

/// LeaderWorkerSet: `replicas` groups of `size` pods, one leader (leaderTemplate, or
/// the worker template when absent) and `size - 1` workers.
pub fn leader_worker_set() -> CustomKind {
    CustomKind {
        group: "leaderworkerset.x-k8s.io".into(),
        kind: "LeaderWorkerSet".into(),
        templates: vec![
            location(
                "$.spec.leaderWorkerTemplate",
                &["leaderTemplate.spec", "workerTemplate.spec"],
                &["leaderTemplate.metadata", "workerTemplate.metadata"],
                vec![factor("$.spec.replicas", 1, 0, 0)],
            ),
            location(
                "$.spec.leaderWorkerTemplate",
                &["workerTemplate.spec"],
                &["workerTemplate.metadata"],
                vec![factor("$.spec.replicas", 1, 0, 0), factor("size", 1, 1, 0)],
            ),
        ],
    }
}

/// KubeRay RayCluster: one head pod and `replicas` pods per worker group.
pub fn ray_cluster() -> CustomKind {
    CustomKind {
        group: "ray.io".into(),
        kind: "RayCluster".into(),
        templates: vec![
            location(
                "$.spec.headGroupSpec",
                &["template.spec"],
                &["template.metadata"],
                vec![],
            ),
            location(
                "$.spec.workerGroupSpecs[*]",
                &["template.spec"],
                &["template.metadata"],
                vec![factor("replicas", 1, 0, 0)],
            ),
        ],
    }
}

/// Kubeflow PyTorchJob: every replica type (Master, Worker) times its `replicas`.
pub fn pytorch_job() -> CustomKind {
    CustomKind {
        group: "kubeflow.org".into(),
        kind: "PyTorchJob".into(),
        templates: vec![location(
            "$.spec.pytorchReplicaSpecs.*",
            &["template.spec"],
            &["template.metadata"],
            vec![factor("replicas", 1, 0, 0)],
        )],
    }
}

/// The ready-made description of `group`/`kind`, if there is one. Builds only that
/// one: workload readers call this for every admitted custom resource.
pub fn find(group: &str, kind: &str) -> Option<CustomKind> {
    maker(group, kind).map(|make| make())
}

/// True when `group`/`kind` has a ready-made description (none is built).
pub fn exists(group: &str, kind: &str) -> bool {
    maker(group, kind).is_some()
}

fn maker(group: &str, kind: &str) -> Option<fn() -> CustomKind> {
    Some(match (group, kind) {
        ("serving.kserve.io", "InferenceService") => kserve_inference_service,
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet") => leader_worker_set,
        ("ray.io", "RayCluster") => ray_cluster,
        ("kubeflow.org", "PyTorchJob") => pytorch_job,
        _ => return None,
    })
}

/// [`find`], made once and shared by every request.
pub(super) fn shared(group: &str, kind: &str) -> Option<&'static CustomKind> {
    static ALL: std::sync::OnceLock<Vec<CustomKind>> = std::sync::OnceLock::new();
    ALL.get_or_init(all)
        .iter()
        .find(|k| k.group == group && k.kind == kind)
}

/// All of the above.
pub fn all() -> Vec<CustomKind> {
    vec![
        kserve_inference_service(),
        leader_worker_set(),
        ray_cluster(),
        pytorch_job(),
    ]
}
