//! `gpu-bench guest-work`: the guest's work per waPC `validate` call, in wasm instructions
//! counted by wasmi's fuel metering, a number that does not depend on the machine or its load.
//!
//! Timings on a 2-core VM swing by tens of percent between runs; this count says whether one
//! module does less work per request than another. A unit of wasmi 2.0 fuel is one executed wasm
//! instruction (`nop`, `drop` and the structure markers `block`, `loop`, `else`, `end` are free),
//! plus one per 64 bytes of bulk memory operations (`memory.copy`, `memory.fill`, `memory.init`),
//! of memory growth (`memory.grow`) and of values passed in calls. Functions are compiled when the
//! module is loaded ([`CompilationMode::Eager`]), so no compilation fuel lands in a call.
//!
//! The host ([`Runtime`]) implements the waPC imports (`__host_call` answers failure and is
//! counted: a measured call must make none) and the WASI preview1 calls these modules make, all
//! deterministic: a fixed clock ([`CLOCK_NANOS`]), an empty environment, `fd_write` swallowed,
//! `random_get` a fixed sequence, `proc_exit` a trap.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use gpu_e2e::{AdmissionResponse, ValidationResponse, read_admission_request};
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use wasmi::{
    Caller, CompilationMode, Config, Engine, Extern, Linker, Memory, Module, Store, TypedFunc,
};

use crate::cases::{self, CASES, Outcome, STATIC_POLICIES};
use crate::stats::fmt_bytes;

/// Calls on the kept instance after the first; the table shows their median.
pub const KEPT_CALLS: usize = 20;

/// Fuel one call may use before it is stopped (a guest looping forever is an error, not a hang):
/// over ten thousand times what the policies' requests take.
pub const FUEL_BUDGET: u64 = 10_000_000_000;

/// What `clock_time_get` answers, for every clock: 2026-12-02T00:00:00Z in nanoseconds.
pub const CLOCK_NANOS: u64 = 1_796_169_600_000_000_000;

/// What `__host_error` tells a guest whose host call was refused.
const HOST_CALL_REFUSED: &str = "gpu-bench guest-work answers no host call";

/// The markers of the section in BENCHMARKS.md.
pub const BEGIN: &str = "<!-- guest-work:begin -->";
pub const END: &str = "<!-- guest-work:end -->";

/// The host's side of one instance.
#[derive(Debug, Default)]
struct Host {
    op: Vec<u8>,
    payload: Vec<u8>,
    response: Option<Vec<u8>>,
    error: Option<String>,
    /// `binding/namespace/operation` of each host call the guest made.
    host_calls: Vec<String>,
}

fn trap(message: impl Into<String>) -> wasmi::Error {
    wasmi::Error::new(message.into())
}

fn memory(caller: &Caller<'_, Host>) -> Result<Memory, wasmi::Error> {
    match caller.get_export("memory") {
        Some(Extern::Memory(m)) => Ok(m),
        _ => Err(trap("the guest exports no memory")),
    }
}

fn read(caller: &Caller<'_, Host>, ptr: i32, len: i32) -> Result<Vec<u8>, wasmi::Error> {
    let mut buf = vec![0; len as u32 as usize];
    memory(caller)?
        .read(caller, ptr as u32 as usize, &mut buf)
        .map_err(|e| trap(format!("guest memory read at {ptr} ({len} bytes): {e}")))?;
    Ok(buf)
}

fn write(caller: &mut Caller<'_, Host>, ptr: i32, bytes: &[u8]) -> Result<(), wasmi::Error> {
    memory(caller)?
        .write(&mut *caller, ptr as u32 as usize, bytes)
        .map_err(|e| {
            trap(format!(
                "guest memory write at {ptr} ({} bytes): {e}",
                bytes.len()
            ))
        })
}

/// The waPC and WASI preview1 imports.
fn linker(engine: &Engine) -> Result<Linker<Host>> {
    let mut l = Linker::<Host>::new(engine);
    l.func_wrap(
        "wapc",
        "__guest_request",
        |mut c: Caller<'_, Host>, op_ptr: i32, ptr: i32| -> Result<(), wasmi::Error> {
            let (op, payload) = (c.data().op.clone(), c.data().payload.clone());
            write(&mut c, op_ptr, &op)?;
            write(&mut c, ptr, &payload)
        },
    )?;
    l.func_wrap(
        "wapc",
        "__guest_response",
        |mut c: Caller<'_, Host>, ptr: i32, len: i32| -> Result<(), wasmi::Error> {
            let bytes = read(&c, ptr, len)?;
            c.data_mut().response = Some(bytes);
            Ok(())
        },
    )?;
    l.func_wrap(
        "wapc",
        "__guest_error",
        |mut c: Caller<'_, Host>, ptr: i32, len: i32| -> Result<(), wasmi::Error> {
            let bytes = read(&c, ptr, len)?;
            c.data_mut().error = Some(String::from_utf8_lossy(&bytes).into_owned());
            Ok(())
        },
    )?;
    l.func_wrap(
        "wapc",
        "__host_call",
        |mut c: Caller<'_, Host>,
         binding_ptr: i32,
         binding_len: i32,
         ns_ptr: i32,
         ns_len: i32,
         op_ptr: i32,
         op_len: i32,
         _ptr: i32,
         _len: i32|
         -> Result<i32, wasmi::Error> {
            let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
            let call = format!(
                "{}/{}/{}",
                text(read(&c, binding_ptr, binding_len)?),
                text(read(&c, ns_ptr, ns_len)?),
                text(read(&c, op_ptr, op_len)?)
            );
            c.data_mut().host_calls.push(call);
            Ok(0)
        },
    )?;
    l.func_wrap(
        "wapc",
        "__host_response_len",
        |_: Caller<'_, Host>| -> i32 { 0 },
    )?;
    l.func_wrap("wapc", "__host_response", |_: Caller<'_, Host>, _: i32| {})?;
    l.func_wrap("wapc", "__host_error_len", |_: Caller<'_, Host>| -> i32 {
        HOST_CALL_REFUSED.len() as i32
    })?;
    l.func_wrap(
        "wapc",
        "__host_error",
        |mut c: Caller<'_, Host>, ptr: i32| -> Result<(), wasmi::Error> {
            write(&mut c, ptr, HOST_CALL_REFUSED.as_bytes())
        },
    )?;

    const WASI: &str = "wasi_snapshot_preview1";
    l.func_wrap(
        WASI,
        "clock_time_get",
        |mut c: Caller<'_, Host>,
         _id: i32,
         _precision: i64,
         out: i32|
         -> Result<i32, wasmi::Error> {
            write(&mut c, out, &CLOCK_NANOS.to_le_bytes())?;
            Ok(0)
        },
    )?;
    l.func_wrap(
        WASI,
        "environ_sizes_get",
        |mut c: Caller<'_, Host>, count: i32, size: i32| -> Result<i32, wasmi::Error> {
            write(&mut c, count, &0u32.to_le_bytes())?;
            write(&mut c, size, &0u32.to_le_bytes())?;
            Ok(0)
        },
    )?;
    l.func_wrap(
        WASI,
        "environ_get",
        |_: Caller<'_, Host>, _: i32, _: i32| -> i32 { 0 },
    )?;
    l.func_wrap(
        WASI,
        "fd_write",
        |mut c: Caller<'_, Host>,
         _fd: i32,
         iovs: i32,
         n: i32,
         out: i32|
         -> Result<i32, wasmi::Error> {
            let mut total = 0u32;
            for i in 0..n.max(0) {
                let iov = read(&c, iovs.wrapping_add(8 * i), 8)?;
                total = total.wrapping_add(u32::from_le_bytes([iov[4], iov[5], iov[6], iov[7]]));
            }
            write(&mut c, out, &total.to_le_bytes())?;
            Ok(0)
        },
    )?;
    l.func_wrap(
        WASI,
        "proc_exit",
        |_: Caller<'_, Host>, code: i32| -> Result<(), wasmi::Error> {
            Err(trap(format!("the guest called proc_exit({code})")))
        },
    )?;
    l.func_wrap(
        WASI,
        "random_get",
        |mut c: Caller<'_, Host>, buf: i32, len: i32| -> Result<i32, wasmi::Error> {
            let bytes: Vec<u8> = (0..len as u32)
                .map(|i| (i.wrapping_mul(31).wrapping_add(7)) as u8)
                .collect();
            write(&mut c, buf, &bytes)?;
            Ok(0)
        },
    )?;
    Ok(l)
}

/// The wasmi engine (fuel metering on, eager compilation) and the host's imports.
pub struct Runtime {
    engine: Engine,
    linker: Linker<Host>,
    budget: u64,
}

impl Runtime {
    pub fn new() -> Result<Runtime> {
        let mut config = Config::default();
        config.consume_fuel(true);
        config.compilation_mode(CompilationMode::Eager);
        let engine = Engine::new(&config);
        let linker = linker(&engine)?;
        Ok(Runtime {
            engine,
            linker,
            budget: FUEL_BUDGET,
        })
    }

    /// The same runtime stopping each call after `budget` units of fuel.
    pub fn with_budget(mut self, budget: u64) -> Runtime {
        self.budget = budget;
        self
    }

    /// Validates and compiles a module.
    pub fn load(&self, bytes: &[u8]) -> Result<Module> {
        Module::new(&self.engine, bytes).map_err(|e| anyhow!("wasmi cannot load the module: {e}"))
    }

    /// A new instance of `module`, initialised (`_initialize`, `_start` and `wapc_init`, those
    /// it exports), with the fuel that took.
    pub fn instantiate(&self, module: &Module) -> Result<(Guest, u64)> {
        let mut store = Store::new(&self.engine, Host::default());
        store.set_fuel(self.budget)?;
        let instance = self
            .linker
            .instantiate_and_start(&mut store, module)
            .map_err(|e| anyhow!("cannot instantiate: {e}"))?;
        for init in ["_initialize", "_start", "wapc_init"] {
            if let Ok(f) = instance.get_typed_func::<(), ()>(&store, init) {
                f.call(&mut store, ())
                    .map_err(|e| anyhow!("{init} failed: {e}"))?;
            }
        }
        let used = self.budget - store.get_fuel()?;
        let call = instance
            .get_typed_func::<(i32, i32), i32>(&store, "__guest_call")
            .map_err(|e| anyhow!("not a waPC module (no __guest_call(i32, i32) -> i32): {e}"))?;
        let memory = instance.get_memory(&store, "memory");
        Ok((
            Guest {
                store,
                call,
                memory,
                budget: self.budget,
            },
            used,
        ))
    }
}

/// One instance of a module.
pub struct Guest {
    store: Store<Host>,
    call: TypedFunc<(i32, i32), i32>,
    memory: Option<Memory>,
    budget: u64,
}

/// A guest call's answer and cost.
#[derive(Debug, Clone)]
pub struct Answer {
    pub response: Vec<u8>,
    pub fuel: u64,
    /// The host calls it made (`binding/namespace/operation`), all refused.
    pub host_calls: Vec<String>,
    /// 64 KiB pages the call added to the guest's memory (each costs 1,024 fuel).
    pub grown_pages: u64,
}

impl Guest {
    /// The guest memory's size in 64 KiB pages (0 without an exported memory).
    pub fn pages(&self) -> u64 {
        self.memory.map_or(0, |m| m.size(&self.store))
    }

    /// Calls waPC operation `op` with `payload`; a guest error or a trap is an error.
    pub fn call(&mut self, op: &str, payload: &[u8]) -> Result<Answer> {
        let host = self.store.data_mut();
        host.op = op.as_bytes().to_vec();
        host.payload = payload.to_vec();
        host.response = None;
        host.error = None;
        host.host_calls.clear();
        self.store.set_fuel(self.budget)?;
        let pages = self.pages();
        let status = self
            .call
            .call(&mut self.store, (op.len() as i32, payload.len() as i32));
        let fuel = self.budget - self.store.get_fuel()?;
        let grown_pages = self.pages().saturating_sub(pages);
        let host = self.store.data_mut();
        match status {
            Err(e) if e.as_trap_code() == Some(wasmi::TrapCode::OutOfFuel) => {
                bail!("{op}: stopped after {} units of fuel", self.budget)
            }
            Err(e) => bail!("{op}: the guest trapped: {e}"),
            Ok(1) => Ok(Answer {
                response: host
                    .response
                    .take()
                    .with_context(|| format!("{op}: the guest succeeded without a response"))?,
                fuel,
                host_calls: std::mem::take(&mut host.host_calls),
                grown_pages,
            }),
            Ok(status) => bail!(
                "{op}: guest error (status {status}): {}",
                host.error.as_deref().unwrap_or("(no message)")
            ),
        }
    }
}

/// One payload's cost on one module.
#[derive(Debug, Clone)]
pub struct Work {
    /// Instantiation and initialisation.
    pub init: u64,
    /// The first call on the fresh instance.
    pub first: u64,
    /// 64 KiB pages the first call grew the memory by.
    pub first_grown_pages: u64,
    /// The calls after it on the same instance, sorted.
    pub kept: Vec<u64>,
    /// The first call's answer.
    pub response: Vec<u8>,
    /// Some kept call answered with other bytes that `same` accepted as the same answer.
    pub varied: bool,
}

impl Work {
    pub fn median(&self) -> u64 {
        self.kept
            .get(self.kept.len() / 2)
            .copied()
            .unwrap_or(self.first)
    }
}

/// `op` with `payload` on a fresh instance of `module`, then `calls` times more on the same
/// instance. No call may call the host, and every answer must be the first one's, bytes equal or
/// `same` (first, other).
pub fn measure(
    runtime: &Runtime,
    module: &Module,
    op: &str,
    payload: &[u8],
    calls: usize,
    same: &dyn Fn(&[u8], &[u8]) -> bool,
) -> Result<Work> {
    let (mut guest, init) = runtime.instantiate(module)?;
    let call = |guest: &mut Guest| -> Result<Answer> {
        let answer = guest.call(op, payload)?;
        if !answer.host_calls.is_empty() {
            bail!(
                "the guest called the host ({}), which guest-work does not answer: the count would be of its failure path",
                answer.host_calls.join(", ")
            );
        }
        Ok(answer)
    };
    let first = call(&mut guest)?;
    let (mut kept, mut varied) = (Vec::with_capacity(calls), false);
    for i in 0..calls {
        let answer = call(&mut guest)?;
        if answer.response != first.response {
            varied = true;
        }
        if answer.response != first.response && !same(&first.response, &answer.response) {
            bail!(
                "call {} on the kept instance answered differently from the first: {} vs {}",
                i + 2,
                String::from_utf8_lossy(&answer.response),
                String::from_utf8_lossy(&first.response)
            );
        }
        kept.push(answer.fuel);
    }
    kept.sort_unstable();
    Ok(Work {
        init,
        first: first.fuel,
        first_grown_pages: first.grown_pages,
        kept,
        response: first.response,
        varied,
    })
}

/// The verdict of a `validate` answer to `request`, as the host would give it (a mutated
/// object that differs from the request's is a patch).
pub fn verdict(request: &Value, response: &[u8]) -> Result<(Outcome, Option<String>)> {
    let answer: ValidationResponse = serde_json::from_slice(response).with_context(|| {
        format!(
            "not a ValidationResponse: {}",
            String::from_utf8_lossy(response)
        )
    })?;
    let admission =
        AdmissionResponse::from_validation_response("", request.get("object"), &answer)?;
    Ok((
        crate::wasm::outcome(&admission),
        admission.message().map(str::to_string),
    ))
}

// ------------------------------------------------------------------------------------------
// Kubewarden's own policies: bench/kubewarden/kubewarden_policies.json, shared with the scripts
// ------------------------------------------------------------------------------------------

/// `bench/kubewarden/kubewarden_policies.json`.
pub const KUBEWARDEN_POLICIES_JSON: &str = include_str!("../kubewarden/kubewarden_policies.json");

#[derive(Debug, Clone, Deserialize)]
pub struct KubewardenPolicies {
    /// The kubewarden/policies commit the modules are built from.
    pub commit: String,
    pub labels: KubewardenPolicy,
    pub mutating: KubewardenPolicy,
}

/// One of Kubewarden's policies, measured when its environment variable names its module.
#[derive(Debug, Clone, Deserialize)]
pub struct KubewardenPolicy {
    pub env: String,
    /// Its name in kubewarden/policies.
    pub policy: String,
    /// Our policy whose requests it is measured on (the rows go after that policy's).
    pub beside: String,
    pub settings: Value,
    /// (kind, request file relative to `beside`'s directory).
    pub requests: Vec<(String, String)>,
}

impl KubewardenPolicies {
    pub fn shared() -> Result<KubewardenPolicies> {
        serde_json::from_str(KUBEWARDEN_POLICIES_JSON)
            .context("bench/kubewarden/kubewarden_policies.json")
    }
}

impl KubewardenPolicy {
    /// The module its environment variable names; `None` when unset, an error when it names no
    /// file.
    pub fn module(&self) -> Result<Option<PathBuf>> {
        match std::env::var_os(&self.env) {
            Some(v) if !v.is_empty() => {
                let path = PathBuf::from(v);
                if !path.is_file() {
                    bail!(
                        "{}={}: no such file (build it with bench/kubewarden/build-kubewarden-policies.sh)",
                        self.env,
                        path.display()
                    );
                }
                Ok(Some(path))
            }
            _ => Ok(None),
        }
    }
}

// ------------------------------------------------------------------------------------------
// The table
// ------------------------------------------------------------------------------------------

/// One measured request.
#[derive(Debug, Clone)]
pub struct Row {
    pub policy: String,
    pub kind: String,
    /// Request file stem.
    pub request: String,
    pub verdict: Outcome,
    /// Ours: the verdict is the one `cases.rs` states (checked). Kubewarden's: recorded only.
    pub kubewarden: bool,
    pub message: Option<String>,
    pub work: Work,
    pub module_size: u64,
}

/// A module to measure and the requests to measure it on.
struct Subject {
    policy: String,
    module: PathBuf,
    kubewarden: bool,
    requests: Vec<Input>,
}

/// One request to measure, read.
struct Input {
    kind: String,
    /// Request file stem.
    name: String,
    request: Value,
    payload: Vec<u8>,
    /// The verdict it is meant to give (ours only).
    intent: Option<Outcome>,
}

/// What one run measured and what it left out.
#[derive(Debug, Clone)]
pub struct Report {
    pub rows: Vec<Row>,
    /// Cases not measured, and why.
    pub skipped: Vec<String>,
    /// Kubewarden's policies: (policy, module) measured, or the sentence saying it was not.
    pub kubewarden: Vec<Result<(String, PathBuf), String>>,
    /// Each module measured: (policy, file name, first 12 hex digits of its SHA-256).
    pub modules: Vec<(String, String, String)>,
    pub commit: String,
    pub date: String,
}

/// Measures the static policies' cases and, when their modules are named, Kubewarden's.
pub fn run(root: &Path, progress: &dyn Fn(String)) -> Result<Report> {
    let mut subjects: Vec<Subject> = Vec::new();
    let mut skipped = Vec::new();
    for policy in STATIC_POLICIES {
        let mut requests = Vec::new();
        for case in CASES.iter().filter(|c| c.policy == *policy) {
            if case.session.is_some() {
                skipped.push(format!(
                    "{policy} {} `{}` (context-aware: its answer needs host calls answered)",
                    case.kind,
                    cases::stem(case.request)
                ));
                continue;
            }
            let loaded = cases::load(root, case)?;
            requests.push(Input {
                kind: case.kind.to_string(),
                name: loaded.name(),
                request: loaded.request,
                payload: loaded.payload,
                intent: Some(case.intent),
            });
        }
        subjects.push(Subject {
            policy: policy.to_string(),
            module: gpu_e2e::module_path(policy)?,
            kubewarden: false,
            requests,
        });
    }
    let mut others: Vec<&str> = CASES
        .iter()
        .map(|c| c.policy)
        .filter(|p| !STATIC_POLICIES.contains(p))
        .collect();
    others.dedup();
    if !others.is_empty() {
        skipped.push(format!(
            "{} (context-aware policies: their decisions read the cluster through host calls)",
            others.join(", ")
        ));
    }
    let shared = KubewardenPolicies::shared()?;
    let mut kubewarden = Vec::new();
    for kw in [&shared.labels, &shared.mutating] {
        let Some(module) = kw.module()? else {
            kubewarden.push(Err(format!(
                "Kubewarden's {} was not measured ({} was not set to its module).",
                kw.policy, kw.env
            )));
            continue;
        };
        kubewarden.push(Ok((kw.policy.clone(), module.clone())));
        let dir = cases::policy_dir(root, &kw.beside);
        let subject = Subject {
            policy: format!("kubewarden/{}", kw.policy),
            module,
            kubewarden: true,
            requests: kw
                .requests
                .iter()
                .map(|(kind, file)| {
                    let request = read_admission_request(dir.join(file))?;
                    Ok(Input {
                        kind: kind.clone(),
                        name: cases::stem(file),
                        payload: cases::validate_payload(&request, &kw.settings)?,
                        request,
                        intent: None,
                    })
                })
                .collect::<Result<_>>()?,
        };
        let at = subjects
            .iter()
            .rposition(|s| s.policy == kw.beside)
            .map_or(subjects.len(), |i| i + 1);
        subjects.insert(at, subject);
    }

    let runtime = Runtime::new()?;
    let (mut rows, mut modules) = (Vec::new(), Vec::new());
    for subject in subjects {
        let bytes = std::fs::read(&subject.module)
            .with_context(|| format!("cannot read {}", subject.module.display()))?;
        let digest = Sha256::digest(&bytes);
        let sha: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
        modules.push((
            subject.policy.clone(),
            subject
                .module
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default(),
            sha,
        ));
        let module = runtime
            .load(&bytes)
            .with_context(|| subject.module.display().to_string())?;
        for Input {
            kind,
            name,
            request,
            payload,
            intent,
        } in subject.requests
        {
            let what = format!("{} {kind} {name}", subject.policy);
            // Our answers must repeat as JSON (audit annotations are a map whose key order changes
            // from call to call); Kubewarden's labels-policy also lists the missing labels in an
            // order that changes (a HashSet): the same verdict will do.
            let same = |a: &[u8], b: &[u8]| {
                if subject.kubewarden {
                    matches!((verdict(&request, a), verdict(&request, b)), (Ok(a), Ok(b)) if a.0 == b.0)
                } else {
                    crate::wasm::same_answer(a, b)
                }
            };
            let work = measure(&runtime, &module, "validate", &payload, KEPT_CALLS, &same)
                .with_context(|| what.clone())?;
            let (verdict, message) = verdict(&request, &work.response).context(what.clone())?;
            if let Some(intent) = intent.filter(|i| *i != verdict) {
                bail!(
                    "{what}: meant to {} but the module answered {} ({})",
                    intent.as_str(),
                    verdict.as_str(),
                    message.as_deref().unwrap_or("no message")
                );
            }
            progress(format!(
                "{what}: {}, {} per validate on a kept instance (min {}, max {}), first {}, instantiate {}",
                verdict.as_str(),
                work.median(),
                work.kept.first().copied().unwrap_or(0),
                work.kept.last().copied().unwrap_or(0),
                work.first,
                work.init
            ));
            rows.push(Row {
                policy: subject.policy.clone(),
                kind,
                request: name,
                verdict,
                kubewarden: subject.kubewarden,
                message,
                work,
                module_size: bytes.len() as u64,
            });
        }
    }
    Ok(Report {
        rows,
        skipped,
        kubewarden,
        modules,
        commit: head_commit(root),
        date: crate::machine::utc_now(),
    })
}

/// `git rev-parse --short=12 HEAD` as Markdown, saying when the policies' sources (`shared/`,
/// `policies/`) had uncommitted changes: the modules may have been built from them.
fn head_commit(root: &Path) -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(root)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let Some(head) = git(&["rev-parse", "--short=12", "HEAD"]).filter(|s| !s.is_empty()) else {
        return "unknown".into();
    };
    match git(&["status", "--porcelain", "--", "shared", "policies"]) {
        Some(changes) if !changes.is_empty() => {
            let files: Vec<&str> = changes.lines().filter_map(|l| l.get(3..)).collect();
            format!("`{head}`, with uncommitted changes to {}", files.join(", "))
        }
        _ => format!("`{head}`"),
    }
}

/// `1234567` as `1,234,567`.
pub fn fmt_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn verdict_word(row: &Row) -> &'static str {
    match (row.verdict, row.kubewarden) {
        (Outcome::Accept, _) => "accepted",
        (Outcome::Deny, _) => "denied",
        (Outcome::Patch, false) => "patched",
        (Outcome::Patch, true) => "mutated",
    }
}

impl Report {
    /// The largest spread (max - min) of a row's kept calls, and that row.
    fn widest_spread(&self) -> Option<(u64, &Row)> {
        self.rows
            .iter()
            .map(|r| {
                let k = &r.work.kept;
                (k.last().unwrap_or(&0) - k.first().unwrap_or(&0), r)
            })
            .max_by_key(|(spread, _)| *spread)
    }

    /// The Markdown section, markers included.
    pub fn markdown(&self, command: &str) -> String {
        let mut md = String::new();
        md.push_str(BEGIN);
        md.push_str("\n## Guest work: wasm instructions per `validate`\n\n");
        md.push_str(&format!(
            "Written by `gpu-bench guest-work` (`bench/src/guest_work.rs`); rerun it, do not edit by hand. \
             Each module runs in wasmi 2.0, an interpreter, with fuel metering: a unit of fuel is about one \
             executed wasm instruction (`nop`, `drop` and the block markers are free), plus one per 64 bytes \
             of bulk memory operations (`memory.copy`, `memory.fill`) and of memory growth (1,024 per 64 KiB \
             page). Functions are compiled when the module is loaded, so no compilation is counted. The count \
             is deterministic and does not depend on the host, its CPU or its load (the clock and the random \
             numbers the host gives are fixed), where timings on this 2-core VM swing by 20 to 40% between \
             runs. It is not a time: wasmtime runs some instructions far faster than others, so the count \
             says where a module's work goes and whether a change removed some, while kwctl's times decide \
             which module is faster (the arena allocator took 42% of the labels Pod's count and a few \
             percent of its kwctl time). It measures the \
             guest only: kwctl's and policy-server's times (their sections in this file) add the host's share, \
             serializing the request, copying it in, reading the answer back and diffing a patch, and they \
             remain the figures users see.\n\n\
             The main figure is the median of {KEPT_CALLS} `validate` calls on a kept instance after a first \
             one (what `kwctl bench` times). The first call on a fresh instance is shown apart: it also pays \
             for growing the heap (pages in brackets) and for what a module does once per instance (ours read \
             the settings once and keep them while the host sends the same settings); policy-server and \
             `kwctl run` evaluate each request in a fresh instance (Notes, above). `instantiate + wapc_init` \
             is the fuel from instantiation through `_initialize`, `_start` and `wapc_init`, those the module \
             exports. Every answer is checked: our policies' verdicts are the ones `bench/src/cases.rs` states \
             and every call on an instance gives the first one's answer (as JSON); Kubewarden's verdicts are \
             recorded, not checked (\"mutated\": accepted with a patch), and must not change between calls.\n\n"
        ));
        let sums: Vec<String> = self
            .modules
            .iter()
            .map(|(_, file, sha)| format!("`{file}` {sha}"))
            .collect();
        md.push_str(&format!(
            "| | |\n|---|---|\n| date | {} |\n| HEAD | {} (the modules are measured as found, not rebuilt) |\n\
             | command | `{command}` |\n\
             | modules | ours as built in `target/wasm32-wasip1/release` (or `$GPU_ADMISSION_WASM_DIR`), unannotated; Kubewarden's as given (annotated) |\n\
             | SHA-256 (first 12 hex digits) | {} |\n\n",
            self.date,
            self.commit,
            sums.join(", ")
        ));
        md.push_str(&format!(
            "| policy | request | verdict | wasm instructions per `validate`, kept instance (median of {KEPT_CALLS}) | first `validate`, fresh instance (pages grown) | instantiate + `wapc_init` | module size |\n"
        ));
        md.push_str("|---|---|---|---:|---:|---:|---:|\n");
        for r in &self.rows {
            md.push_str(&format!(
                "| {} | {} `{}` | {} | {} | {} ({}) | {} | {} |\n",
                r.policy,
                r.kind,
                r.request,
                verdict_word(r),
                fmt_count(r.work.median()),
                fmt_count(r.work.first),
                r.work.first_grown_pages,
                fmt_count(r.work.init),
                fmt_bytes(r.module_size),
            ));
        }
        md.push('\n');
        if let Some((spread, row)) = self.widest_spread() {
            md.push_str(&format!(
                "Within a row the kept calls differ by at most {} units ({:.2}% of the median, {} `{}`).",
                fmt_count(spread),
                100.0 * spread as f64 / row.work.median().max(1) as f64,
                row.policy,
                row.request
            ));
            if self.rows.iter().any(|r| r.work.varied) {
                md.push_str(
                    " Some answers repeat with their maps' keys or lists in another order (audit \
                     annotations; labels-policy's list of missing labels): compared as JSON, or by verdict \
                     for Kubewarden's.",
                );
            }
            md.push_str("\n\n");
        }
        let shared = KubewardenPolicies::shared().ok();
        for kw in &self.kubewarden {
            let (policy, module) = match kw {
                Ok(measured) => measured,
                Err(sentence) => {
                    md.push_str(sentence);
                    md.push_str("\n\n");
                    continue;
                }
            };
            let described = shared.as_ref().and_then(|s| {
                [&s.labels, &s.mutating]
                    .into_iter()
                    .find(|p| &p.policy == policy)
                    .map(|p| (s.commit.get(..12).unwrap_or(&s.commit), p))
            });
            let name = format!("kubewarden/{policy}");
            md.push_str(&format!(
                "`{name}` is Kubewarden's {policy} (`{}`",
                module.display()
            ));
            if let Some((commit, p)) = described {
                md.push_str(&format!(
                    ", built from kubewarden/policies {commit}) on {}'s requests with settings `{}`",
                    p.beside, p.settings
                ));
            } else {
                md.push(')');
            }
            md.push_str(" (`bench/kubewarden/kubewarden_policies.json`).");
            for r in self
                .rows
                .iter()
                .filter(|r| r.policy == name && r.verdict == Outcome::Deny)
            {
                md.push_str(&format!(
                    " It denies `{}`: \"{}\".",
                    r.request,
                    r.message.as_deref().unwrap_or("no message")
                ));
            }
            md.push_str("\n\n");
        }
        if !self.skipped.is_empty() {
            md.push_str("Not measured: ");
            md.push_str(&self.skipped.join("; "));
            md.push_str(".\n\n");
        }
        md.push_str(END);
        md.push('\n');
        md
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use wasm_encoder::{
        BlockType, CodeSection, ConstExpr, DataSection, EntityType, ExportKind, ExportSection,
        Function, FunctionSection, ImportSection, Instruction as I, MemorySection, MemoryType,
        TypeSection, ValType,
    };

    const ERROR_TEXT: &[u8] = b"empty payload";
    const ERROR_AT: i32 = 16;
    const PAYLOAD_AT: i32 = 1024;

    /// A waPC guest: `__guest_call(op_len, len)` fetches the payload, loops `len` times, then
    /// answers the payload back; an empty payload is a guest error, operation `host` (4 bytes)
    /// first calls the host.
    fn echo_module() -> Vec<u8> {
        let mut types = TypeSection::new();
        types.ty().function([ValType::I32, ValType::I32], []); // 0: request, response, error
        types.ty().function([ValType::I32; 8], [ValType::I32]); // 1: __host_call
        types.ty().function([], []); // 2: wapc_init
        types
            .ty()
            .function([ValType::I32, ValType::I32], [ValType::I32]); // 3: __guest_call
        let mut imports = ImportSection::new();
        for name in ["__guest_request", "__guest_response", "__guest_error"] {
            imports.import("wapc", name, EntityType::Function(0));
        }
        imports.import("wapc", "__host_call", EntityType::Function(1));
        let (request, response, error, host_call) = (0, 1, 2, 3);
        let mut functions = FunctionSection::new();
        functions.function(2);
        functions.function(3);
        let mut memories = MemorySection::new();
        memories.memory(MemoryType {
            minimum: 1,
            maximum: None,
            memory64: false,
            shared: false,
            page_size_log2: None,
        });
        let mut exports = ExportSection::new();
        exports.export("memory", ExportKind::Memory, 0);
        exports.export("wapc_init", ExportKind::Func, 4);
        exports.export("__guest_call", ExportKind::Func, 5);

        let mut codes = CodeSection::new();
        let mut init = Function::new([]);
        init.instruction(&I::End);
        codes.function(&init);
        // params: 0 op_len, 1 len; local 2: counter
        let mut call = Function::new([(1, ValType::I32)]);
        for i in [
            I::I32Const(0),
            I::I32Const(PAYLOAD_AT),
            I::Call(request),
            // empty payload: guest error
            I::LocalGet(1),
            I::I32Eqz,
            I::If(BlockType::Empty),
            I::I32Const(ERROR_AT),
            I::I32Const(ERROR_TEXT.len() as i32),
            I::Call(error),
            I::I32Const(0),
            I::Return,
            I::End,
            // operation of 4 bytes: a host call first
            I::LocalGet(0),
            I::I32Const(4),
            I::I32Eq,
            I::If(BlockType::Empty),
            I::I32Const(0),
            I::I32Const(4),
            I::I32Const(0),
            I::I32Const(4),
            I::I32Const(0),
            I::I32Const(4),
            I::I32Const(PAYLOAD_AT),
            I::LocalGet(1),
            I::Call(host_call),
            I::Drop,
            I::End,
            // loop len times
            I::LocalGet(1),
            I::LocalSet(2),
            I::Loop(BlockType::Empty),
            I::LocalGet(2),
            I::I32Const(1),
            I::I32Sub,
            I::LocalTee(2),
            I::BrIf(0),
            I::End,
            I::I32Const(PAYLOAD_AT),
            I::LocalGet(1),
            I::Call(response),
            I::I32Const(1),
            I::End,
        ] {
            call.instruction(&i);
        }
        codes.function(&call);
        let mut data = DataSection::new();
        data.active(
            0,
            &ConstExpr::i32_const(ERROR_AT),
            ERROR_TEXT.iter().copied(),
        );

        let mut module = wasm_encoder::Module::new();
        module
            .section(&types)
            .section(&imports)
            .section(&functions)
            .section(&memories)
            .section(&exports)
            .section(&codes)
            .section(&data);
        module.finish()
    }

    fn guest() -> Guest {
        let runtime = Runtime::new().unwrap();
        let module = runtime.load(&echo_module()).unwrap();
        runtime.instantiate(&module).unwrap().0
    }

    #[test]
    fn the_host_reads_back_what_the_guest_answers() {
        let mut g = guest();
        let answer = g.call("validate", b"{\"accepted\":true}").unwrap();
        assert_eq!(answer.response, b"{\"accepted\":true}");
        assert!(answer.host_calls.is_empty());
        assert!(answer.fuel > 0);
        // A second, different payload: nothing is left over from the first.
        assert_eq!(g.call("validate", b"xy").unwrap().response, b"xy");
    }

    #[test]
    fn fuel_grows_with_the_work_and_repeats_exactly() {
        let mut g = guest();
        let mut fuel = |n: usize| g.call("validate", &vec![b'a'; n]).unwrap().fuel;
        let (f10, f100, f1000) = (fuel(10), fuel(100), fuel(1000));
        assert!(f10 < f100 && f100 < f1000, "{f10} {f100} {f1000}");
        // The same fixed cost per iteration: linear in the loop count.
        assert_eq!(f1000 - f100, 10 * (f100 - f10));
        assert!(
            (f100 - f10) / 90 >= 4,
            "at least the loop's 4 costed instructions"
        );
        assert_eq!(fuel(100), f100);
    }

    #[test]
    fn a_guest_error_is_an_error_with_its_message() {
        let mut g = guest();
        let e = g.call("validate", b"").unwrap_err().to_string();
        assert!(
            e.contains("guest error") && e.contains("empty payload"),
            "{e}"
        );
        // The instance still works afterwards.
        assert_eq!(g.call("validate", b"ok").unwrap().response, b"ok");
    }

    #[test]
    fn host_calls_are_refused_counted_and_fail_a_measurement() {
        let mut g = guest();
        let answer = g.call("host", b"ping").unwrap();
        assert_eq!(answer.host_calls, ["host/host/host"]);
        let runtime = Runtime::new().unwrap();
        let module = runtime.load(&echo_module()).unwrap();
        let never = |_: &[u8], _: &[u8]| false;
        let e = measure(&runtime, &module, "host", b"ping", 3, &never).unwrap_err();
        assert!(e.to_string().contains("host/host/host"), "{e}");
        let work = measure(&runtime, &module, "validate", b"ping", 3, &never).unwrap();
        assert!(!work.varied);
        assert_eq!(
            (work.kept.len(), work.response.as_slice()),
            (3, &b"ping"[..])
        );
        assert_eq!(work.median(), work.kept[1]);
    }

    #[test]
    fn a_runaway_guest_stops_at_the_budget() {
        let runtime = Runtime::new().unwrap().with_budget(1_000);
        let module = runtime.load(&echo_module()).unwrap();
        let mut g = runtime.instantiate(&module).unwrap().0;
        let e = g.call("validate", &[b'a'; 5_000]).unwrap_err().to_string();
        assert!(e.contains("stopped after 1000 units of fuel"), "{e}");
    }

    #[test]
    fn verdicts() {
        let request = json!({"object": {"a": 1}});
        let v = |answer: &str| verdict(&request, answer.as_bytes()).unwrap().0;
        assert_eq!(v(r#"{"accepted":true}"#), Outcome::Accept);
        assert_eq!(v(r#"{"accepted":false,"message":"no"}"#), Outcome::Deny);
        assert_eq!(
            v(r#"{"accepted":true,"mutated_object":{"a":2}}"#),
            Outcome::Patch
        );
        // Handing back the object unchanged is no patch.
        assert_eq!(
            v(r#"{"accepted":true,"mutated_object":{"a":1}}"#),
            Outcome::Accept
        );
        assert!(verdict(&request, b"nonsense").is_err());
    }

    #[test]
    fn counts() {
        assert_eq!(fmt_count(0), "0");
        assert_eq!(fmt_count(999), "999");
        assert_eq!(fmt_count(1_000), "1,000");
        assert_eq!(fmt_count(12_345_678), "12,345,678");
    }

    #[test]
    fn the_shared_kubewarden_settings_name_existing_requests() {
        let shared = KubewardenPolicies::shared().unwrap();
        let root = gpu_e2e::workspace_root();
        for kw in [&shared.labels, &shared.mutating] {
            assert!(
                STATIC_POLICIES.contains(&kw.beside.as_str()),
                "{}",
                kw.beside
            );
            assert!(kw.env.starts_with("KUBEWARDEN_"), "{}", kw.env);
            assert!(!kw.requests.is_empty());
            for (_, file) in &kw.requests {
                let path = cases::policy_dir(&root, &kw.beside).join(file);
                assert!(path.is_file(), "{}", path.display());
            }
        }
        assert_eq!(
            shared.mutating.settings,
            json!({"required_drop_capabilities": ["ALL"]})
        );
    }
}
