//! Property tests of the VRAM rule: the memory a model needs never shrinks as
//! its parameters, context length, concurrency, weight precision or tensor-parallel size
//! grow, and more GPUs (of the same product) never turn an acceptance into a denial; a
//! server that runs with a longer `--max-model-len`, more `--max-num-seqs` or a smaller
//! `--gpu-memory-utilization` never turns a denial into an acceptance; and every flag reads
//! the same as `--flag value` and `--flag=value`. (Run natively; the unit tests also run in
//! wasm.)
#![cfg(not(target_arch = "wasm32"))]

use gpu_rules::admission::{AdmissionRequest, Verdict};
use gpu_rules::cluster::{Cluster, ClusterRequest};
use gpu_rules::policies::VramFit;
use gpu_rules::policy::Policy;
use gpu_rules::vram::Settings;
use gpu_rules::vram::catalog::{Model, ModelSpec};

/// The policy on `request`, with `settings` (generated valid) checked.
fn evaluate(request: &AdmissionRequest, settings: &Settings, cluster: &dyn Cluster) -> Verdict {
    let checked = VramFit::check(Box::new(settings.clone())).expect("generated settings are valid");
    VramFit::evaluate(request, &checked, cluster)
}

/// The verdict on a CREATE of `object` in namespace ml, with no cluster to read.
fn create(object: Value, settings: &Settings) -> Verdict {
    let request: AdmissionRequest = serde_json::from_value(json!({
        "uid": "u", "operation": "CREATE", "namespace": "ml",
        "kind": {"group": "", "version": "v1", "kind": object["kind"]},
        "object": object,
    }))
    .unwrap();
    evaluate(&request, settings, &NoCluster)
}
use gpu_rules::workload::presets;
use proptest::prelude::*;
use serde_json::{Value, json};

/// Weight dtypes, quantized ones included.
const DTYPES: [&str; 6] = ["fp32", "bf16", "fp16", "fp8", "int8", "int4"];

/// Bits per weight of a dtype name above.
fn bits(dtype: &str) -> u32 {
    match dtype {
        "fp32" => 32,
        "bf16" | "fp16" => 16,
        "fp8" | "int8" => 8,
        _ => 4,
    }
}

/// The KV cache part of a description.
#[derive(Debug, Clone)]
struct Kv {
    layers: u64,
    kv_heads: u64,
    head_dim: u64,
    context_length: u64,
    concurrency: Option<u64>,
    dtype: Option<&'static str>,
}

/// A model description as the registry gives it.
#[derive(Debug, Clone)]
struct Description {
    /// Billions, in thousandths (`parametersBillions` has at most 3 decimals).
    params_thousandths: u64,
    dtype: &'static str,
    kv: Option<Kv>,
    overhead_percent: Option<u64>,
}

impl Description {
    fn to_json(&self) -> Value {
        let mut v = json!({
            "parametersBillions": format!("{}.{:03}", self.params_thousandths / 1000, self.params_thousandths % 1000),
            "dtype": self.dtype,
        });
        if let Some(o) = self.overhead_percent {
            v["overheadPercent"] = json!(o);
        }
        if let Some(kv) = &self.kv {
            v["layers"] = json!(kv.layers);
            v["kvHeads"] = json!(kv.kv_heads);
            v["headDim"] = json!(kv.head_dim);
            v["contextLength"] = json!(kv.context_length);
            if let Some(c) = kv.concurrency {
                v["concurrency"] = json!(c);
            }
            if let Some(d) = kv.dtype {
                v["kvCacheDtype"] = json!(d);
            }
        }
        v
    }

    fn model(&self) -> Model {
        let spec: ModelSpec = serde_json::from_value(self.to_json()).unwrap();
        spec.resolve("models[m]")
            .unwrap_or_else(|e| panic!("generated description is invalid: {e}"))
    }

    /// MiB needed on `tp` tensor-parallel GPUs.
    fn need(&self, tp: u64) -> u64 {
        self.model().estimate(tp).total_mib
    }
}

fn dtype() -> impl Strategy<Value = &'static str> {
    prop::sample::select(DTYPES.to_vec())
}

fn kv() -> impl Strategy<Value = Kv> {
    (
        1u64..=128,
        prop_oneof![1u64..=8, 1u64..=128],
        prop_oneof![Just(64u64), Just(128), Just(256), 1u64..=512],
        prop_oneof![1u64..=4096, 1u64..=1_000_000],
        prop::option::of(1u64..=256),
        prop::option::of(dtype()),
    )
        .prop_map(
            |(layers, kv_heads, head_dim, context_length, concurrency, dtype)| Kv {
                layers,
                kv_heads,
                head_dim,
                context_length,
                concurrency,
                dtype,
            },
        )
}

fn description() -> impl Strategy<Value = Description> {
    (
        // Tiny (a million parameters) to huge (2,000 billion).
        prop_oneof![1u64..=1000, 1u64..=2_000_000],
        dtype(),
        prop::option::weighted(0.8, kv()),
        prop::option::of(0u64..=200),
    )
        .prop_map(
            |(params_thousandths, dtype, kv, overhead_percent)| Description {
                params_thousandths,
                dtype,
                kv,
                overhead_percent,
            },
        )
}

/// A description with a KV cache (for the properties that vary it).
fn description_with_kv() -> impl Strategy<Value = Description> {
    (description(), kv()).prop_map(|(mut d, kv)| {
        d.kv.get_or_insert(kv);
        d
    })
}

/// `d` changed by `more` (more of something) needs no less memory on `tp` GPUs.
fn grows(
    d: &Description,
    tp: u64,
    more: impl FnOnce(&mut Description),
) -> Result<(), TestCaseError> {
    let mut changed = d.clone();
    more(&mut changed);
    prop_assert!(d.need(tp) <= changed.need(tp), "{:?} -> {:?}", d, changed);
    Ok(())
}

/// [`grows`], with `more` of something in the KV cache of `d`.
fn grows_kv(d: &Description, tp: u64, more: impl FnOnce(&mut Kv)) -> Result<(), TestCaseError> {
    grows(d, tp, |changed| changed.kv.as_mut().map_or((), more))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn need_grows_with_parameters(d in description(), more in 1u64..=500_000, tp in 1u64..=16) {
        grows(&d, tp, |bigger| {
            bigger.params_thousandths = (d.params_thousandths + more).min(100_000_000);
        })?;
    }

    #[test]
    fn need_grows_with_context_length(d in description_with_kv(), more in 1u64..=100_000, tp in 1u64..=16) {
        grows_kv(&d, tp, |kv| kv.context_length = (kv.context_length + more).min(100_000_000))?;
    }

    #[test]
    fn need_grows_with_concurrency(d in description_with_kv(), more in 1u64..=64, tp in 1u64..=16) {
        // Unset concurrency means 1.
        grows_kv(&d, tp, |kv| kv.concurrency = Some(kv.concurrency.unwrap_or(1) + more))?;
    }

    #[test]
    fn need_grows_with_weight_precision(d in description(), a in dtype(), b in dtype(), tp in 1u64..=16) {
        let (narrow, wide) = if bits(a) <= bits(b) { (a, b) } else { (b, a) };
        let with = |dtype| Description { dtype, ..d.clone() };
        prop_assert!(with(narrow).need(tp) <= with(wide).need(tp), "{} vs {} for {:?}", narrow, wide, d);
    }

    /// More tensor-parallel GPUs never need less (KV heads are replicated beyond their count).
    #[test]
    fn need_grows_with_tensor_parallel_size(d in description(), tp in 1u64..=64) {
        prop_assert!(d.need(tp) <= d.need(tp + 1));
    }
}

/// The rule makes no host call: models are in the settings.
struct NoCluster;

impl Cluster for NoCluster {
    fn call(&self, request: &ClusterRequest) -> Result<Vec<u8>, String> {
        Err(format!("no host call expected, got {}", request.what()))
    }
}

/// What a generated workload runs on.
#[derive(Debug, Clone)]
enum Device {
    /// Whole GPUs (`nvidia.com/gpu`) of a product named by nodeSelector.
    Product(String),
    /// Whole GPUs of the settings' own product `TEST-GPU` with this many MiB.
    Custom(u64),
    /// A MIG profile resource (its devices do not combine).
    Mig(String),
}

#[derive(Debug, Clone)]
enum Shape {
    Pod,
    Deployment,
    /// A LeaderWorkerSet group of `size` pods, each with the same GPUs.
    Group {
        size: u64,
    },
}

#[derive(Debug, Clone)]
struct Case {
    model: Value,
    device: Device,
    shape: Shape,
    usable_percent: u64,
    /// A cap (GiB) on model memory for this workload's `tier` label.
    cap_gib: Option<u64>,
}

fn model_entry() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => description().prop_map(|d| d.to_json()),
        1 => (1u64..=400_000).prop_map(|t| json!({"vramGiB": format!("{}.{:03}", t / 1000, t % 1000)})),
    ]
}

fn device() -> impl Strategy<Value = Device> {
    prop_oneof![
        prop::sample::select(vec![
            "Tesla-T4",
            "NVIDIA-A10G",
            "NVIDIA-L4",
            "NVIDIA-L40S",
            "NVIDIA-H100-80GB-HBM3",
            "NVIDIA-A100-SXM4-80GB",
            "NVIDIA-A10G-SHARED",
        ])
        .prop_map(|p| Device::Product(p.to_string())),
        (1000u64..=200_000).prop_map(Device::Custom),
        prop::sample::select(vec![
            "nvidia.com/mig-1g.10gb",
            "nvidia.com/mig-3g.40gb",
            "nvidia.com/mig-7g.80gb"
        ])
        .prop_map(|r| Device::Mig(r.to_string())),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        model_entry(),
        device(),
        prop_oneof![
            Just(Shape::Pod),
            Just(Shape::Deployment),
            (1u64..=4).prop_map(|size| Shape::Group { size })
        ],
        prop_oneof![Just(90u64), 50u64..=100],
        prop::option::weighted(0.3, 1u64..=400),
    )
        .prop_map(|(model, device, shape, usable_percent, cap_gib)| Case {
            model,
            device,
            shape,
            usable_percent,
            cap_gib,
        })
}

impl Case {
    fn settings(&self) -> Settings {
        let mut s = json!({
            "models": {"m": self.model},
            "usableMemoryPercent": self.usable_percent,
            "customKinds": presets::all(),
        });
        if let Device::Custom(mib) = self.device {
            s["gpuProducts"] = json!({"TEST-GPU": mib});
        }
        if let Some(cap) = self.cap_gib {
            s["modelMemoryCaps"] = json!({"labelKey": "tier", "maxGiB": {"small": cap}});
        }
        let settings: Settings = serde_json::from_value(s).unwrap();
        settings.check().expect("generated settings are valid");
        settings
    }

    /// The object asking for `n` GPUs (or MIG devices) per pod.
    fn object(&self, n: u64) -> Value {
        let (resource, product) = match &self.device {
            Device::Product(p) => ("nvidia.com/gpu", Some(p.as_str())),
            Device::Custom(_) => ("nvidia.com/gpu", Some("TEST-GPU")),
            Device::Mig(r) => (r.as_str(), None),
        };
        let mut spec = json!({"containers": [{"name": "server", "image": "vllm",
            "resources": {"limits": {resource: n.to_string()}}}]});
        if let Some(p) = product {
            spec["nodeSelector"] = json!({"nvidia.com/gpu.product": p});
        }
        let labels = json!({"gpu-admission/model": "m", "tier": "small"});
        let template = json!({"metadata": {"labels": labels}, "spec": spec});
        match self.shape {
            Shape::Pod => json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ml", "labels": labels}, "spec": spec}),
            Shape::Deployment => json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "d", "namespace": "ml"},
                "spec": {"replicas": 2, "template": template}}),
            Shape::Group { size } => json!({"apiVersion": "leaderworkerset.x-k8s.io/v1",
                "kind": "LeaderWorkerSet", "metadata": {"name": "g", "namespace": "ml"},
                "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": size,
                    "leaderTemplate": template, "workerTemplate": template}}}),
        }
    }

    fn evaluate(&self, settings: &Settings, n: u64) -> Verdict {
        create(self.object(n), settings)
    }

    /// MiB the model needs with `n` GPUs (or MIG devices) per pod. The tensor-parallel
    /// size counts whole GPUs only: MIG devices do not combine, and time-sliced replicas
    /// share one GPU.
    fn need(&self, n: u64) -> u64 {
        let one_device = match &self.device {
            Device::Mig(_) => true,
            Device::Product(p) => p.ends_with("-SHARED"),
            Device::Custom(_) => false,
        };
        let tp = if one_device { 1 } else { n };
        let spec: ModelSpec = serde_json::from_value(self.model.clone()).unwrap();
        spec.resolve("m").unwrap().estimate(tp).total_mib
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    /// If a workload with N GPUs (or MIG devices) per pod is accepted, N + 1 is accepted
    /// too, unless the settings' memory cap refuses the larger tensor-parallel need.
    #[test]
    fn more_gpus_never_turn_an_acceptance_into_a_denial(c in case(), n in 1u64..=12) {
        let settings = c.settings();
        let fewer = c.evaluate(&settings, n);
        if !fewer.allowed {
            return Ok(());
        }
        let more = c.evaluate(&settings, n + 1);
        if more.allowed {
            return Ok(());
        }
        let message = more.message.clone().unwrap_or_default();
        let cap_mib = c.cap_gib.map(|g| g * 1024);
        let capped = message.contains("allowed for tier=small workloads")
            && cap_mib.is_some_and(|cap| c.need(n) <= cap && c.need(n + 1) > cap);
        prop_assert!(capped, "accepted with {} per pod, denied with {}: {}\n{:?}", n, n + 1, message, c);
    }

    /// A verdict is consistent: a denial has a message, an acceptance has none, and an
    /// accepted, checked workload carries numbers with need <= available.
    #[test]
    fn verdicts_are_consistent(c in case(), n in 1u64..=12) {
        let v = c.evaluate(&c.settings(), n);
        prop_assert_eq!(v.allowed, v.message.is_none(), "{:?}", v);
        prop_assert!(v.mutated_object.is_none());
        if v.allowed {
            let need: u64 = v.audit_annotations["vram-need-mib"].parse().unwrap();
            let available: u64 = v.audit_annotations["vram-available-mib"].parse().unwrap();
            prop_assert!(need <= available, "{:?}", v);
            prop_assert_eq!(need, c.need(n));
        }
    }
}

/// A model whose context length is the largest that still fits `case` with `n` GPUs per
/// pod: the need sits right at the available memory, where rounding could break
/// monotonicity. `None` when even one token does not fit.
fn at_the_limit(case: &Case, n: u64) -> Option<Case> {
    // Settings are checked once and kept by the policy, so each context length gets its own.
    let with_context = |ctx: u64| {
        let mut c = case.clone();
        c.model["contextLength"] = json!(ctx);
        c
    };
    let fits = |ctx: u64| {
        let c = with_context(ctx);
        c.evaluate(&c.settings(), n).allowed
    };
    if !fits(1) {
        return None;
    }
    let (mut lo, mut hi) = (1u64, 100_000_000u64);
    if fits(hi) {
        return Some(with_context(hi));
    }
    // fits(lo) and !fits(hi): the need grows with the context length.
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(with_context(lo))
}

/// Small KV shapes, so one more token moves the need by little and the search lands
/// within a MiB of the limit; tiny to small weights.
fn boundary_case() -> impl Strategy<Value = Case> {
    (
        prop_oneof![1u64..=20, 1u64..=200_000],
        dtype(),
        (
            1u64..=4,
            1u64..=4,
            1u64..=128,
            prop::option::of(1u64..=4),
            prop::option::of(dtype()),
        ),
        prop::option::of(0u64..=20),
        prop_oneof![(1000u64..=200_000).prop_map(Device::Custom), device()],
        prop_oneof![
            Just(Shape::Pod),
            (2u64..=3).prop_map(|size| Shape::Group { size })
        ],
        50u64..=100,
    )
        .prop_map(
            |(
                params,
                dtype,
                (layers, kv_heads, head_dim, concurrency, kv_dtype),
                overhead,
                device,
                shape,
                usable_percent,
            )| {
                let d = Description {
                    params_thousandths: params,
                    dtype,
                    kv: Some(Kv {
                        layers,
                        kv_heads,
                        head_dim,
                        context_length: 1,
                        concurrency,
                        dtype: kv_dtype,
                    }),
                    overhead_percent: overhead,
                };
                Case {
                    model: d.to_json(),
                    device,
                    shape,
                    usable_percent,
                    cap_gib: None,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// The sharpest form of the GPU-count property: the model is made as large as still
    /// fits on N GPUs per pod; N + 1 must still accept it.
    #[test]
    fn a_model_at_the_limit_still_fits_on_one_more_gpu(c in boundary_case(), n in 1u64..=8) {
        if let Some(limit) = at_the_limit(&c, n) {
            let settings = limit.settings();
            let more = limit.evaluate(&settings, n + 1);
            prop_assert!(more.allowed, "{} per pod fits, {} does not: {:?}\n{:?}", n, n + 1, more.message, limit);
        }
    }
}

/// The fixes a denial proposes: `(resource, count per pod, product)`, read from
/// `Request nvidia.com/mig-2g.20gb: 1, or nvidia.com/gpu: 2 on NVIDIA-L4, or 1 per pod
/// on NVIDIA-H100-NVL (nodeSelector ...)`.
fn proposed_fixes(message: &str) -> Vec<(String, u64, Option<String>)> {
    let Some(start) = message.find("Request ") else {
        return Vec::new();
    };
    let text = &message[start + "Request ".len()..];
    let text = text.split(" (nodeSelector").next().unwrap_or(text);
    let text = text.split(';').next().unwrap_or(text).trim_end_matches('.');
    let mut out = Vec::new();
    let mut resource = String::new();
    for option in text.split(", or ") {
        let option = match option.split_once(": ") {
            Some((r, rest)) => {
                resource = r.to_string();
                rest
            }
            None => option,
        };
        let (count, product) = match option.split_once(" on ") {
            Some((n, p)) => (n.trim_end_matches(" per pod"), Some(p.to_string())),
            None => (option, None),
        };
        let count = count
            .parse()
            .unwrap_or_else(|_| panic!("count in '{option}' of: {message}"));
        out.push((resource.clone(), count, product));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Every fix a denial proposes (a GPU count on the same or a larger product, or a
    /// larger MIG profile) is accepted when applied.
    #[test]
    fn proposed_fixes_are_accepted(c in case(), n in 1u64..=4) {
        let message = c.evaluate(&c.settings(), n).message.unwrap_or_default();
        for (resource, count, product) in proposed_fixes(&message) {
            let device = match (resource.as_str(), product) {
                ("nvidia.com/gpu", Some(p)) if p == "TEST-GPU" => c.device.clone(),
                ("nvidia.com/gpu", Some(p)) => Device::Product(p),
                (r, None) if r.starts_with("nvidia.com/mig-") => Device::Mig(r.to_string()),
                other => panic!("unexpected fix {other:?} in: {message}"),
            };
            let fixed = Case { device, cap_gib: None, ..c.clone() };
            let after = fixed.evaluate(&fixed.settings(), count);
            prop_assert!(after.allowed, "proposed {} x {:?} after: {}\n  got: {:?}", count, fixed.device, message, after.message);
        }
    }
}

#[test]
fn proposed_fixes_are_read() {
    assert_eq!(
        proposed_fixes(
            "x. Request nvidia.com/mig-2g.20gb: 1, or nvidia.com/gpu: 2 on NVIDIA-L4, or 1 per pod on NVIDIA-H100-NVL (nodeSelector nvidia.com/gpu.product); counts are tensor-parallel sizes."
        ),
        vec![
            ("nvidia.com/mig-2g.20gb".to_string(), 1, None),
            (
                "nvidia.com/gpu".to_string(),
                2,
                Some("NVIDIA-L4".to_string())
            ),
            (
                "nvidia.com/gpu".to_string(),
                1,
                Some("NVIDIA-H100-NVL".to_string())
            ),
        ]
    );
    assert!(proposed_fixes("model m needs more than allowed").is_empty());
}

/// `object` with `args` given to every container named `server`.
fn with_args(mut object: Value, args: &[String]) -> Value {
    fn walk(v: &mut Value, args: &[String]) {
        match v {
            Value::Object(map) => {
                if map.get("name").and_then(Value::as_str) == Some("server")
                    && map.contains_key("resources")
                {
                    map.insert("args".into(), json!(args));
                }
                for child in map.values_mut() {
                    walk(child, args);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| walk(i, args)),
            _ => {}
        }
    }
    walk(&mut object, args);
    object
}

impl Case {
    /// The verdict for `n` GPUs per pod with the server running `args`.
    fn evaluate_with(&self, settings: &Settings, n: u64, args: &[String]) -> Verdict {
        create(with_args(self.object(n), args), settings)
    }

    /// When the server running `args` on `n` GPUs per pod is denied: that denial and the
    /// verdict with `other_args` instead (nothing when `args` fit).
    fn misfit_then(
        &self,
        n: u64,
        args: &[String],
        other_args: &[String],
    ) -> Option<(Verdict, Verdict)> {
        let settings = self.settings();
        let first = self.evaluate_with(&settings, n, args);
        (!first.allowed).then(|| (first, self.evaluate_with(&settings, n, other_args)))
    }
}

/// Server flags: context length, sequences, and usable memory in thousandths.
fn server_flags(context: u64, seqs: u64, usable_thousandths: Option<u64>) -> Vec<String> {
    let mut args = vec![
        "--max-model-len".to_string(),
        context.to_string(),
        format!("--max-num-seqs={seqs}"),
    ];
    if let Some(t) = usable_thousandths {
        args.push("--gpu-memory-utilization".into());
        args.push(format!("{}.{:03}", t / 1000, t % 1000));
    }
    args
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    /// A server with a longer context or more sequences at once never fits where the
    /// shorter or fewer did not.
    #[test]
    fn longer_contexts_and_more_sequences_never_turn_a_misfit_into_a_fit(
        c in case(),
        n in 1u64..=8,
        context in 1u64..=200_000,
        more_context in 0u64..=1_000_000,
        seqs in 1u64..=64,
        more_seqs in 0u64..=256,
        usable in prop::option::of(10u64..=1000),
    ) {
        let Some((smaller, larger)) = c.misfit_then(
            n,
            &server_flags(context, seqs, usable),
            &server_flags(context + more_context, seqs + more_seqs, usable),
        ) else {
            return Ok(());
        };
        prop_assert!(
            !larger.allowed,
            "{} x {} denied ({:?}) but {} x {} accepted\n{:?}",
            seqs, context, smaller.message, seqs + more_seqs, context + more_context, c
        );
    }

    /// A server that uses less of each GPU never fits where one that used more did not.
    #[test]
    fn less_usable_memory_never_turns_a_misfit_into_a_fit(
        c in case(),
        n in 1u64..=8,
        usable in 10u64..=1000,
        less in 0u64..=990,
    ) {
        let lower = usable.saturating_sub(less).max(10);
        let Some((_, less_memory)) = c.misfit_then(
            n,
            &server_flags(8192, 1, Some(usable)),
            &server_flags(8192, 1, Some(lower)),
        ) else {
            return Ok(());
        };
        prop_assert!(!less_memory.allowed, "{} denied, {} accepted\n{:?}", usable, lower, c);
    }
}

/// The flags the policy reads and values for them: one flag of a group, one value for it.
fn known_flag() -> impl Strategy<Value = (&'static str, String)> {
    let flag = |group: &[&'static str]| prop::sample::select(group.to_vec());
    prop_oneof![
        (
            flag(&[
                "--model",
                "--model-path",
                "--model-id",
                "--model_id",
                "--served-model-name"
            ]),
            "[a-zA-Z0-9][a-zA-Z0-9._/-]{0,30}",
        ),
        (
            flag(&[
                "--max-model-len",
                "--max_model_len",
                "--context-length",
                "--max-total-tokens",
                "--max-length"
            ]),
            prop_oneof![
                (1u64..=100_000_000).prop_map(|n| n.to_string()),
                (1u64..=9999).prop_map(|n| format!("{n}k")),
                (1u64..=99).prop_map(|n| format!("{n}K")),
                "[a-z0-9.]{0,6}",
            ],
        ),
        (
            flag(&[
                "--max-num-seqs",
                "--tensor-parallel-size",
                "-tp",
                "--tp-size",
                "--num-shard",
                "--pipeline-parallel-size",
                "-pp"
            ]),
            prop_oneof![(0u64..=5000).prop_map(|n| n.to_string()), "[0-9.x-]{0,5}"],
        ),
        (
            flag(&["--gpu-memory-utilization", "--mem-fraction-static"]),
            prop_oneof![
                (0u64..=1200).prop_map(|t| format!("{}.{:03}", t / 1000, t % 1000)),
                "[0-9.]{0,5}"
            ],
        ),
        (
            flag(&[
                "--quantization",
                "-q",
                "--quantize",
                "--kv-cache-dtype",
                "--dtype"
            ]),
            prop::sample::select(vec![
                "awq",
                "gptq",
                "fp8",
                "fp8_e5m2",
                "auto",
                "half",
                "bfloat16",
                "float",
                "gguf",
                "int4",
                "bitsandbytes"
            ])
            .prop_map(str::to_string),
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Every known flag reads the same as `--flag value` and as `--flag=value`, among
    /// unknown flags, and reading never panics.
    #[test]
    fn both_spellings_read_the_same(
        flags in prop::collection::vec(known_flag(), 1..8),
        noise in prop::collection::vec("--[a-z-]{1,12}", 0..4),
    ) {
        let mut spaced: Vec<String> = noise.clone();
        let mut joined: Vec<String> = noise;
        for (flag, value) in &flags {
            spaced.push(flag.to_string());
            spaced.push(value.clone());
            joined.push(format!("{flag}={value}"));
        }
        let read = |args: &[String]| {
            let c: gpu_rules::podspec::Container =
                serde_json::from_value(json!({"name": "server", "args": args})).unwrap();
            gpu_rules::vram::server::ServerArgs::read(&c, "container server")
        };
        let (a, b) = (read(&spaced), read(&joined));
        // A value that looks like a flag (`-x`) is no value when spaced; with `=` it is read
        // and refused. Either way both are errors or both read the same.
        match (&a, &b) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Err(_), Err(_)) => {}
            _ => {
                let dashed = flags.iter().any(|(_, v)| v.starts_with('-'));
                prop_assert!(dashed, "{:?} vs {:?} for {:?}", a, b, flags);
            }
        }
    }
}
