//! Loading a built policy module and evaluating it the way policy-evaluator does.
//!
//! Modules are compiled once per process (keyed by content) on one shared
//! wasmtime [`Engine`](wasmtime::Engine); each call then gets a fresh
//! `WapcHost` (a new store and instance, like policy-server's per-request
//! isolation), so no guest state leaks between evaluations.
//!
//! [`Policy::instantiate`] gives an [`Instance`] to keep and reuse instead (for
//! benchmarks of a warm instance); the per-call API above is unchanged.
//!
//! Guests run with a deadline ([`Policy::with_timeout`], epoch interruption) and,
//! when asked, a cap on their linear memory ([`Policy::with_memory_limit`],
//! wasmtime-provider's `ResourceLimits`); [`Policy::memory_needed`] measures how
//! large a guest's memory grows on one call.

use std::collections::HashMap;
use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use wapc::WapcHost;
use wasmtime_provider::wasmtime;
use wasmtime_provider::{
    EpochDeadlines, ResourceLimits, WasmtimeEngineProviderBuilder, WasmtimeEngineProviderPre,
};

use crate::host::{Answers, ContextAwareAccess, HostCall, HostContext, HostResponder};
use crate::replay::{Exchange, ReplaySession};
use crate::response::{AdmissionResponse, SettingsValidation, ValidationResponse};
use crate::wasm_sections::read_kubewarden_metadata;

/// How often the shared engine's epoch advances (the unit of guest deadlines).
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Default limit for one guest call (and for `wapc_init`); policy-server's
/// `timeoutEvalSeconds` may be 2–30 s. Generous, since tests run in parallel on
/// small machines; it only exists so a looping policy fails instead of hanging.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The process-wide engine, with epoch interruption driven by a ticker thread.
fn engine() -> Result<&'static wasmtime::Engine> {
    static ENGINE: OnceLock<Result<wasmtime::Engine, String>> = OnceLock::new();
    ENGINE
        .get_or_init(|| {
            let mut config = wasmtime::Config::new();
            config.epoch_interruption(true);
            // For profilers (bench/x86_count.py --functions): wasmtime writes the compiled wasm
            // functions' addresses and names to /tmp/perf-<pid>.map.
            if std::env::var_os("GPU_E2E_PERFMAP").is_some() {
                config.profiler(wasmtime::ProfilingStrategy::PerfMap);
            }
            let engine = wasmtime::Engine::new(&config).map_err(|e| format!("{e:?}"))?;
            let ticker = engine.clone();
            std::thread::Builder::new()
                .name("gpu-e2e-epoch".into())
                .spawn(move || {
                    loop {
                        std::thread::sleep(EPOCH_TICK);
                        ticker.increment_epoch();
                    }
                })
                .map_err(|e| format!("cannot start the epoch ticker thread: {e}"))?;
            Ok(engine)
        })
        .as_ref()
        .map_err(|e| anyhow!("cannot create the wasmtime engine: {e}"))
}

/// Size of a WebAssembly memory page: linear memory grows in these steps.
pub const WASM_PAGE_SIZE: usize = 64 * 1024;

/// A compiled module and its pre-linked provider without resource limits.
type Compiled = (wasmtime::Module, WasmtimeEngineProviderPre);
type CompiledSlot = Arc<OnceLock<Result<Compiled, String>>>;

/// A provider for `module`, linked (WASI and waPC imports) with these limits.
fn build_pre(
    module: &wasmtime::Module,
    limits: Option<ResourceLimits>,
) -> Result<WasmtimeEngineProviderPre> {
    let mut builder = WasmtimeEngineProviderBuilder::new()
        .engine(module.engine().clone())
        .module(module.clone());
    if let Some(limits) = limits {
        builder = builder.enable_resource_limits(limits);
    }
    builder
        .build_pre()
        .map_err(|e| anyhow!("cannot link the module: {e}"))
}

/// Compiles `bytes` once per process; concurrent loads of the same module wait
/// for one compilation, different modules compile in parallel.
fn compile_cached(bytes: &[u8]) -> Result<Compiled> {
    static MODULES: OnceLock<Mutex<HashMap<(u64, usize), CompiledSlot>>> = OnceLock::new();
    let mut hasher = DefaultHasher::new();
    bytes.hash(&mut hasher);
    let key = (hasher.finish(), bytes.len());
    let slot = MODULES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(key)
        .or_default()
        .clone();
    slot.get_or_init(|| {
        let engine = engine().map_err(|e| format!("{e:#}"))?;
        let module = wasmtime::Module::new(engine, bytes).map_err(|e| format!("{e:?}"))?;
        let pre = build_pre(&module, None).map_err(|e| format!("{e:#}"))?;
        Ok((module, pre))
    })
    .clone()
    .map_err(|e| anyhow!("cannot compile the module: {e}"))
}

/// What one `validate` evaluation produced, beyond the response.
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// The `AdmissionResponse` kwctl would print.
    pub response: AdmissionResponse,
    /// Host calls the guest made, in order.
    pub host_calls: Vec<HostCall>,
    /// Replay exchanges left unconsumed (kwctl warns about these).
    pub unconsumed_exchanges: Vec<Exchange>,
}

impl Evaluation {
    /// The host calls as (operation, payload read as JSON), in order.
    pub fn calls(&self) -> Vec<(&str, Value)> {
        self.host_calls
            .iter()
            .map(|c| {
                let payload = serde_json::from_str(&c.payload)
                    .unwrap_or_else(|e| panic!("host call payload {}: {e}", c.payload));
                (c.operation.as_str(), payload)
            })
            .collect()
    }
}

/// A compiled policy module, ready to be evaluated any number of times.
#[derive(Clone)]
pub struct Policy {
    path: PathBuf,
    module: wasmtime::Module,
    pre: WasmtimeEngineProviderPre,
    memory_limit: Option<usize>,
    metadata: Option<Value>,
    access: ContextAwareAccess,
    timeout: Duration,
    load_time: Duration,
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("path", &self.path)
            .field("metadata", &self.metadata)
            .field("access", &self.access)
            .field("timeout", &self.timeout)
            .field("memory_limit", &self.memory_limit)
            .field("load_time", &self.load_time)
            .finish_non_exhaustive()
    }
}

impl Policy {
    /// Loads and compiles the module at `path` (compiled once per process).
    ///
    /// A missing file is an error telling to build the modules (`make build`).
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        if !path.is_file() {
            bail!(
                "policy module {} not found: run `make build` first (`make build-test-modules` also builds the e2e fixture; or `cargo build --locked --release --target wasm32-wasip1 -p <crate>`)",
                path.display()
            );
        }
        let bytes = std::fs::read(path)
            .with_context(|| format!("cannot read policy module {}", path.display()))?;
        Self::from_bytes(path, &bytes)
            .with_context(|| format!("cannot load policy module {}", path.display()))
    }

    /// Compiles a module given as bytes (binary wasm, or WAT text); `name` is
    /// only used in messages.
    pub fn from_bytes(name: impl Into<PathBuf>, bytes: &[u8]) -> Result<Self> {
        let started = Instant::now();
        let (module, pre) = compile_cached(bytes)?;
        Ok(Self {
            path: name.into(),
            module,
            pre,
            memory_limit: None,
            metadata: read_kubewarden_metadata(bytes),
            access: ContextAwareAccess::default(),
            timeout: DEFAULT_TIMEOUT,
            load_time: started.elapsed(),
        })
    }

    /// Restricts which Kubernetes resources host calls may read (default:
    /// [`ContextAwareAccess::Unrestricted`]).
    pub fn with_context_aware_access(mut self, access: ContextAwareAccess) -> Self {
        self.access = access;
        self
    }

    /// Sets the limit for one guest call (default [`DEFAULT_TIMEOUT`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Caps each linear memory of the guest at `bytes` (rounded down to whole
    /// 64 KiB pages by the runtime), with wasmtime-provider's `ResourceLimits`
    /// as an embedder such as policy-server can: a `memory.grow` beyond it fails,
    /// so a Rust guest aborts its allocation and the call traps (a 500). A guest
    /// whose initial memory is larger cannot be instantiated at all.
    pub fn with_memory_limit(mut self, bytes: usize) -> Result<Self> {
        self.pre = build_pre(
            &self.module,
            Some(ResourceLimits {
                max_memory_size: Some(bytes),
                max_table_elements: None,
            }),
        )?;
        self.memory_limit = Some(bytes);
        Ok(self)
    }

    /// The cap set by [`Policy::with_memory_limit`], if any.
    pub fn memory_limit(&self) -> Option<usize> {
        self.memory_limit
    }

    /// How large the guest's linear memory grows on one call of `operation` with
    /// `payload` in a fresh instance, in bytes (whole 64 KiB pages).
    ///
    /// wasmtime-provider keeps the store to itself, so the size cannot be read
    /// after the call; it is measured instead as the smallest memory cap under
    /// which the call completes, by bisection between 0 and `ceiling`. The two
    /// are the same number: memory never shrinks, and a guest allocates the same
    /// way on the same input until a growth fails. Each probe is a full call in a
    /// fresh instance (about log2(ceiling / 64 KiB) of them). Errors when the
    /// call fails even with `ceiling`.
    pub fn memory_needed(&self, operation: &str, payload: &[u8], ceiling: usize) -> Result<usize> {
        let completes = |pages: usize| -> Result<bool> {
            let capped = self.clone().with_memory_limit(pages * WASM_PAGE_SIZE)?;
            let ctx = self.context(Answers::None);
            // A harness error here is the instantiation failing under the cap.
            Ok(matches!(
                capped.call_with(operation, payload, ctx),
                Ok(Ok(_))
            ))
        };
        let (mut too_small, mut enough) = (0, ceiling / WASM_PAGE_SIZE);
        if !completes(enough)? {
            bail!(
                "{operation} on {} does not complete within {ceiling} bytes of guest memory",
                self.path.display()
            );
        }
        while enough - too_small > 1 {
            let middle = too_small + (enough - too_small) / 2;
            if completes(middle)? {
                enough = middle;
            } else {
                too_small = middle;
            }
        }
        Ok(enough * WASM_PAGE_SIZE)
    }

    /// Where the module was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `io.kubewarden.metadata` the module carries, if annotated.
    pub fn metadata(&self) -> Option<&Value> {
        self.metadata.as_ref()
    }

    /// How long [`Policy::load`] took (near zero when the module was cached).
    pub fn load_time(&self) -> Duration {
        self.load_time
    }

    /// Instantiates the module in a fresh waPC host (runs `wapc_init`) and calls
    /// `operation`. The outer error is a harness failure, the inner one the
    /// guest's (an `Err` returned by the policy, or a trap).
    fn call_with(
        &self,
        operation: &str,
        payload: &[u8],
        ctx: Arc<HostContext>,
    ) -> Result<Result<Vec<u8>, String>> {
        let host = self.host(ctx)?;
        Ok(host.call(operation, payload).map_err(|e| e.to_string()))
    }

    /// A new waPC host (store, instance, `wapc_init` run) whose host calls are
    /// served by `ctx`.
    fn host(&self, ctx: Arc<HostContext>) -> Result<WapcHost> {
        let ticks = u64::try_from(self.timeout.as_millis() / EPOCH_TICK.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let provider = self
            .pre
            .rehydrate(Some(EpochDeadlines {
                wapc_init: ticks,
                wapc_func: ticks,
            }))
            .with_context(|| format!("cannot instantiate {}", self.path.display()))?;
        let callback = move |_id: u64, binding: &str, namespace: &str, op: &str, msg: &[u8]| {
            ctx.handle(binding, namespace, op, msg)
                .map_err(|e| -> Box<dyn std::error::Error + Send + Sync> { e.into() })
        };
        WapcHost::new(Box::new(provider), Some(Box::new(callback)))
            .with_context(|| format!("cannot initialize {}", self.path.display()))
    }

    /// Instantiates the module once (runs `wapc_init`) and returns the instance,
    /// to evaluate many requests in it: what a runtime that keeps instances
    /// warm does. Guest state (heap, globals) carries over between its calls.
    pub fn instantiate(&self) -> Result<Instance> {
        let started = Instant::now();
        let ctx = self.context(Answers::None);
        let host = self.host(Arc::clone(&ctx))?;
        Ok(Instance {
            path: self.path.clone(),
            host,
            ctx,
            instantiate_time: started.elapsed(),
        })
    }

    /// Calls a guest function with a raw payload in a fresh instance; a guest
    /// error (the policy's `Err`, or a trap) is returned as an error.
    pub fn call(&self, operation: &str, payload: &[u8]) -> Result<Vec<u8>> {
        self.call_answered(operation, payload, Answers::None)
    }

    /// [`Policy::call`] with the host calls served from `replay`.
    pub fn call_replayed(
        &self,
        operation: &str,
        payload: &[u8],
        replay: ReplaySession,
    ) -> Result<Vec<u8>> {
        self.call_answered(operation, payload, Answers::Replay(replay))
    }

    /// [`Policy::call`] with the host calls answered by `answers`.
    fn call_answered(&self, operation: &str, payload: &[u8], answers: Answers) -> Result<Vec<u8>> {
        self.call_with(operation, payload, self.context(answers))?
            .map_err(|e| guest_call_failed(operation, e))
    }

    /// A host context for one evaluation: this policy's [`ContextAwareAccess`], host calls
    /// answered by `answers`.
    fn context(&self, answers: Answers) -> Arc<HostContext> {
        Arc::new(HostContext::new(self.access.clone(), answers))
    }

    /// Calls `protocol_version`; SDK policies answer `"v1"`.
    pub fn protocol_version(&self) -> Result<String> {
        let bytes = self.call("protocol_version", &[])?;
        serde_json::from_slice(&bytes).with_context(|| {
            format!(
                "protocol_version answered {:?}, not a JSON string",
                String::from_utf8_lossy(&bytes)
            )
        })
    }

    /// Calls `validate_settings`, as policy-evaluator does: a guest failure or an
    /// unreadable answer means invalid settings. `null` settings are sent as `{}`.
    pub fn validate_settings(&self, settings: &Value) -> Result<SettingsValidation> {
        let payload = serde_json::to_vec(settings_or_empty(settings))?;
        let ctx = self.context(Answers::None);
        Ok(match self.call_with("validate_settings", &payload, ctx)? {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| SettingsValidation {
                valid: false,
                message: Some(format!("error: {e:?}")),
            }),
            Err(e) => SettingsValidation {
                valid: false,
                message: Some(format!("Error invoking settings validation callback: {e}")),
            },
        })
    }

    /// Evaluates an `AdmissionRequest` (not an `AdmissionReview`) with `settings`,
    /// serving host calls from `replay`, and returns the `AdmissionResponse`.
    pub fn validate(
        &self,
        request: &Value,
        settings: &Value,
        replay: Option<ReplaySession>,
    ) -> Result<AdmissionResponse> {
        Ok(self.evaluate(request, settings, replay)?.response)
    }

    /// Like [`Policy::validate`], also returning the host calls made and the
    /// replay exchanges left unconsumed.
    pub fn evaluate(
        &self,
        request: &Value,
        settings: &Value,
        replay: Option<ReplaySession>,
    ) -> Result<Evaluation> {
        self.evaluate_answered(request, settings, replay.into())
    }

    /// Like [`Policy::evaluate`], with host calls answered by `responder` (a cluster snapshot,
    /// a live cluster) instead of a replay session; calls outside the policy's
    /// [`ContextAwareAccess`] are refused before they reach it.
    pub fn evaluate_with(
        &self,
        request: &Value,
        settings: &Value,
        responder: Arc<dyn HostResponder>,
    ) -> Result<Evaluation> {
        self.evaluate_answered(request, settings, Answers::Responder(responder))
    }

    fn evaluate_answered(
        &self,
        request: &Value,
        settings: &Value,
        answers: Answers,
    ) -> Result<Evaluation> {
        let payload = validate_payload(request, settings)?;
        let ctx = self.context(answers);
        let outcome = self.call_with("validate", &payload, Arc::clone(&ctx))?;
        Ok(evaluation(request, outcome, &ctx))
    }
}

/// A kept waPC instance of a [`Policy`] (from [`Policy::instantiate`]), evaluated
/// any number of times. Each call gets its own replay session and host-call log.
pub struct Instance {
    path: PathBuf,
    host: WapcHost,
    ctx: Arc<HostContext>,
    instantiate_time: Duration,
}

impl fmt::Debug for Instance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Instance")
            .field("path", &self.path)
            .field("instantiate_time", &self.instantiate_time)
            .finish_non_exhaustive()
    }
}

impl Instance {
    /// How long [`Policy::instantiate`] took (store, instance and `wapc_init`).
    pub fn instantiate_time(&self) -> Duration {
        self.instantiate_time
    }

    /// Calls a guest function with a raw payload, serving host calls from
    /// `replay`; a guest error (the policy's `Err`, or a trap) is an error.
    pub fn call(
        &self,
        operation: &str,
        payload: &[u8],
        replay: Option<ReplaySession>,
    ) -> Result<Vec<u8>> {
        self.ctx.start(replay);
        let outcome = self.host.call(operation, payload);
        self.ctx.finish();
        outcome.map_err(|e| guest_call_failed(operation, e))
    }

    /// [`Policy::evaluate`] in this instance.
    pub fn evaluate(
        &self,
        request: &Value,
        settings: &Value,
        replay: Option<ReplaySession>,
    ) -> Result<Evaluation> {
        let payload = validate_payload(request, settings)?;
        self.ctx.start(replay);
        let outcome = self
            .host
            .call("validate", &payload)
            .map_err(|e| e.to_string());
        Ok(evaluation(request, outcome, &self.ctx))
    }
}

/// The error of a guest call that failed (the policy's `Err`, or a trap).
fn guest_call_failed(operation: &str, error: impl fmt::Display) -> anyhow::Error {
    anyhow!("guest call {operation} failed: {error}")
}

/// The `validate` payload policy-evaluator sends: `{"request", "settings"}`.
fn validate_payload(request: &Value, settings: &Value) -> Result<Vec<u8>> {
    Ok(serde_json::to_vec(&json!({
        "request": request,
        "settings": settings_or_empty(settings),
    }))?)
}

/// Turns the guest's answer to `validate` into the [`Evaluation`] kwctl reports.
fn evaluation(request: &Value, outcome: Result<Vec<u8>, String>, ctx: &HostContext) -> Evaluation {
    let uid = request
        .get("uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    // A DELETE request has a null object: mutations are then refused.
    let object = request.get("object").filter(|o| !o.is_null());
    let response = match outcome {
        Ok(bytes) => serde_json::from_slice::<ValidationResponse>(&bytes)
            .map_err(|e| anyhow!("cannot parse the policy's response: {e}"))
            .and_then(|r| AdmissionResponse::from_validation_response(uid, object, &r))
            .unwrap_or_else(|e| {
                AdmissionResponse::reject_internal_server_error(uid, format!("{e:#}"))
            }),
        Err(e) => AdmissionResponse::reject_internal_server_error(uid, e),
    };
    let (replay, host_calls) = ctx.finish();
    Evaluation {
        response,
        host_calls,
        unconsumed_exchanges: replay
            .map(|s| s.remaining().cloned().collect())
            .unwrap_or_default(),
    }
}

/// policy-evaluator's settings are a map; "no settings" is `{}`.
fn settings_or_empty(settings: &Value) -> &Value {
    static EMPTY: OnceLock<Value> = OnceLock::new();
    if settings.is_null() {
        EMPTY.get_or_init(|| json!({}))
    } else {
        settings
    }
}
