//! DRA claims, generated: counting never panics and stays within the limits, one more
//! device never counts fewer GPUs, a pod naming a claim counts what the claim counts, and
//! an unreadable claim always leaves a problem (never zero GPUs silently).
#![cfg(not(target_arch = "wasm32"))]

use gpu_rules::dra::{
    ClaimBook, ClaimRef, DraSettings, MAX_DEVICES_PER_REQUEST, MAX_REQUESTS_PER_CLAIM,
    claim_object_gpus,
};
use gpu_rules::gpu::{GpuResources, workload_gpus};
use gpu_rules::workload::Workload;
use proptest::prelude::*;
use serde_json::{Value, json};

const CLASSES: &[&str] = &[
    "gpu.nvidia.com",
    "mig.nvidia.com",
    "gpu.amd.com",
    "rdma.example.com",
    "",
];
const MODES: &[&str] = &["ExactCount", "All", "", "Some"];

fn request() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(CLASSES),
        prop::option::of(prop::sample::select(MODES)),
        prop::option::of(-2i64..2000),
        any::<bool>(),
        prop::collection::vec((prop::sample::select(CLASSES), 0i64..5), 0..3),
    )
        .prop_map(|(class, mode, count, v1, alternatives)| {
            let mut exact = json!({"deviceClassName": class});
            if let Some(m) = mode {
                exact["allocationMode"] = json!(m);
            }
            if let Some(c) = count {
                exact["count"] = json!(c);
            }
            let mut r = if v1 {
                json!({"name": "r", "exactly": exact})
            } else {
                let mut r = exact;
                r["name"] = json!("r");
                r
            };
            if !alternatives.is_empty() {
                r["firstAvailable"] = Value::Array(
                    alternatives
                        .into_iter()
                        .map(|(c, n)| json!({"name": "a", "deviceClassName": c, "count": n}))
                        .collect(),
                );
            }
            r
        })
}

fn template(requests: Vec<Value>) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
           "metadata": {"name": "t"}, "spec": {"spec": {"devices": {"requests": requests}}}})
}

fn total(v: &Value) -> Option<u64> {
    claim_object_gpus(v, &DraSettings::default())
        .ok()
        .map(|g| g.gpus.values().sum())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn counts_are_bounded_and_a_pod_counts_what_its_claim_counts(
        requests in prop::collection::vec(request(), 0..40)
    ) {
        let object = template(requests.clone());
        let counted = claim_object_gpus(&object, &DraSettings::default());
        if requests.len() > MAX_REQUESTS_PER_CLAIM {
            prop_assert!(counted.is_err());
        }
        if let Ok(gpus) = &counted {
            let sum: u64 = gpus.gpus.values().sum();
            prop_assert!(sum <= MAX_REQUESTS_PER_CLAIM as u64 * MAX_DEVICES_PER_REQUEST);
            let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c"}],
                         "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}]}});
            let w = Workload::from_object(&pod, &[]).unwrap();
            let mut book = ClaimBook::default();
            book.insert(ClaimRef::Template("t".into()), Ok(gpus.clone()));
            prop_assert_eq!(&workload_gpus(&w, &GpuResources::default(), &book).total, &gpus.gpus);
            // Unread, the same claim is a problem, never zero GPUs silently.
            let unread = workload_gpus(&w, &GpuResources::default(), &ClaimBook::default());
            prop_assert!(unread.uses_gpu());
        }
    }

    #[test]
    fn one_more_gpu_device_never_counts_fewer(requests in prop::collection::vec(request(), 0..10)) {
        let before = total(&template(requests.clone()));
        let mut more = requests;
        more.push(json!({"name": "extra", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}));
        let after = total(&template(more.clone()));
        if let (Some(b), Some(a)) = (before, after) {
            prop_assert_eq!(a, b + 1);
        }
        if more.len() <= MAX_REQUESTS_PER_CLAIM {
            prop_assert_eq!(before.is_some(), after.is_some(), "the extra request is countable");
        }
    }
}
