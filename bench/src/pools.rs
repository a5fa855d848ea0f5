//! The capacity gate over synthetic pools: one decision (a Deployment of 4 x 2 GPUs
//! into pool `a100`, the gate's own `test_data/deployment_a100_4x2.json` and
//! `settings.yml`) against pools of 100 to 50,000 GPU pods, three ways:
//!
//! - **masked**: the shipped module, answered with what Kubewarden's field masks let
//!   through (the gate's own masks); its streaming parser reads GPU entries only.
//! - **unmasked**: the shipped module, answered with whole objects (a host that does not
//!   apply masks): the same parser, skipping far more bytes.
//! - **naive**: `naive-capacity-gate`, which asks for whole objects and parses each
//!   answer into a `serde_json::Value` tree first (what a straightforward policy does).
//!
//! Each in wasm through the harness (a replay session per pool size, cloned per call),
//! in a kept instance and in a fresh one, and natively.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use gpu_e2e::{Policy, ReplaySession, read_admission_request, read_settings};
use gpu_rules::capacity::Settings;
use gpu_rules::capacity::queries::{POD_FIELD_MASKS, pod_query};
use gpu_rules::pools::nodes::{NODE_FIELD_MASKS, node_query};
use serde_json::{Value, json};

use crate::native;
use crate::stats::{Plan, Summary, measure};
use crate::synth::{self, POOL, PoolData};

/// The pool sizes measured, in GPU pods: from one team's pool to a large cluster's.
pub const SIZES: &[usize] = &[100, 1_000, 10_000, 50_000];

/// How the pool's state reaches the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    Masked,
    /// Masked, every pod and node spelled differently: nothing is read only once.
    Distinct,
    Unmasked,
    Naive,
}

impl Variant {
    pub const ALL: [Variant; 4] = [
        Variant::Masked,
        Variant::Distinct,
        Variant::Unmasked,
        Variant::Naive,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Variant::Masked => "masked, streaming GPU-only parse (shipped)",
            Variant::Distinct => {
                "masked, every pod and node different (shipped; each spec read once)"
            }
            Variant::Unmasked => "whole objects, streaming parse (shipped module, no masks)",
            Variant::Naive => "whole objects, full Value parse (naive baseline)",
        }
    }

    pub fn short(self) -> &'static str {
        match self {
            Variant::Masked => "masked",
            Variant::Distinct => "distinct",
            Variant::Unmasked => "unmasked",
            Variant::Naive => "naive",
        }
    }
}

/// One pool size and variant, measured.
#[derive(Debug, Clone)]
pub struct PoolRow {
    pub pods: usize,
    pub nodes: usize,
    pub variant: Variant,
    /// Bytes of the two answers (Nodes + Pods) that cross the host boundary.
    pub bytes: u64,
    pub wasm_warm: Summary,
    pub wasm_fresh: Summary,
    pub native: Summary,
}

/// The request, settings and both modules.
pub struct Setup {
    pub gate: Policy,
    pub naive: Policy,
    pub request: Value,
    pub settings_json: Value,
    pub settings: Settings,
    pub payload: Vec<u8>,
}

impl Setup {
    pub fn new(root: &Path, gate: Policy, naive: Policy) -> Result<Setup> {
        let dir = root.join("policies/gpu-capacity-gate-policy/test_data");
        let request = read_admission_request(dir.join("deployment_a100_4x2.json"))?;
        let settings_json = read_settings(dir.join("settings.yml"))?;
        let settings: Settings = serde_json::from_value(settings_json.clone())
            .context("the capacity gate's test_data/settings.yml")?;
        let payload = serde_json::to_vec(&json!({"request": request, "settings": settings_json}))?;
        Ok(Setup {
            gate,
            naive,
            request,
            settings_json,
            settings,
            payload,
        })
    }

    /// The replay session answering `variant`'s two list calls from `data`.
    pub fn session(&self, variant: Variant, data: &PoolData) -> Result<ReplaySession> {
        let Some(pool) = self.settings.pools.iter().find(|p| p.name == POOL) else {
            bail!("settings.yml has no pool {POOL}");
        };
        let key = &self.settings.pool_label_key;
        match variant {
            Variant::Masked => synth::session(&[
                (node_query(pool), &data.nodes_masked),
                (pod_query(key, pool), &data.pods_masked),
            ]),
            Variant::Distinct => synth::session(&[
                (node_query(pool), &data.nodes_distinct),
                (pod_query(key, pool), &data.pods_distinct),
            ]),
            Variant::Unmasked => synth::session(&[
                (node_query(pool), &data.nodes_full),
                (pod_query(key, pool), &data.pods_full),
            ]),
            Variant::Naive => synth::session(&[
                (naive_capacity_gate::node_query(pool), &data.nodes_full),
                (naive_capacity_gate::pod_query(key, pool), &data.pods_full),
            ]),
        }
    }

    fn module(&self, variant: Variant) -> (&Policy, &'static str) {
        match variant {
            Variant::Naive => (&self.naive, native::NAIVE_CAPACITY),
            _ => (&self.gate, "gpu-capacity-gate-policy"),
        }
    }
}

/// Generates the pool of `pods` pods with the gate's masks.
pub fn generate(pods: usize) -> PoolData {
    synth::pool(pods, POD_FIELD_MASKS, NODE_FIELD_MASKS)
}

/// The plan of a `--quick` run: a few calls, half a second.
pub const QUICK: Plan = Plan {
    warmup: 1,
    min: 3,
    max: 20,
    budget: Duration::from_millis(500),
};

/// The measurement plan for a pool size: whole seconds for the large ones.
pub fn plan(pods: usize, factor: f64) -> Plan {
    if factor < 1.0 {
        return QUICK;
    }
    Plan {
        warmup: 1,
        min: if pods >= 10_000 { 3 } else { 5 },
        max: if pods <= 1_000 { 500 } else { 100 },
        budget: Duration::from_secs(3),
    }
}

/// Checks one decision: accepted, every pod counted, the same numbers natively.
fn check(answer: &[u8], pods: usize) -> Result<String> {
    let answer: Value = serde_json::from_slice(answer).context("the gate's answer")?;
    let capacity = answer
        .pointer("/audit_annotations/capacity")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if answer["accepted"] != true || !capacity.contains(&format!(" used {pods} + incoming 8 ")) {
        bail!("the decision did not count the pool's {pods} pods: {answer}");
    }
    Ok(capacity)
}

/// Measures `variant` on `data`.
pub fn measure_pool(
    setup: &Setup,
    data: &PoolData,
    variant: Variant,
    plan: &Plan,
) -> Result<PoolRow> {
    let session = setup.session(variant, data)?;
    let (policy, module) = setup.module(variant);
    let instance = policy.instantiate()?;
    let wasm = instance.call("validate", &setup.payload, Some(session.clone()))?;
    let native_answer = native::validate(module, &setup.payload, Some(session.clone()))?;
    let (wasm_audit, native_audit) = (check(&wasm, data.pods)?, check(&native_answer, data.pods)?);
    if wasm_audit != native_audit {
        bail!("wasm and native disagree: {wasm_audit} vs {native_audit}");
    }
    let wasm_warm = measure(
        plan,
        || Some(session.clone()),
        |s| instance.call("validate", &setup.payload, s).map(drop),
    )?;
    let wasm_fresh = measure(
        plan,
        || Some(session.clone()),
        |s| {
            let response = policy.validate(&setup.request, &setup.settings_json, s)?;
            if !response.allowed {
                bail!("denied: {:?}", response.message());
            }
            Ok(())
        },
    )?;
    let native = measure(
        plan,
        || Some(session.clone()),
        |s| native::validate(module, &setup.payload, s).map(drop),
    )?;
    Ok(PoolRow {
        pods: data.pods,
        nodes: data.nodes,
        variant,
        bytes: match variant {
            Variant::Masked => data.bytes(true),
            Variant::Distinct => (data.nodes_distinct.len() + data.pods_distinct.len()) as u64,
            Variant::Unmasked | Variant::Naive => data.bytes(false),
        },
        wasm_warm,
        wasm_fresh,
        native,
    })
}
