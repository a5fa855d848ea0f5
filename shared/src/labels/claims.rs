//! DRA claim objects themselves: a ResourceClaimTemplate or ResourceClaim is where a DRA
//! pod's GPU count lives, so the rules that bound a pod's GPUs are checked there too (a
//! template asking for more GPUs than `maxGpusPerPod`, a GPU request nobody can count).
//! The pods that name the claim are checked again when they are created.

use super::settings::Settings;
use crate::admission::{AdmissionRequest, Verdict};
use crate::dra::{self, ClaimGpus};
use crate::workload::At;

/// True for the DRA claim kinds.
pub fn is_claim_object(request: &AdmissionRequest) -> bool {
    let object = &request.object;
    let api_version = object
        .get("apiVersion")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    let kind = object.get("kind").and_then(|v| v.as_str()).unwrap_or("");
    api_version.starts_with("resource.k8s.io/")
        && matches!(kind, "ResourceClaimTemplate" | "ResourceClaim")
}

/// The verdict on a ResourceClaimTemplate or ResourceClaim.
pub fn check(request: &AdmissionRequest, settings: &Settings) -> Verdict {
    let object = &request.object;
    let kind = object.get("kind").and_then(|v| v.as_str()).unwrap_or("");
    let name = object
        .at("/metadata/name")
        .and_then(|v| v.as_str())
        .unwrap_or(&request.name);
    let what = format!("{kind} {name}");
    let gpus: ClaimGpus = match dra::claim_object_gpus(object, &settings.dra) {
        Ok(g) => g,
        Err(e) => {
            return Verdict::reject(format!(
                "{what}: {e}; the GPU rules cannot check GPUs they cannot count, so it is denied"
            ))
            .with_code(400);
        }
    };
    let total = gpus.gpus.values().fold(0u64, |a, b| a.saturating_add(*b));
    if let Some(max) = settings.max_gpus_per_pod
        && total > max
    {
        return Verdict::reject(format!(
            "{what} asks for {total} GPUs ({}); a pod may hold at most {max} (maxGpusPerPod), and every pod that uses this claim would hold them: ask for at most {max}",
            crate::gpu::describe(&gpus.gpus)
        ));
    }
    Verdict::accept()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{denies, denies_saying};
    use serde_json::{Value, json};

    fn request(object: Value) -> AdmissionRequest {
        serde_json::from_value(json!({
            "uid": "1", "operation": "CREATE", "name": "t", "namespace": "ml",
            "kind": {"group": "resource.k8s.io", "version": "v1", "kind": object["kind"]},
            "object": object
        }))
        .unwrap()
    }

    fn template(count: i64, mode: &str) -> Value {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
               "metadata": {"name": "big"},
               "spec": {"spec": {"devices": {"requests": [
                   {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                             "allocationMode": mode, "count": count}}]}}}})
    }

    #[test]
    fn a_template_over_max_gpus_per_pod_is_denied() {
        let settings = Settings {
            max_gpus_per_pod: Some(8),
            ..Settings::default()
        };
        let r = request(template(16, "ExactCount"));
        assert!(is_claim_object(&r));
        let v = check(&r, &settings);
        denies(
            &v,
            "ResourceClaimTemplate big asks for 16 GPUs (nvidia.com/gpu: 16); a pod may hold at most 8 (maxGpusPerPod), and every pod that uses this claim would hold them: ask for at most 8",
        );
        assert!(check(&request(template(8, "ExactCount")), &settings).allowed);
        assert!(check(&r, &Settings::default()).allowed, "no maximum set");
    }

    #[test]
    fn uncountable_claims_are_denied() {
        let v = check(&request(template(1, "All")), &Settings::default());
        denies_saying(&v, "allocationMode: All");
        let bad = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                         "metadata": {"name": "x"}, "spec": {"devices": {"requests": 7}}});
        let v = check(&request(bad), &Settings::default());
        assert!(!v.allowed);
        assert_eq!(v.code, Some(400));
    }

    #[test]
    fn other_objects_are_not_claims() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod"});
        assert!(!is_claim_object(&request(pod)));
        let class = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass"});
        assert!(!is_claim_object(&request(class)));
    }
}
