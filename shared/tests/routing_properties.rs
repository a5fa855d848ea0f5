//! Property tests of the routing rules: routing is idempotent (a routed object
//! routes to itself, without a patch or a denial), and `evaluate` never panics, whatever
//! the object. Settings are generated too: several disjoint pools, steering by node
//! selector and/or required node affinity, tolerations, priority classes, with or without
//! a default pool. (Run natively; the unit tests also run in wasm.)
#![cfg(not(target_arch = "wasm32"))]

mod json_gen;

use json_gen::json_tree;

use gpu_rules::admission::{AdmissionRequest, ValidateSettings, Verdict};
use gpu_rules::policies::Routing;
use gpu_rules::policy::Policy;
use gpu_rules::routing::{Checked, Settings};

/// Settings the strategies generate, checked: they are valid.
fn checked(settings: &Settings) -> Box<Checked> {
    Routing::check(Box::new(settings.clone())).expect("generated settings are valid")
}

/// The rules without a cluster: these requests name no DRA claim. The request handed over
/// as the waPC glue hands it (the object changed in place) gets the same verdict.
fn evaluate(request: &AdmissionRequest, settings: &Settings) -> Verdict {
    let cluster = gpu_rules::cluster::NoCluster;
    let settings = checked(settings);
    let verdict = Routing::evaluate(request, &settings, &cluster);
    let owned = Routing::evaluate_owned(request.clone(), &settings, &cluster);
    assert_eq!(owned, verdict, "handed over and borrowed");
    verdict
}
use gpu_rules::workload::presets;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{Map, Value, json};

/// Pools are told apart by this label's value, so they are disjoint by construction.
const TYPE_KEY: &str = "workload-type";
const POOL_NAMES: [&str; 4] = ["batch", "interactive", "training", "serving"];
const NODE_POOL_KEY: &str = "gpu-admission/node-pool";
const PRODUCT_KEY: &str = "nvidia.com/gpu.product";
const PRODUCTS: [&str; 4] = [
    "NVIDIA-L4",
    "NVIDIA-A10G",
    "NVIDIA-H100-80GB-HBM3",
    "NVIDIA-A100-SXM4-80GB",
];
const NAMESPACES: [&str; 4] = ["team-a", "ml-x", "serving", "default"];
const PRIORITY_CLASSES: [&str; 4] = [
    "batch-prio",
    "interactive-prio",
    "shared-high",
    "system-cluster-critical",
];

fn pick<T: Clone + std::fmt::Debug + 'static>(items: &[T]) -> impl Strategy<Value = T> + use<T> {
    prop::sample::select(items.to_vec())
}

fn products() -> impl Strategy<Value = Vec<&'static str>> {
    prop::sample::subsequence(PRODUCTS.to_vec(), 1..=3)
}

/// A toleration as a pool or a workload may give it, named after `pool`.
fn toleration(pool: &'static str) -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(
            json!({"key": "dedicated", "operator": "Equal", "value": pool, "effect": "NoSchedule"})
        ),
        Just(json!({"key": "dedicated", "value": pool})),
        Just(json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})),
        Just(json!({"key": format!("pool-{pool}"), "operator": "Exists"})),
        Just(
            json!({"key": "preemptible", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
        ),
        Just(json!({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"})),
    ]
}

/// The required node affinity a pool may add: 1 to 3 requirements on different keys
/// (or the same key, without contradiction).
fn pool_requirements() -> impl Strategy<Value = Vec<Value>> {
    (
        prop::sample::subsequence(vec![0u8, 1, 2, 3], 1..=3),
        products(),
    )
        .prop_map(|(which, p)| {
            which
                .into_iter()
                .map(|i| match i {
                    0 => json!({"key": PRODUCT_KEY, "operator": "In", "values": p}),
                    1 => json!({"key": "nvidia.com/gpu.present", "operator": "Exists"}),
                    2 => json!({"key": PRODUCT_KEY, "operator": "NotIn", "values": ["Tesla-T4"]}),
                    _ => json!({"key": "gpu-generation", "operator": "Gt", "values": ["7"]}),
                })
                .collect()
        })
}

fn pool(name: &'static str) -> impl Strategy<Value = Value> {
    (
        // How it steers: 0 nodeSelector, 1 affinity, 2 both.
        0u8..3,
        pool_requirements(),
        prop::collection::vec(toleration(name), 0..3),
        prop::option::of(Just(format!("{name}-prio"))),
        prop::option::of(Just(vec!["shared-high"])),
        prop::option::of(pick(&[json!(["ml-*"]), json!(["team-a", "serving"])])),
        prop::option::of(pick(&[
            json!([{"key": "team", "operator": "In", "values": ["a", "b"]}]),
            json!([{"key": "tier", "operator": "Exists"}]),
            json!([{"key": "tier", "operator": "DoesNotExist"}]),
        ])),
    )
        .prop_map(
            move |(steer, affinity, tolerations, priority, allowed, namespaces, expressions)| {
                let mut selector = json!({"matchLabels": {TYPE_KEY: name}});
                if let Some(e) = expressions {
                    selector["matchExpressions"] = e;
                }
                let mut p = json!({"name": name, "selector": selector, "tolerations": tolerations});
                if steer != 1 {
                    p["nodeSelector"] = json!({NODE_POOL_KEY: name});
                }
                if steer != 0 {
                    p["requiredNodeAffinity"] = json!(affinity);
                }
                if let Some(pc) = priority {
                    p["priorityClassName"] = json!(pc);
                }
                if let Some(a) = allowed {
                    p["allowedPriorityClasses"] = json!(a);
                }
                if let Some(ns) = namespaces {
                    p["namespaces"] = ns;
                }
                p
            },
        )
}

/// Valid settings: 1 to 4 disjoint pools, a default pool or none.
fn settings() -> impl Strategy<Value = Settings> {
    prop::sample::subsequence(POOL_NAMES.to_vec(), 1..=4)
        .prop_flat_map(|names| {
            let count = names.len();
            let pools: Vec<_> = names.into_iter().map(pool).collect();
            (
                pools,
                prop::option::weighted(0.6, 0..count),
                pick(&["gpu-admission/pool", "example.com/pool"]),
            )
        })
        .prop_map(|(pools, default, label_key)| {
            let default_pool = default.map(|i| pools[i]["name"].clone());
            let s: Settings = serde_json::from_value(json!({
                "pools": pools,
                "defaultPool": default_pool,
                "poolLabelKey": label_key,
                "extraGpuResources": ["example.com/tpu"],
                "customKinds": presets::all(),
            }))
            .unwrap();
            if let Err(e) = s.validate() {
                panic!("generated settings are invalid: {e}\n{:?}", s.pools);
            }
            s
        })
}

fn gpu_resources() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => (1u32..=8).prop_map(|n| json!({"limits": {"nvidia.com/gpu": n.to_string()}})),
        1 => Just(json!({"limits": {"amd.com/gpu": "1"}})),
        1 => Just(json!({"requests": {"nvidia.com/mig-1g.10gb": "2"}, "limits": {"nvidia.com/mig-1g.10gb": "2"}})),
        1 => Just(json!({"limits": {"example.com/tpu": "4"}})),
        1 => Just(json!({"limits": {"cpu": "2", "memory": "8Gi"}})),
    ]
}

/// Pod template labels: sometimes matching a pool, sometimes none, sometimes with a pool
/// label set by hand (right or wrong).
fn labels() -> impl Strategy<Value = Value> {
    (
        prop::option::weighted(
            0.85,
            pick(&["batch", "interactive", "training", "serving", "other"]),
        ),
        prop::option::of(pick(&["a", "b", "c"])),
        prop::option::of(Just("gold")),
        prop::option::weighted(0.15, pick(&POOL_NAMES)),
    )
        .prop_map(|(kind, team, tier, pool)| {
            let mut m = Map::new();
            m.insert("app".into(), json!("llm"));
            if let Some(k) = kind {
                m.insert(TYPE_KEY.into(), json!(k));
            }
            if let Some(t) = team {
                m.insert("team".into(), json!(t));
            }
            if let Some(t) = tier {
                m.insert("tier".into(), json!(t));
            }
            if let Some(p) = pool {
                m.insert("gpu-admission/pool".into(), json!(p));
            }
            Value::Object(m)
        })
}

/// A requirement in a workload's own required node affinity term.
fn own_requirement() -> impl Strategy<Value = Value> {
    prop_oneof![
        products().prop_map(|p| json!({"key": PRODUCT_KEY, "operator": "In", "values": p})),
        pick(&POOL_NAMES)
            .prop_map(|n| json!({"key": NODE_POOL_KEY, "operator": "In", "values": [n]})),
        Just(json!({"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b"]})),
        Just(json!({"key": "nvidia.com/gpu.present", "operator": "Exists"})),
        Just(json!({"key": "gpu-generation", "operator": "Gt", "values": ["8"]})),
    ]
}

fn pod_spec() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(gpu_resources(), 1..3),
        prop::option::weighted(0.3, gpu_resources()),
        prop::option::weighted(
            0.4,
            prop_oneof![
                pick(&POOL_NAMES).prop_map(|n| json!({NODE_POOL_KEY: n})),
                Just(json!({"topology.kubernetes.io/zone": "a"})),
                pick(&PRODUCTS).prop_map(|p| json!({PRODUCT_KEY: p})),
            ],
        ),
        prop_oneof![
            2 => Just(Vec::new()),
            1 => prop::collection::vec(pick(&POOL_NAMES).prop_flat_map(toleration), 1..3),
        ],
        prop::option::weighted(
            0.3,
            prop::collection::vec(prop::collection::vec(own_requirement(), 1..3), 0..3),
        ),
        prop::option::weighted(0.25, pick(&PRIORITY_CLASSES)),
    )
        .prop_map(|(resources, init, node_selector, tolerations, terms, priority)| {
            let containers: Vec<Value> = resources
                .into_iter()
                .enumerate()
                .map(|(i, r)| json!({"name": format!("c{i}"), "image": "vllm", "resources": r}))
                .collect();
            let mut spec = json!({"containers": containers});
            if let Some(r) = init {
                spec["initContainers"] = json!([{"name": "init", "image": "busybox", "resources": r}]);
            }
            if let Some(ns) = node_selector {
                spec["nodeSelector"] = ns;
            }
            if !tolerations.is_empty() {
                spec["tolerations"] = json!(tolerations);
            }
            if let Some(terms) = terms {
                let terms: Vec<Value> = terms.into_iter().map(|e| json!({"matchExpressions": e})).collect();
                spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}});
            }
            if let Some(pc) = priority {
                spec["priorityClassName"] = json!(pc);
            }
            spec
        })
}

fn template() -> impl Strategy<Value = Value> {
    (labels(), pod_spec())
        .prop_map(|(labels, spec)| json!({"metadata": {"labels": labels}, "spec": spec}))
}

/// A GPU workload of one of the routed kinds, built-in or (RayCluster) custom, with
/// generated templates.
fn workload() -> impl Strategy<Value = Value> {
    let kinds = pick(&[
        "Pod",
        "Deployment",
        "Job",
        "CronJob",
        "StatefulSet",
        "RayCluster",
    ]);
    (kinds, template(), prop::collection::vec(template(), 0..3)).prop_map(|(kind, t, workers)| {
        let meta = json!({"name": "w", "namespace": "ns"});
        match kind {
            "Pod" => json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "w", "namespace": "ns", "labels": t["metadata"]["labels"]},
                "spec": t["spec"]}),
            "Deployment" | "StatefulSet" => json!({"apiVersion": "apps/v1", "kind": kind, "metadata": meta,
                "spec": {"replicas": 2, "template": t}}),
            "Job" => json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {"template": t}}),
            "CronJob" => json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta,
                "spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": t}}}}),
            _ => {
                let workers: Vec<Value> = workers
                    .into_iter()
                    .map(|w| json!({"groupName": "g", "replicas": 2, "template": w}))
                    .collect();
                json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta,
                    "spec": {"headGroupSpec": {"template": t}, "workerGroupSpecs": workers}})
            }
        }
    })
}

fn request(operation: &str, namespace: &str, object: &Value, old: &Value) -> AdmissionRequest {
    serde_json::from_value(json!({
        "uid": "u", "operation": operation, "namespace": namespace,
        "kind": {"group": "", "version": "v1", "kind": object.get("kind").cloned().unwrap_or(Value::Null)},
        "object": object, "oldObject": old,
    }))
    .unwrap()
}

fn create(settings: &Settings, namespace: &str, object: &Value) -> Verdict {
    evaluate(
        &request("CREATE", namespace, object, &Value::Null),
        settings,
    )
}

/// Invariants of every verdict.
fn well_formed(v: &Verdict) -> Result<(), TestCaseError> {
    prop_assert_eq!(v.allowed, v.message.is_none(), "{:?}", v);
    if let Some(m) = &v.message {
        prop_assert!(!m.is_empty());
    }
    prop_assert!(
        v.allowed || v.mutated_object.is_none(),
        "a denial carries no patch: {:?}",
        v
    );
    Ok(())
}

/// A routed object is a fixed point: evaluating it again (as a CREATE, and as an UPDATE
/// from itself) accepts without a patch.
fn routes_to_itself(
    settings: &Settings,
    namespace: &str,
    routed: &Value,
) -> Result<(), TestCaseError> {
    let again = create(settings, namespace, routed);
    well_formed(&again)?;
    prop_assert!(
        again.allowed,
        "the routed object is denied: {:?}\n{:#}",
        again.message,
        routed
    );
    prop_assert_eq!(
        &again.mutated_object,
        &None,
        "the routed object is changed again:\n{:#}",
        routed
    );
    let update = evaluate(&request("UPDATE", namespace, routed, routed), settings);
    prop_assert!(
        update.allowed && update.mutated_object.is_none(),
        "UPDATE of the routed object: {:?}",
        update
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn routing_is_idempotent(settings in settings(), object in workload(), namespace in pick(&NAMESPACES)) {
        let first = create(&settings, namespace, &object);
        well_formed(&first)?;
        if let (true, Some(routed)) = (first.allowed, &first.mutated_object) {
            prop_assert_ne!(routed, &object, "a patch that changes nothing");
            routes_to_itself(&settings, namespace, routed)?;
        }
    }
}

/// Arbitrary JSON, a few levels deep, with the keys routing reads.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1e3f64..1e3).prop_map(|f| json!(f)),
        "[a-zA-Z0-9./*-]{0,12}".prop_map(Value::String),
        pick(&[
            "Exists",
            "Equal",
            "In",
            "NotIn",
            "Gt",
            "NoSchedule",
            "batch",
            "1",
            "nvidia.com/gpu"
        ])
        .prop_map(|s| json!(s)),
    ];
    json_tree(
        leaf,
        &[
            "workload-type",
            "gpu-admission/pool",
            "nodeSelector",
            "tolerations",
            "key",
            "operator",
            "value",
            "effect",
            "affinity",
            "nodeAffinity",
            "requiredDuringSchedulingIgnoredDuringExecution",
            "nodeSelectorTerms",
            "matchExpressions",
            "values",
            "priorityClassName",
            "headGroupSpec",
            "ownerReferences",
        ],
        4,
        5,
    )
}

/// Where a generated workload gets an arbitrary value in the mutation test.
const POINTERS: [&str; 12] = [
    "/spec",
    "/spec/template",
    "/spec/template/metadata",
    "/spec/template/metadata/labels",
    "/spec/template/spec",
    "/spec/template/spec/nodeSelector",
    "/spec/template/spec/tolerations",
    "/spec/template/spec/affinity",
    "/spec/template/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms",
    "/spec/template/spec/priorityClassName",
    "/metadata",
    "/metadata/labels",
];

/// `object` with `value` at `pointer`, when its parent is an object.
fn replaced(mut object: Value, pointer: &str, value: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap_or(("", pointer));
    if let Some(Value::Object(map)) = object.pointer_mut(parent) {
        map.insert(key.to_string(), value);
    }
    object
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Arbitrary objects: a verdict, never a panic.
    #[test]
    fn routing_never_panics_on_arbitrary_objects(
        settings in settings(),
        kind in pick(&[("v1", "Pod"), ("apps/v1", "Deployment"), ("batch/v1", "CronJob"), ("ray.io/v1", "RayCluster"), ("x.io/v1", "Thing")]),
        spec in any_json(),
        metadata in any_json(),
        whole in any_json(),
        operation in pick(&["CREATE", "UPDATE"]),
    ) {
        let object = json!({"apiVersion": kind.0, "kind": kind.1, "metadata": metadata, "spec": spec});
        for (o, old) in [(&object, &whole), (&whole, &object)] {
            let v = evaluate(&request(operation, "ml-x", o, old), &settings);
            well_formed(&v)?;
        }
    }

    /// Generated workloads with one field replaced by arbitrary JSON: a verdict, never a
    /// panic, and whatever is routed routes to itself.
    #[test]
    fn routing_never_panics_on_damaged_workloads(
        settings in settings(),
        object in workload(),
        pointer in pick(&POINTERS),
        value in any_json(),
        namespace in pick(&NAMESPACES),
    ) {
        let damaged = replaced(object, pointer, value);
        let v = create(&settings, namespace, &damaged);
        well_formed(&v)?;
        if let (true, Some(routed)) = (v.allowed, &v.mutated_object) {
            routes_to_itself(&settings, namespace, routed)?;
        }
    }
}

/// The generators exercise the property: among generated cases, many are routed (patched),
/// some denied and some accepted as they are.
#[test]
fn generated_cases_cover_every_outcome() {
    let mut runner = TestRunner::deterministic();
    let strategy = (settings(), workload(), pick(&NAMESPACES));
    let (mut patched, mut denied, mut unchanged) = (0, 0, 0);
    for _ in 0..400 {
        let (settings, object, namespace) = strategy.new_tree(&mut runner).unwrap().current();
        let v = create(&settings, namespace, &object);
        match (v.allowed, v.mutated_object.is_some()) {
            (true, true) => patched += 1,
            (true, false) => unchanged += 1,
            (false, _) => denied += 1,
        }
    }
    assert!(
        patched >= 120 && denied >= 40 && unchanged >= 10,
        "patched {patched}, denied {denied}, unchanged {unchanged} of 400"
    );
}

/// Settings where the second pool lends to the first during a generated window.
fn lending_settings() -> impl Strategy<Value = Settings> {
    (
        settings(),
        0u16..24,
        1u16..24,
        prop::sample::subsequence(vec!["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"], 1..=7),
    )
        .prop_filter("two pools", |(s, ..)| s.pools.len() >= 2)
        .prop_map(|(s, from, length, days)| {
            let mut v = serde_json::to_value(&s).unwrap();
            let borrower = v["pools"][0]["name"].clone();
            v["schedules"] = json!({"w": {"timeZone": "Europe/Berlin", "windows": [{
                "days": days,
                "from": format!("{from:02}:00"),
                "to": format!("{:02}:30", (from + length) % 24)}]}});
            v["pools"][1]["lendTo"] = json!([{"pool": borrower, "window": "w"}]);
            v["pools"][1]["guestPriorityClassName"] = json!("guest-low");
            let s: Settings = serde_json::from_value(v).unwrap();
            s.validate().unwrap();
            s
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A workload routed at any time (lent or not) is left alone when it is updated at
    /// any other time: routing a routed guest is a no-op.
    #[test]
    fn routed_guests_stay_put(
        settings in lending_settings(),
        object in workload(),
        namespace in pick(&NAMESPACES),
        t1 in 1_780_000_000i64..1_800_000_000,
        t2 in 1_780_000_000i64..1_800_000_000,
    ) {
        let settings = checked(&settings);
        let at = |r: &AdmissionRequest, t: i64| Routing::evaluate_at(
            r, &settings, &gpu_rules::cluster::NoCluster, &gpu_rules::clock::FixedClock(t));
        let first = at(&request("CREATE", namespace, &object, &Value::Null), t1);
        well_formed(&first)?;
        if let (true, Some(routed)) = (first.allowed, &first.mutated_object) {
            let update = at(&request("UPDATE", namespace, routed, routed), t2);
            prop_assert!(
                update.allowed && update.mutated_object.is_none(),
                "UPDATE of the routed object at another time: {:?}\n{:#}", update, routed
            );
        }
    }
}

/// A cluster whose Namespaces carry `team` in their label `team` (none: no label).
struct Namespaces(Option<&'static str>);

impl gpu_rules::cluster::Cluster for Namespaces {
    fn call(&self, request: &gpu_rules::cluster::ClusterRequest) -> Result<Vec<u8>, String> {
        match request {
            gpu_rules::cluster::ClusterRequest::Get(g) if g.kind == "Namespace" => {
                let labels = match self.0 {
                    Some(t) => json!({"team": t}),
                    None => json!({}),
                };
                Ok(json!({"metadata": {"name": g.name, "labels": labels}})
                    .to_string()
                    .into_bytes())
            }
            other => Err(format!("unexpected host call {other:?}")),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// With teamLabelKey: a routed object is a fixed point under its namespace's team, and
    /// after the namespace has moved to another team (or left its team), one UPDATE
    /// settles it: the result is a fixed point under the new team.
    #[test]
    fn team_labels_settle_after_the_namespace_moves(
        settings in settings(),
        object in workload(),
        namespace in pick(&NAMESPACES),
        before in prop::option::of(pick(&["ml-a", "ml-b"])),
        after in prop::option::of(pick(&["ml-a", "ml-b"])),
    ) {
        let mut settings = settings;
        settings.team_label_key = Some("team".into());
        let settings = checked(&settings);
        let eval = |r: &AdmissionRequest, team| {
            Routing::evaluate(r, &settings, &Namespaces(team))
        };
        let quiet = |v: &Verdict| v.allowed && v.mutated_object.is_none();
        let first = eval(&request("CREATE", namespace, &object, &Value::Null), before);
        well_formed(&first)?;
        if let (true, Some(routed)) = (first.allowed, &first.mutated_object) {
            let again = eval(&request("CREATE", namespace, routed, &Value::Null), before);
            prop_assert!(quiet(&again), "routed again: {:?}\n{:#}", again, routed);
            let update = eval(&request("UPDATE", namespace, routed, routed), before);
            prop_assert!(quiet(&update), "UPDATE of the routed object: {:?}", update);
            let moved = eval(&request("UPDATE", namespace, routed, routed), after);
            well_formed(&moved)?;
            prop_assert!(moved.allowed, "after the move: {:?}\n{:#}", moved.message, routed);
            let settled = moved.mutated_object.clone().unwrap_or_else(|| routed.clone());
            let again = eval(&request("UPDATE", namespace, &settled, &settled), after);
            prop_assert!(quiet(&again), "not settled after the move: {:?}\n{:#}", again, settled);
        }
    }
}
