//! `evaluate` with `nodeOffers`: templates that select a GPU product, a MIG profile or a
//! least driver version against a pool of GFD-labelled nodes.

use super::*;
use crate::admission::ValidateSettings;
use crate::clock::FixedClock;
use crate::inventory::tests::gfd_node;

/// 2026-12-01T00:00:00Z.
const NOW: i64 = 1_796_083_200;
const A100_40: &str = "NVIDIA-A100-SXM4-40GB";
const A100_80: &str = "NVIDIA-A100-SXM4-80GB";

/// Two 8-GPU A100 40 GB nodes of pool a100 (driver 535.104.05, CUDA 12.2).
fn a100_nodes() -> String {
    node_list(&[
        gfd_node("gpu-a100-0", A100_40, 40960, 8, "535.104.05"),
        gfd_node("gpu-a100-1", A100_40, 40960, 8, "535.104.05"),
    ])
}

fn node_list(items: &[Value]) -> String {
    json!({"apiVersion": "v1", "kind": "NodeList", "items": items}).to_string()
}

/// Two A100 nodes partitioned into MIG devices (mixed strategy): 7 x 1g.10gb and 2 x 3g.40gb.
fn mig_nodes() -> String {
    let node = |name: &str| {
        let mut n = gfd_node(name, A100_80, 81920, 0, "535.104.05");
        n["metadata"]["labels"]["nvidia.com/mig.strategy"] = json!("mixed");
        n["status"]["allocatable"] =
            json!({"nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-3g.40gb": "2"});
        n
    };
    node_list(&[node("gpu-mig-0"), node("gpu-mig-1")])
}

/// A Deployment of one pod of pool a100 asking for `resource: gpus`, with `node_selector`
/// and `labels` added to its template.
fn selecting(resource: &str, gpus: &str, node_selector: Value, labels: Value) -> AdmissionRequest {
    let mut d = deployment(1, Some("a100"), "1");
    let t = &mut d["spec"]["template"];
    t["spec"]["containers"][0]["resources"]["limits"] = json!({resource: gpus});
    t["spec"]["nodeSelector"] = node_selector;
    for (k, v) in labels.as_object().unwrap() {
        t["metadata"]["labels"][k] = v.clone();
    }
    create(d)
}

fn product(p: &str) -> AdmissionRequest {
    selecting(
        "nvidia.com/gpu",
        "1",
        json!({"nvidia.com/gpu.product": p}),
        json!({}),
    )
}

fn with(fields: Value) -> Settings {
    let mut v = serde_json::to_value(settings()).unwrap();
    for (k, value) in fields.as_object().unwrap() {
        v[k] = value.clone();
    }
    let s: Settings = serde_json::from_value(v).unwrap();
    s.validate().unwrap();
    s
}

fn judge(req: &AdmissionRequest, s: &Settings, node_list: String) -> Verdict {
    let cluster = Script::new(pool_calls("a100", node_list, pods(&[4])));
    let v = CapacityGate::evaluate_at(
        req,
        &crate::policy::checked::<CapacityGate>(s),
        &cluster,
        &FixedClock(NOW),
    );
    assert!(cluster.done(), "host calls left unmade");
    v
}

/// [`judge`] with `settings()` on [`a100_nodes`].
fn judge_a100(req: &AdmissionRequest) -> Verdict {
    judge(req, &settings(), a100_nodes())
}

/// A Deployment of one pod of pool a100 asking for one `nvidia.com/gpu`, its template
/// labelled `label: version`.
fn needing(label: &str, version: &str) -> AdmissionRequest {
    selecting("nvidia.com/gpu", "1", json!({}), json!({label: version}))
}

const ADVICE: &str = "Select a GPU product, MIG profile and driver or CUDA version the pool's nodes offer, or target a pool whose nodes offer them (nodeOffers: deny).";

#[test]
fn a_product_no_node_of_the_pool_carries_is_denied_naming_the_products_there() {
    let v = judge_a100(&product(A100_80));
    denies(
        &v,
        &format!(
            "pool a100: spec.template.spec: no node offers GPU product '{A100_80}' (nvidia.com/gpu.product) (did you mean '{A100_40}'?); the nodes offer {A100_40} (2 nodes). {ADVICE}"
        ),
    );
    assert_eq!(
        v.audit_annotations["node-offers"],
        format!(
            "a100: spec.template.spec: no node offers GPU product '{A100_80}' (nvidia.com/gpu.product) (did you mean '{A100_40}'?); the nodes offer {A100_40} (2 nodes)"
        )
    );
    // The capacity is still measured and reported.
    notes_ending(&v, "capacity", "fits");
}

#[test]
fn a_typo_of_the_product_there_is_denied_with_a_suggestion() {
    let v = judge_a100(&product("NVIDIA-A100-SXM4-40G"));
    denies_saying(&v, &format!("(did you mean '{A100_40}'?)"));
}

#[test]
fn the_product_there_is_accepted_and_required_affinity_counts_as_a_selection() {
    let v = judge_a100(&product(A100_40));
    assert!(v.allowed, "{v:?}");
    assert!(!v.audit_annotations.contains_key("node-offers"));
    // Required node affinity restricting the product to values none of which is there.
    let mut req = product(A100_40);
    let spec = &mut req.object["spec"]["template"]["spec"];
    spec["nodeSelector"] = json!({});
    spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In",
            "values": ["NVIDIA-H100-80GB-HBM3", A100_80]}]}]}}});
    denies_saying(
        &judge_a100(&req),
        &format!("no node offers GPU product '{A100_80}' or 'NVIDIA-H100-80GB-HBM3'"),
    );
}

#[test]
fn a_mig_profile_the_nodes_do_not_offer_is_denied_naming_the_profiles_there() {
    let req = selecting("nvidia.com/mig-2g.20gb", "1", json!({}), json!({}));
    denies(
        &judge(&req, &settings(), mig_nodes()),
        &format!(
            "pool a100: spec.template.spec: no node offers MIG profile 2g.20gb (nvidia.com/mig-2g.20gb); they offer 1g.10gb, 3g.40gb. {ADVICE}"
        ),
    );
    let req = selecting("nvidia.com/mig-3g.40gb", "1", json!({}), json!({}));
    assert!(judge(&req, &settings(), mig_nodes()).allowed);
}

#[test]
fn a_driver_older_than_the_template_asks_for_is_denied() {
    denies(
        &judge_a100(&needing("gpu-admission/min-driver-version", "550.54")),
        &format!(
            "pool a100: spec.template.spec: the pod needs driver version 550.54 or later (label gpu-admission/min-driver-version on spec.template.spec), and the newest driver on the nodes that offer its GPUs is 535.104.05. {ADVICE}"
        ),
    );
    assert!(judge_a100(&needing("gpu-admission/min-driver-version", "535.104")).allowed);
}

#[test]
fn a_version_that_does_not_read_is_denied_naming_the_label() {
    denies_starting(
        &judge_a100(&needing("gpu-admission/min-cuda-version", "twelve")),
        "pool a100: spec.template.spec: label gpu-admission/min-cuda-version on spec.template.spec is 'twelve', not a version",
    );
}

#[test]
fn warn_accepts_with_the_same_words_and_allow_does_not_look() {
    let s = with(json!({"nodeOffers": "warn"}));
    let v = judge(&product(A100_80), &s, a100_nodes());
    assert!(v.allowed, "{v:?}");
    assert_eq!(
        v.warnings,
        vec![format!(
            "pool a100: spec.template.spec: no node offers GPU product '{A100_80}' (nvidia.com/gpu.product) (did you mean '{A100_40}'?); the nodes offer {A100_40} (2 nodes). Its pods stay Pending until the pool has a node that offers it (nodeOffers: warn)."
        )]
    );
    let s = with(json!({"nodeOffers": "allow"}));
    let v = judge(&product(A100_80), &s, a100_nodes());
    assert!(v.allowed, "{v:?}");
    assert!(v.warnings.is_empty());
    assert!(!v.audit_annotations.contains_key("node-offers"));
}

#[test]
fn a_pool_that_can_add_nodes_only_warns() {
    let mut s = with(json!({}));
    s.pools[0] = serde_json::from_value(json!({"name": "a100",
        "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}},
        "maxAllocatable": {"nvidia.com/gpu": 64}}))
    .unwrap();
    let v = judge(&product(A100_80), &s, a100_nodes());
    assert!(v.allowed, "{v:?}");
    assert_eq!(v.warnings.len(), 1, "{v:?}");
    assert!(
        v.warnings[0].ends_with("Its pods stay Pending until the pool has a node that offers it (the pool can add nodes (maxAllocatable in settings) whose labels are unknown, so this only warns (nodeOffers: deny))."),
        "{v:?}"
    );
}

#[test]
fn an_exception_for_node_offers_excuses_it_alone() {
    let exception = |rules: Value, expires: &str| {
        with(
            json!({"exceptions": [{"name": "new-a100s", "namespaces": ["ml"], "rules": rules,
            "owner": "alice@example.com", "reason": "80 GB nodes arrive Monday", "expires": expires}]}),
        )
    };
    let s = exception(json!(["nodeOffers"]), "2026-12-20");
    let v = judge(&product(A100_80), &s, a100_nodes());
    allows_recording(
        &v,
        "exception",
        "exception=new-a100s owner=alice@example.com expires=2026-12-21T00:00:00Z",
    );
    assert!(
        audit(&v, "excused")
            .starts_with("pool a100: spec.template.spec: no node offers GPU product"),
        "{v:?}"
    );
    // The capacity is still judged for an excused template: 4 in use + 1 of 16 fits, a
    // Deployment of 16 pods does not.
    let mut req = product(A100_80);
    req.object["spec"]["replicas"] = json!(16);
    denies_saying(
        &judge(&req, &s, a100_nodes()),
        "nvidia.com/gpu would be 20 of 16",
    );
    // An exception for another rule does not excuse it; one that has ended says so.
    let v = judge(
        &product(A100_80),
        &exception(json!(["burstBrake"]), "2026-12-20"),
        a100_nodes(),
    );
    assert!(!v.allowed);
    let v = judge(
        &product(A100_80),
        &exception(json!(["nodeOffers"]), "2026-11-20"),
        a100_nodes(),
    );
    assert!(!v.allowed);
    ends_saying(
        &v,
        "(exception new-a100s (owner alice@example.com) expired at 2026-11-21T00:00:00Z; renew it or fix the workload)",
    );
}

#[test]
fn a_template_that_selects_nothing_the_labels_tell_is_not_checked() {
    // No product, no MIG profile, no version: an unlabelled pool of the old tests' kind.
    let cluster = Script::new(pool_calls("a100", nodes(&[8, 8]), pods(&[4])));
    let v = run_deployment(1, Some("a100"), "1", &cluster);
    assert!(v.allowed, "{v:?}");
    assert!(!v.audit_annotations.contains_key("node-offers"));
}
