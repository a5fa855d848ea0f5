//! gpu-capacity-gate-policy, built as wasm, through the harness: every request in
//! `policies/gpu-capacity-gate-policy/test_data/` with its replay session (kwctl's
//! format: the exact host calls, selectors and field masks included), the verdict, the
//! exact message, warnings and audit annotations; settings validation; and the README
//! quoting the messages verbatim.

mod common;

use std::sync::OnceLock;

use common::PolicyUnderTest;
use common::dates::{DatedException, assert_more_than_30_days_ahead, days_from_civil};
use common::manifests::{
    assert_granted, assert_metadata_version_matches_the_crate, checked_example, deploy_dra_role,
    rbac_names, yaml_documents,
};
use gpu_e2e::{ContextAwareAccess, ReplaySession};
use serde_json::Value;

const POLICY: PolicyUnderTest = PolicyUnderTest("gpu-capacity-gate-policy");

/// What one request must produce.
struct Case {
    request: &'static str,
    settings: &'static str,
    session: Option<&'static str>,
    /// `None`: allowed; `Some(message)`: denied with exactly this message.
    denied: Option<&'static str>,
    /// Expected `capacity` audit annotation (`None`: absent).
    capacity: Option<&'static str>,
    /// Other audit annotation expected: (key, value).
    audit: Option<(&'static str, &'static str)>,
    /// Quoted verbatim in the README.
    in_readme: bool,
    /// The warning expected, when there is one to check.
    warning: Option<&'static str>,
}

const S: &str = "settings.yml";

const OVER: &str = "pool a100: nvidia.com/gpu would be 58 of 64 allocatable (90.6%) with this workload's 8 (50 in use), above the 90% threshold (room for 7 more). Wait for capacity, lower replicas, or target another pool.";
const EMPTY: &str = "pool a100: no schedulable node offers nvidia.com/gpu for this workload's 8 (no node matches gpu-admission/pool=a100). Request a resource the pool offers, target another pool, or check the pool's nodeSelector in the policy settings and that its nodes are schedulable.";
const NOT_GRANTED: &str = "pool a100: cannot list v1/Node: not granted to this policy: add {apiVersion: v1, kind: Node} to the ClusterAdmissionPolicy's contextAwareResources. The GPU capacity gate denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error.";
const PODS_FORBIDDEN: &str = "pool a100: cannot list v1/Pod: forbidden by RBAC: grant the policy-server's ServiceAccount list and watch on pods. The GPU capacity gate denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error.";
const DEPLOYMENT_FORBIDDEN: &str = "scale of Deployment ml-serving/llm-a100: cannot get apps/v1/Deployment ml-serving/llm-a100: forbidden by RBAC: grant the policy-server's ServiceAccount get on deployments (apiGroup apps). The GPU capacity gate denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error.";
const MIG_OVER: &str = "pool a100-mig: nvidia.com/mig-3g.40gb would be 15 of 16 allocatable (93.8%) with this workload's 5 (10 in use), above the 90% threshold (room for 4 more). Wait for capacity, lower replicas, or target another pool.";
const MALFORMED: &str = "Deployment ml-serving/llm-a100 cannot be read, so it is denied: spec.replicas: must be a non-negative integer, got \"four\". Fix the manifest (for a custom resource, check its customKinds entry in the policy settings)";

// Usage from ResourceQuotas (settings_quotas.yml).
const Q: &str = "settings_quotas.yml";
const QUOTAS_OVER: &str = "pool a100: nvidia.com/gpu would be 58 of capacity 64 declared in settings (90.6%) with this workload's 8 (50 in use from 6 ResourceQuotas), above the 90% threshold (room for 7 more). Wait for capacity, lower replicas, or target another pool.";
const QUOTAS_NONE: &str = "pool a100: namespace ml-serving has no ResourceQuota labelled gpu-admission/pool=a100, so the pool's pods there would not be counted. Create it: {apiVersion: v1, kind: ResourceQuota, metadata: {name: gpu-a100, namespace: ml-serving, labels: {gpu-admission/pool: \"a100\"}}, spec: {hard: {requests.nvidia.com/gpu: \"64\"}, scopeSelector: {matchExpressions: [{scopeName: PriorityClass, operator: In, values: [a100-high, a100-low]}]}}} (spec.hard at the pool's size caps nothing; lower it to cap the namespace). The GPU capacity gate denies what it cannot count (unreadableCluster: deny).";
const QUOTAS_UNSCOPED: &str = "pool a100: ResourceQuota ml-training/gpu-a100 is not scoped to the pool's priority classes (it has no scope, so it counts the pods of every pool in ml-training): set its spec.scopeSelector to {matchExpressions: [{scopeName: PriorityClass, operator: In, values: [a100-high, a100-low]}]}. The GPU capacity gate denies what it cannot count (unreadableCluster: deny).";
const QUOTAS_FORBIDDEN: &str = "pool a100: cannot list v1/ResourceQuota: forbidden by RBAC: grant the policy-server's ServiceAccount list and watch on resourcequotas. The GPU capacity gate denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error.";
const QUOTAS_NO_CLASS: &str = "pool a100: its GPUs in use are counted by ResourceQuotas scoped to its priority classes (a100-high, a100-low), which would not count this workload's pods: spec.template.spec has no priorityClassName. Set priorityClassName to one of a100-high, a100-low (gpu-pool-routing-policy sets it on the pool's workloads).";

// DRA: a Deployment of 3 replicas whose pods each get 4 gpu.nvidia.com devices from a
// ResourceClaimTemplate (12 GPUs), and claims that cannot be counted.
const DRA: &str = "deployment_dra_a100_3x4.json";
const DRA_QUOTAS_OVER: &str = "pool a100: nvidia.com/gpu would be 62 of capacity 64 declared in settings (96.9%) with this workload's 12 (50 in use from 6 ResourceQuotas), above the 90% threshold (room for 7 more). Wait for capacity, lower replicas, or target another pool.";
const DRA_PODS_OVER: &str = "pool a100: nvidia.com/gpu would be 62 of 64 allocatable (96.9%) with this workload's 12 (50 in use), above the 90% threshold (room for 7 more). Wait for capacity, lower replicas, or target another pool.";
const DRA_NOT_FOUND: &str = "the capacity gate cannot count the GPUs of this workload, so it cannot admit it: spec.template.spec: resource claim 'gpus' (ResourceClaimTemplate four-gpus) cannot be read (Host error: Callback evaluation failure: Cannot find resource.k8s.io/v1/ResourceClaimTemplate named 'four-gpus' inside of namespace 'Some(\"ml-serving\")'); create it before the workload, and let the policy read it: contextAwareResources {apiVersion: resource.k8s.io/v1, kind: ResourceClaimTemplate} in the policy and get on resourceclaimtemplates.resource.k8s.io for the policy server's service account";
const DRA_NOT_GRANTED: &str = "the capacity gate cannot count the GPUs of this workload, so it cannot admit it: spec.template.spec: resource claim 'gpus' (ResourceClaimTemplate four-gpus) cannot be read (Host error: Callback evaluation failure: Policy has not been granted access to Kubernetes resource.k8s.io/v1/ResourceClaimTemplate resources. The violation has been reported.); create it before the workload, and let the policy read it: contextAwareResources {apiVersion: resource.k8s.io/v1, kind: ResourceClaimTemplate} in the policy and get on resourceclaimtemplates.resource.k8s.io for the policy server's service account";
const DRA_ALLOCATION_ALL: &str = "the capacity gate cannot count the GPUs of this workload, so it cannot admit it: spec.template.spec: resource claim 'gpus' (ResourceClaimTemplate four-gpus) request gpus asks for every gpu.nvidia.com device on a node (allocationMode: All); the policies cannot count that: ask for an exact count (allocationMode: ExactCount, count: N)";

// Pools that grow (ceilings), suspended and queued Jobs, pods no node holds, fragmentation,
// rollout surge, alternatives, and a threshold by schedule window.
const STATIC_CEILING: &str = "a100: nvidia.com/gpu used 0 + incoming 8 = 8 of 64 it can grow to (12.5%), threshold 90%, fits (ceiling 64 from maxAllocatable in settings, 0 allocatable now)";
const KARPENTER_FOUND: &str = "a100: nvidia.com/gpu used 0 + incoming 8 = 8 of 64 it can grow to (12.5%), threshold 90%, fits (ceiling 64 from NodePool gpu-a100 spec.limits, 0 allocatable now)";
const KARPENTER_NOT_FOUND: &str = "pool a100: cannot get karpenter.sh/v1/NodePool gpu-a100: not found. The GPU capacity gate denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error.";
const KARPENTER_NOT_GRANTED: &str = "pool a100: cannot get karpenter.sh/v1/NodePool gpu-a100: not granted to this policy: add {apiVersion: karpenter.sh/v1, kind: NodePool} to the ClusterAdmissionPolicy's contextAwareResources. The GPU capacity gate denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error.";
const SUSPENDED: &str = "Job ml-training/train-a100 is suspended (spec.suspend: true): not charged until the update that unsuspends it";
const UNSUSPENDED: &str =
    "Job ml-training/train-a100 is unsuspended (spec.suspend: true -> false): charged in full";
const QUEUED_SUSPENDED: &str = "Job ml-training/train-queued is suspended (spec.suspend: true): not charged until the update that unsuspends it";
const QUEUE_OWNED: &str = "Job ml-serving/train-queued carries kueue.x-k8s.io/queue-name=team-a: LocalQueue ml-serving/team-a exists and Kueue holds the Job (suspended), so its queue admits it, not the capacity gate (gateQueued: false)";
const QUEUE_NOT_OWNED: &str = "Job ml-serving/train-queued carries kueue.x-k8s.io/queue-name=team-a, but LocalQueue ml-serving/team-a does not exist: gated like any workload";
const QUEUE_NOT_GRANTED: &str = "Job ml-serving/train-queued carries kueue.x-k8s.io/queue-name=team-a, but the capacity gate could not check that Kueue owns it: cannot get kueue.x-k8s.io/v1beta1/LocalQueue ml-serving/team-a: not granted to this policy: add {apiVersion: kueue.x-k8s.io/v1beta1, kind: LocalQueue} to the ClusterAdmissionPolicy's contextAwareResources; until then it is gated like any workload";
const QUEUE_NOT_OWNED_DENIED: &str = "team ml-a would hold 20 of its 16 nvidia.com/gpu (12 used + 8 incoming): 2 of the 4 incoming replicas (2 nvidia.com/gpu each) fit. Lower replicas, free the team's GPUs, or ask for a larger budget.";
const BIGGER_THAN_NODES: &str = "pool a100: the pod asks for 16 nvidia.com/gpu, more than any node of the pool has (the largest, gpu-a100-0, has 8 nvidia.com/gpu allocatable), so it can never be scheduled. Ask for at most 8 nvidia.com/gpu per pod (split the work over more pods), or target a pool with bigger nodes.";
const BIGGER_THAN_NODE_SHAPE: &str = "pool a100: the pod asks for 16 nvidia.com/gpu, more than any node of the pool has (the pool has no node now and the nodes the cluster autoscaler adds have 8), so it can never be scheduled. Ask for at most 8 nvidia.com/gpu per pod (split the work over more pods), or target a pool with bigger nodes.";
const FRAGMENTED_AUDIT: &str = "a100: no node has room for one pod of spec.template.spec (4 nvidia.com/gpu): the largest free block is 3 nvidia.com/gpu on gpu-a100-0 (11 nvidia.com/gpu free over its 4 nodes)";
const FRAGMENTED_WARNING: &str = "pool a100: no node has room for one pod of spec.template.spec (4 nvidia.com/gpu): the largest free block is 3 nvidia.com/gpu on gpu-a100-0 (11 nvidia.com/gpu free over its 4 nodes). Its pods will wait (Pending) until GPUs free up on one node (fragmentation: warn).";
const FRAGMENTED_DENIED: &str = "pool a100: no node has room for one pod of spec.template.spec (4 nvidia.com/gpu): the largest free block is 3 nvidia.com/gpu on gpu-a100-0 (11 nvidia.com/gpu free over its 4 nodes). Wait for GPUs to free up on one node, ask for fewer GPUs per pod, or target another pool (fragmentation: deny).";
const FRAGMENTED_CAPACITY: &str =
    "a100: nvidia.com/gpu used 21 + incoming 4 = 25 of 32 allocatable (78.1%), threshold 90%, fits";
const SURGE_10: &str = "rollout of Deployment ml-serving/llm-a100: 3 extra pods charged (maxSurge 25% (the default) of 10 replicas, rounded up; chargeRolloutSurge: true)";
const ALTERNATIVE_ROOM: &str = "pool a100: nvidia.com/gpu would be 58 of 64 allocatable (90.6%) with this workload's 8 (50 in use), above the 90% threshold (room for 7 more). Wait for capacity, lower replicas, or target another pool. Pool batch has room for 20 nvidia.com/gpu.";
const ALTERNATIVE_NONE: &str = "pool a100: nvidia.com/gpu would be 58 of 64 allocatable (90.6%) with this workload's 8 (50 in use), above the 90% threshold (room for 7 more). Wait for capacity, lower replicas, or target another pool. No alternative pool has room: h100 (room for 1 nvidia.com/gpu), batch (room for 0 nvidia.com/gpu).";
const PEAK: &str = "pool a100: nvidia.com/gpu would be 48 of 56 allocatable (85.7%) with this workload's 8 (40 in use), above the 80% threshold of window peak (room for 4 more). Wait for capacity, lower replicas, or target another pool.";

/// settings_exceptions.yml's exception (until 2027-09-27: renew the fixture before then).
const EXCEPTION_AUDIT: &str =
    "exception=llm-a100-launch owner=serving-team@example.com expires=2027-09-28T00:00:00Z";
const EXCEPTION_EXPIRED: &str = "pool a100: nvidia.com/gpu would be 58 of 64 allocatable (90.6%) with this workload's 8 (50 in use), above the 90% threshold (room for 7 more). Wait for capacity, lower replicas, or target another pool. (exception llm-a100-launch (owner serving-team@example.com) expired at 2026-11-16T00:00:00Z; renew it or fix the workload)";

// Namespace ResourceQuotas (settings_namespace_quotas.yml) and team budgets
// (settings_team_budgets*.yml; team ml-a: 16 nvidia.com/gpu, 8 in pool a100).
const NQ: &str = "settings_namespace_quotas.yml";
const TEAM: &str = "settings_team_budgets.yml";
const TEAM_CM: &str = "settings_team_budgets_configmap.yml";
const BELOW: &str =
    "a100: nvidia.com/gpu used 40 + incoming 8 = 48 of 56 allocatable (85.7%), threshold 90%, fits";
const NS_QUOTA_OVER: &str = "namespace ml-serving: ResourceQuota gpu-quota would hold 20 of its 16 requests.nvidia.com/gpu (12 used + 8 incoming): 2 of the 4 incoming replicas (2 nvidia.com/gpu each) fit. Lower replicas, free GPUs in the namespace, or ask for a larger quota.";
const NS_QUOTA_PRIORITY: &str = "namespace ml-serving: ResourceQuota a100-high-gpus would hold 8 of its 4 requests.nvidia.com/gpu (0 used + 8 incoming): 2 of the 4 incoming replicas (2 nvidia.com/gpu each) fit. Lower replicas, free GPUs in the namespace, or ask for a larger quota.";
const NS_QUOTA_NOT_GRANTED: &str = "namespace ml-serving: its ResourceQuotas were not checked: cannot list v1/ResourceQuota: not granted to this policy: add {apiVersion: v1, kind: ResourceQuota} to the ClusterAdmissionPolicy's contextAwareResources (unreadableNamespaceQuotas: warn; Kubernetes still enforces them when the pods are created)";
const NQ_DEFAULT: &str = "settings_namespace_quotas_default.yml";
const NQ_EXPLICIT: &str = "settings_namespace_quotas_explicit.yml";
const NS_QUOTA_NOT_GRANTED_BY_DEFAULT: &str = "namespace ml-serving: its ResourceQuotas were not checked: cannot list v1/ResourceQuota: not granted to this policy: add {apiVersion: v1, kind: ResourceQuota} to the ClusterAdmissionPolicy's contextAwareResources (checkNamespaceQuotas is on by default and only warns until it is granted; set checkNamespaceQuotas: true to deny instead, or false to skip the check; Kubernetes still enforces the quotas when the pods are created)";
const NS_QUOTA_NOT_GRANTED_EXPLICIT: &str = "namespace ml-serving: its ResourceQuotas: cannot list v1/ResourceQuota: not granted to this policy: add {apiVersion: v1, kind: ResourceQuota} to the ClusterAdmissionPolicy's contextAwareResources. The GPU capacity gate denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error.";
const NS_QUOTA_LIMITS_KEY: &str = "ResourceQuota ml-serving/gpu-limits: spec.hard limits.nvidia.com/gpu is not counted by Kubernetes (for an extended resource it counts only requests.nvidia.com/gpu), so it limits nothing and the capacity gate does not check it: rename it to requests.nvidia.com/gpu";
const TEAM_OVER: &str = "team ml-a would hold 20 of its 16 nvidia.com/gpu (12 used + 8 incoming): 2 of the 4 incoming replicas (2 nvidia.com/gpu each) fit. Lower replicas, free the team's GPUs, or ask for a larger budget.";
const TEAM_POOL_OVER: &str = "team ml-a would hold 12 of its 8 nvidia.com/gpu in pool a100 (4 used + 8 incoming): 2 of the 4 incoming replicas (2 nvidia.com/gpu each) fit. Lower replicas, free the team's GPUs, or ask for a larger budget.";
const TEAM_CM_MISSING: &str = "team budget of namespace ml-serving: cannot get v1/ConfigMap gpu-system/gpu-team-budgets: not found. The GPU capacity gate denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error.";
const TEAM_CM_NOT_GRANTED: &str = "team budget of namespace ml-serving: cannot get v1/ConfigMap gpu-system/gpu-team-budgets: not granted to this policy: add {apiVersion: v1, kind: ConfigMap} to the ClusterAdmissionPolicy's contextAwareResources. The GPU capacity gate denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error.";
const TEAM_CM_MALFORMED: &str = "the team budgets ConfigMap gpu-system/gpu-team-budgets is malformed: budgets.json.ml-a.cpu: not a GPU resource the gate counts (nvidia.com/gpu, nvidia.com/gpu.shared, amd.com/gpu, gpu.intel.com/i915, gpu.intel.com/xe, nvidia.com/mig-*, or a name in extraGpuResources); fix the ConfigMap (settings.teamBudgetsConfigMap). The GPU capacity gate denies what it cannot check.";

const CASES: &[Case] = &[
    // Below, over and exactly at the threshold; an empty pool.
    Case {
        request: "deployment_a100_4x2.json",
        settings: S,
        session: Some("session_a100_below.yml"),
        denied: None,
        capacity: Some(
            "a100: nvidia.com/gpu used 40 + incoming 8 = 48 of 56 allocatable (85.7%), threshold 90%, fits",
        ),
        audit: Some(("pool", "a100")),
        in_readme: true,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: S,
        session: Some("session_a100_over.yml"),
        denied: Some(OVER),
        capacity: Some(
            "a100: nvidia.com/gpu used 50 + incoming 8 = 58 of 64 allocatable (90.6%), threshold 90%, over",
        ),
        audit: Some(("pool", "a100")),
        in_readme: true,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: S,
        session: Some("session_a100_exact.yml"),
        denied: None,
        capacity: Some(
            "a100: nvidia.com/gpu used 64 + incoming 8 = 72 of 80 allocatable (90.0%), threshold 90%, fits",
        ),
        audit: None,
        in_readme: false,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: S,
        session: Some("session_a100_empty.yml"),
        denied: Some(EMPTY),
        capacity: Some(
            "a100: nvidia.com/gpu used 0 + incoming 8 = 8 of 0 allocatable (n/a), threshold 90%, over",
        ),
        audit: None,
        in_readme: true,
        warning: None,
    },
    // Host-call failures: fail closed, or open with a warning.
    Case {
        request: "deployment_a100_4x2.json",
        settings: S,
        session: Some("session_a100_nodes_not_granted.yml"),
        denied: Some(NOT_GRANTED),
        capacity: Some("pool a100: not checked"),
        audit: Some((
            "host-error",
            "Callback evaluation failure: Policy has not been granted access to Kubernetes v1/Node resources. The violation has been reported.",
        )),
        in_readme: true,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: S,
        session: Some("session_a100_pods_forbidden.yml"),
        denied: Some(PODS_FORBIDDEN),
        capacity: Some("pool a100: not checked"),
        audit: None,
        in_readme: true,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: "settings_fail_open.yml",
        session: Some("session_a100_nodes_not_granted.yml"),
        denied: None,
        capacity: Some("pool a100: not checked"),
        audit: None,
        in_readme: false,
        warning: None,
    },
    // UPDATE: only the increase is charged, no increase means no host call.
    Case {
        request: "deployment_update_more_replicas.json",
        settings: S,
        session: Some("session_a100_over.yml"),
        denied: None,
        capacity: Some(
            "a100: nvidia.com/gpu used 50 + incoming 2 = 52 of 64 allocatable (81.3%), threshold 90%, fits",
        ),
        audit: None,
        in_readme: false,
        warning: None,
    },
    // A template change (new image) starts a rollout: maxSurge pods are charged (25% of 4
    // replicas, rounded up: 1 pod of 2 GPUs)...
    Case {
        request: "deployment_update_image_only.json",
        settings: S,
        session: Some("session_a100_over.yml"),
        denied: None,
        capacity: Some(
            "a100: nvidia.com/gpu used 50 + incoming 2 = 52 of 64 allocatable (81.3%), threshold 90%, fits",
        ),
        audit: Some((
            "surge",
            "rollout of Deployment ml-serving/llm-a100: 1 extra pod charged (maxSurge 25% (the default) of 4 replicas, rounded up; chargeRolloutSurge: true)",
        )),
        in_readme: false,
        warning: None,
    },
    // ...unless chargeRolloutSurge is false: then nothing, and no host call.
    Case {
        request: "deployment_update_image_only.json",
        settings: "settings_no_surge.yml",
        session: None,
        denied: None,
        capacity: None,
        audit: None,
        in_readme: false,
        warning: None,
    },
    // 10 replicas of 2 GPUs, new image: 25% of 10 rounded up = 3 pods, 6 GPUs.
    Case {
        request: "deployment_update_rollout_10.json",
        settings: S,
        session: Some("session_a100_below.yml"),
        denied: None,
        capacity: Some(
            "a100: nvidia.com/gpu used 40 + incoming 6 = 46 of 56 allocatable (82.1%), threshold 90%, fits",
        ),
        audit: Some(("surge", SURGE_10)),
        in_readme: false,
        warning: None,
    },
    // Scale subresource: the parent's GPUs per pod x the added replicas.
    Case {
        request: "deployment_scale_up.json",
        settings: S,
        session: Some("session_scale_a100_over.yml"),
        denied: Some(OVER),
        capacity: Some(
            "a100: nvidia.com/gpu used 50 + incoming 8 = 58 of 64 allocatable (90.6%), threshold 90%, over",
        ),
        audit: Some(("pool", "a100")),
        in_readme: false,
        warning: None,
    },
    Case {
        request: "deployment_scale_up.json",
        settings: S,
        session: Some("session_scale_deployment_forbidden.yml"),
        denied: Some(DEPLOYMENT_FORBIDDEN),
        capacity: Some("scale of Deployment ml-serving/llm-a100: not checked"),
        audit: None,
        in_readme: true,
        warning: None,
    },
    Case {
        request: "deployment_scale_down.json",
        settings: S,
        session: None,
        denied: None,
        capacity: None,
        audit: None,
        in_readme: false,
        warning: None,
    },
    // Time-slicing and MIG: per resource name, in the unit pods request.
    Case {
        request: "deployment_l4_timesliced.json",
        settings: S,
        session: Some("session_l4_timesliced.yml"),
        denied: None,
        capacity: Some(
            "l4-shared: nvidia.com/gpu used 110 + incoming 6 = 116 of 128 allocatable (90.6%), threshold 95%, fits",
        ),
        audit: None,
        in_readme: false,
        warning: None,
    },
    Case {
        request: "job_mig_3g.json",
        settings: S,
        session: Some("session_a100_mig.yml"),
        denied: Some(MIG_OVER),
        capacity: Some(
            "a100-mig: nvidia.com/mig-3g.40gb used 10 + incoming 5 = 15 of 16 allocatable (93.8%), threshold 90%, over",
        ),
        audit: None,
        in_readme: false,
        warning: None,
    },
    // A custom kind from settings (KServe preset), pool from the object's own label.
    Case {
        request: "inferenceservice_h100.json",
        settings: S,
        session: Some("session_h100_below.yml"),
        denied: None,
        capacity: Some(
            "h100: nvidia.com/gpu used 16 + incoming 8 = 24 of 32 allocatable (75.0%), threshold 80%, fits",
        ),
        audit: None,
        in_readme: false,
        warning: None,
    },
    // Demand counted once: a pod of a gated controller is not charged again...
    Case {
        request: "pod_owned_by_replicaset.json",
        settings: S,
        session: None,
        denied: None,
        capacity: None,
        audit: Some((
            "not-charged",
            "created by ReplicaSet llm-a100-7d9f8c6b5, which was charged for its pods (chargePods: ownerless)",
        )),
        in_readme: false,
        warning: None,
    },
    // ...unless chargePods is all.
    Case {
        request: "pod_owned_by_replicaset.json",
        settings: "settings_charge_all.yml",
        session: Some("session_a100_over.yml"),
        denied: None,
        capacity: Some(
            "a100: nvidia.com/gpu used 50 + incoming 2 = 52 of 64 allocatable (81.3%), threshold 90%, fits",
        ),
        audit: None,
        in_readme: false,
        warning: None,
    },
    // No host call for what the gate does not measure.
    Case {
        request: "deployment_cpu_only.json",
        settings: S,
        session: None,
        denied: None,
        capacity: None,
        audit: None,
        in_readme: false,
        warning: None,
    },
    // The same with kwctl's empty session, as e2e.bats runs every case that makes no call.
    Case {
        request: "deployment_cpu_only.json",
        settings: S,
        session: Some("session_no_calls.yml"),
        denied: None,
        capacity: None,
        audit: None,
        in_readme: false,
        warning: None,
    },
    Case {
        request: "deployment_no_pool.json",
        settings: S,
        session: None,
        denied: None,
        capacity: None,
        audit: Some((
            "no-pool",
            "spec.template.spec (nvidia.com/gpu: 8): no configured pool is named by the pool label or selected by the node selector; capacity not checked",
        )),
        in_readme: false,
        warning: None,
    },
    Case {
        request: "deployment_exempt_namespace.json",
        settings: S,
        session: None,
        denied: None,
        capacity: None,
        audit: Some((
            "exempt",
            "namespace gpu-operator is in exemptNamespaces: not checked",
        )),
        in_readme: false,
        warning: None,
    },
    Case {
        request: "deployment_malformed.json",
        settings: S,
        session: None,
        denied: Some(MALFORMED),
        capacity: None,
        audit: None,
        in_readme: false,
        warning: None,
    },
    // Usage from ResourceQuotas with capacity declared: one list of the pool's quotas.
    Case {
        request: "deployment_a100_4x2_priority.json",
        settings: Q,
        session: Some("session_quotas_found.yml"),
        denied: None,
        capacity: Some(
            "a100: nvidia.com/gpu used 40 from 6 ResourceQuotas + incoming 8 = 48 of capacity 64 declared in settings (75.0%), threshold 90%, fits",
        ),
        audit: Some(("pool", "a100")),
        in_readme: false,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2_priority.json",
        settings: Q,
        session: Some("session_quotas_over.yml"),
        denied: Some(QUOTAS_OVER),
        capacity: Some(
            "a100: nvidia.com/gpu used 50 from 6 ResourceQuotas + incoming 8 = 58 of capacity 64 declared in settings (90.6%), threshold 90%, over",
        ),
        audit: None,
        in_readme: true,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2_priority.json",
        settings: Q,
        session: Some("session_quotas_none.yml"),
        denied: Some(QUOTAS_NONE),
        capacity: Some("pool a100: not checked"),
        audit: None,
        in_readme: true,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2_priority.json",
        settings: Q,
        session: Some("session_quotas_unscoped.yml"),
        denied: Some(QUOTAS_UNSCOPED),
        capacity: Some("pool a100: not checked"),
        audit: None,
        in_readme: true,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2_priority.json",
        settings: Q,
        session: Some("session_quotas_forbidden.yml"),
        denied: Some(QUOTAS_FORBIDDEN),
        capacity: Some("pool a100: not checked"),
        audit: Some((
            "host-error",
            "Callback evaluation failure: resourcequotas is forbidden: User \"system:serviceaccount:kubewarden:gpu-admission-policy-server\" cannot list resource \"resourcequotas\" in API group \"\" at the cluster scope",
        )),
        in_readme: true,
        warning: None,
    },
    // A template without one of the pool's classes: its pods would not be counted.
    Case {
        request: "deployment_a100_4x2.json",
        settings: Q,
        session: None,
        denied: Some(QUOTAS_NO_CLASS),
        capacity: Some("pool a100: not checked"),
        audit: None,
        in_readme: true,
        warning: None,
    },
    // usage: pods with capacity declared: only the pool's Pods are listed.
    Case {
        request: "deployment_l4_timesliced.json",
        settings: Q,
        session: Some("session_l4_pods_declared.yml"),
        denied: None,
        capacity: Some(
            "l4-shared: nvidia.com/gpu used 110 + incoming 6 = 116 of capacity 128 declared in settings (90.6%), threshold 95%, fits",
        ),
        audit: None,
        in_readme: false,
        warning: None,
    },
    // DRA: the claim template is read first (3 x 4 = 12 GPUs), then the pool, as for a
    // Deployment asking 4 nvidia.com/gpu per pod; with quotas and declared capacity...
    Case {
        request: DRA,
        settings: Q,
        session: Some("session_dra_quotas_found.yml"),
        denied: None,
        capacity: Some(
            "a100: nvidia.com/gpu used 40 from 6 ResourceQuotas + incoming 12 = 52 of capacity 64 declared in settings (81.3%), threshold 90%, fits",
        ),
        audit: Some(("pool", "a100")),
        in_readme: false,
        warning: None,
    },
    Case {
        request: DRA,
        settings: Q,
        session: Some("session_dra_quotas_over.yml"),
        denied: Some(DRA_QUOTAS_OVER),
        capacity: Some(
            "a100: nvidia.com/gpu used 50 from 6 ResourceQuotas + incoming 12 = 62 of capacity 64 declared in settings (96.9%), threshold 90%, over",
        ),
        audit: Some(("pool", "a100")),
        in_readme: true,
        warning: None,
    },
    // ...and on nodes that advertise nvidia.com/gpu (usage: pods).
    Case {
        request: DRA,
        settings: S,
        session: Some("session_dra_a100_over.yml"),
        denied: Some(DRA_PODS_OVER),
        capacity: Some(
            "a100: nvidia.com/gpu used 50 + incoming 12 = 62 of 64 allocatable (96.9%), threshold 90%, over",
        ),
        audit: Some(("pool", "a100")),
        in_readme: false,
        warning: None,
    },
    // A claim that cannot be counted: denied before the pool is read, whatever
    // unreadableCluster says.
    Case {
        request: DRA,
        settings: Q,
        session: Some("session_dra_not_found.yml"),
        denied: Some(DRA_NOT_FOUND),
        capacity: None,
        audit: None,
        in_readme: true,
        warning: None,
    },
    Case {
        request: DRA,
        settings: S,
        session: Some("session_dra_not_granted.yml"),
        denied: Some(DRA_NOT_GRANTED),
        capacity: None,
        audit: None,
        in_readme: true,
        warning: None,
    },
    Case {
        request: DRA,
        settings: "settings_fail_open.yml",
        session: Some("session_dra_not_granted.yml"),
        denied: Some(DRA_NOT_GRANTED),
        capacity: None,
        audit: None,
        in_readme: false,
        warning: None,
    },
    Case {
        request: DRA,
        settings: S,
        session: Some("session_dra_allocation_all.yml"),
        denied: Some(DRA_ALLOCATION_ALL),
        capacity: None,
        audit: None,
        in_readme: true,
        warning: None,
    },
    // Pool ceilings: a pool scaled to zero grows to a static maxAllocatable or to its
    // Karpenter NodePool's spec.limits (nodes, then the NodePool, then the pods).
    Case {
        request: "deployment_a100_4x2.json",
        settings: "settings_static_ceiling.yml",
        session: Some("session_a100_empty.yml"),
        denied: None,
        capacity: Some(STATIC_CEILING),
        audit: Some(("pool", "a100")),
        in_readme: false,
        warning: None,
    },
    // Scale from zero: the pools block gpu-autoscaler-policy's case of the same name has.
    Case {
        request: "deployment_serving_8x2.json",
        settings: "settings_scale_from_zero.yml",
        session: Some("session_scale_from_zero.yml"),
        denied: None,
        capacity: Some(
            "h100-serving: nvidia.com/gpu used 0 + incoming 16 = 16 of 64 it can grow to (25.0%), threshold 85%, fits (ceiling 64 from maxAllocatable in settings, 0 allocatable now)",
        ),
        audit: Some(("pool", "h100-serving")),
        in_readme: false,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: "settings_karpenter.yml",
        session: Some("session_karpenter_zero_nodes.yml"),
        denied: None,
        capacity: Some(KARPENTER_FOUND),
        audit: Some(("pool", "a100")),
        in_readme: false,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: "settings_karpenter.yml",
        session: Some("session_karpenter_not_found.yml"),
        denied: Some(KARPENTER_NOT_FOUND),
        capacity: Some("pool a100: not checked"),
        audit: Some((
            "host-error",
            "Callback evaluation failure: Cannot find karpenter.sh/v1/NodePool named 'gpu-a100' inside of namespace 'None'",
        )),
        in_readme: true,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: "settings_karpenter.yml",
        session: Some("session_karpenter_not_granted.yml"),
        denied: Some(KARPENTER_NOT_GRANTED),
        capacity: Some("pool a100: not checked"),
        audit: None,
        in_readme: true,
        warning: None,
    },
    // cluster-autoscaler: the node shape decides what a pool of no nodes can schedule.
    Case {
        request: "pod_a100_16gpu.json",
        settings: "settings_cluster_autoscaler.yml",
        session: Some("session_a100_empty.yml"),
        denied: Some(BIGGER_THAN_NODE_SHAPE),
        capacity: Some(
            "a100: nvidia.com/gpu used 0 + incoming 16 = 16 of 64 it can grow to (25.0%), threshold 90%, fits (ceiling 64 from clusterAutoscaler: 8 nodes x 8 nvidia.com/gpu, 0 allocatable now)",
        ),
        audit: None,
        in_readme: true,
        warning: None,
    },
    // Suspended Jobs: not charged at CREATE (no host call); the UPDATE that unsuspends one
    // is charged in full (2 pods x 4 GPUs), accepted or denied like a new Job.
    Case {
        request: "job_a100_suspended.json",
        settings: S,
        session: None,
        denied: None,
        capacity: None,
        audit: Some(("suspend", SUSPENDED)),
        in_readme: false,
        warning: None,
    },
    Case {
        request: "job_a100_unsuspended.json",
        settings: S,
        session: Some("session_a100_below.yml"),
        denied: None,
        capacity: Some(
            "a100: nvidia.com/gpu used 40 + incoming 8 = 48 of 56 allocatable (85.7%), threshold 90%, fits",
        ),
        audit: Some(("suspend", UNSUSPENDED)),
        in_readme: false,
        warning: None,
    },
    Case {
        request: "job_a100_unsuspended.json",
        settings: S,
        session: Some("session_a100_over.yml"),
        denied: Some(OVER),
        capacity: Some(
            "a100: nvidia.com/gpu used 50 + incoming 8 = 58 of 64 allocatable (90.6%), threshold 90%, over",
        ),
        audit: Some(("suspend", UNSUSPENDED)),
        in_readme: false,
        warning: None,
    },
    // A Job created with the Kueue label, suspended as Kueue's webhook leaves it: not
    // charged, no host call (the label is judged at the update that unsuspends it).
    Case {
        request: "job_kueue_a100.json",
        settings: S,
        session: None,
        denied: None,
        capacity: None,
        audit: Some(("suspend", QUEUED_SUSPENDED)),
        in_readme: false,
        warning: None,
    },
    // The queue label excuses nothing by itself: the Job Kueue unsuspends is left to its
    // queue only when its LocalQueue exists; without it, it is gated like any workload
    // (team ml-a over its budget); without the grant too, with a warning naming it.
    Case {
        request: "job_kueue_unsuspended.json",
        settings: TEAM,
        session: Some("session_kueue_local_queue_found.yml"),
        denied: None,
        capacity: None,
        audit: Some(("queue", QUEUE_OWNED)),
        in_readme: true,
        warning: None,
    },
    Case {
        request: "job_kueue_unsuspended.json",
        settings: TEAM,
        session: Some("session_kueue_local_queue_missing.yml"),
        denied: Some(QUEUE_NOT_OWNED_DENIED),
        capacity: Some(BELOW),
        audit: Some(("queue", QUEUE_NOT_OWNED)),
        in_readme: false,
        warning: None,
    },
    Case {
        request: "job_kueue_unsuspended.json",
        settings: TEAM,
        session: Some("session_kueue_local_queue_not_granted.yml"),
        denied: Some(QUEUE_NOT_OWNED_DENIED),
        capacity: Some(BELOW),
        audit: Some((
            "host-error",
            "Callback evaluation failure: Policy has not been granted access to Kubernetes kueue.x-k8s.io/v1beta1/LocalQueue resources. The violation has been reported.",
        )),
        in_readme: false,
        warning: Some(QUEUE_NOT_GRANTED),
    },
    // A 16-GPU pod on a pool of 8-GPU nodes with 40 GPUs free: never schedulable.
    Case {
        request: "pod_a100_16gpu.json",
        settings: S,
        session: Some("session_a100_8gpu_nodes.yml"),
        denied: Some(BIGGER_THAN_NODES),
        capacity: Some(
            "a100: nvidia.com/gpu used 24 + incoming 16 = 40 of 64 allocatable (62.5%), threshold 90%, fits",
        ),
        audit: Some(("pool", "a100")),
        in_readme: true,
        warning: None,
    },
    // Fragmentation: room in the pool (11 free), no node with 4 free: warn (default) or deny.
    Case {
        request: "deployment_a100_1x4.json",
        settings: S,
        session: Some("session_a100_fragmented.yml"),
        denied: None,
        capacity: Some(FRAGMENTED_CAPACITY),
        audit: Some(("fragmentation", FRAGMENTED_AUDIT)),
        in_readme: false,
        warning: Some(FRAGMENTED_WARNING),
    },
    Case {
        request: "deployment_a100_1x4.json",
        settings: "settings_fragmentation_deny.yml",
        session: Some("session_a100_fragmented.yml"),
        denied: Some(FRAGMENTED_DENIED),
        capacity: Some(FRAGMENTED_CAPACITY),
        audit: None,
        in_readme: true,
        warning: None,
    },
    // Alternatives: the first with room is named; or none has room.
    Case {
        request: "deployment_a100_4x2.json",
        settings: "settings_alternatives.yml",
        session: Some("session_alternatives_batch_room.yml"),
        denied: Some(ALTERNATIVE_ROOM),
        capacity: Some(
            "a100: nvidia.com/gpu used 50 + incoming 8 = 58 of 64 allocatable (90.6%), threshold 90%, over",
        ),
        audit: Some((
            "alternatives",
            "a100: Pool batch has room for 20 nvidia.com/gpu.",
        )),
        in_readme: true,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: "settings_alternatives.yml",
        session: Some("session_alternatives_none.yml"),
        denied: Some(ALTERNATIVE_NONE),
        capacity: Some(
            "a100: nvidia.com/gpu used 50 + incoming 8 = 58 of 64 allocatable (90.6%), threshold 90%, over",
        ),
        audit: None,
        in_readme: true,
        warning: None,
    },
    // A threshold by schedule window: peak is open all week in this fixture, so the
    // module, reading the host's clock, always picks it (80% instead of 90%).
    Case {
        request: "deployment_a100_4x2.json",
        settings: "settings_peak.yml",
        session: Some("session_a100_below.yml"),
        denied: Some(PEAK),
        capacity: Some(
            "a100: nvidia.com/gpu used 40 + incoming 8 = 48 of 56 allocatable (85.7%), threshold 80% in window peak, over",
        ),
        audit: Some(("pool", "a100")),
        in_readme: true,
        warning: None,
    },
    // Exceptions: the over-threshold Deployment excused, then named expired in the denial.
    Case {
        request: "deployment_a100_4x2.json",
        settings: "settings_exceptions.yml",
        session: Some("session_a100_over.yml"),
        denied: None,
        capacity: None,
        audit: Some(("exception", EXCEPTION_AUDIT)),
        in_readme: false,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: "settings_exceptions_expired.yml",
        session: Some("session_a100_over.yml"),
        denied: Some(EXCEPTION_EXPIRED),
        capacity: Some(
            "a100: nvidia.com/gpu used 50 + incoming 8 = 58 of 64 allocatable (90.6%), threshold 90%, over",
        ),
        audit: None,
        in_readme: false,
        warning: None,
    },
    // Namespace ResourceQuotas: over, within (exactly at it), scoped to a PriorityClass (counts the
    // a100-high Deployment, not one without a class), a scale-up, with the pool over too, not
    // granted (warned), a limits.<gpu> key Kubernetes never counts.
    Case {
        request: "deployment_a100_4x2.json",
        settings: NQ,
        session: Some("session_ns_quota_over.yml"),
        denied: Some(NS_QUOTA_OVER),
        capacity: Some(BELOW),
        audit: Some((
            "quota",
            "namespace ml-serving: gpu-quota: requests.nvidia.com/gpu used 12 + incoming 8 = 20 of 16, over",
        )),
        in_readme: true,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: NQ,
        session: Some("session_ns_quota_within.yml"),
        denied: None,
        capacity: Some(BELOW),
        audit: Some((
            "quota",
            "namespace ml-serving: gpu-quota: requests.nvidia.com/gpu used 8 + incoming 8 = 16 of 16, fits",
        )),
        in_readme: false,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2_priority.json",
        settings: NQ,
        session: Some("session_ns_quota_priority.yml"),
        denied: Some(NS_QUOTA_PRIORITY),
        capacity: Some(BELOW),
        audit: None,
        in_readme: false,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: NQ,
        session: Some("session_ns_quota_priority.yml"),
        denied: None,
        capacity: Some(BELOW),
        audit: Some((
            "quota",
            "namespace ml-serving: 1 ResourceQuota, none counts this workload's GPUs",
        )),
        in_readme: false,
        warning: None,
    },
    Case {
        request: "deployment_scale_up.json",
        settings: NQ,
        session: Some("session_ns_quota_scale_over.yml"),
        denied: Some(NS_QUOTA_OVER),
        capacity: Some(BELOW),
        audit: None,
        in_readme: true,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: NQ,
        session: Some("session_ns_quota_and_pool_over.yml"),
        denied: Some(
            "pool a100: nvidia.com/gpu would be 58 of 64 allocatable (90.6%) with this workload's 8 (50 in use), above the 90% threshold (room for 7 more). Wait for capacity, lower replicas, or target another pool. namespace ml-serving: ResourceQuota gpu-quota would hold 20 of its 16 requests.nvidia.com/gpu (12 used + 8 incoming): 2 of the 4 incoming replicas (2 nvidia.com/gpu each) fit. Lower replicas, free GPUs in the namespace, or ask for a larger quota.",
        ),
        capacity: Some(
            "a100: nvidia.com/gpu used 50 + incoming 8 = 58 of 64 allocatable (90.6%), threshold 90%, over",
        ),
        audit: None,
        in_readme: false,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: NQ,
        session: Some("session_ns_quota_not_granted.yml"),
        denied: None,
        capacity: Some(BELOW),
        audit: Some(("quota", "namespace ml-serving: not checked")),
        in_readme: false,
        warning: Some(NS_QUOTA_NOT_GRANTED),
    },
    // Defaults safe to upgrade into: the check on by default warns until it is granted;
    // switched on explicitly it fails closed; granted, it checks as usual.
    Case {
        request: "deployment_a100_4x2.json",
        settings: NQ_DEFAULT,
        session: Some("session_ns_quota_not_granted.yml"),
        denied: None,
        capacity: Some(BELOW),
        audit: Some(("quota", "namespace ml-serving: not checked")),
        in_readme: true,
        warning: Some(NS_QUOTA_NOT_GRANTED_BY_DEFAULT),
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: NQ_EXPLICIT,
        session: Some("session_ns_quota_not_granted.yml"),
        denied: Some(NS_QUOTA_NOT_GRANTED_EXPLICIT),
        capacity: Some("namespace ml-serving: its ResourceQuotas: not checked"),
        audit: Some((
            "host-error",
            "Callback evaluation failure: Policy has not been granted access to Kubernetes v1/ResourceQuota resources. The violation has been reported.",
        )),
        in_readme: false,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: NQ_DEFAULT,
        session: Some("session_ns_quota_within.yml"),
        denied: None,
        capacity: Some(BELOW),
        audit: Some((
            "quota",
            "namespace ml-serving: gpu-quota: requests.nvidia.com/gpu used 8 + incoming 8 = 16 of 16, fits",
        )),
        in_readme: false,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: NQ,
        session: Some("session_ns_quota_limits_key.yml"),
        denied: None,
        capacity: Some(BELOW),
        audit: Some((
            "quota",
            "namespace ml-serving: 1 ResourceQuota, none counts this workload's GPUs",
        )),
        in_readme: false,
        warning: Some(NS_QUOTA_LIMITS_KEY),
    },
    // Team budgets: over the team's 16 GPUs across three namespaces, over its 8 in pool a100,
    // within both; the budgets ConfigMap found, missing, not granted and malformed.
    Case {
        request: "deployment_a100_4x2.json",
        settings: TEAM,
        session: Some("session_team_over.yml"),
        denied: Some(TEAM_OVER),
        capacity: Some(BELOW),
        audit: Some((
            "team",
            "team ml-a (Namespace label gpu-admission/team; budget in settings; 3 pods): nvidia.com/gpu used 12 + incoming 8 = 20 of 16, over; nvidia.com/gpu in pool a100 used 0 + incoming 8 = 8 of 8, fits",
        )),
        in_readme: true,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: TEAM,
        session: Some("session_team_pool_over.yml"),
        denied: Some(TEAM_POOL_OVER),
        capacity: Some(BELOW),
        audit: None,
        in_readme: true,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: TEAM,
        session: Some("session_team_within.yml"),
        denied: None,
        capacity: Some(BELOW),
        audit: Some((
            "team",
            "team ml-a (Namespace label gpu-admission/team; budget in settings; 3 pods): nvidia.com/gpu used 8 + incoming 8 = 16 of 16, fits; nvidia.com/gpu in pool a100 used 0 + incoming 8 = 8 of 8, fits",
        )),
        in_readme: false,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: TEAM_CM,
        session: Some("session_team_configmap.yml"),
        denied: Some(TEAM_OVER),
        capacity: Some(BELOW),
        audit: Some((
            "team",
            "team ml-a (Namespace label gpu-admission/team; budget in ConfigMap gpu-system/gpu-team-budgets; 3 pods): nvidia.com/gpu used 12 + incoming 8 = 20 of 16, over; nvidia.com/gpu in pool a100 used 0 + incoming 8 = 8 of 8, fits",
        )),
        in_readme: false,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: TEAM_CM,
        session: Some("session_team_configmap_missing.yml"),
        denied: Some(TEAM_CM_MISSING),
        capacity: Some("team budget of namespace ml-serving: not checked"),
        audit: None,
        in_readme: true,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: TEAM_CM,
        session: Some("session_team_configmap_not_granted.yml"),
        denied: Some(TEAM_CM_NOT_GRANTED),
        capacity: Some("team budget of namespace ml-serving: not checked"),
        audit: None,
        in_readme: true,
        warning: None,
    },
    Case {
        request: "deployment_a100_4x2.json",
        settings: TEAM_CM,
        session: Some("session_team_configmap_malformed.yml"),
        denied: Some(TEAM_CM_MALFORMED),
        capacity: None,
        audit: Some(("team", "team budget of namespace ml-serving: not checked")),
        in_readme: true,
        warning: None,
    },
    // KAI Scheduler: 3 pods of gpu-fraction 0.5 are charged ceil(3 x 0.5) = 2 GPUs.
    Case {
        request: "deployment_kai_fraction_3x.json",
        settings: S,
        session: Some("session_a100_below.yml"),
        denied: None,
        capacity: Some(
            "a100: nvidia.com/gpu used 40 + incoming 2 = 42 of 56 allocatable (75.0%), threshold 90%, fits",
        ),
        audit: Some(("pool", "a100")),
        in_readme: false,
        warning: None,
    },
];

#[test]
fn every_request_gives_its_verdict_message_and_annotations() {
    for case in CASES {
        let label = format!(
            "{} with {} and {:?}",
            case.request, case.settings, case.session
        );
        let eval = POLICY.evaluate(case.request, case.settings, case.session);
        let response = &eval.response;
        assert_eq!(
            response.allowed,
            case.denied.is_none(),
            "{label}: {response:?}"
        );
        assert_eq!(response.message(), case.denied, "{label}");
        assert!(
            eval.unconsumed_exchanges.is_empty(),
            "{label}: host calls not made: {:?}",
            eval.unconsumed_exchanges
        );
        if case.session.is_none() {
            assert!(eval.host_calls.is_empty(), "{label}: {:?}", eval.host_calls);
        }
        let audit = response.audit_annotations.clone().unwrap_or_default();
        assert_eq!(
            audit.get("capacity").map(String::as_str),
            case.capacity,
            "{label}: {audit:?}"
        );
        if let Some(warning) = case.warning {
            assert_eq!(
                response.warnings.as_deref(),
                Some(&[warning.to_string()][..]),
                "{label}"
            );
        }
        if let Some((key, value)) = case.audit {
            assert_eq!(
                audit.get(key).map(String::as_str),
                Some(value),
                "{label}: {audit:?}"
            );
        }
        if let Some(message) = case.denied.filter(|_| case.in_readme) {
            assert!(
                readme().contains(message),
                "{label}: README does not quote {message:?}"
            );
        }
    }
}

#[test]
fn every_test_data_request_has_a_case() {
    for name in POLICY.test_data_files() {
        if name.ends_with(".json") {
            assert!(
                CASES.iter().any(|c| c.request == name),
                "{name} has no case"
            );
        }
        if name.starts_with("session_") {
            assert!(
                CASES.iter().any(|c| c.session == Some(name.as_str())),
                "{name} is unused"
            );
        }
    }
}

#[test]
fn host_calls_carry_the_exact_selectors_and_masks() {
    let eval = POLICY.evaluate(
        "deployment_a100_4x2.json",
        S,
        Some("session_a100_below.yml"),
    );
    let payloads: Vec<Value> = eval
        .host_calls
        .iter()
        .map(|c| serde_json::from_str(&c.payload).unwrap())
        .collect();
    assert_eq!(
        eval.host_calls
            .iter()
            .map(|c| c.operation.as_str())
            .collect::<Vec<_>>(),
        vec!["list_resources_all", "list_resources_all"]
    );
    assert_eq!(
        payloads,
        vec![
            serde_json::json!({"api_version": "v1", "kind": "Node",
                "label_selector": "gpu-admission/pool=a100", "field_selector": null,
                "field_masks": ["spec.taints", "spec.unschedulable", "status.allocatable"]}),
            serde_json::json!({"api_version": "v1", "kind": "Pod",
                "label_selector": "gpu-admission/pool=a100",
                "field_selector": "status.phase!=Succeeded,status.phase!=Failed",
                "field_masks": ["spec.containers.resources", "spec.ephemeralContainers.resources",
                                "spec.initContainers.resources", "spec.initContainers.restartPolicy",
                                "spec.nodeName", "spec.resources"]}),
        ]
    );
}

#[test]
fn dra_claims_are_read_first_then_the_pool() {
    let eval = POLICY.evaluate(DRA, Q, Some("session_dra_quotas_found.yml"));
    let calls = eval.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(
        calls[0],
        (
            "get_resource",
            serde_json::json!({"api_version": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "name": "four-gpus", "namespace": "ml-serving", "disable_cache": false,
                "field_masks": ["spec.spec.devices"]})
        )
    );
    assert_eq!(calls[1].0, "list_resources_all");
    assert_eq!(calls[1].1["kind"], "ResourceQuota");
    // Deployed without the DRA grant (the contextAwareResources of an earlier version):
    // denied before the pool is read.
    let old = serde_json::json!({"contextAwareResources": [
        {"apiVersion": "v1", "kind": "Node"}, {"apiVersion": "v1", "kind": "Pod"},
        {"apiVersion": "v1", "kind": "ResourceQuota"}]});
    let request = POLICY.request(DRA);
    let eval = POLICY
        .module()
        .with_context_aware_access(ContextAwareAccess::from_metadata(Some(&old)))
        .evaluate(
            &request,
            &POLICY.settings(Q),
            Some(POLICY.session("session_dra_quotas_found.yml")),
        )
        .unwrap();
    assert!(!eval.response.allowed);
    assert!(
        eval.response
            .message()
            .unwrap()
            .starts_with("the capacity gate cannot count the GPUs of this workload, so it cannot admit it: spec.template.spec: resource claim 'gpus' (ResourceClaimTemplate four-gpus) cannot be read (Host error: Policy has not been granted access to Kubernetes resource.k8s.io/v1/ResourceClaimTemplate resources."),
        "{:?}",
        eval.response
    );
    assert_eq!(eval.host_calls.len(), 1);
}

#[test]
fn scale_reads_the_deployment_then_the_pool() {
    let eval = POLICY.evaluate(
        "deployment_scale_up.json",
        S,
        Some("session_scale_a100_over.yml"),
    );
    assert_eq!(
        eval.host_calls
            .iter()
            .map(|c| c.operation.as_str())
            .collect::<Vec<_>>(),
        vec!["get_resource", "list_resources_all", "list_resources_all"]
    );
    let audit = eval.response.audit_annotations.unwrap_or_default();
    assert!(audit["capacity"].contains("incoming 8 "), "{audit:?}");
}

#[test]
fn a_karpenter_pool_reads_its_nodes_then_its_node_pool_then_its_pods() {
    let eval = POLICY.evaluate(
        "deployment_a100_4x2.json",
        "settings_karpenter.yml",
        Some("session_karpenter_zero_nodes.yml"),
    );
    let calls = eval.calls();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert_eq!(calls[0].1["kind"], "Node");
    assert_eq!(
        calls[1],
        (
            "get_resource",
            serde_json::json!({"api_version": "karpenter.sh/v1", "kind": "NodePool",
                "name": "gpu-a100", "namespace": null, "disable_cache": false,
                "field_masks": ["spec.limits"]})
        )
    );
    assert_eq!(calls[2].1["kind"], "Pod");
}

#[test]
fn without_node_pool_in_context_aware_resources_a_karpenter_pool_fails_closed() {
    // The contextAwareResources of a policy deployed before karpenterNodePool existed.
    let old = serde_json::json!({"contextAwareResources": [
        {"apiVersion": "v1", "kind": "Node"}, {"apiVersion": "v1", "kind": "Pod"}]});
    let request = POLICY.request("deployment_a100_4x2.json");
    let response = POLICY
        .module()
        .with_context_aware_access(ContextAwareAccess::from_metadata(Some(&old)))
        .validate(
            &request,
            &POLICY.settings("settings_karpenter.yml"),
            Some(POLICY.session("session_karpenter_zero_nodes.yml")),
        )
        .unwrap();
    assert!(!response.allowed);
    assert_eq!(response.message(), Some(KARPENTER_NOT_GRANTED));
}

#[test]
fn pods_bigger_than_every_node_are_denied_before_any_warning_and_whatever_unreadable_cluster() {
    // unreadableCluster is about cluster reads; a pod no node can hold is denied all the same.
    let request = POLICY.request("pod_a100_16gpu.json");
    let eval = POLICY
        .module()
        .evaluate(
            &request,
            &POLICY.settings("settings_fail_open.yml"),
            Some(POLICY.session("session_a100_8gpu_nodes.yml")),
        )
        .unwrap();
    assert_eq!(eval.response.message(), Some(BIGGER_THAN_NODES));
}

#[test]
fn quota_mode_makes_one_host_call_with_the_exact_selector_and_masks() {
    let eval = POLICY.evaluate(
        "deployment_a100_4x2_priority.json",
        Q,
        Some("session_quotas_found.yml"),
    );
    let calls = eval.calls();
    assert_eq!(
        calls,
        vec![(
            "list_resources_all",
            serde_json::json!({"api_version": "v1", "kind": "ResourceQuota",
                "label_selector": "gpu-admission/pool=a100", "field_selector": null,
                "field_masks": ["spec.hard", "spec.scopeSelector", "spec.scopes", "status.used"]})
        )]
    );
}

/// The quota the denial asks for, read back from its message.
fn quota_to_create(message: &str) -> Value {
    let manifest = message
        .split_once("Create it: ")
        .and_then(|(_, rest)| rest.split_once(" (spec.hard"))
        .map(|(manifest, _)| manifest)
        .unwrap_or_else(|| panic!("no manifest in {message:?}"));
    serde_yaml::from_str(manifest).unwrap_or_else(|e| panic!("{manifest}: {e}"))
}

/// A replay session answering pool `pool`'s quota query with `quotas`, each given a
/// `status.used` of 0 GPUs (as the quota controller sets it on an empty namespace).
fn quota_session(pool: &str, quotas: &[Value]) -> ReplaySession {
    let items: Vec<Value> = quotas
        .iter()
        .map(|q| {
            let mut q = q.clone();
            q["status"] = serde_json::json!({"used": {"requests.nvidia.com/gpu": "0"}});
            q
        })
        .collect();
    let payload = serde_json::json!({"apiVersion": "v1", "kind": "ResourceQuotaList",
        "metadata": {"resourceVersion": "1"}, "items": items});
    let yaml = format!(
        "- type: Exchange\n  request: |\n    !KubernetesListResourceAll\n    api_version: v1\n    kind: ResourceQuota\n    label_selector: 'gpu-admission/pool={pool}'\n    field_selector: null\n    field_masks:\n    - spec.hard\n    - spec.scopeSelector\n    - spec.scopes\n    - status.used\n  response:\n    type: Success\n    payload: {}\n",
        serde_json::to_string(&payload.to_string()).unwrap()
    );
    ReplaySession::from_yaml_str(&yaml).unwrap_or_else(|e| panic!("{e:#}"))
}

#[test]
fn the_quota_a_denial_asks_for_makes_the_request_countable() {
    let denied = POLICY.evaluate(
        "deployment_a100_4x2_priority.json",
        Q,
        Some("session_quotas_none.yml"),
    );
    let created = quota_to_create(denied.response.message().unwrap());
    assert_eq!(created["kind"], "ResourceQuota");
    assert_eq!(created["metadata"]["namespace"], "ml-serving");
    assert_eq!(created["metadata"]["labels"]["gpu-admission/pool"], "a100");
    assert_eq!(created["spec"]["hard"]["requests.nvidia.com/gpu"], "64");
    let request = POLICY.request("deployment_a100_4x2_priority.json");
    let eval = POLICY
        .module()
        .evaluate(
            &request,
            &POLICY.settings(Q),
            Some(quota_session("a100", &[created])),
        )
        .unwrap();
    assert!(eval.response.allowed, "{:?}", eval.response);
    assert_eq!(
        eval.response.audit_annotations.unwrap_or_default()["capacity"],
        "a100: nvidia.com/gpu used 0 from 1 ResourceQuota + incoming 8 = 8 of capacity 64 declared in settings (12.5%), threshold 90%, fits"
    );
}

#[test]
fn without_resource_quota_in_context_aware_resources_quota_mode_fails_closed() {
    // The contextAwareResources of a policy deployed before usage: quotas existed.
    let old = serde_json::json!({"contextAwareResources": [
        {"apiVersion": "v1", "kind": "Node"}, {"apiVersion": "v1", "kind": "Pod"}]});
    let request = POLICY.request("deployment_a100_4x2_priority.json");
    let response = POLICY
        .module()
        .with_context_aware_access(ContextAwareAccess::from_metadata(Some(&old)))
        .validate(
            &request,
            &POLICY.settings(Q),
            Some(POLICY.session("session_quotas_found.yml")),
        )
        .unwrap();
    assert!(!response.allowed);
    assert_eq!(
        response.message(),
        Some(
            "pool a100: cannot list v1/ResourceQuota: not granted to this policy: add {apiVersion: v1, kind: ResourceQuota} to the ClusterAdmissionPolicy's contextAwareResources. The GPU capacity gate denies what it cannot check (unreadableCluster: deny); the host's error is in the audit annotation host-error."
        )
    );
}

#[test]
fn unreadable_cluster_warn_accepts_with_a_warning() {
    let eval = POLICY.evaluate(
        "deployment_a100_4x2.json",
        "settings_fail_open.yml",
        Some("session_a100_nodes_not_granted.yml"),
    );
    assert_eq!(
        eval.response.warnings,
        Some(vec!["pool a100: GPU capacity was not checked: cannot list v1/Node: not granted to this policy: add {apiVersion: v1, kind: Node} to the ClusterAdmissionPolicy's contextAwareResources (accepted because unreadableCluster is warn)".to_string()])
    );
}

#[test]
fn without_the_context_aware_grant_the_gate_fails_closed() {
    // What policy-server does when the ClusterAdmissionPolicy lists no contextAwareResources.
    let request = POLICY.request("deployment_a100_4x2.json");
    let response = POLICY.ungranted(&request, &POLICY.settings(S), "session_a100_below.yml");
    assert!(!response.allowed);
    assert_eq!(response.message(), Some(NOT_GRANTED));
}

#[test]
fn settings_validation() {
    let p = POLICY.module();
    POLICY.assert_valid_settings(&[
        "settings.yml",
        "settings_fail_open.yml",
        "settings_fail_open_old_spelling.yml",
        "settings_charge_all.yml",
        "settings_quotas.yml",
        "settings_static_ceiling.yml",
        "settings_karpenter.yml",
        "settings_cluster_autoscaler.yml",
        "settings_fragmentation_deny.yml",
        "settings_no_surge.yml",
        "settings_alternatives.yml",
        "settings_peak.yml",
        "settings_exceptions.yml",
        "settings_exceptions_expired.yml",
    ]);
    let cases = [
        (
            POLICY.settings("settings_invalid.yml"),
            "pools[1].name: 'a100' is already the name of pools[0]; pool names must be unique",
        ),
        (
            POLICY.settings("settings_invalid_threshold.yml"),
            "pools[0].thresholdPercent: must be between 1 and 100 (got 120)",
        ),
        (
            serde_json::json!({}),
            "pools: define at least one pool, e.g. {name: a100, nodeSelector: {matchLabels: {gpu-admission/pool: a100}}}; without pools the gate has nothing to measure",
        ),
        (
            serde_json::json!({"pools": [{"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}},
                "thresholds": [{"window": "peak", "thresholdPercent": 80}]}]}),
            "pools[0].thresholds[0].window: 'peak' names no schedule; define it under schedules",
        ),
        (
            serde_json::json!({"pools": [{"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}},
                "maxAllocatable": {"nvidia.com/gpu": 64}, "karpenterNodePool": "gpu-a100"}]}),
            "pools[0].karpenterNodePool: the pool already has a ceiling in pools[0].maxAllocatable; give one ceiling per pool",
        ),
        (
            serde_json::json!({"pools": [{"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}},
                "alternatives": ["batch"]}]}),
            "pools[0].alternatives[0]: 'batch' names no pool; use one of the other pools (there are none)",
        ),
    ];
    for (s, message) in cases {
        let v = p.validate_settings(&s).unwrap();
        assert!(!v.valid);
        assert_eq!(v.message.as_deref(), Some(message));
    }
    let typo = p
        .validate_settings(&serde_json::json!({"pools": [], "failopen": true}))
        .unwrap();
    assert!(!typo.valid);
    assert!(typo.message.unwrap().contains("unknown field `failopen`"));
}

fn readme() -> &'static str {
    static README: OnceLock<String> = OnceLock::new();
    README
        .get_or_init(|| std::fs::read_to_string(POLICY.dir().join("README.md")).unwrap_or_default())
}

#[test]
fn example_manifest_matches_the_metadata_and_its_settings_are_valid() {
    let (docs, metadata) = checked_example(&POLICY.module(), &POLICY.dir());
    let cap = &docs[0];
    // Every kind the policy reads is granted to the ServiceAccount (get, list, watch; get for
    // NodePools); the DRA claims, read with get only, by deploy/policy-server.yaml for every
    // policy.
    let dra_role = deploy_dra_role();
    for resource in metadata["contextAwareResources"].as_array().unwrap() {
        let (group, kind, plural) = rbac_names(resource);
        // The team budgets ConfigMap is read only with teamBudgetsConfigMap, granted then
        // by a Role in its namespace (the README says how).
        if kind == "ConfigMap" {
            assert!(
                cap["spec"]["settings"]["teamBudgetsConfigMap"].is_null(),
                "the example reads a budgets ConfigMap: grant it"
            );
            continue;
        }
        let (role, verbs): (&Value, &[&str]) = match (group, kind) {
            ("resource.k8s.io", _) => (&dra_role, &["get"]),
            // NodePools, LocalQueues and Namespaces are only read with get_resource.
            ("karpenter.sh", _) | ("kueue.x-k8s.io", _) | ("", "Namespace") => (&docs[1], &["get"]),
            _ => (&docs[1], &["get", "list", "watch"]),
        };
        assert_granted(role, group, &plural, verbs);
    }
}

/// The documents of `examples/resource-quotas.yaml`.
fn example_quotas() -> Vec<Value> {
    yaml_documents(POLICY.dir().join("examples/resource-quotas.yaml"))
}

#[test]
fn the_example_quotas_count_the_example_quota_pool() {
    // The example's pool with usage: quotas, and its quotas beside it.
    let cap = &yaml_documents(POLICY.dir().join("examples/cluster-admission-policy.yaml"))[0];
    // The pool's quotas only: the namespace quota and team budget checks are tested above.
    let mut settings = cap["spec"]["settings"].clone();
    settings["checkNamespaceQuotas"] = Value::from(false);
    settings.as_object_mut().unwrap().remove("teamBudgets");
    let settings = &settings;
    let pool = settings["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["usage"] == "quotas")
        .expect("the example has a pool with usage: quotas");
    let name = pool["name"].as_str().unwrap();
    let docs = example_quotas();
    let classes: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "PriorityClass")
        .map(|d| &d["metadata"]["name"])
        .collect();
    assert_eq!(
        classes,
        pool["priorityClasses"]
            .as_array()
            .unwrap()
            .iter()
            .collect::<Vec<_>>()
    );
    let quotas: Vec<Value> = docs
        .iter()
        .filter(|d| d["kind"] == "ResourceQuota")
        .cloned()
        .collect();
    assert!(quotas.len() >= 2, "{quotas:?}");
    let class = classes[0].as_str().unwrap();
    // A GPU Deployment of that pool in each quota's namespace is counted (no set-up denial).
    for quota in &quotas {
        let namespace = quota["metadata"]["namespace"].as_str().unwrap();
        let mut request = POLICY.request("deployment_a100_4x2_priority.json");
        request["namespace"] = Value::from(namespace);
        let template = &mut request["object"]["spec"]["template"];
        template["metadata"]["labels"]["gpu-admission/pool"] = Value::from(name);
        template["spec"]["nodeSelector"] = serde_json::json!({"gpu-admission/pool": name});
        template["spec"]["priorityClassName"] = Value::from(class);
        let eval = POLICY
            .module()
            .evaluate(&request, settings, Some(quota_session(name, &quotas)))
            .unwrap();
        assert!(eval.response.allowed, "{namespace}: {:?}", eval.response);
        assert_eq!(
            eval.response.audit_annotations.unwrap_or_default()["capacity"],
            format!(
                "{name}: nvidia.com/gpu used 0 from {} ResourceQuotas + incoming 8 = 8 of capacity 64 declared in settings (12.5%), threshold 85%, fits",
                quotas.len()
            )
        );
    }
}

#[test]
fn metadata_version_matches_the_crate() {
    assert_metadata_version_matches_the_crate(&POLICY.dir());
}

#[test]
fn the_exception_fixture_is_renewed_in_time() {
    assert_more_than_30_days_ahead(
        days_from_civil(2027, 9, 28) * 86_400,
        "test_data/settings_exceptions.yml: the exception ends 2027-09-27, in less than 30 days; move its expires forward (at most maxExceptionDays from today) and EXCEPTION_AUDIT with it",
    );
}

#[test]
fn an_excused_denial_is_kept_in_the_audit_and_warned_about_in_its_last_week() {
    let exception = DatedException::new(
        "settings_exceptions.yml",
        "llm-a100-launch",
        "serving-team@example.com",
    );
    let until = |days: i64| exception.until(POLICY, days);
    let request = POLICY.request("deployment_a100_4x2.json");
    let session = || Some(POLICY.session("session_a100_over.yml"));
    let month = POLICY
        .module()
        .validate(&request, &until(30), session())
        .unwrap();
    assert!(month.allowed && month.warnings.is_none(), "{month:?}");
    let audit = month.audit_annotations.clone().unwrap_or_default();
    assert_eq!(audit.get("excused").map(String::as_str), Some(OVER));
    assert_eq!(audit.get("exception").cloned(), Some(exception.audit(30)));
    let soon = POLICY
        .module()
        .validate(&request, &until(2), session())
        .unwrap();
    assert!(soon.allowed);
    exception.last_week_warning(soon.warnings, 2);
    // Another workload of the namespace, which the selector does not match, is still denied.
    let mut other = request.clone();
    other["object"]["spec"]["template"]["metadata"]["labels"]["app"] =
        serde_json::json!("llm-other");
    assert!(
        !POLICY
            .module()
            .validate(&other, &until(30), session())
            .unwrap()
            .allowed
    );
}
