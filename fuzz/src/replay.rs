//! Runs one fuzz input natively and checks what must hold of the answer.
//!
//! Shared word for word by the fuzz targets (this crate) and the regression test of the main
//! workspace, `shared/tests/fuzz_regressions.rs` (through `#[path]`): every file under
//! `fuzz/regressions/<target>/` goes through [`run`], so a crash input fails the normal test
//! suite exactly as it failed under the fuzzer. Needs only `gpu_rules` (feature
//! `kubewarden`), `serde_json` and `std`.
//!
//! Inputs by target:
//! - `quantity`: text for the quantity parser;
//! - `workload_bytes`, `workload_structured`: a JSON object for pod-template extraction;
//! - `<policy>_bytes`: the same bytes as the `validate` payload and as the settings of
//!   `validate_settings`; every host call fails;
//! - `<policy>_request`, `<policy>_settings`: a [`Fixture`], the JSON payload plus the
//!   answers to the host calls in call order (Kubernetes and OCI calls alike);
//! - `vram_args`: a container's JSON, read as a model server's command line and judged in
//!   a Deployment.

use gpu_rules::admission::{Payload, Verdict};
use gpu_rules::cluster::{Cluster, ClusterRequest, OciManifestConfig};
use gpu_rules::gpu::{GpuResources, workload_gpus};
use gpu_rules::kubewarden;
use gpu_rules::policies;
use gpu_rules::policy;
use gpu_rules::quantity::Quantity;
use gpu_rules::settings::Action;
use gpu_rules::workload::{Workload, presets};
use gpu_rules::{autoscaler, capacity, labels, routing, vram};
use serde_json::{Value, json};
use std::cell::RefCell;

/// The five policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Labels,
    Routing,
    Vram,
    Capacity,
    Autoscaler,
}

impl Policy {
    pub const ALL: [Policy; 5] = [
        Policy::Labels,
        Policy::Routing,
        Policy::Vram,
        Policy::Capacity,
        Policy::Autoscaler,
    ];

    /// `job` run with this policy's types: the one place that maps a [`Policy`] to its
    /// [`gpu_rules::policy::Policy`].
    pub fn with<J: PolicyJob>(self, job: J) -> J::Out {
        match self {
            Policy::Labels => job.run::<policies::Labels>(),
            Policy::Routing => job.run::<policies::Routing>(),
            Policy::Vram => job.run::<policies::VramFit>(),
            Policy::Capacity => job.run::<policies::CapacityGate>(),
            Policy::Autoscaler => job.run::<policies::Autoscaler>(),
        }
    }

    /// The prefix of its fuzz targets and its directory under `policies/`.
    fn names(self) -> (&'static str, &'static str) {
        struct Names;
        impl PolicyJob for Names {
            type Out = (&'static str, &'static str);
            fn run<P: Fuzzed>(self) -> Self::Out {
                (P::PREFIX, P::NAME)
            }
        }
        self.with(Names)
    }

    /// The prefix of its fuzz targets.
    pub fn prefix(self) -> &'static str {
        self.names().0
    }

    /// Its directory under `policies/`.
    pub fn crate_name(self) -> &'static str {
        self.names().1
    }
}

/// Something done with one policy's types ([`Policy::with`]).
pub trait PolicyJob {
    type Out;
    fn run<P: Fuzzed>(self) -> Self::Out;
}

/// The most DRA claims and claim templates one object makes a policy read.
const MAX_CLAIMS: usize = gpu_rules::dra::MAX_CLAIMS_PER_OBJECT;

/// What the checks know of a policy's host calls and answers, beyond its rules.
pub trait Fuzzed: policy::Policy<Settings: Clone> {
    /// The prefix of its fuzz targets.
    const PREFIX: &'static str;
    /// Whether its answers may carry a changed object.
    const MUTATES: bool = false;
    /// The most host calls one request may make.
    fn max_calls(settings: &Self::Settings) -> usize;
    /// For policies that gate on cluster state: `unreadableCluster` (or its old spelling
    /// `failOpen`), as the settings say. A failed host call then accepts (with a warning)
    /// exactly when it is `warn`.
    fn unreadable_cluster(_settings: &Self::Settings) -> Option<Action> {
        None
    }
    /// Whether the settings let the rules read image configs (each image at most once).
    fn images(_settings: &Self::Settings) -> bool {
        false
    }
}

impl Fuzzed for policies::Labels {
    const PREFIX: &'static str = "labels";
    /// The DRA claims and claim templates the object names.
    fn max_calls(_: &labels::Settings) -> usize {
        MAX_CLAIMS
    }
}

impl Fuzzed for policies::Routing {
    const PREFIX: &'static str = "routing";
    const MUTATES: bool = true;
    /// The DRA claims, and the namespace for its team label.
    fn max_calls(_: &routing::Settings) -> usize {
        MAX_CLAIMS + 1
    }
}

impl Fuzzed for policies::VramFit {
    const PREFIX: &'static str = "vram";
    /// The DRA claims, the registry ConfigMap; image configs only with imageLabels.
    fn max_calls(_: &vram::Settings) -> usize {
        MAX_CLAIMS + 1
    }
    fn images(s: &vram::Settings) -> bool {
        s.image_labels.enabled
    }
}

impl Fuzzed for policies::CapacityGate {
    const PREFIX: &'static str = "capacity";
    /// The scaled workload, its DRA claims, then Nodes and Pods of each pool.
    fn max_calls(s: &capacity::Settings) -> usize {
        1 + MAX_CLAIMS + 2 * s.pools.len()
    }
    fn unreadable_cluster(s: &capacity::Settings) -> Option<Action> {
        Some(s.on_unreadable_cluster())
    }
}

impl Fuzzed for policies::Autoscaler {
    const PREFIX: &'static str = "autoscaler";
    /// The scale target, its DRA claims, then the Nodes of each pool it targets.
    fn max_calls(s: &autoscaler::Settings) -> usize {
        1 + MAX_CLAIMS + s.pools.len()
    }
    /// Fail closed: a failed read always denies. With `unreadableCluster: warn` it accepts
    /// with a warning unless another finding (the signal, a bound) denies anyway, so only
    /// the closed half is an invariant.
    fn unreadable_cluster(s: &autoscaler::Settings) -> Option<Action> {
        Some(s.on_unreadable_cluster()).filter(|a| *a == Action::Deny)
    }
}

/// One answer of the host to a context-aware call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Ok(Vec<u8>),
    Err(String),
}

impl Answer {
    /// `{"ok": text}`, `{"bytes": [..]}` (not UTF-8) or `{"err": text}`.
    pub fn to_json(&self) -> Value {
        match self {
            Answer::Ok(bytes) => match std::str::from_utf8(bytes) {
                Ok(text) => json!({ "ok": text }),
                Err(_) => json!({ "bytes": bytes }),
            },
            Answer::Err(e) => json!({ "err": e }),
        }
    }

    pub fn from_json(v: &Value) -> Result<Answer, String> {
        if let Some(text) = v.get("ok").and_then(Value::as_str) {
            return Ok(Answer::Ok(text.as_bytes().to_vec()));
        }
        if let Some(text) = v.get("err").and_then(Value::as_str) {
            return Ok(Answer::Err(text.to_string()));
        }
        if let Some(bytes) = v.get("bytes") {
            return serde_json::from_value(bytes.clone())
                .map(Answer::Ok)
                .map_err(|e| format!("answers: bytes: {e}"));
        }
        Err(format!(
            "answers: expected {{\"ok\": text}}, {{\"bytes\": [..]}} or {{\"err\": text}}, got {v}"
        ))
    }
}

/// What a structure-aware policy target runs: `validate` on the payload (and
/// `validate_settings` on its settings), with the host answering from `answers` in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Fixture {
    pub payload: Value,
    pub answers: Vec<Answer>,
}

impl Fixture {
    /// `{"payload": ..., "answers": [...]}`.
    pub fn to_json(&self) -> Value {
        json!({
            "payload": self.payload,
            "answers": self.answers.iter().map(Answer::to_json).collect::<Vec<_>>(),
        })
    }

    pub fn from_json(v: &Value) -> Result<Fixture, String> {
        let payload = v.get("payload").cloned().ok_or("fixture: no \"payload\"")?;
        let answers = match v.get("answers") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(Answer::from_json)
                .collect::<Result<_, _>>()?,
            Some(other) => return Err(format!("fixture: answers must be a list, got {other}")),
        };
        Ok(Fixture { payload, answers })
    }
}

/// Runs the input of fuzz target `target`; `Err` says which invariant broke.
pub fn run(target: &str, input: &[u8]) -> Result<(), String> {
    match target {
        "quantity" => quantity(input),
        "workload_bytes" | "workload_structured" => workload(input),
        "vram_args" => vram_args(input),
        "dra_claim" => dra_claim(input),
        _ => {
            let (prefix, form) = target
                .rsplit_once('_')
                .ok_or_else(|| format!("unknown fuzz target {target}"))?;
            let policy = Policy::ALL
                .into_iter()
                .find(|p| p.prefix() == prefix)
                .ok_or_else(|| format!("unknown fuzz target {target}"))?;
            match form {
                "bytes" => policy_bytes(policy, input),
                "request" | "settings" => {
                    let v: Value = serde_json::from_slice(input)
                        .map_err(|e| format!("fixture is not JSON: {e}"))?;
                    run_fixture(policy, &Fixture::from_json(&v)?)
                }
                _ => Err(format!("unknown fuzz target {target}")),
            }
        }
    }
}

/// The quantity parser: accepted values are bounded and display in a form that parses
/// back to the same value.
pub fn quantity(input: &[u8]) -> Result<(), String> {
    let Ok(text) = std::str::from_utf8(input) else {
        return Ok(());
    };
    if let Ok(q) = Quantity::parse(text) {
        if q.nanos().unsigned_abs() > (i64::MAX as u128) * 1_000_000_000 {
            return Err(format!("{text:?} parsed out of bounds: {q}"));
        }
        let back = Quantity::parse(&q.to_string());
        if back != Ok(q) {
            return Err(format!("display round trip of {text:?}: {q} -> {back:?}"));
        }
    }
    let _ = Quantity::parse_count(text);
    Ok(())
}

/// A DRA ResourceClaim or ResourceClaimTemplate read for its GPUs: never panics, counts
/// stay within the limits, and the same claim behind a pod template counts the same.
pub fn dra_claim(input: &[u8]) -> Result<(), String> {
    let Ok(object) = serde_json::from_slice::<Value>(input) else {
        return Ok(());
    };
    let settings = gpu_rules::dra::DraSettings::default();
    let Ok(gpus) = gpu_rules::dra::claim_object_gpus(&object, &settings) else {
        return Ok(());
    };
    let bound = (gpu_rules::dra::MAX_REQUESTS_PER_CLAIM as u64)
        .saturating_mul(gpu_rules::dra::MAX_DEVICES_PER_REQUEST);
    let total = gpus.gpus.values().fold(0u64, |a, b| a.saturating_add(*b));
    if total > bound {
        return Err(format!("{total} devices counted, more than {bound}"));
    }
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let claim = if kind == "ResourceClaimTemplate" {
        gpu_rules::dra::ClaimRef::Template("c".into())
    } else {
        gpu_rules::dra::ClaimRef::Claim("c".into())
    };
    let field = if kind == "ResourceClaimTemplate" {
        "resourceClaimTemplateName"
    } else {
        "resourceClaimName"
    };
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c"}], "resourceClaims": [{"name": "c", field: "c"}]}});
    let w = Workload::from_object(&pod, &[]).map_err(|e| e.to_string())?;
    let mut book = gpu_rules::dra::ClaimBook::default();
    book.insert(claim, Ok(gpus.clone()));
    let counted = workload_gpus(&w, &GpuResources::default(), &book);
    if counted.total != gpus.gpus {
        return Err(format!(
            "the pod counts {:?}, its claim {:?}",
            counted.total, gpus.gpus
        ));
    }
    Ok(())
}

/// Pod-template extraction and GPU demand of an object (every preset kind).
pub fn workload(input: &[u8]) -> Result<(), String> {
    let Ok(object) = serde_json::from_slice::<Value>(input) else {
        return Ok(());
    };
    if let Ok(w) = Workload::from_object(&object, &presets::all()) {
        let _ = workload_gpus(&w, &GpuResources::default(), &Default::default());
        let _ = w.pods();
    }
    Ok(())
}

/// A container read as a model server: the reader answers the same twice, its errors name
/// the container, what it reads is within the flags' bounds; and the container in a
/// Deployment (labelled with a registered model) gets a verdict that holds every
/// invariant of `vram_request`.
pub fn vram_args(input: &[u8]) -> Result<(), String> {
    use gpu_rules::vram::server::ServerArgs;
    let Ok(container) = serde_json::from_slice::<Value>(input) else {
        return Ok(());
    };
    if let Ok(c) = serde_json::from_value::<gpu_rules::podspec::Container>(container.clone()) {
        let read = ServerArgs::read(&c, "container server");
        if read != ServerArgs::read(&c, "container server") {
            return Err(format!("reading {container} twice differs"));
        }
        match &read {
            Err(e) if !e.starts_with("container server: ") => {
                return Err(format!("an error that does not name the container: {e}"));
            }
            Err(_) => {}
            Ok(a) => {
                let bounded = |v: Option<u64>, max: u64| v.is_none_or(|v| (1..=max).contains(&v));
                let value =
                    |f: &Option<gpu_rules::vram::server::Found<u64>>| f.as_ref().map(|f| f.value);
                if !(bounded(value(&a.context_length), 100_000_000)
                    && bounded(value(&a.max_num_seqs), 1_000_000)
                    && bounded(value(&a.tensor_parallel), 4096)
                    && bounded(value(&a.pipeline_parallel), 4096)
                    && bounded(value(&a.usable_percent), 100))
                {
                    return Err(format!("out of bounds: {a:?}"));
                }
            }
        }
    }
    let payload = json!({
        "request": {"uid": "u", "operation": "CREATE", "namespace": "ml",
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "object": {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "d", "namespace": "ml"},
                "spec": {"template": {
                    "metadata": {"labels": {"gpu-admission/model": "llama-3.1-8b"}},
                    "spec": {"containers": [container],
                        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"}}}}}},
        "settings": {"models": {"meta-llama/Llama-3.1-8B-Instruct": {
            "parametersBillions": 8.03, "dtype": "bf16", "layers": 32, "kvHeads": 8,
            "headDim": 128, "contextLength": 8192, "attentionHeads": 32,
            "aliases": ["llama-3.1-8b"]}}},
    });
    let payload = serde_json::to_vec(&payload).map_err(|e| e.to_string())?;
    check_validate(Policy::Vram, &payload, &[])
}

/// Arbitrary bytes as the `validate` payload and as the settings: both entry points answer
/// in Kubewarden's format; every host call fails.
pub fn policy_bytes(policy: Policy, input: &[u8]) -> Result<(), String> {
    check_settings(policy, input)?;
    check_validate(policy, input, &[])
}

/// A structured fixture: `validate` on the payload, `validate_settings` on its settings.
pub fn run_fixture(policy: Policy, fixture: &Fixture) -> Result<(), String> {
    let payload = serde_json::to_vec(&fixture.payload).map_err(|e| e.to_string())?;
    if let Some(settings) = fixture.payload.get("settings") {
        let settings = serde_json::to_vec(settings).map_err(|e| e.to_string())?;
        check_settings(policy, &settings)?;
    }
    check_validate(policy, &payload, &fixture.answers)
}

/// What `kubewarden::evaluate` answers for a payload it cannot read.
const UNREADABLE: &str = "the admission request could not be read";

/// Longest text (message, warnings and audit values together) an answer may carry: 1 MiB,
/// or four times the payload. Past that a rule is amplifying its input.
fn text_limit(payload: &[u8]) -> usize {
    (1 << 20).max(4 * payload.len())
}

/// One host call the rules made.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    Kubernetes(ClusterRequest),
    /// The config of this image (`oci/v1/oci_manifest_config`).
    Image(String),
}

/// Answers host calls from a script, in order, and records what was asked.
struct Scripted<'a> {
    answers: &'a [Answer],
    calls: RefCell<Vec<Call>>,
}

impl Scripted<'_> {
    fn answer(&self, call: Call) -> Result<Vec<u8>, String> {
        let mut calls = self.calls.borrow_mut();
        calls.push(call);
        match self.answers.get(calls.len() - 1) {
            Some(Answer::Ok(bytes)) => Ok(bytes.clone()),
            Some(Answer::Err(e)) => Err(e.clone()),
            None => Err(format!("fuzz: no answer for host call {}", calls.len())),
        }
    }
}

impl Cluster for Scripted<'_> {
    fn call(&self, request: &ClusterRequest) -> Result<Vec<u8>, String> {
        self.answer(Call::Kubernetes(request.clone()))
    }

    fn oci_manifest_config(&self, request: &OciManifestConfig) -> Result<Vec<u8>, String> {
        self.answer(Call::Image(request.image.clone()))
    }
}

/// `validate_settings` of `policy`, checked.
pub fn check_settings(policy: Policy, settings: &[u8]) -> Result<(), String> {
    struct ValidateSettings<'a>(&'a [u8]);
    impl PolicyJob for ValidateSettings<'_> {
        type Out = Result<Vec<u8>, String>;
        fn run<P: Fuzzed>(self) -> Self::Out {
            kubewarden::validate_settings::<P>(self.0).map_err(|e| e.to_string())
        }
    }
    let out = policy
        .with(ValidateSettings(settings))
        .map_err(|e| format!("validate_settings returned an error: {e}"))?;
    let v: Value = serde_json::from_slice(&out)
        .map_err(|e| format!("validate_settings answered no JSON: {e}"))?;
    let message = &v["message"];
    match v["valid"].as_bool() {
        Some(true) if message.is_null() => Ok(()),
        Some(false) if message.as_str().is_some_and(|m| !m.trim().is_empty()) => {
            let m = message.as_str().unwrap_or_default();
            if m.len() > text_limit(settings) {
                return Err(format!("settings message of {} bytes", m.len()));
            }
            Ok(())
        }
        _ => Err(format!(
            "validate_settings: valid must be true with no message or false with one: {v}"
        )),
    }
}

/// `validate` of `policy` on `payload`, checked.
pub fn check_validate(policy: Policy, payload: &[u8], answers: &[Answer]) -> Result<(), String> {
    struct Validate<'a> {
        payload: &'a [u8],
        answers: &'a [Answer],
    }
    impl PolicyJob for Validate<'_> {
        type Out = Result<(), String>;
        fn run<P: Fuzzed>(self) -> Self::Out {
            check::<P>(self.payload, self.answers)
        }
    }
    policy.with(Validate { payload, answers })
}

fn decide_with<P: Fuzzed>(payload: &[u8], answers: &[Answer]) -> (Verdict, Vec<Call>) {
    let cluster = Scripted {
        answers,
        calls: RefCell::new(Vec::new()),
    };
    let verdict = kubewarden::evaluate::<P, _>(payload, |r, s| P::evaluate_owned(r, s, &cluster));
    (verdict, cluster.calls.into_inner())
}

fn check<P: Fuzzed>(payload: &[u8], answers: &[Answer]) -> Result<(), String> {
    let (verdict, all_calls) = decide_with::<P>(payload, answers);
    check_verdict(&verdict, text_limit(payload))?;
    let mut calls: Vec<&ClusterRequest> = Vec::new();
    let mut images: Vec<&String> = Vec::new();
    for call in &all_calls {
        match call {
            Call::Kubernetes(r) => calls.push(r),
            Call::Image(i) => images.push(i),
        }
    }
    check_response(&verdict)?;

    // Over the size limits of `gpu_rules::limits`: denied before parsing.
    if verdict.code == Some(413) {
        if all_calls.is_empty() && !verdict.allowed {
            return Ok(());
        }
        return Err(format!("413 after host calls or accepted: {calls:?}"));
    }
    let unreadable = verdict
        .message
        .as_deref()
        .is_some_and(|m| m.starts_with(UNREADABLE));
    let parsed = match serde_json::from_slice::<Payload<P::Settings>>(payload) {
        Ok(p) => p,
        Err(_) if unreadable && verdict.code == Some(400) && all_calls.is_empty() => {
            return Ok(());
        }
        Err(e) => {
            return Err(format!(
                "an unreadable payload ({e}) must be rejected with code 400 and no host call"
            ));
        }
    };
    if unreadable {
        return Err("a readable payload was answered as unreadable".into());
    }
    let request = &parsed.request;
    let settings_valid = P::check(parsed.settings.clone()).is_ok();
    let unchanged = verdict.allowed && verdict.mutated_object.is_none();
    // Settings that cannot be put in the form the rules take are refused whatever the
    // request (validate_settings refuses them first: a host never sends them).
    if P::prepare(parsed.settings.clone()).is_err() {
        return match verdict.message.as_deref() {
            Some(m)
                if !verdict.allowed && m.contains("invalid settings") && all_calls.is_empty() =>
            {
                Ok(())
            }
            _ => Err(format!(
                "settings that do not check were not refused: {verdict:?}"
            )),
        };
    }
    if !request.creates_or_updates() && !unchanged {
        return Err(format!(
            "operation {:?} must be accepted unchanged",
            request.operation
        ));
    }
    if !P::MUTATES && verdict.mutated_object.is_some() {
        return Err(format!("{} is not a mutating policy", P::NAME));
    }
    if calls.len() > P::max_calls(&parsed.settings) {
        return Err(format!("{} host calls: {calls:?}", calls.len()));
    }
    if !images.is_empty() && !P::images(&parsed.settings) {
        return Err(format!(
            "image configs read without imageLabels: {images:?}"
        ));
    }
    if let Some(again) = images
        .iter()
        .enumerate()
        .find_map(|(i, image)| images[..i].contains(image).then_some(image))
    {
        return Err(format!("the config of image {again} was read twice"));
    }
    let host_failed = (0..all_calls.len()).any(|i| !matches!(answers.get(i), Some(Answer::Ok(_))));
    if let Some(action) = P::unreadable_cluster(&parsed.settings)
        && host_failed
    {
        let warn = action == Action::Warn;
        if verdict.allowed != warn || (warn && verdict.warnings.is_empty()) {
            return Err(format!(
                "a host call failed with unreadableCluster: {action}, and the verdict is {verdict:?}"
            ));
        }
    }
    for call in &calls {
        serde_json::from_slice::<Value>(&call.payload())
            .map_err(|e| format!("host call {call:?} has no JSON payload: {e}"))?;
    }
    for image in &images {
        let payload = OciManifestConfig {
            image: image.to_string(),
        }
        .payload();
        if serde_json::from_slice::<String>(&payload).ok().as_deref() != Some(image.as_str()) {
            return Err(format!(
                "the image request for {image:?} is not its JSON string"
            ));
        }
    }
    if settings_valid
        && verdict
            .message
            .as_deref()
            .is_some_and(|m| m.contains("invalid settings"))
    {
        return Err("settings that validate_settings accepts were called invalid".into());
    }
    let (again, calls_again) = decide_with::<P>(payload, answers);
    if again != verdict || calls_again != all_calls {
        return Err(format!("not deterministic: {verdict:?} then {again:?}"));
    }
    // Only for settings Kubewarden would load: invalid ones (a toleration with effect
    // `Equal`) can make a routing the pod template never satisfies.
    if let Some(mutated) = &verdict.mutated_object
        && settings_valid
    {
        routed_is_settled::<P>(payload, mutated, answers)?;
    }
    Ok(())
}

/// A mutated object sent again (Kubernetes reinvokes mutating webhooks) is accepted as is.
fn routed_is_settled<P: Fuzzed>(
    payload: &[u8],
    mutated: &Value,
    answers: &[Answer],
) -> Result<(), String> {
    // Fields the request type ignores are skipped unchecked: a lone surrogate escape there
    // reads as a payload but not as a `Value`, and then there is nothing to send again.
    let Ok(mut again) = serde_json::from_slice::<Value>(payload) else {
        return Ok(());
    };
    // serde reads a struct from a map or, in field order, from a list.
    let request = match &mut again {
        Value::Object(payload) => payload.get_mut("request"),
        Value::Array(payload) => payload.first_mut(),
        _ => None,
    };
    if let Some(Value::Object(request)) = request {
        request.insert("object".into(), mutated.clone());
    }
    let again = serde_json::to_vec(&again).map_err(|e| e.to_string())?;
    let (verdict, _) = decide_with::<P>(&again, answers);
    if !verdict.allowed || verdict.mutated_object.is_some() {
        return Err(format!(
            "the mutated object is not settled: sent again it is {verdict:?}"
        ));
    }
    Ok(())
}

/// What every verdict must be.
fn check_verdict(v: &Verdict, limit: usize) -> Result<(), String> {
    if !v.allowed && v.message.as_deref().is_none_or(|m| m.trim().is_empty()) {
        return Err(format!("a rejection without a message: {v:?}"));
    }
    if let Some(code) = v.code
        && (v.allowed || !matches!(code, 400 | 413))
    {
        return Err(format!("code {code} on {v:?}"));
    }
    if v.warnings.iter().any(|w| w.trim().is_empty()) {
        return Err(format!("an empty warning: {v:?}"));
    }
    for key in v.audit_annotations.keys() {
        let ok = !key.is_empty()
            && key
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !ok {
            return Err(format!("audit annotation key {key:?} is not a plain name"));
        }
    }
    if let Some(m) = &v.mutated_object
        && !m.is_object()
    {
        return Err(format!("mutated object is not an object: {m}"));
    }
    let text = v.message.as_deref().map_or(0, str::len)
        + v.warnings.iter().map(String::len).sum::<usize>()
        + v.audit_annotations.values().map(String::len).sum::<usize>();
    if text > limit {
        return Err(format!(
            "{text} bytes of message, warnings and audit annotations (limit {limit})"
        ));
    }
    Ok(())
}

/// The response's message is the verdict's, or its start followed by a note that it was
/// cut (`gpu_rules::limits` caps what the API client gets).
fn same_message(response: Option<&str>, verdict: Option<&str>) -> bool {
    match (response, verdict) {
        (None, None) => true,
        (Some(r), Some(v)) if r == v => true,
        (Some(r), Some(v)) => {
            r.len() < v.len() && r.find(" [cut: ").is_some_and(|at| v.starts_with(&r[..at]))
        }
        _ => false,
    }
}

/// The verdict serialized as Kubewarden's `ValidationResponse` says the same.
fn check_response(v: &Verdict) -> Result<(), String> {
    let out = kubewarden::respond(v.clone()).map_err(|e| format!("respond failed: {e}"))?;
    let r: Value = serde_json::from_slice(&out).map_err(|e| format!("respond: no JSON: {e}"))?;
    let same = r["accepted"] == json!(v.allowed)
        && same_message(r["message"].as_str(), v.message.as_deref())
        && r["code"] == json!(v.code)
        && r["mutated_object"] == json!(v.mutated_object)
        && r["warnings"] == json!((!v.warnings.is_empty()).then_some(&v.warnings));
    if !same {
        return Err(format!("response {r} does not say {v:?}"));
    }
    Ok(())
}
