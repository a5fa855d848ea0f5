//! The representative requests each policy is measured on: a Pod, a Deployment and a
//! KServe InferenceService where the policy handles them, accepted and denied, and
//! for routing the requests that get a patch. All come from the policies' own
//! `test_data/` (the e2e tests pin their verdicts), so they stay realistic.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use gpu_e2e::{ReplaySession, read_admission_request, read_settings};
use serde_json::{Value, json};

/// What a case is meant to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Accept,
    Deny,
    /// Accepted with a JSONPatch (mutating policies).
    Patch,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Accept => "accept",
            Outcome::Deny => "deny",
            Outcome::Patch => "patch",
        }
    }
}

/// One request of one policy (paths relative to the policy's directory).
#[derive(Debug, Clone, Copy)]
pub struct Case {
    pub policy: &'static str,
    /// Kind shown in tables.
    pub kind: &'static str,
    pub request: &'static str,
    /// `None`: empty settings (`{}`).
    pub settings: Option<&'static str>,
    /// Replay session for context-aware requests.
    pub session: Option<&'static str>,
    pub intent: Outcome,
}

const fn case(
    policy: &'static str,
    kind: &'static str,
    request: &'static str,
    settings: Option<&'static str>,
    session: Option<&'static str>,
    intent: Outcome,
) -> Case {
    Case {
        policy,
        kind,
        request,
        settings,
        session,
        intent,
    }
}

const LABELS: &str = "gpu-labels-policy";
const ROUTING: &str = "gpu-pool-routing-policy";
const VRAM: &str = "gpu-vram-fit-policy";
const CAPACITY: &str = "gpu-capacity-gate-policy";
const AUTOSCALER: &str = "gpu-autoscaler-policy";

/// The policies that decide from the request alone (the < 100 µs target).
pub const STATIC_POLICIES: &[&str] = &[LABELS, ROUTING, VRAM];

use Outcome::{Accept, Deny, Patch};

/// Every measured request.
// One line a case: policy, kind shown, request, settings, replay session, intent.
#[rustfmt::skip]
pub const CASES: &[Case] = &[
    case(LABELS, "Pod", "test_data/pod_gpu_labelled.json", None, None, Accept),
    case(LABELS, "Pod", "test_data/pod_gpu_missing_labels.json", None, None, Deny),
    case(LABELS, "Deployment", "test_data/deployment_labelled.json", None, None, Accept),
    case(LABELS, "Deployment", "test_data/deployment_missing_team.json", None, None, Deny),
    case(LABELS, "InferenceService", "test_data/inferenceservice_labelled.json", Some("test_data/settings_custom_kinds.yml"), None, Accept),
    case(LABELS, "InferenceService", "test_data/inferenceservice_missing_labels.json", Some("test_data/settings_custom_kinds.yml"), None, Deny),
    case(ROUTING, "Pod", "test_data/pod_batch.json", Some("test_data/settings.yml"), None, Patch),
    case(ROUTING, "Deployment", "test_data/deployment_interactive.json", Some("test_data/settings.yml"), None, Patch),
    case(ROUTING, "Deployment", "test_data/deployment_no_gpu.json", Some("test_data/settings.yml"), None, Accept),
    case(ROUTING, "Deployment", "test_data/deployment_nodeselector_other_pool.json", Some("test_data/settings.yml"), None, Deny),
    case(ROUTING, "InferenceService", "test_data/inferenceservice_interactive.json", Some("test_data/settings.yml"), None, Patch),
    case(ROUTING, "Deployment (lending window)", "test_data/deployment_batch.json", Some("test_data/settings_lending.yml"), None, Patch),
    case(VRAM, "Pod", "test_data/pod_mig_3g_40gb_llama_8b.json", Some("test_data/settings.yml"), None, Accept),
    case(VRAM, "Deployment", "test_data/deployment_llama_8b_on_l4.json", Some("test_data/settings.yml"), None, Accept),
    case(VRAM, "Deployment", "test_data/deployment_llama_70b_on_2_a10g.json", Some("test_data/settings.yml"), None, Deny),
    case(VRAM, "InferenceService", "test_data/inferenceservice_multinode_llama_70b.json", Some("test_data/settings.yml"), None, Accept),
    case(VRAM, "InferenceService", "test_data/inferenceservice_llama_70b_on_2_l40s.json", Some("test_data/settings.yml"), None, Deny),
    case(VRAM, "Deployment (registry ConfigMap)", "test_data/deployment_registry_model.json", Some("test_data/settings_registry.yml"), Some("test_data/session_registry_found.yml"), Accept),
    case(CAPACITY, "Pod (owned, not charged)", "test_data/pod_owned_by_replicaset.json", Some("test_data/settings.yml"), None, Accept),
    case(CAPACITY, "Deployment", "test_data/deployment_a100_4x2.json", Some("test_data/settings.yml"), Some("test_data/session_a100_below.yml"), Accept),
    case(CAPACITY, "Deployment (peak window)", "test_data/deployment_a100_4x2.json", Some("test_data/settings_peak.yml"), Some("test_data/session_a100_below.yml"), Deny),
    case(CAPACITY, "Deployment", "test_data/deployment_a100_4x2.json", Some("test_data/settings.yml"), Some("test_data/session_a100_over.yml"), Deny),
    case(CAPACITY, "InferenceService", "test_data/inferenceservice_h100.json", Some("test_data/settings.yml"), Some("test_data/session_h100_below.yml"), Accept),
    case(AUTOSCALER, "HorizontalPodAutoscaler", "test_data/hpa_external_gpu_deployment.json", Some("test_data/settings.yml"), Some("test_data/session_deployment_a100.yml"), Accept),
    case(AUTOSCALER, "HorizontalPodAutoscaler", "test_data/hpa_max_replicas_over_pool.json", Some("test_data/settings.yml"), Some("test_data/session_deployment_a100.yml"), Deny),
    case(AUTOSCALER, "ScaledObject (warning)", "test_data/scaledobject_cpu.json", Some("test_data/settings.yml"), Some("test_data/session_deployment_a100.yml"), Accept),
];

/// A case with its files read.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub case: Case,
    pub request: Value,
    pub settings: Value,
    pub session: Option<ReplaySession>,
    /// The `validate` payload the harness sends (`{"request", "settings"}`).
    pub payload: Vec<u8>,
}

impl Loaded {
    /// `request` file name without directory and extension, for tables.
    pub fn name(&self) -> String {
        match self.case.session {
            Some(s) => format!("{} + {}", stem(self.case.request), stem(s)),
            None => stem(self.case.request),
        }
    }
}

/// A file's name without its directory and extension (`test_data/pod.json`: `pod`).
pub fn stem(path: &str) -> String {
    Path::new(path)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The `validate` payload a host sends: `{"request", "settings"}`.
pub fn validate_payload(request: &Value, settings: &Value) -> Result<Vec<u8>> {
    serde_json::to_vec(&json!({"request": request, "settings": settings}))
        .context("cannot serialize the validate payload")
}

/// The directory of policy `name`.
pub fn policy_dir(root: &Path, name: &str) -> PathBuf {
    root.join("policies").join(name)
}

/// Reads a case's request, settings and session.
pub fn load(root: &Path, case: &Case) -> Result<Loaded> {
    let dir = policy_dir(root, case.policy);
    let request = read_admission_request(dir.join(case.request))?;
    let settings = match case.settings {
        Some(file) => read_settings(dir.join(file))?,
        None => json!({}),
    };
    let session = case
        .session
        .map(|file| ReplaySession::from_file(dir.join(file)))
        .transpose()?;
    let payload = validate_payload(&request, &settings)?;
    Ok(Loaded {
        case: *case,
        request,
        settings,
        session,
        payload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_has_accepted_and_denied_cases_and_routing_patches() {
        for policy in [LABELS, ROUTING, VRAM, CAPACITY, AUTOSCALER] {
            let intents: Vec<Outcome> = CASES
                .iter()
                .filter(|c| c.policy == policy)
                .map(|c| c.intent)
                .collect();
            assert!(intents.contains(&Deny), "{policy}");
            assert!(
                intents.contains(&Accept) || intents.contains(&Patch),
                "{policy}"
            );
        }
        assert!(
            CASES
                .iter()
                .any(|c| c.policy == ROUTING && c.intent == Patch)
        );
        for kind in ["Pod", "Deployment", "InferenceService"] {
            assert!(CASES.iter().any(|c| c.kind.starts_with(kind)), "{kind}");
        }
    }
}
