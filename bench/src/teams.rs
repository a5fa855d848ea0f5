//! The capacity gate's namespace quotas and team budgets: one decision (the gate's
//! `test_data/deployment_a100_4x2.json`, pool `a100` of 100 pods on 25 nodes) for a team of
//! 50 namespaces holding 2,000 GPU pods, four ways:
//!
//! - **pools only**: `checkNamespaceQuotas: false`, no budget (the baseline);
//! - **+ namespace quotas**: one `list_resources_by_namespace` of 3 ResourceQuotas;
//! - **+ team by label**: the quotas, the Namespace (`get_resource`) and one
//!   `list_resources_all` of the team's 2,000 Pods by the team label;
//! - **+ team by namespaces**: the quotas and 50 `list_resources_by_namespace` of Pods
//!   (40 each), the team given by its namespaces.
//!
//! Pods are the benchmark's whole pods (`synth::full_pod`) masked with the gate's Pod
//! masks (metadata whole, as Kubewarden passes it), spread over the 50 namespaces and
//! the pools a100 / h100. Each in wasm through the harness (kept instance) and natively.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use gpu_e2e::{Policy, read_admission_request, read_settings};
use gpu_rules::capacity::Settings;
use gpu_rules::capacity::queries::{
    POD_FIELD_MASKS, namespace_pod_query, namespace_quota_query, pod_query, team_pod_query,
};
use gpu_rules::cluster::ClusterRequest;
use gpu_rules::cluster::namespace_request;
use gpu_rules::pools::nodes::{NODE_FIELD_MASKS, node_query};
use serde_json::{Value, json};

use crate::native;
use crate::stats::{Plan, Summary, measure};
use crate::synth::{self, POOL};

/// The team measured: namespaces and GPU pods (one GPU each).
pub const NAMESPACES: usize = 50;
pub const TEAM_PODS: usize = 2_000;
/// Pods of pool a100 (the pool the Deployment targets).
const POOL_PODS: usize = 100;

/// How the decision is configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    PoolsOnly,
    NamespaceQuotas,
    TeamByLabel,
    TeamByNamespaces,
}

impl Variant {
    pub const ALL: [Variant; 4] = [
        Variant::PoolsOnly,
        Variant::NamespaceQuotas,
        Variant::TeamByLabel,
        Variant::TeamByNamespaces,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Variant::PoolsOnly => "pools only (checkNamespaceQuotas: false, no budget)",
            Variant::NamespaceQuotas => "+ namespace quotas (1 list, 3 ResourceQuotas)",
            Variant::TeamByLabel => "+ team by Namespace label (1 get + 1 list of 2,000 Pods)",
            Variant::TeamByNamespaces => "+ team by namespaces (50 lists of 40 Pods)",
        }
    }
}

/// One variant, measured.
#[derive(Debug, Clone)]
pub struct TeamRow {
    pub variant: Variant,
    pub calls: usize,
    /// Bytes of every answer crossing the host boundary.
    pub bytes: u64,
    pub wasm: Summary,
    pub native: Summary,
}

fn team_namespace(i: usize) -> String {
    format!("ml-a-{:02}", i % NAMESPACES)
}

/// Team pod `i`, masked, in its namespace, with the team label and a pool label.
fn team_pod(i: usize) -> Value {
    let mut pod = synth::apply_field_masks(&synth::full_pod(i), POD_FIELD_MASKS);
    let metadata = &mut pod["metadata"];
    metadata["namespace"] = json!(team_namespace(i));
    metadata["labels"]["gpu-admission/team"] = json!("ml-a");
    metadata["labels"][synth::POOL_LABEL] = json!(if i.is_multiple_of(2) { POOL } else { "h100" });
    pod
}

/// The settings of each variant: `test_data/settings.yml` with the quota and team settings.
fn settings(base: &Value, variant: Variant) -> Value {
    let mut s = base.clone();
    s["checkNamespaceQuotas"] = json!(variant != Variant::PoolsOnly);
    let big = json!({"nvidia.com/gpu": 100_000, "pools": {POOL: 100_000}});
    match variant {
        Variant::PoolsOnly | Variant::NamespaceQuotas => {}
        Variant::TeamByLabel => s["teamBudgets"] = json!({"ml-a": big}),
        Variant::TeamByNamespaces => {
            let mut budget = big;
            budget["namespaces"] = json!((0..NAMESPACES).map(team_namespace).collect::<Vec<_>>());
            s["teamBudgets"] = json!({"ml-a": budget});
        }
    }
    s
}

/// The exchanges of one decision, in order.
fn exchanges(
    settings: &Settings,
    variant: Variant,
    namespace: &str,
) -> Vec<(ClusterRequest, Vec<u8>)> {
    let pool = settings
        .pools
        .iter()
        .find(|p| p.name == POOL)
        .expect("settings.yml has pool a100");
    let pool_data = synth::pool(POOL_PODS, POD_FIELD_MASKS, NODE_FIELD_MASKS);
    let mut out = vec![
        (node_query(pool), pool_data.nodes_masked),
        (
            pod_query(&settings.pool_label_key, pool),
            pool_data.pods_masked,
        ),
    ];
    if variant == Variant::PoolsOnly {
        return out;
    }
    let quotas: Vec<Value> = ["gpu-quota", "cpu-quota", "objects"]
        .iter()
        .map(|name| {
            json!({"metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"},
                   "spec": {"hard": {"requests.nvidia.com/gpu": "1000", "requests.cpu": "512", "pods": "500"}},
                   "status": {"used": {"requests.nvidia.com/gpu": "100", "requests.cpu": "96", "pods": "100"}}})
        })
        .collect();
    out.push((
        namespace_quota_query(namespace),
        synth::list_bytes("ResourceQuota", quotas),
    ));
    match variant {
        Variant::PoolsOnly | Variant::NamespaceQuotas => {}
        Variant::TeamByLabel => {
            out.push((
                namespace_request(namespace),
                json!({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": namespace, "labels": {"gpu-admission/team": "ml-a"}}})
                .to_string()
                .into_bytes(),
            ));
            let pods: Vec<Value> = (0..TEAM_PODS).map(team_pod).collect();
            out.push((team_pod_query("ml-a"), synth::list_bytes("Pod", pods)));
        }
        Variant::TeamByNamespaces => {
            for n in 0..NAMESPACES {
                let ns = team_namespace(n);
                let pods: Vec<Value> = (0..TEAM_PODS)
                    .filter(|i| i % NAMESPACES == n)
                    .map(team_pod)
                    .collect();
                out.push((namespace_pod_query(&ns), synth::list_bytes("Pod", pods)));
            }
        }
    }
    out
}

/// Measures every variant.
pub fn measure_teams(root: &std::path::Path, gate: &Policy, plan: &Plan) -> Result<Vec<TeamRow>> {
    let dir = root.join("policies/gpu-capacity-gate-policy/test_data");
    let mut request = read_admission_request(dir.join("deployment_a100_4x2.json"))?;
    let namespace = team_namespace(0);
    request["namespace"] = json!(namespace);
    let base = read_settings(dir.join("settings.yml"))?;
    let mut rows = Vec::new();
    for variant in Variant::ALL {
        let settings_json = settings(&base, variant);
        let settings: Settings =
            serde_json::from_value(settings_json.clone()).context("the benchmark's settings")?;
        let exchanges = exchanges(&settings, variant, &namespace);
        let bytes = exchanges.iter().map(|(_, b)| b.len() as u64).sum();
        let borrowed: Vec<(ClusterRequest, &[u8])> = exchanges
            .iter()
            .map(|(r, b)| (r.clone(), b.as_slice()))
            .collect();
        let session = synth::session(&borrowed)?;
        let payload = serde_json::to_vec(&json!({"request": request, "settings": settings_json}))?;
        let instance = gate.instantiate()?;
        let answer = instance.call("validate", &payload, Some(session.clone()))?;
        let native_answer =
            native::validate("gpu-capacity-gate-policy", &payload, Some(session.clone()))?;
        if check(&answer, variant)? != check(&native_answer, variant)? {
            bail!("{variant:?}: wasm and native disagree");
        }
        let wasm = measure(
            plan,
            || Some(session.clone()),
            |s| instance.call("validate", &payload, s).map(drop),
        )?;
        let native = measure(
            plan,
            || Some(session.clone()),
            |s| native::validate("gpu-capacity-gate-policy", &payload, s).map(drop),
        )?;
        rows.push(TeamRow {
            variant,
            calls: exchanges.len(),
            bytes,
            wasm,
            native,
        });
    }
    Ok(rows)
}

/// The decision is accepted and counted what it should: the team's audit names its pods.
fn check(answer: &[u8], variant: Variant) -> Result<String> {
    let answer: Value = serde_json::from_slice(answer).context("the gate's answer")?;
    if answer["accepted"] != true {
        bail!("{variant:?}: denied: {answer}");
    }
    let audit = |key: &str| {
        answer
            .pointer(&format!("/audit_annotations/{key}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let team = audit("team");
    let expected = match variant {
        Variant::PoolsOnly | Variant::NamespaceQuotas => "",
        Variant::TeamByLabel | Variant::TeamByNamespaces => {
            "2000 pods): nvidia.com/gpu used 2000 + incoming 8"
        }
    };
    if !team.contains(expected)
        || (variant == Variant::NamespaceQuotas
            && !audit("quota").contains("used 100 + incoming 8"))
    {
        bail!("{variant:?}: unexpected audit {answer}");
    }
    Ok(format!("{} | {}", audit("quota"), team))
}

/// The measurement plan: a few seconds per variant.
pub fn plan(quick: bool) -> Plan {
    if quick {
        return crate::pools::QUICK;
    }
    Plan {
        warmup: 3,
        min: 20,
        max: 300,
        budget: Duration::from_secs(3),
    }
}
