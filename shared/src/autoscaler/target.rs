//! The workload an autoscaler scales: how it is read (`get_resource` with field masks)
//! and how many GPUs one of its replicas holds, per pool.
//!
//! GPUs are counted as everywhere else: the effective GPU request of each pod template
//! ([`crate::gpu::pod_gpus`]: app containers and sidecars against the largest init
//! container, plus pod-level resources) times the pods it stands for, and the pools a
//! template targets as the capacity gate finds them
//! ([`crate::pools::PoolSet::targeted_by`]: pool label, node selector, required node
//! affinity).

use super::object::TargetRef;
use super::settings::Settings;
use crate::capacity::queries::parent_query;
use crate::cluster::{ClusterRequest, GetResource};
use crate::gpu::gpus_text;
use crate::gpu::{GpuCounts, add_into, scale, template_gpus};
use crate::settings::CustomKind;
use crate::workload::Workload;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// GPUs of one replica of a target.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicaGpus {
    /// Per GPU resource, all pod templates together.
    pub total: GpuCounts,
    /// Per pool (index into `settings.pools`) and GPU resource.
    pub per_pool: BTreeMap<usize, GpuCounts>,
    /// Templates that hold GPUs and target no configured pool: `location (gpus)`.
    pub no_pool: Vec<String>,
    /// Templates whose GPUs cannot be counted (a DRA claim that cannot be read, a
    /// fractional share that cannot): `location: reason`. The target itself was read.
    pub uncountable: Vec<String>,
}

impl ReplicaGpus {
    /// True when a replica holds a GPU.
    pub fn uses_gpu(&self) -> bool {
        !self.total.is_empty()
    }

    /// Every GPU of a replica, whatever its resource name.
    pub fn count(&self) -> u64 {
        self.total.values().fold(0u64, |a, n| a.saturating_add(*n))
    }
}

/// The built-in scalable kinds, by (group, kind): their one apiVersion. A reference
/// through another version of the group (`apps/v1beta2`) is read at this one, the version
/// contextAwareResources and RBAC name.
fn builtin(group: &str, kind: &str) -> Option<&'static str> {
    match (group, kind) {
        ("apps", "Deployment" | "StatefulSet" | "ReplicaSet") => Some("apps/v1"),
        ("", "ReplicationController") => Some("v1"),
        _ => None,
    }
}

/// The custom kind of `target`, from settings.
fn custom_kind<'a>(target: &TargetRef, settings: &'a Settings) -> Option<&'a CustomKind> {
    settings
        .custom_kinds
        .iter()
        .find(|c| c.group == target.group() && c.kind == target.kind)
}

/// The `get_resource` call that reads `target` in `namespace`: for the built-in kinds the
/// capacity gate's own request for scaled workloads (its field masks: the pod template's
/// labels, resources, node selector and affinity; policy-server then answers both policies
/// from one cache entry), for a custom kind masks derived from its template locations.
/// `None`: a kind that is neither built in nor configured in `customKinds`.
pub fn query(target: &TargetRef, namespace: &str, settings: &Settings) -> Option<ClusterRequest> {
    if let Some(api_version) = builtin(target.group(), &target.kind) {
        return Some(parent_query(
            api_version,
            &target.kind,
            &target.name,
            namespace,
        ));
    }
    let custom = custom_kind(target, settings)?;
    Some(ClusterRequest::Get(GetResource {
        api_version: target.api_version.clone(),
        kind: target.kind.clone(),
        name: target.name.clone(),
        namespace: Some(namespace.to_string()),
        disable_cache: false,
        field_masks: custom_masks(custom),
    }))
}

/// Field masks covering every template location of a custom kind: the plain leading part
/// of each location's JSONPath (`$.spec.workerGroupSpecs[*]` -> `spec.workerGroupSpecs`),
/// the `$.`-rooted paths of its pod specs, metadata and replica factors, and
/// `spec.replicas`. `None` (the whole object) when a location starts with no plain field
/// (`$`, `$..x`): no mask would be narrower than the object.
pub fn custom_masks(kind: &CustomKind) -> Option<BTreeSet<String>> {
    let mut masks = BTreeSet::from(["spec.replicas".to_string()]);
    for location in kind.locations() {
        masks.insert(plain_prefix(&location.path)?);
        let rooted = location
            .pod_spec
            .candidates()
            .iter()
            .chain(location.metadata.candidates())
            .chain(location.replicas.iter().map(|r| &r.path))
            .filter_map(|p| p.strip_prefix("$."));
        masks.extend(rooted.map(str::to_string));
    }
    Some(masks)
}

/// The leading dot-separated field names of a JSONPath, up to the first wildcard, filter,
/// bracket or recursive descent.
fn plain_prefix(path: &str) -> Option<String> {
    let rest = path.strip_prefix("$.")?;
    let mut fields = Vec::new();
    for segment in rest.split('.') {
        let head = segment
            .split(['[', '*', '?', '(', '@'])
            .next()
            .unwrap_or("");
        if !head.is_empty() {
            fields.push(head);
        }
        if head.len() != segment.len() || segment.is_empty() {
            break;
        }
    }
    (!fields.is_empty()).then(|| fields.join("."))
}

/// The target as read from the host: `apiVersion` and `kind` set (field masks may drop
/// them), and `spec.replicas` set to 1 when `one_replica`, so that its pod templates stand
/// for one replica (a Deployment's pod; a LeaderWorkerSet's group of leader and workers).
pub fn as_one_replica(mut object: Value, api_version: &str, kind: &str) -> Result<Value, String> {
    let Some(map) = object.as_object_mut() else {
        return Err(format!("expected an object, got {}", kind_of(&object)));
    };
    map.insert("apiVersion".into(), Value::from(api_version));
    map.insert("kind".into(), Value::from(kind));
    let spec = map
        .entry("spec")
        .or_insert_with(|| Value::Object(Default::default()));
    if spec.is_null() {
        *spec = Value::Object(Default::default());
    }
    match spec.as_object_mut() {
        Some(spec) => {
            spec.insert("replicas".into(), Value::from(1));
            Ok(object)
        }
        None => Err(format!("spec is {}, not an object", kind_of(spec))),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// GPUs of the pods `object` stands for (one replica, see [`as_one_replica`]), per pool.
///
/// The DRA claims the templates name are read in `namespace` through `cluster`; a claim
/// that cannot be read, or a fractional share that cannot, is in
/// [`ReplicaGpus::uncountable`] (the target was read; its GPUs cannot be counted).
pub fn replica_gpus(
    object: &Value,
    settings: &Settings,
    namespace: &str,
    cluster: &dyn crate::cluster::Cluster,
) -> Result<ReplicaGpus, String> {
    let workload =
        Workload::from_object(object, &settings.custom_kinds).map_err(|e| e.to_string())?;
    let names = settings.gpu_resources();
    let pools = settings.pool_set();
    let claims = crate::dra::resolve(&workload, namespace, &settings.dra, cluster);
    let mut gpus = ReplicaGpus::default();
    for t in &workload.templates {
        let pod = template_gpus(t, &names, &claims);
        let uncountable: Vec<String> = pod
            .problems
            .iter()
            .filter(|p| {
                matches!(
                    p,
                    crate::gpu::GpuProblem::Claim { .. } | crate::gpu::GpuProblem::Share(_)
                )
            })
            .map(ToString::to_string)
            .collect();
        if !uncountable.is_empty() {
            gpus.uncountable
                .push(format!("{}: {}", t.location, uncountable.join("; ")));
            continue;
        }
        let counts: GpuCounts = scale(&pod.effective, t.pods)
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .collect();
        if counts.is_empty() {
            continue;
        }
        add_into(&mut gpus.total, &counts);
        let targeted = pools.targeted_by(&t.meta.labels, &t.spec);
        if targeted.is_empty() {
            gpus.no_pool
                .push(format!("{} ({})", t.location, gpus_text(&counts)));
        }
        for i in targeted {
            add_into(gpus.per_pool.entry(i).or_default(), &counts);
        }
    }
    Ok(gpus)
}

/// The canonical apiVersion the target is read at (see [`query`]).
pub fn api_version_of(target: &TargetRef) -> String {
    builtin(target.group(), &target.kind)
        .map(str::to_string)
        .unwrap_or_else(|| target.api_version.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::queries::TEMPLATE_FIELD_MASKS;
    use crate::workload::presets;
    use rstest::rstest;
    use serde_json::json;

    fn settings() -> Settings {
        serde_json::from_value(json!({
            "pools": [
                {"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}}},
                {"name": "h100", "nodeSelector": {"matchLabels": {"node.example.com/gpu": "h100"}}}
            ],
            "customKinds": presets::all(),
        }))
        .unwrap()
    }

    fn target(api_version: &str, kind: &str) -> TargetRef {
        TargetRef {
            api_version: api_version.into(),
            kind: kind.into(),
            name: "llm".into(),
        }
    }

    #[test]
    fn built_in_targets_are_read_as_the_gate_reads_scaled_workloads() {
        let q = query(&target("apps/v1beta2", "StatefulSet"), "ml", &settings()).unwrap();
        assert_eq!(q, parent_query("apps/v1", "StatefulSet", "llm", "ml"));
        let ClusterRequest::Get(get) = q else {
            panic!("a get")
        };
        assert_eq!(
            get.field_masks.unwrap().len(),
            TEMPLATE_FIELD_MASKS.len(),
            "the gate's masks"
        );
        assert!(
            query(
                &target("argoproj.io/v1alpha1", "Rollout"),
                "ml",
                &settings()
            )
            .is_none()
        );
        assert_eq!(
            api_version_of(&target("apps/v1beta2", "Deployment")),
            "apps/v1"
        );
    }

    #[test]
    fn custom_targets_are_masked_to_their_templates() {
        let q = query(
            &target("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
            "ml",
            &settings(),
        )
        .unwrap();
        let ClusterRequest::Get(get) = q else {
            panic!("a get")
        };
        assert_eq!(get.api_version, "leaderworkerset.x-k8s.io/v1");
        assert_eq!(
            get.field_masks.unwrap().into_iter().collect::<Vec<_>>(),
            vec!["spec.leaderWorkerTemplate", "spec.replicas"]
        );
        let ray = presets::find("ray.io", "RayCluster").unwrap();
        assert_eq!(
            custom_masks(&ray).unwrap().into_iter().collect::<Vec<_>>(),
            vec![
                "spec.headGroupSpec",
                "spec.replicas",
                "spec.workerGroupSpecs"
            ]
        );
    }

    #[rstest]
    #[case::plain("$.spec.predictor", Some("spec.predictor"))]
    #[case::wildcard("$.spec.workerGroupSpecs[*]", Some("spec.workerGroupSpecs"))]
    #[case::star_field("$.spec.pytorchReplicaSpecs.*", Some("spec.pytorchReplicaSpecs"))]
    #[case::filter("$.spec.groups[?(@.gpu)]", Some("spec.groups"))]
    #[case::root("$", None)]
    #[case::descent("$..template", None)]
    #[case::bracket_root("$['spec']", None)]
    fn plain_prefixes(#[case] path: &str, #[case] expected: Option<&str>) {
        assert_eq!(plain_prefix(path).as_deref(), expected);
    }

    fn deployment(labels: Value, node_selector: Value, limits: Value) -> Value {
        json!({"metadata": {"name": "llm"},
               "spec": {"replicas": 6, "template": {"metadata": {"labels": labels},
                 "spec": {"nodeSelector": node_selector, "containers": [{"name": "server", "resources": {"limits": limits}}],
                          "initContainers": [{"name": "fetch", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}})
    }

    #[test]
    fn one_replica_of_a_deployment_per_pool() {
        let object = as_one_replica(
            deployment(
                json!({"gpu-admission/pool": "a100"}),
                json!({}),
                json!({"nvidia.com/gpu": "2"}),
            ),
            "apps/v1",
            "Deployment",
        )
        .unwrap();
        assert_eq!(object["spec"]["replicas"], 1);
        let gpus = replica_gpus(&object, &settings(), "ml", &crate::cluster::NoCluster).unwrap();
        assert_eq!(gpus.total, GpuCounts::from([("nvidia.com/gpu".into(), 2)]));
        assert_eq!(gpus.per_pool.keys().collect::<Vec<_>>(), vec![&0]);
        assert_eq!(gpus.count(), 2);
        assert_eq!(gpus_text(&gpus.total), "2 nvidia.com/gpu");

        // By node selector, and the init container's GPU is the pod's largest need.
        let object = as_one_replica(
            deployment(
                json!({}),
                json!({"node.example.com/gpu": "h100"}),
                json!({"cpu": "4"}),
            ),
            "apps/v1",
            "Deployment",
        )
        .unwrap();
        let gpus = replica_gpus(&object, &settings(), "ml", &crate::cluster::NoCluster).unwrap();
        assert_eq!(gpus.per_pool.keys().collect::<Vec<_>>(), vec![&1]);
        assert_eq!(gpus.count(), 1);

        // No pool.
        let object = as_one_replica(
            deployment(json!({}), json!({}), json!({"nvidia.com/gpu": "4"})),
            "apps/v1",
            "Deployment",
        )
        .unwrap();
        let gpus = replica_gpus(&object, &settings(), "ml", &crate::cluster::NoCluster).unwrap();
        assert!(gpus.per_pool.is_empty());
        assert_eq!(
            gpus.no_pool,
            vec!["spec.template.spec (4 nvidia.com/gpu)".to_string()]
        );
    }

    #[test]
    fn one_replica_of_a_leader_worker_set_is_a_group() {
        let lws = json!({"spec": {"replicas": 4, "leaderWorkerTemplate": {"size": 4,
            "workerTemplate": {"metadata": {"labels": {"gpu-admission/pool": "h100"}},
              "spec": {"containers": [{"name": "w", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}}});
        let object = as_one_replica(lws, "leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet").unwrap();
        let gpus = replica_gpus(&object, &settings(), "ml", &crate::cluster::NoCluster).unwrap();
        assert_eq!(gpus.count(), 32, "leader + 3 workers of 8 GPUs");
        assert_eq!(gpus.per_pool.keys().collect::<Vec<_>>(), vec![&1]);
    }

    #[test]
    fn masked_answers_are_completed_and_odd_ones_refused() {
        let object = as_one_replica(json!({}), "apps/v1", "Deployment").unwrap();
        assert_eq!(
            object,
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 1}})
        );
        assert!(
            !replica_gpus(&object, &settings(), "ml", &crate::cluster::NoCluster)
                .unwrap()
                .uses_gpu()
        );
        assert_eq!(
            as_one_replica(json!({"spec": null}), "apps/v1", "Deployment").unwrap()["spec"]["replicas"],
            1
        );
        assert_eq!(
            as_one_replica(json!([]), "apps/v1", "Deployment").unwrap_err(),
            "expected an object, got a list"
        );
        assert_eq!(
            as_one_replica(json!({"spec": 3}), "apps/v1", "Deployment").unwrap_err(),
            "spec is a number, not an object"
        );
    }
}
