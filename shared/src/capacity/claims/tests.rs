use super::*;
use crate::admission::{AdmissionRequest, Verdict};
use crate::capacity::policy::CapacityGate;
use crate::capacity::queries::pod_query;
use crate::capacity::settings::Settings;
use crate::cluster::fake::Script;
use crate::policy::Policy;
use crate::pools::nodes::node_query;
use crate::testing::{allows_noting, denies, denies_saying, denies_starting, notes};
use serde_json::{Value, json};

const GPU: &str = "nvidia.com/gpu";

/// A pod of the pool in `namespace`, with `limits` GPUs, referencing `claims` by name and
/// `generated` through its status (claims made from templates).
fn pod(namespace: &str, limits: u64, claims: &[&str], generated: &[&str]) -> Value {
    let mut p = json!({
        "metadata": {"name": format!("p-{}", claims.join("-")), "namespace": namespace},
        "spec": {"containers": [{"resources": {"limits": {GPU: limits.to_string()}}}]}
    });
    if !claims.is_empty() {
        p["spec"]["resourceClaims"] = claims
            .iter()
            .map(|c| json!({"name": "gpus", "resourceClaimName": c}))
            .collect();
    }
    if !generated.is_empty() {
        p["spec"]["resourceClaims"] = json!([{"name": "gpus", "resourceClaimTemplateName": "t"}]);
        p["status"] = json!({"resourceClaimStatuses": generated
            .iter()
            .map(|c| json!({"name": "gpus", "resourceClaimName": c}))
            .collect::<Vec<_>>()});
    }
    p
}

fn list(kind: &str, items: Vec<Value>) -> String {
    json!({"apiVersion": "v1", "kind": kind, "metadata": {}, "items": items}).to_string()
}

/// A claim `namespace/name` asking `count` devices of `class` (with `selector`, if any),
/// allocated `allocated` of them (`None`: pending).
fn claim(
    namespace: &str,
    name: &str,
    class: &str,
    selector: Option<&str>,
    allocated: Option<u64>,
) -> Value {
    let mut exactly = json!({"deviceClassName": class, "count": allocated.unwrap_or(1).max(1)});
    if let Some(s) = selector {
        exactly["selectors"] = json!([{"cel": {"expression": s}}]);
    }
    let mut c = json!({
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}
    });
    if let Some(n) = allocated {
        let results: Vec<Value> = (0..n)
            .map(|i| json!({"request": "gpus", "driver": "gpu.nvidia.com", "pool": "node-0", "device": format!("gpu-{i}")}))
            .collect();
        c["status"] = json!({"allocation": {"devices": {"results": results}}});
    }
    c
}

/// GPU counts of (resource, count).
fn gpus(counts: &[(&str, u64)]) -> GpuCounts {
    counts.iter().map(|(r, n)| (r.to_string(), *n)).collect()
}

fn count(pods: &[Value], claims: &[Value]) -> ClaimUse {
    let refs = referenced_claims(list("PodList", pods.to_vec()).as_bytes()).unwrap();
    count_claims(
        list("ResourceClaimList", claims.to_vec()).as_bytes(),
        &refs,
        &DraSettings::default(),
    )
    .unwrap()
}

#[test]
fn pods_reference_claims_by_name_and_through_their_status() {
    let refs = referenced_claims(
        list(
            "PodList",
            vec![
                pod("ml", 0, &["shared"], &[]),
                pod("ml", 0, &["shared"], &[]),
                pod("ml", 0, &[], &["p-0-gpus-x1"]),
                pod("other", 0, &["shared"], &[]),
                pod("ml", 2, &[], &[]),
            ],
        )
        .as_bytes(),
    )
    .unwrap();
    let key = |ns: &str, n: &str| (ns.to_string(), n.to_string());
    assert_eq!(refs.len(), 3, "{refs:?}");
    assert_eq!(refs[&key("ml", "shared")], 2);
    assert_eq!(refs[&key("ml", "p-0-gpus-x1")], 1);
    assert_eq!(refs[&key("other", "shared")], 1, "claims are per namespace");
}

#[test]
fn allocated_claims_count_their_devices_and_pending_ones_nothing() {
    let used = count(
        &[pod("ml", 0, &["a"], &[]), pod("ml", 0, &["b"], &[])],
        &[
            claim("ml", "a", "gpu.nvidia.com", None, Some(4)),
            claim("ml", "b", "gpu.nvidia.com", None, None),
            // Not referenced by the pool's pods.
            claim("ml", "c", "gpu.nvidia.com", None, Some(8)),
            claim("elsewhere", "a", "gpu.nvidia.com", None, Some(8)),
        ],
    );
    assert_eq!(
        used,
        ClaimUse {
            referenced: 2,
            allocated: 1,
            shared: 0,
            gpus: gpus(&[(GPU, 4)]),
        }
    );
    assert_eq!(
        used.audit("a100"),
        "a100: 1 of 2 ResourceClaims of the pool's pods allocated, holding 4 nvidia.com/gpu (1 not allocated, not counted)"
    );
}

#[test]
fn a_claim_shared_by_several_pods_counts_once() {
    let used = count(
        &[
            pod("ml", 0, &["shared"], &[]),
            pod("ml", 0, &["shared"], &[]),
            pod("ml", 0, &["shared"], &[]),
        ],
        &[claim("ml", "shared", "gpu.nvidia.com", None, Some(2))],
    );
    assert_eq!(used.gpus, gpus(&[(GPU, 2)]));
    assert_eq!((used.allocated, used.shared), (1, 1));
    assert_eq!(
        used.audit("a100"),
        "a100: 1 of 1 ResourceClaims of the pool's pods allocated, holding 2 nvidia.com/gpu (1 shared by several pods, counted once)"
    );
}

#[test]
fn devices_count_as_their_request_class_mig_by_profile() {
    let used = count(
        &[pod("ml", 0, &["mig", "nic", "amd"], &[])],
        &[
            claim(
                "ml",
                "mig",
                "mig.nvidia.com",
                Some("device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"),
                Some(2),
            ),
            claim("ml", "nic", "rdma.example.com", None, Some(1)),
            claim("ml", "amd", "gpu.amd.com", None, Some(1)),
        ],
    );
    assert_eq!(
        used.gpus,
        gpus(&[("nvidia.com/mig-3g.40gb", 2), ("amd.com/gpu", 1)]),
        "a NIC is no GPU"
    );
    assert_eq!(used.allocated, 3);
}

#[test]
fn first_available_alternatives_driver_fallback_and_admin_access() {
    let c = json!({
        "metadata": {"name": "alt", "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpus", "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 2},
            {"name": "small", "deviceClassName": "mig.nvidia.com",
             "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}]}
        ]}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpus/small", "driver": "gpu.nvidia.com", "pool": "n", "device": "mig-0"},
            // A request the claim does not name (masked away): its driver decides.
            {"request": "gone", "driver": "gpu.amd.com", "pool": "n", "device": "gpu-1"},
            {"request": "gone", "driver": "dra.example.com", "pool": "n", "device": "fpga-0"},
            {"request": "gpus/big", "driver": "gpu.nvidia.com", "pool": "n", "device": "gpu-0", "adminAccess": true}
        ]}}}
    });
    let used = count(&[pod("ml", 0, &["alt"], &[])], &[c]);
    assert_eq!(
        used.gpus,
        gpus(&[("nvidia.com/mig-1g.10gb", 1), ("amd.com/gpu", 1)])
    );
}

#[test]
fn a_malformed_claim_list_is_an_error_not_a_partial_count() {
    let refs =
        referenced_claims(list("PodList", vec![pod("ml", 0, &["a"], &[])]).as_bytes()).unwrap();
    let bad = json!({"items": [{"metadata": {"name": "a", "namespace": "ml"},
        "status": {"allocation": {"devices": {"results": {"not": "a list"}}}}}]})
    .to_string();
    assert!(count_claims(bad.as_bytes(), &refs, &DraSettings::default()).is_err());
    assert!(count_claims(b"{\"items\": [", &refs, &DraSettings::default()).is_err());
}

#[test]
fn pods_without_claims_make_no_claim_list() {
    let pods = list("PodList", vec![pod("ml", 8, &[], &[])]);
    let used = read(&Script::none(), pods.as_bytes(), &DraSettings::default()).unwrap();
    assert_eq!(used, ClaimUse::default());
}

#[test]
fn the_claim_list_is_read_once_per_decision() {
    let dra = DraSettings::default();
    let answer = list("ResourceClaimList", vec![]);
    let script = Script::new(vec![(claim_query(&dra), Ok(answer.clone()))]);
    let memo = Memo::new(&script);
    assert_eq!(memo.call(&claim_query(&dra)).unwrap(), answer.as_bytes());
    assert_eq!(memo.call(&claim_query(&dra)).unwrap(), answer.as_bytes());
    assert_eq!(*script.calls.borrow(), 1);
}

#[test]
fn the_claim_query_is_masked_to_requests_and_allocation() {
    let ClusterRequest::ListAll(q) = claim_query(&DraSettings::default()) else {
        panic!("a list of every namespace");
    };
    assert_eq!(
        (q.api_version.as_str(), q.kind.as_str()),
        ("resource.k8s.io/v1", "ResourceClaim")
    );
    assert_eq!(q.label_selector, None);
    assert_eq!(
        q.field_masks.unwrap().into_iter().collect::<Vec<_>>(),
        ["spec.devices.requests", "status.allocation.devices.results"]
    );
}

// The gate end to end, with a scripted cluster.

fn settings(count: bool) -> Settings {
    serde_json::from_value(json!({
        "pools": [{"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}}}],
        "checkNamespaceQuotas": false,
        "countDraClaims": count
    }))
    .unwrap()
}

fn nodes(gpus: &[u64]) -> String {
    let items = gpus
        .iter()
        .enumerate()
        .map(|(i, n)| {
            json!({"metadata": {"name": format!("gpu-{i}"), "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}},
                   "status": {"allocatable": {GPU: n.to_string()}}})
        })
        .collect();
    list("NodeList", items)
}

fn deployment_4x2() -> AdmissionRequest {
    serde_json::from_value(json!({
        "uid": "u", "operation": "CREATE", "namespace": "ml", "name": "llm",
        "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "object": {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "llm", "namespace": "ml"},
            "spec": {"replicas": 4, "template": {
                "metadata": {"labels": {"gpu-admission/pool": "a100"}},
                "spec": {"containers": [{"name": "s", "image": "vllm",
                    "resources": {"limits": {GPU: "2"}}}]}}}}
    }))
    .unwrap()
}

fn run(s: &Settings, calls: Vec<(ClusterRequest, Result<String, String>)>) -> Verdict {
    let cluster = Script::new(calls);
    let v = CapacityGate::evaluate(
        &deployment_4x2(),
        &crate::policy::checked::<CapacityGate>(s),
        &cluster,
    );
    assert!(
        cluster.done(),
        "host calls left unmade: {:?}",
        cluster.answers.borrow()
    );
    v
}

/// The calls that read pool a100 of `s` without claims: `node_list`, then `pods`.
fn plain_pool(s: &Settings, node_list: String, pods: Vec<Value>) -> Calls {
    let pool = &s.pools[0];
    vec![
        (node_query(pool), Ok(node_list)),
        (
            pod_query("gpu-admission/pool", pool),
            Ok(list("PodList", pods)),
        ),
    ]
}

/// Pool a100: 8 nodes x 8 GPUs; its 7 pods hold 50 GPUs through claims only (six of 8
/// GPUs, one shared by two pods; one pending claim).
fn all_dra_pool(s: &Settings) -> Vec<(ClusterRequest, Result<String, String>)> {
    let pool = &s.pools[0];
    let mut pods: Vec<Value> = (0..6)
        .map(|i| pod("ml", 0, &[&format!("c{i}")], &[]))
        .collect();
    pods.push(pod("ml", 0, &["c5"], &[])); // shares c5
    pods.push(pod("ml", 0, &[], &["pending-0"]));
    pods.push(pod("ml", 0, &["shared-2"], &[]));
    let mut claims: Vec<Value> = (0..6)
        .map(|i| claim("ml", &format!("c{i}"), "gpu.nvidia.com", None, Some(8)))
        .collect();
    claims.push(claim("ml", "pending-0", "gpu.nvidia.com", None, None));
    claims.push(claim("ml", "shared-2", "gpu.nvidia.com", None, Some(2)));
    vec![
        (node_query(pool), Ok(nodes(&[8; 8]))),
        (
            with_claim_masks(pod_query("gpu-admission/pool", pool)),
            Ok(list("PodList", pods)),
        ),
        (claim_query(&s.dra), Ok(list("ResourceClaimList", claims))),
    ]
}

#[test]
fn a_pool_whose_usage_is_all_dra_claims_is_denied_over_its_threshold() {
    let s = settings(true);
    let v = run(&s, all_dra_pool(&s));
    denies(
        &v,
        "pool a100: nvidia.com/gpu would be 58 of 64 allocatable (90.6%) with this workload's 8 (50 in use), above the 90% threshold (room for 7 more). Wait for capacity, lower replicas, or target another pool.",
    );
    assert_eq!(
        v.audit_annotations["dra-claims"],
        "a100: 7 of 8 ResourceClaims of the pool's pods allocated, holding 50 nvidia.com/gpu (1 shared by several pods, counted once; 1 not allocated, not counted)"
    );
}

#[test]
fn without_the_setting_claims_are_not_read() {
    let s = settings(false);
    let pods: Vec<Value> = (0..6)
        .map(|i| pod("ml", 0, &[&format!("c{i}")], &[]))
        .collect();
    let v = run(&s, plain_pool(&s, nodes(&[8; 8]), pods));
    assert!(v.allowed, "{v:?}");
    assert!(!v.audit_annotations.contains_key("dra-claims"));
}

#[test]
fn a_claim_list_that_cannot_be_read_fails_closed() {
    let s = settings(true);
    let mut calls = all_dra_pool(&s);
    calls[2].1 = Err("Policy has not been granted access to Kubernetes resource.k8s.io/v1/ResourceClaim resources. The violation has been reported.".into());
    denies_starting(
        &run(&s, calls),
        "pool a100: cannot list resource.k8s.io/v1/ResourceClaim: not granted to this policy: add {apiVersion: resource.k8s.io/v1, kind: ResourceClaim}",
    );
}

#[test]
fn a_node_with_gpu_labels_and_no_allocatable_gpu_is_named() {
    let s = settings(false);
    let mut node_list: Value = serde_json::from_str(&nodes(&[8, 8, 0])).unwrap();
    // A node of the pool without GPU labels nor GPUs is no GPU node: not named.
    node_list["items"]
        .as_array_mut()
        .unwrap()
        .push(json!({"metadata": {"name": "cpu-0"}, "status": {"allocatable": {"cpu": "8"}}}));
    let v = run(&s, plain_pool(&s, node_list.to_string(), vec![]));
    assert!(v.allowed, "{v:?}");
    assert_eq!(
        v.warnings,
        [
            "pool a100: GPU nodes with GPU labels but no allocatable GPU (is their device plugin down?), not counted as capacity: gpu-2"
        ]
    );
    assert_eq!(
        v.audit_annotations["capacity"],
        "a100: nvidia.com/gpu used 0 + incoming 8 = 8 of 16 allocatable (50.0%), threshold 90%, fits"
    );
}

/// Host calls and their answers, in order.
type Calls = Vec<(ClusterRequest, Result<String, String>)>;

/// Team ml-a (its Namespace label), 16 GPUs in all and 10 in pool a100; pool a100 (8 x 8)
/// empty. The team's pods: two in pool a100 share claim `big` (8 GPUs, allocated), one in
/// h100 holds claim `h` (4), one outside pools asks for 2 in its limits.
fn team_with_claims(count: bool) -> (Settings, Calls) {
    let mut v = serde_json::to_value(settings(count)).unwrap();
    v["teamBudgets"] = json!({"ml-a": {GPU: 16, "pools": {"a100": 10}}});
    v["pools"].as_array_mut().unwrap().push(
        json!({"name": "h100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "h100"}}}),
    );
    let s: Settings = serde_json::from_value(v).unwrap();
    let labelled = |mut p: Value, pool: Option<&str>| {
        p["metadata"]["labels"] = json!({"gpu-admission/team": "ml-a"});
        if let Some(pool) = pool {
            p["metadata"]["labels"]["gpu-admission/pool"] = json!(pool);
        }
        p
    };
    let team_pods = list(
        "PodList",
        vec![
            labelled(pod("ml", 0, &["big"], &[]), Some("a100")),
            labelled(pod("ml", 0, &["big"], &[]), Some("a100")),
            labelled(pod("ml-prod", 0, &["h"], &[]), Some("h100")),
            labelled(pod("ml-prod", 2, &[], &[]), None),
        ],
    );
    let claims = list(
        "ResourceClaimList",
        vec![
            claim("ml", "big", "gpu.nvidia.com", None, Some(8)),
            claim("ml-prod", "h", "gpu.nvidia.com", None, Some(4)),
        ],
    );
    let mut team_query = crate::capacity::queries::team_pod_query("ml-a");
    let mut pool_pods = pod_query("gpu-admission/pool", &s.pools[0]);
    if count {
        team_query = with_claim_masks(team_query);
        pool_pods = with_claim_masks(pool_pods);
    }
    let mut calls = vec![
        (node_query(&s.pools[0]), Ok(nodes(&[8; 8]))),
        (pool_pods, Ok(list("PodList", vec![]))),
        (
            crate::cluster::namespace_request("ml"),
            Ok(
                json!({"metadata": {"name": "ml", "labels": {"gpu-admission/team": "ml-a"}}})
                    .to_string(),
            ),
        ),
        (team_query, Ok(team_pods)),
    ];
    if count {
        calls.push((claim_query(&s.dra), Ok(claims)));
    }
    (s, calls)
}

#[test]
fn team_budgets_count_the_devices_of_the_teams_claims() {
    // 2 in limits + 8 (claim big, shared: once) + 4 (claim h) = 14 held; 8 of them in a100.
    let (s, calls) = team_with_claims(true);
    let v = run(&s, calls);
    denies_saying(
        &v,
        "team ml-a would hold 22 of its 16 nvidia.com/gpu (14 used + 8 incoming)",
    );
    notes(&v, "team", "used 14 + incoming 8 = 22 of 16, over");
    notes(&v, "team", "used 8 + incoming 8 = 16 of 10, over");
    // Without countDraClaims the claims are not read: 2 held, 0 in a100, and it fits.
    let (s, calls) = team_with_claims(false);
    allows_noting(
        &run(&s, calls),
        "team",
        "used 2 + incoming 8 = 10 of 16, fits",
    );
}

#[test]
fn claims_are_read_per_label_value_each_once() {
    let pods = |pool: &str, claims: &[&str]| {
        let mut p = pod("ml", 0, claims, &[]);
        p["metadata"]["labels"] = json!({"gpu-admission/pool": pool});
        p
    };
    let a = list(
        "PodList",
        vec![pods("a100", &["a"]), pods("a100", &["a", "b"])],
    );
    let b = list("PodList", vec![pods("h100", &["c"]), pods("l4", &["d"])]);
    let lists = [a.as_bytes(), b.as_bytes()];
    let claims = list(
        "ResourceClaimList",
        ["a", "b", "c", "d"]
            .iter()
            .map(|n| claim("ml", n, "gpu.nvidia.com", None, Some(2)))
            .collect(),
    );
    let dra = DraSettings::default();
    let cluster = Script::new(vec![(claim_query(&dra), Ok(claims))]);
    let (total, per_pool) = read_by_label(
        &cluster,
        &lists,
        &dra,
        "gpu-admission/pool",
        &["a100", "h100", "v100"],
    )
    .unwrap();
    assert!(cluster.done());
    assert_eq!((total.referenced, total.gpus[GPU]), (4, 8));
    let per_pool: Vec<(String, u64, u64)> = per_pool
        .into_iter()
        .map(|(p, u)| (p, u.shared, u.gpus[GPU]))
        .collect();
    assert_eq!(
        per_pool,
        [("a100".to_string(), 1, 4), ("h100".to_string(), 0, 2)]
    );
    // No pod with a claim: no claim list.
    let cluster = Script::new(vec![]);
    let none = read_by_label(
        &cluster,
        &[b"{\"items\": []}".as_slice()],
        &dra,
        "k",
        &["a100"],
    )
    .unwrap();
    assert_eq!(none, (ClaimUse::default(), Vec::new()));
}

/// Pool a100 (8 x 8) keeping 16 GPUs for interactive work; its interactive pods hold 16
/// through two claims, its batch pods 20 through their limits.
fn reserve_filled_by_claims(count: bool) -> Verdict {
    let mut v = serde_json::to_value(settings(count)).unwrap();
    v["pools"][0]["reserve"] = json!({"interactive": 16});
    let s: Settings = serde_json::from_value(v).unwrap();
    let typed = |mut p: Value, t: &str| {
        p["metadata"]["labels"] = json!({"gpu-admission/pool": "a100", "workload-type": t});
        p
    };
    let pods = list(
        "PodList",
        vec![
            typed(pod("ml", 0, &["i0"], &[]), "interactive"),
            typed(pod("ml", 0, &["i1"], &[]), "interactive"),
            typed(pod("ml", 20, &[], &[]), "batch"),
        ],
    );
    let claims = list(
        "ResourceClaimList",
        vec![
            claim("ml", "i0", "gpu.nvidia.com", None, Some(8)),
            claim("ml", "i1", "gpu.nvidia.com", None, Some(8)),
        ],
    );
    let pool = &s.pools[0];
    let mut calls = vec![(node_query(pool), Ok(nodes(&[8; 8])))];
    if count {
        calls.push((
            with_claim_masks(pod_query("gpu-admission/pool", pool)),
            Ok(pods),
        ));
        calls.push((claim_query(&s.dra), Ok(claims)));
    } else {
        calls.push((pod_query("gpu-admission/pool", pool), Ok(pods)));
    }
    run(&s, calls)
}

#[test]
fn a_reserve_its_type_fills_through_claims_keeps_nothing_more() {
    // 36 in use (16 through claims); interactive holds its 16: nothing more is kept from
    // the batch workload: 36 + 8 = 44 of the 57 under the threshold.
    let v = reserve_filled_by_claims(true);
    assert!(
        !v.audit_annotations["capacity"].contains("reserve"),
        "{v:?}"
    );
    allows_noting(&v, "capacity", "used 36 + incoming 8 = 44 of 64");
    // Without countDraClaims the claims count nowhere: 20 in use, and the reserve keeps its
    // 16 (interactive seems to hold nothing): 20 + 8 = 28 of 57 - 16 = 41 fits too.
    allows_noting(
        &reserve_filled_by_claims(false),
        "capacity",
        "reserve nvidia.com/gpu: 16 kept for interactive (16 reserved, 0 held by its pods)",
    );
}
