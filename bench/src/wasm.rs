//! The built modules in the harness's runtime (wapc + wasmtime, `gpu_e2e::Policy`):
//! module compile time, instantiation, and `validate` on each representative request,
//! in a kept (warm) instance and in a fresh instance per call, next to the same rules
//! called natively.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use gpu_e2e::{AdmissionResponse, Policy, ReplaySession, add_custom_section};
use serde_json::Value;

use crate::cases::{Loaded, Outcome};
use crate::native;
use crate::stats::{Plan, Summary, measure};

/// How many calls each measurement makes.
#[derive(Debug, Clone, Copy)]
pub struct Plans {
    /// Uncached compilations of each module.
    pub compiles: usize,
    pub instantiate: Plan,
    pub warm: Plan,
    pub fresh: Plan,
    pub native: Plan,
}

impl Plans {
    pub fn full() -> Plans {
        Plans {
            compiles: 5,
            instantiate: Plan::thousands(1_000),
            warm: Plan::thousands(5_000),
            fresh: Plan::thousands(2_000),
            native: Plan::thousands(5_000),
        }
    }

    pub fn scaled(self, factor: f64) -> Plans {
        Plans {
            compiles: ((self.compiles as f64 * factor).round() as usize).max(1),
            instantiate: self.instantiate.scaled(factor),
            warm: self.warm.scaled(factor),
            fresh: self.fresh.scaled(factor),
            native: self.native.scaled(factor),
        }
    }
}

/// Compile and instantiate times of one module.
#[derive(Debug, Clone)]
pub struct ModuleTimes {
    /// Cranelift compilation of the module (cache bypassed), per compile.
    pub compile: Summary,
    /// New store + instance + `wapc_init` (and dropping it).
    pub instantiate: Summary,
}

/// Compiles `bytes` `n` times, each time as a module the harness has not seen (a
/// custom section with a fresh number defeats its per-process cache), and returns the
/// loaded policy with the times.
pub fn load_module(path: &Path, bytes: &[u8], compiles: usize) -> Result<(Policy, Vec<Duration>)> {
    static NONCE: AtomicU64 = AtomicU64::new(0);
    let mut times = Vec::with_capacity(compiles);
    let mut policy = None;
    for _ in 0..compiles.max(1) {
        let nonce = NONCE.fetch_add(1, Ordering::Relaxed);
        let unique = add_custom_section(bytes, "gpu-bench-nonce", &nonce.to_le_bytes());
        let started = Instant::now();
        let loaded = Policy::from_bytes(path, &unique)
            .with_context(|| format!("cannot load {}", path.display()))?;
        times.push(started.elapsed());
        policy = Some(loaded);
    }
    match policy {
        Some(p) => Ok((p, times)),
        None => bail!("no compilation of {}", path.display()),
    }
}

/// Compile and instantiate times of `policy` loaded from `bytes`.
pub fn module_times(path: &Path, bytes: &[u8], plans: &Plans) -> Result<(Policy, ModuleTimes)> {
    let (policy, compiles) = load_module(path, bytes, plans.compiles)?;
    let compile = Summary::from_samples(compiles).context("no compile time")?;
    let instantiate = measure(
        &plans.instantiate,
        || (),
        |()| policy.instantiate().map(drop),
    )?;
    Ok((
        policy,
        ModuleTimes {
            compile,
            instantiate,
        },
    ))
}

/// The outcome of an admission response.
pub fn outcome(response: &AdmissionResponse) -> Outcome {
    match (response.allowed, response.patch.is_some()) {
        (true, true) => Outcome::Patch,
        (true, false) => Outcome::Accept,
        (false, _) => Outcome::Deny,
    }
}

/// One request of one policy, measured.
#[derive(Debug, Clone)]
pub struct CaseResult {
    pub name: String,
    pub kind: &'static str,
    pub intent: Outcome,
    pub observed: Outcome,
    pub request_bytes: usize,
    /// Host calls the evaluation made.
    pub host_calls: usize,
    /// Raw guest `validate` call (payload bytes in, answer bytes out) in a kept instance.
    pub warm_call: Summary,
    /// The harness's whole `validate` (payload serialization, guest call, response
    /// parsing and JSONPatch) in a kept instance.
    pub warm_validate: Summary,
    /// The harness's `validate` with a fresh instance per call (what policy-server does).
    pub fresh_validate: Summary,
    /// The same rules natively (`None` when there is no native counterpart).
    pub native: Option<Summary>,
    /// Anything odd: an outcome other than intended, native and wasm disagreeing.
    pub notes: Vec<String>,
}

/// [`measure`] of `call`, given a fresh copy of the case's replay session each time.
fn measure_in_session<R>(
    plan: &Plan,
    case: &Loaded,
    mut call: impl FnMut(Option<ReplaySession>) -> Result<R>,
) -> Result<Summary> {
    measure(
        plan,
        || case.session.clone(),
        |session| call(session).map(drop),
    )
}

/// Measures one case of `policy`.
pub fn measure_case(
    policy: &Policy,
    module: &str,
    case: &Loaded,
    plans: &Plans,
) -> Result<CaseResult> {
    let instance = policy.instantiate()?;
    let first = policy.evaluate(&case.request, &case.settings, case.session.clone())?;
    let observed = outcome(&first.response);
    let mut notes = Vec::new();
    if observed != case.case.intent {
        notes.push(format!(
            "meant to {} but the module answered {}: {:?}",
            case.case.intent.as_str(),
            observed.as_str(),
            first.response.message()
        ));
    }
    if !first.unconsumed_exchanges.is_empty() {
        notes.push(format!(
            "{} replay exchanges left unconsumed",
            first.unconsumed_exchanges.len()
        ));
    }
    let wasm_answer = instance.call("validate", &case.payload, case.session.clone())?;

    let warm_call = measure_in_session(&plans.warm, case, |session| {
        instance.call("validate", &case.payload, session)
    })?;
    let warm_validate = measure_in_session(&plans.warm, case, |session| {
        instance
            .evaluate(&case.request, &case.settings, session)
            .map(|e| e.response)
    })?;
    let fresh_validate = measure_in_session(&plans.fresh, case, |session| {
        policy.validate(&case.request, &case.settings, session)
    })?;
    let native = if native::supported(module) {
        let answer = native::validate(module, &case.payload, case.session.clone())?;
        if !same_answer(&answer, &wasm_answer) {
            notes.push(format!(
                "native and wasm answers differ: {} vs {}",
                String::from_utf8_lossy(&answer),
                String::from_utf8_lossy(&wasm_answer)
            ));
        }
        Some(measure(
            &plans.native,
            || case.session.clone(),
            |session| native::validate(module, &case.payload, session).map(drop),
        )?)
    } else {
        None
    };
    Ok(CaseResult {
        name: case.name(),
        kind: case.case.kind,
        intent: case.case.intent,
        observed,
        request_bytes: case.payload.len(),
        host_calls: first.host_calls.len(),
        warm_call,
        warm_validate,
        fresh_validate,
        native,
        notes,
    })
}

/// Two `ValidationResponse`s are the same answer (maps compared as maps).
pub fn same_answer(a: &[u8], b: &[u8]) -> bool {
    match (
        serde_json::from_slice::<Value>(a),
        serde_json::from_slice::<Value>(b),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_compare_as_json() {
        assert!(same_answer(br#"{"a":1,"b":2}"#, br#"{"b":2,"a":1}"#));
        assert!(!same_answer(br#"{"a":1}"#, br#"{"a":2}"#));
    }
}
