//! Property tests of the capacity gate: the decision is monotonic in demand and in what the
//! pool already holds, both in [`decide`] and through `evaluate` with a fake cluster serving
//! generated Node and Pod lists, or ResourceQuota lists (`usage: quotas`); where the numbers
//! come from never changes the decision. With ceilings (judged on max(allocatable,
//! ceiling)) and per-node accounting (pods bound to nodes, fragmentation warn or deny) the
//! decision stays monotonic in demand, existing use and the ceiling; a suspended workload
//! is never charged more than its unsuspended form. A namespace ResourceQuota's decision is
//! `used + incoming <= hard`, monotonic in demand and in existing use. (Run natively; the
//! unit tests also run in wasm.)
#![cfg(not(target_arch = "wasm32"))]

use gpu_rules::admission::{AdmissionRequest, Verdict};
use gpu_rules::capacity::decision::decide;
use gpu_rules::capacity::{CapacitySource, PoolSnapshot, Settings, UsageSource};

use gpu_rules::cluster::{Cluster, ClusterRequest};
use gpu_rules::gpu::GpuCounts;
use proptest::prelude::*;
use serde_json::{Value, json};

mod pool_gen;
use pool_gen::{
    FakeCluster, GPU, Node, POOL_KEY, RESOURCES, counts, create_deployment, demand, evaluate,
    nodes, pool,
};

fn snapshot() -> impl Strategy<Value = PoolSnapshot> {
    (counts(256), counts(300), 0u64..40).prop_map(|(allocatable, used, pods)| PoolSnapshot {
        nodes: 4,
        schedulable_nodes: 4,
        allocatable,
        pods,
        used,
        ..PoolSnapshot::default()
    })
}

fn allowed(s: &PoolSnapshot, d: &GpuCounts, threshold: u32) -> bool {
    let decision = decide(s, d, &pool(threshold));
    assert_eq!(
        decision.allowed(),
        decision.denial().is_none(),
        "allowed() and denial() disagree: {decision:?}"
    );
    decision.allowed()
}

fn plus(counts: &GpuCounts, resource: &str, n: u64) -> GpuCounts {
    let mut out = counts.clone();
    *out.entry(resource.to_string()).or_insert(0) += n;
    out
}

/// A pool of one schedulable node with `allocatable` GPUs, `used` of them by one pod.
fn one_node_pool(allocatable: u64, used: u64) -> PoolSnapshot {
    PoolSnapshot {
        nodes: 1,
        schedulable_nodes: 1,
        allocatable: [(GPU.to_string(), allocatable)].into(),
        pods: 1,
        used: [(GPU.to_string(), used)].into(),
        ..PoolSnapshot::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// One more GPU of any demanded resource never turns a denial into an acceptance (and
    /// so an acceptance at d + 1 implies one at d).
    #[test]
    fn decision_is_monotonic_in_demand(
        s in snapshot(), d in demand(), threshold in 1u32..=100, which in 0usize..3, extra in 1u64..8,
    ) {
        let resource = d.keys().nth(which % d.len()).unwrap().clone();
        let more = plus(&d, &resource, extra);
        let (at_d, at_more) = (allowed(&s, &d, threshold), allowed(&s, &more, threshold));
        prop_assert!(at_d || !at_more, "denied at {d:?} but accepted at {more:?} ({s:?}, {threshold}%)");
    }

    /// A demand for one more resource kind never turns a denial into an acceptance.
    #[test]
    fn decision_is_monotonic_in_demanded_resources(
        s in snapshot(), d in demand(), threshold in 1u32..=100, which in 0usize..3, n in 1u64..8,
    ) {
        let more = plus(&d, RESOURCES[which], n);
        prop_assert!(allowed(&s, &d, threshold) || !allowed(&s, &more, threshold));
    }

    /// More GPUs already held by the pool's pods never turn a denial into an acceptance.
    #[test]
    fn decision_is_monotonic_in_existing_allocation(
        s in snapshot(), d in demand(), threshold in 1u32..=100, which in 0usize..3, extra in 1u64..16,
    ) {
        let mut fuller = s.clone();
        fuller.used = plus(&s.used, RESOURCES[which], extra);
        fuller.pods += 1;
        prop_assert!(
            allowed(&s, &d, threshold) || !allowed(&fuller, &d, threshold),
            "denied with {:?} in use but accepted with {:?}", s.used, fuller.used
        );
    }

    /// More allocatable GPUs, or a higher threshold, never turn an acceptance into a denial.
    #[test]
    fn decision_is_monotonic_in_capacity_and_threshold(
        s in snapshot(), d in demand(), threshold in 1u32..100, which in 0usize..3, extra in 1u64..16,
    ) {
        let mut bigger = s.clone();
        bigger.allocatable = plus(&s.allocatable, RESOURCES[which], extra);
        let before = allowed(&s, &d, threshold);
        prop_assert!(!before || allowed(&bigger, &d, threshold));
        prop_assert!(!before || allowed(&s, &d, threshold + 1));
    }

    /// The limit is exact: `floor(threshold% x allocatable)` GPUs in use fit, one more
    /// does not (random sampling rarely lands on the boundary itself).
    #[test]
    fn exactly_at_the_limit_fits_and_one_more_does_not(
        allocatable in 1u64..5000, threshold in 1u32..=100, used_share in 0u64..=100,
    ) {
        let limit = u64::from(threshold) * allocatable / 100;
        let used = limit * used_share / 100;
        let s = one_node_pool(allocatable, used);
        let demand = |n: u64| -> GpuCounts { [(GPU.to_string(), n)].into() };
        if limit > used {
            prop_assert!(allowed(&s, &demand(limit - used), threshold), "{} + {} of limit {}", used, limit - used, limit);
        }
        prop_assert!(!allowed(&s, &demand(limit - used + 1), threshold));
    }

    /// Where the numbers come from (Nodes or declared, Pods or quotas) changes the messages,
    /// never the decision.
    #[test]
    fn the_sources_of_the_numbers_do_not_change_the_decision(
        s in snapshot(), d in demand(), threshold in 1u32..=100, quotas in 0u64..500,
    ) {
        let mut quoted = s.clone();
        quoted.used_from = UsageSource::Quotas(quotas);
        quoted.allocatable_from = CapacitySource::Declared;
        let (plain, from_quotas) = (decide(&s, &d, &pool(threshold)), decide(&quoted, &d, &pool(threshold)));
        prop_assert_eq!(plain.allowed(), from_quotas.allowed());
        prop_assert_eq!(plain.denial().is_none(), from_quotas.denial().is_none());
    }

    /// The check is exact: a resource fits iff its incoming GPUs fit in the room the
    /// denial quotes, and a denial never quotes a percentage at or below its threshold.
    #[test]
    fn room_and_percent_agree_with_the_decision(
        allocatable in 0u64..5000, used in 0u64..6000, incoming in 1u64..500, threshold in 1u32..=100,
    ) {
        let s = one_node_pool(allocatable, used);
        let decision = decide(&s, &[(GPU.to_string(), incoming)].into(), &pool(threshold));
        let check = &decision.checks[0];
        prop_assert_eq!(check.tally.fits(), incoming <= check.tally.room());
        prop_assert_eq!(check.tally.fits(), decision.allowed());
        if !check.tally.fits() && allocatable > 0 {
            let text = check.percent_after();
            let shown: f64 = text.trim_end_matches('%').parse().unwrap();
            prop_assert!(shown > f64::from(threshold), "{} quoted against {}%", text, threshold);
            let room = format!("room for {} more", check.tally.room());
            prop_assert!(decision.denial().unwrap().contains(&room));
        }
    }
}

/// One generated Pod of the pool: the GPUs of each app container and of one init container.
#[derive(Debug, Clone)]
struct PoolPod {
    containers: Vec<u64>,
    init: u64,
}

impl PoolPod {
    /// The effective request (Kubernetes' rule: max of the apps' sum and any init container).
    fn effective(&self) -> u64 {
        self.containers.iter().sum::<u64>().max(self.init)
    }

    fn to_json(&self) -> Value {
        let limits = |n: u64| json!({"limits": {GPU: n.to_string()}});
        let containers: Vec<Value> = self
            .containers
            .iter()
            .map(|n| json!({"name": "c", "resources": limits(*n)}))
            .collect();
        json!({"metadata": {"name": "p", "labels": {POOL_KEY: "a100"}},
               "spec": {"containers": containers,
                        "initContainers": [{"name": "i", "resources": limits(self.init)}]},
               "status": {"phase": "Running"}})
    }
}

fn pool_pods() -> impl Strategy<Value = Vec<PoolPod>> {
    prop::collection::vec(
        (prop::collection::vec(0u64..=4, 1..3), 0u64..=6)
            .prop_map(|(containers, init)| PoolPod { containers, init }),
        0..10,
    )
}

fn cluster(nodes: &[Node], pods: &[PoolPod]) -> FakeCluster {
    let node_items: Vec<Value> = nodes
        .iter()
        .map(|n| {
            json!({"metadata": {"name": "n", "labels": {POOL_KEY: "a100"}},
                   "spec": {"unschedulable": n.cordoned},
                   "status": {"allocatable": {GPU: n.gpus.to_string(), "cpu": "64"}}})
        })
        .collect();
    let pod_items: Vec<Value> = pods.iter().map(PoolPod::to_json).collect();
    FakeCluster::new([
        (
            "v1/Node",
            json!({"apiVersion": "v1", "kind": "NodeList", "items": node_items}).to_string(),
        ),
        (
            "v1/Pod",
            json!({"apiVersion": "v1", "kind": "PodList", "items": pod_items}).to_string(),
        ),
        ("v1/ResourceQuota", String::new()),
    ])
}

fn gate_settings(threshold: u32) -> Settings {
    serde_json::from_value(json!({"checkNamespaceQuotas": false, "pools": [
        {"name": "a100", "nodeSelector": {"matchLabels": {POOL_KEY: "a100"}}, "thresholdPercent": threshold}
    ]}))
    .unwrap()
}

fn gate(
    threshold: u32,
    nodes: &[Node],
    pods: &[PoolPod],
    replicas: u64,
    gpus_per_pod: u64,
) -> Verdict {
    evaluate(
        &create_deployment(replicas, gpus_per_pod),
        &gate_settings(threshold),
        &cluster(nodes, pods),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Through `evaluate`: the verdict is exactly `(used + replicas x GPUs) x 100 <=
    /// threshold x allocatable` on the schedulable nodes, and a pod no larger than the
    /// largest of them (a larger one can never be scheduled), so it is monotonic in
    /// replicas, in GPUs per pod and in the pods already in the pool.
    #[test]
    fn gate_is_exact_and_monotonic(
        threshold in 1u32..=100,
        nodes in nodes(),
        pods in pool_pods(),
        replicas in 0u64..6,
        gpus_per_pod in 1u64..=4,
        newcomer in (prop::collection::vec(0u64..=4, 1..3), 0u64..=6),
    ) {
        let allocatable: u64 = nodes.iter().filter(|n| !n.cordoned).map(|n| n.gpus).sum();
        let used: u64 = pods.iter().map(PoolPod::effective).sum();
        let v = gate(threshold, &nodes, &pods, replicas, gpus_per_pod);
        let largest = nodes.iter().filter(|n| !n.cordoned).map(|n| n.gpus).max().unwrap_or(0);
        let demand = replicas * gpus_per_pod;
        let expected = demand == 0
            || (u128::from(used + demand) * 100 <= u128::from(threshold) * u128::from(allocatable)
                && gpus_per_pod <= largest);
        prop_assert_eq!(v.allowed, expected, "{:?}", v);
        prop_assert_eq!(v.allowed, v.message.is_none());

        // At the boundary: exactly the room left, in pods of one GPU, fits; one more does not.
        let limit = u64::from(threshold) * allocatable / 100;
        if allocatable > 0 && used < limit {
            prop_assert!(gate(threshold, &nodes, &pods, limit - used, 1).allowed);
            prop_assert!(!gate(threshold, &nodes, &pods, limit - used + 1, 1).allowed);
        }

        let more_replicas = gate(threshold, &nodes, &pods, replicas + 1, gpus_per_pod);
        let more_gpus = gate(threshold, &nodes, &pods, replicas, gpus_per_pod + 1);
        let mut fuller = pods.clone();
        fuller.push(PoolPod { containers: newcomer.0, init: newcomer.1 });
        let busier = gate(threshold, &nodes, &fuller, replicas, gpus_per_pod);
        for (what, other) in [("one more replica", &more_replicas), ("one more GPU per pod", &more_gpus), ("one more pod in the pool", &busier)] {
            prop_assert!(v.allowed || !other.allowed, "denied, but accepted with {}: {:?}", what, other);
        }
    }
}

/// The pool's ResourceQuotas, one per namespace (the request's, `ml`, first), each holding
/// that many GPUs, scoped to the pool's class as the gate requires.
fn quota_list(used: &[u64]) -> String {
    let items: Vec<Value> = used
        .iter()
        .enumerate()
        .map(|(i, n)| {
            json!({"metadata": {"name": "gpu-a100", "namespace": if i == 0 { "ml".to_string() } else { format!("team-{i}") },
                                "labels": {POOL_KEY: "a100"}},
                   "spec": {"hard": {"requests.nvidia.com/gpu": "100000"},
                            "scopeSelector": {"matchExpressions": [
                                {"scopeName": "PriorityClass", "operator": "In", "values": ["a100-high"]}]}},
                   "status": {"used": {"requests.nvidia.com/gpu": n.to_string()}}})
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "ResourceQuotaList", "items": items}).to_string()
}

fn quota_gate(
    threshold: u32,
    capacity: u64,
    used: &[u64],
    replicas: u64,
    gpus_per_pod: u64,
) -> Verdict {
    let settings: Settings = serde_json::from_value(json!({"checkNamespaceQuotas": false, "usage": "quotas", "pools": [
        {"name": "a100", "capacity": {GPU: capacity}, "priorityClasses": ["a100-high"], "thresholdPercent": threshold}
    ]}))
    .unwrap();
    let mut request = create_deployment(replicas, gpus_per_pod);
    if let Some(spec) = request
        .object
        .pointer_mut("/spec/template/spec")
        .and_then(Value::as_object_mut)
    {
        spec.insert("priorityClassName".into(), json!("a100-high"));
    }
    let cluster = FakeCluster::new([
        ("v1/Node", String::new()),
        ("v1/Pod", String::new()),
        ("v1/ResourceQuota", quota_list(used)),
    ]);
    evaluate(&request, &settings, &cluster)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// With `usage: quotas` and declared capacity, through `evaluate`: the verdict is exactly
    /// `(sum of the quotas' used + replicas x GPUs) x 100 <= threshold x capacity`, so more GPUs
    /// counted by any quota, or one more namespace's quota holding GPUs, never turn a denial
    /// into an acceptance, and more replicas never turn a denial into an acceptance either.
    #[test]
    fn quota_gate_is_exact_and_monotonic_in_quota_usage(
        threshold in 1u32..=100,
        capacity in 0u64..256,
        used in prop::collection::vec(0u64..64, 1..8),
        replicas in 1u64..6,
        gpus_per_pod in 1u64..=4,
        which in 0usize..8,
        extra in 1u64..32,
    ) {
        let v = quota_gate(threshold, capacity, &used, replicas, gpus_per_pod);
        let total: u64 = used.iter().sum();
        let expected = u128::from(total + replicas * gpus_per_pod) * 100
            <= u128::from(threshold) * u128::from(capacity);
        prop_assert_eq!(v.allowed, expected, "{:?}", v);
        prop_assert_eq!(v.allowed, v.message.is_none());
        let capacity_note = v.audit_annotations.get("capacity").cloned().unwrap_or_default();
        let quotas_text = if used.len() == 1 { "1 ResourceQuota".to_string() } else { format!("{} ResourceQuotas", used.len()) };
        prop_assert!(capacity_note.contains(&format!("used {total} from {quotas_text} + ")), "{}", capacity_note);

        let mut busier = used.clone();
        let i = which % busier.len();
        busier[i] += extra;
        let mut more_namespaces = used.clone();
        more_namespaces.push(extra);
        for (what, other) in [
            ("more GPUs in one quota", quota_gate(threshold, capacity, &busier, replicas, gpus_per_pod)),
            ("another namespace's quota", quota_gate(threshold, capacity, &more_namespaces, replicas, gpus_per_pod)),
            ("one more replica", quota_gate(threshold, capacity, &used, replicas + 1, gpus_per_pod)),
        ] {
            prop_assert!(v.allowed || !other.allowed, "denied, but accepted with {}: {:?}", what, other);
        }
    }
}

// -- ceilings, per-node checks, suspended workloads -------------------------------------

use gpu_rules::capacity::{Ceiling, CeilingSource};
use gpu_rules::pools::reserve::InForce;
use pool_gen::allowed_in;

fn ceiling() -> impl Strategy<Value = Option<Ceiling>> {
    prop::option::of(counts(400).prop_map(|gpus| Ceiling {
        gpus,
        source: CeilingSource::MaxAllocatable,
        node_shape: None,
    }))
}

fn allowed_with(s: &PoolSnapshot, d: &GpuCounts, threshold: u32) -> bool {
    allowed_in(s, d, threshold, InForce::default(), None)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// With a ceiling: more demand or more GPUs in use never turn a denial into an
    /// acceptance; more allocatable, a higher ceiling or a higher threshold never turn an
    /// acceptance into a denial; and the pool is judged on max(allocatable, ceiling).
    #[test]
    fn decision_with_a_ceiling_is_monotonic(
        s in snapshot(), c in ceiling(), d in demand(), threshold in 1u32..100, which in 0usize..3, extra in 1u64..16,
    ) {
        let s = PoolSnapshot { ceiling: c, ..s };
        let resource = RESOURCES[which];
        let base = allowed_with(&s, &d, threshold);
        prop_assert!(base || !allowed_with(&s, &plus(&d, resource, extra), threshold));
        let fuller = PoolSnapshot { used: plus(&s.used, resource, extra), ..s.clone() };
        prop_assert!(base || !allowed_with(&fuller, &d, threshold));
        let bigger = PoolSnapshot { allocatable: plus(&s.allocatable, resource, extra), ..s.clone() };
        prop_assert!(!base || allowed_with(&bigger, &d, threshold));
        let mut higher = s.clone();
        if let Some(c) = higher.ceiling.as_mut() {
            c.gpus = plus(&c.gpus, resource, extra);
        }
        prop_assert!(!base || allowed_with(&higher, &d, threshold));
        prop_assert!(!base || allowed_with(&s, &d, threshold + 1));
        // Against the larger of the two numbers, exactly.
        let expected = d.iter().all(|(r, n)| {
            let now = s.allocatable.get(r).copied().unwrap_or(0);
            let limit = s.ceiling.as_ref().and_then(|c| c.gpus.get(r)).copied().unwrap_or(0);
            let used = s.used.get(r).copied().unwrap_or(0);
            u128::from(used + n) * 100 <= u128::from(threshold) * u128::from(now.max(limit))
        });
        prop_assert_eq!(base, expected);
    }
}

/// A named pool node and the GPUs its pods hold.
#[derive(Debug, Clone)]
struct BusyNode {
    gpus: u64,
    used: Vec<u64>,
}

fn busy_nodes() -> impl Strategy<Value = Vec<BusyNode>> {
    prop::collection::vec(
        (1u64..=8, prop::collection::vec(0u64..=4, 0..3))
            .prop_map(|(gpus, used)| BusyNode { gpus, used }),
        0..6,
    )
}

/// The gate's Node and Pod lists for `nodes` (pods bound with `spec.nodeName`), and
/// `pending` pods bound to no node; a NodePool answer for `ceiling`.
fn pool_cluster(nodes: &[BusyNode], pending: &[u64], ceiling: u64) -> FakeCluster {
    let node_items: Vec<Value> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| json!({"metadata": {"name": format!("n{i}")}, "status": {"allocatable": {GPU: n.gpus.to_string()}}}))
        .collect();
    let pod = |node: Option<usize>, gpus: u64| {
        let mut spec = json!({"containers": [{"resources": {"limits": {GPU: gpus.to_string()}}}]});
        if let Some(i) = node {
            spec["nodeName"] = json!(format!("n{i}"));
        }
        json!({"metadata": {"name": "p"}, "spec": spec})
    };
    let mut pod_items: Vec<Value> = nodes
        .iter()
        .enumerate()
        .flat_map(|(i, n)| n.used.iter().map(move |g| (i, *g)))
        .map(|(i, g)| pod(Some(i), g))
        .collect();
    pod_items.extend(pending.iter().map(|g| pod(None, *g)));
    FakeCluster::new([
        ("v1/Node", json!({"items": node_items}).to_string()),
        ("v1/Pod", json!({"items": pod_items}).to_string()),
        (
            "karpenter.sh/v1/NodePool",
            json!({"spec": {"limits": {GPU: ceiling.to_string(), "cpu": "1000"}}}).to_string(),
        ),
    ])
}

fn node_gate(
    threshold: u32,
    ceiling: Option<u64>,
    fragmentation: &str,
    cluster: &FakeCluster,
    replicas: u64,
    gpus_per_pod: u64,
) -> Verdict {
    let mut pool = json!({"name": "a100", "nodeSelector": {"matchLabels": {POOL_KEY: "a100"}}, "thresholdPercent": threshold});
    if ceiling.is_some() {
        pool["karpenterNodePool"] = json!("a100");
    }
    let settings: Settings = serde_json::from_value(
        json!({"checkNamespaceQuotas": false, "pools": [pool], "fragmentation": fragmentation}),
    )
    .unwrap();
    evaluate(
        &create_deployment(replicas, gpus_per_pod),
        &settings,
        cluster,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Through `evaluate`, with per-node accounting (pods bound by `spec.nodeName`), a
    /// Karpenter ceiling or none, fragmentation warn or deny: more replicas, more GPUs per
    /// pod, or one more pod on any node never turn a denial into an acceptance; a higher
    /// ceiling never turns an acceptance into a denial. A pod bigger than every node (and
    /// nodes exist) is always denied.
    #[test]
    fn per_node_gate_is_monotonic(
        threshold in 1u32..=100,
        nodes in busy_nodes(),
        pending in prop::collection::vec(0u64..=4, 0..3),
        ceiling in prop::option::of(0u64..80),
        deny in prop::bool::ANY,
        replicas in 1u64..5,
        gpus_per_pod in 1u64..=9,
        which in 0usize..6,
        extra in 1u64..4,
    ) {
        let mode = if deny { "deny" } else { "warn" };
        let cluster = pool_cluster(&nodes, &pending, ceiling.unwrap_or(0));
        let v = node_gate(threshold, ceiling, mode, &cluster, replicas, gpus_per_pod);
        prop_assert_eq!(v.allowed, v.message.is_none());
        if !nodes.is_empty() && nodes.iter().all(|n| n.gpus < gpus_per_pod) {
            prop_assert!(!v.allowed, "bigger than every node, accepted: {:?}", v);
            prop_assert!(v.message.as_deref().unwrap().contains("can never be scheduled"), "{:?}", v);
        }
        let more_replicas = node_gate(threshold, ceiling, mode, &cluster, replicas + 1, gpus_per_pod);
        let more_gpus = node_gate(threshold, ceiling, mode, &cluster, replicas, gpus_per_pod + 1);
        let mut fuller = nodes.clone();
        if !fuller.is_empty() {
            let i = which % fuller.len();
            fuller[i].used.push(extra);
        }
        let busier = node_gate(threshold, ceiling, mode, &pool_cluster(&fuller, &pending, ceiling.unwrap_or(0)), replicas, gpus_per_pod);
        for (what, other) in [("one more replica", &more_replicas), ("one more GPU per pod", &more_gpus), ("one more pod on a node", &busier)] {
            prop_assert!(v.allowed || !other.allowed, "denied, but accepted with {}: {:?} / {:?}", what, v, other);
        }
        if let Some(c) = ceiling {
            let higher = node_gate(threshold, Some(c + extra * 8), mode, &pool_cluster(&nodes, &pending, c + extra * 8), replicas, gpus_per_pod);
            prop_assert!(!v.allowed || higher.allowed, "accepted under ceiling {}, denied under {}: {:?}", c, c + extra * 8, higher);
        }
        // Warn never denies what deny accepts, and deny never accepts what warn denies.
        let other_mode = node_gate(threshold, ceiling, if deny { "warn" } else { "deny" }, &cluster, replicas, gpus_per_pod);
        let (warn, denied) = if deny { (&other_mode, &v) } else { (&v, &other_mode) };
        prop_assert!(warn.allowed || !denied.allowed);
    }
}

/// The GPUs an UPDATE or CREATE of a Job is charged: the `incoming` of the capacity audit
/// annotation (0 when the pool is not checked).
fn charged(v: &Verdict) -> u64 {
    v.audit_annotations
        .get("capacity")
        .and_then(|c| c.split("incoming ").nth(1))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn job(suspend: Option<bool>, parallelism: u64, gpus: u64) -> Value {
    let mut spec = json!({"parallelism": parallelism, "template": {
        "metadata": {"labels": {POOL_KEY: "a100"}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {GPU: gpus.to_string()}}}]}}});
    if let Some(s) = suspend {
        spec["suspend"] = json!(s);
    }
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "ml"}, "spec": spec})
}

fn job_request(new: Value, old: Option<Value>) -> AdmissionRequest {
    let operation = if old.is_some() { "UPDATE" } else { "CREATE" };
    serde_json::from_value(json!({
        "uid": "u", "operation": operation, "namespace": "ml", "name": "train",
        "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "object": new, "oldObject": old.unwrap_or(Value::Null)
    }))
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A suspended Job is never charged more than the same Job unsuspended, at CREATE and
    /// on any UPDATE (from any old Job), and is accepted whenever its unsuspended form is.
    #[test]
    fn a_suspended_workload_is_never_charged_more_than_unsuspended(
        parallelism in 0u64..6,
        gpus in 1u64..=8,
        old in prop::option::of((prop::option::of(prop::bool::ANY), 0u64..6, 1u64..=8)),
        nodes in nodes(),
        pods in pool_pods(),
        threshold in 1u32..=100,
    ) {
        let cluster = cluster(&nodes, &pods);
        let settings = gate_settings(threshold);
        let old = old.map(|(s, p, g)| job(s, p, g));
        let suspended = evaluate(&job_request(job(Some(true), parallelism, gpus), old.clone()), &settings, &cluster);
        for unsuspended in [None, Some(false)] {
            let running = evaluate(&job_request(job(unsuspended, parallelism, gpus), old.clone()), &settings, &cluster);
            prop_assert!(charged(&suspended) <= charged(&running), "{:?} vs {:?}", suspended, running);
            prop_assert!(suspended.allowed || !running.allowed);
        }
        prop_assert_eq!(charged(&suspended), 0);
        prop_assert!(suspended.allowed);
    }
}

/// Answers the namespace's ResourceQuota list only: one quota of `hard` GPUs with `used`
/// of them counted (the pools are declared with capacity and read from no Pods: a
/// Deployment into no pool makes only this call).
struct NamespaceQuotas {
    quotas: String,
}

impl Cluster for NamespaceQuotas {
    fn call(&self, request: &ClusterRequest) -> Result<Vec<u8>, String> {
        match request {
            ClusterRequest::ListInNamespace(l)
                if l.kind == "ResourceQuota" && l.namespace == "ml" =>
            {
                Ok(self.quotas.clone().into_bytes())
            }
            other => Err(format!("unexpected host call {other:?}")),
        }
    }
}

fn namespace_quota(hard: u64, used: u64) -> NamespaceQuotas {
    NamespaceQuotas {
        quotas: json!({"apiVersion": "v1", "kind": "ResourceQuotaList", "items": [
            {"metadata": {"name": "gpus", "namespace": "ml"},
             "spec": {"hard": {format!("requests.{GPU}"): hard.to_string()}},
             "status": {"used": {format!("requests.{GPU}"): used.to_string()}}}]})
        .to_string(),
    }
}

/// A Deployment of `replicas` x `gpus_per_pod` in no pool, judged by its namespace quota.
fn quota_verdict(hard: u64, used: u64, replicas: u64, gpus_per_pod: u64) -> Verdict {
    let settings: Settings = serde_json::from_value(json!({"pools": [
        {"name": "a100", "nodeSelector": {"matchLabels": {POOL_KEY: "a100"}}}
    ]}))
    .unwrap();
    let mut request = create_deployment(replicas, gpus_per_pod);
    request.object["spec"]["template"]["metadata"]["labels"] = json!({"app": "llm"});
    evaluate(&request, &settings, &namespace_quota(hard, used))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The namespace quota decision is `used + incoming <= hard`: exactly at the quota fits
    /// and one more GPU does not, and it is monotonic in demand and in existing use.
    #[test]
    fn the_namespace_quota_decision_is_monotonic_and_exact_at_the_limit(
        hard in 0u64..64,
        used in 0u64..64,
        replicas in 1u64..8,
        gpus_per_pod in 1u64..=8,
    ) {
        let incoming = replicas * gpus_per_pod;
        let v = quota_verdict(hard, used, replicas, gpus_per_pod);
        prop_assert_eq!(v.allowed, used + incoming <= hard, "{:?}", v);
        // More demand (another replica) or more in use is never more allowed.
        prop_assert!(v.allowed || !quota_verdict(hard, used, replicas + 1, gpus_per_pod).allowed);
        prop_assert!(v.allowed || !quota_verdict(hard, used + 1, replicas, gpus_per_pod).allowed);
        if v.allowed {
            prop_assert!(quota_verdict(hard, used.saturating_sub(1), replicas, gpus_per_pod).allowed);
        }
        // At the limit fits; one GPU more in use does not.
        if incoming <= hard {
            let at = hard - incoming;
            prop_assert!(quota_verdict(hard, at, replicas, gpus_per_pod).allowed);
            prop_assert!(!quota_verdict(hard, at + 1, replicas, gpus_per_pod).allowed);
        }
        if !v.allowed {
            let message = v.message.clone().unwrap_or_default();
            let expected = format!("would hold {} of its {hard} requests.{GPU} ({used} used + {incoming} incoming)", used + incoming);
            prop_assert!(message.contains(&expected), "{}", message);
        }
    }
}
