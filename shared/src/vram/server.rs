//! What a model server's container says about the model it serves and how.
//!
//! Read from a container's command line (`command` + `args`, after Kubernetes' `$(VAR)`
//! expansion from the container's literal `env`; `sh -c` scripts are split as a shell
//! splits them, with `$VAR` and `${VAR}` expanded the same way) and, for TGI, from its
//! environment. One flag table covers vLLM, SGLang, TGI and KServe's huggingface runtime:
//!
//! | setting | flags (and TGI environment) |
//! |---|---|
//! | model | `vllm serve <model>`, `--model`, `--model-path`, `--model-id`, `MODEL_ID` |
//! | served name | `--served-model-name`, `--model-name` |
//! | context length | `--max-model-len`, `--context-length`, `--max-total-tokens`, `--max-length`, `MAX_TOTAL_TOKENS` |
//! | sequences at once | `--max-num-seqs` |
//! | tensor parallel | `--tensor-parallel-size`, `-tp`, `--tp-size`, `--num-shard`, `NUM_SHARD` |
//! | pipeline parallel | `--pipeline-parallel-size`, `-pp` |
//! | usable memory | `--gpu-memory-utilization`, `--mem-fraction-static` |
//! | weights | `--quantization`, `-q`, `--quantize`, `--dtype` |
//! | KV cache | `--kv-cache-dtype` |
//!
//! Flag names are compared with `_` read as `-` (vLLM's parser does the same, and KServe's
//! runtime spells its own flags with `_`). `--flag value` and `--flag=value` are both read,
//! the last occurrence wins, and a flag beats the environment. Unknown flags are ignored; a
//! known flag whose value cannot be read (not a number, out of range, missing, or taken
//! from a variable the policy cannot see) is an error that says so.

use super::catalog::model::{Dtype, KvCache, Model, Need};
use crate::podspec::{Container, EnvVar};
use std::collections::BTreeMap;
use std::fmt;

/// The most tokens per sequence a context-length flag may give.
const MAX_TOKENS: u64 = 100_000_000;
/// The most sequences at once.
const MAX_SEQS: u64 = 1_000_000;
/// The most GPUs a parallel size may name.
const MAX_PARALLEL: u64 = 4096;

/// One setting as the container gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found<T> {
    pub value: T,
    /// The flag as written (`--max-model-len`, `--max_model_len`), `env MAX_TOTAL_TOKENS`
    /// or `vllm serve`.
    pub flag: String,
    /// The value as written (after variable expansion).
    pub text: String,
    /// `container vllm` (with its template's location when a unit has several).
    pub container: String,
}

impl<T> Found<T> {
    /// `--max-model-len 131072`, `env MAX_TOTAL_TOKENS=8192`, `vllm serve meta-llama/x`.
    pub fn shown(&self) -> String {
        match self.flag.strip_prefix("env ") {
            Some(name) => format!("env {name}={}", self.text),
            None => format!("{} {}", self.flag, self.text),
        }
    }

    /// `argument --model of container vllm`, `env MODEL_ID of container tgi`.
    pub fn source(&self) -> String {
        if self.flag.starts_with("env ") {
            format!("{} of {}", self.flag, self.container)
        } else {
            format!("argument {} of {}", self.flag, self.container)
        }
    }
}

/// Where the server loads its model from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelArg {
    /// A model id (`meta-llama/Llama-3.1-8B-Instruct`) or URI, looked up in the registry.
    Id(String),
    /// A path in the container (`/mnt/models`): what it holds cannot be seen at admission.
    Path(String),
}

/// A choice flag: `auto`, a dtype the estimate knows, or a value it does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Auto,
    Known(Dtype),
    Unknown,
}

/// Everything the policy reads from the server containers of one serving unit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerArgs {
    pub model: Option<Found<ModelArg>>,
    pub served_name: Option<Found<String>>,
    pub context_length: Option<Found<u64>>,
    pub max_num_seqs: Option<Found<u64>>,
    pub tensor_parallel: Option<Found<u64>>,
    pub pipeline_parallel: Option<Found<u64>>,
    /// Percent of each GPU's memory the server uses (`0.95` -> 95, rounded down).
    pub usable_percent: Option<Found<u64>>,
    /// The weights' dtype a quantization method stores; `None` for methods the policy does
    /// not know.
    pub quantization: Option<Found<Option<Dtype>>>,
    pub kv_cache_dtype: Option<Found<Choice>>,
    pub dtype: Option<Found<Choice>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Model,
    ServedName,
    ContextLength,
    MaxNumSeqs,
    TensorParallel,
    PipelineParallel,
    GpuMemory,
    Quantization,
    KvCacheDtype,
    Dtype,
}

/// Flags, as compared (`_` read as `-`).
const FLAGS: &[(&str, Key)] = &[
    ("--model", Key::Model),
    ("--model-path", Key::Model),
    ("--model-id", Key::Model),
    ("--served-model-name", Key::ServedName),
    ("--model-name", Key::ServedName),
    ("--max-model-len", Key::ContextLength),
    ("--context-length", Key::ContextLength),
    ("--max-total-tokens", Key::ContextLength),
    ("--max-length", Key::ContextLength),
    ("--max-num-seqs", Key::MaxNumSeqs),
    ("--tensor-parallel-size", Key::TensorParallel),
    ("-tp", Key::TensorParallel),
    ("--tp-size", Key::TensorParallel),
    ("--num-shard", Key::TensorParallel),
    ("--pipeline-parallel-size", Key::PipelineParallel),
    ("-pp", Key::PipelineParallel),
    ("--gpu-memory-utilization", Key::GpuMemory),
    ("--mem-fraction-static", Key::GpuMemory),
    ("--quantization", Key::Quantization),
    ("-q", Key::Quantization),
    ("--quantize", Key::Quantization),
    ("--kv-cache-dtype", Key::KvCacheDtype),
    ("--dtype", Key::Dtype),
];

/// TGI's environment variables (read only from containers that run TGI).
const TGI_ENV: &[(&str, Key)] = &[
    ("MODEL_ID", Key::Model),
    ("MAX_TOTAL_TOKENS", Key::ContextLength),
    ("NUM_SHARD", Key::TensorParallel),
];

/// Words of a command line that name a model server: in a shell script, only the
/// commands holding one of them are read (when any does).
const SERVER_MARKERS: &[&str] = &[
    "vllm",
    "sglang",
    "text-generation-launcher",
    "huggingfaceserver",
];

/// Quantization methods and the dtype their weights are stored in. Methods whose bit
/// width depends on the checkpoint are given the larger one (bitsandbytes: 8 bits).
const QUANTIZATION: &[(&str, Dtype)] = &[
    ("awq", Dtype::Int4),
    ("awq_marlin", Dtype::Int4),
    ("gptq", Dtype::Int4),
    ("gptq_marlin", Dtype::Int4),
    ("marlin", Dtype::Int4),
    ("bitsandbytes-nf4", Dtype::Int4),
    ("bitsandbytes-fp4", Dtype::Int4),
    ("bitsandbytes", Dtype::Int8),
    ("eetq", Dtype::Int8),
    ("experts_int8", Dtype::Int8),
    ("fp8", Dtype::Fp8),
    ("fbgemm_fp8", Dtype::Fp8),
    ("modelopt", Dtype::Fp8),
    ("ptpc_fp8", Dtype::Fp8),
];

/// One word of a command line, after expansion, with the variables it names that could
/// not be expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Word {
    text: String,
    unresolved: Vec<String>,
}

impl ServerArgs {
    /// True when nothing was read.
    pub fn is_empty(&self) -> bool {
        *self == ServerArgs::default()
    }

    /// Reads one container; `who` names it in messages (`container vllm`). Errors are
    /// sentences about the flag and its value.
    pub fn read(container: &Container, who: &str) -> Result<ServerArgs, String> {
        let env = literal_env(&container.env);
        let words: Vec<Word> = container
            .command
            .iter()
            .chain(&container.args)
            .map(|w| expand_kubernetes(w, &env))
            .collect();
        let lines = command_lines(words, &env);
        let mut out = ServerArgs::default();
        let tgi = container
            .image
            .as_deref()
            .is_some_and(|i| i.contains("text-generation-inference"))
            || lines
                .iter()
                .flatten()
                .any(|w| w.text.contains("text-generation-launcher"));
        if tgi {
            for (name, key) in TGI_ENV {
                let Some(var) = container.env.iter().rev().find(|e| e.name == *name) else {
                    continue;
                };
                let flag = format!("env {name}");
                if var.value_from {
                    return Err(format!(
                        "{who}: {flag} is set with valueFrom, which the policy cannot read at admission: set its value in the pod spec"
                    ));
                }
                let word = env
                    .get(*name)
                    .cloned()
                    .flatten()
                    .map(|text| Word {
                        text,
                        unresolved: Vec::new(),
                    })
                    .unwrap_or_else(|| Word {
                        text: String::new(),
                        unresolved: Vec::new(),
                    });
                out.set(*key, &flag, &word, who)?;
            }
        }
        let mut positional: Option<Found<ModelArg>> = None;
        for line in &lines {
            let mut i = 0;
            while i < line.len() {
                let word = &line[i];
                i += 1;
                if word.text == "--" {
                    break;
                }
                if word.text == "serve"
                    && i >= 2
                    && basename(&line[i - 2].text) == "vllm"
                    && let Some(model) = line.get(i).filter(|w| !w.text.starts_with('-'))
                {
                    i += 1;
                    let mut found = ServerArgs::default();
                    found.set(Key::Model, "vllm serve", model, who)?;
                    positional = found.model;
                    continue;
                }
                if !word.text.starts_with('-') {
                    continue;
                }
                let (name, inline) = match word.text.split_once('=') {
                    Some((n, v)) => (n, Some(v)),
                    None => (word.text.as_str(), None),
                };
                let normalized = name.replace('_', "-");
                let Some((_, key)) = FLAGS.iter().find(|(f, _)| *f == normalized) else {
                    continue;
                };
                let value = match inline {
                    Some(v) => Word {
                        text: v.to_string(),
                        unresolved: word.unresolved.clone(),
                    },
                    // The next word, unless it is another flag (a negative number is a
                    // value, refused below).
                    None => match line.get(i) {
                        Some(next)
                            if !next.text.starts_with('-') || next.text.parse::<f64>().is_ok() =>
                        {
                            i += 1;
                            next.clone()
                        }
                        _ => {
                            return Err(format!("{who}: {name} is given without a value"));
                        }
                    },
                };
                out.set(*key, name, &value, who)?;
            }
        }
        if positional.is_some() {
            out.model = positional;
        }
        Ok(out)
    }

    /// Combines the containers of one serving unit: a setting given by several must have
    /// the same value in all of them.
    pub fn merge(parts: Vec<ServerArgs>) -> Result<ServerArgs, String> {
        fn pick<T: PartialEq + Clone>(
            into: &mut Option<Found<T>>,
            from: &Option<Found<T>>,
        ) -> Result<(), String> {
            match (into.as_ref(), from) {
                (_, None) => Ok(()),
                (None, Some(f)) => {
                    *into = Some(f.clone());
                    Ok(())
                }
                (Some(a), Some(b)) if a.value == b.value => Ok(()),
                (Some(a), Some(b)) => Err(format!(
                    "{} of {} and {} of {} disagree: the servers of one serving unit run one model with one configuration, so give them the same value",
                    a.shown(),
                    a.container,
                    b.shown(),
                    b.container
                )),
            }
        }
        let mut out = ServerArgs::default();
        for p in &parts {
            pick(&mut out.model, &p.model)?;
            pick(&mut out.served_name, &p.served_name)?;
            pick(&mut out.context_length, &p.context_length)?;
            pick(&mut out.max_num_seqs, &p.max_num_seqs)?;
            pick(&mut out.tensor_parallel, &p.tensor_parallel)?;
            pick(&mut out.pipeline_parallel, &p.pipeline_parallel)?;
            pick(&mut out.usable_percent, &p.usable_percent)?;
            pick(&mut out.quantization, &p.quantization)?;
            pick(&mut out.kv_cache_dtype, &p.kv_cache_dtype)?;
            pick(&mut out.dtype, &p.dtype)?;
        }
        Ok(out)
    }

    fn set(&mut self, key: Key, flag: &str, word: &Word, who: &str) -> Result<(), String> {
        let text = word.text.trim();
        if let Some(var) = word.unresolved.first() {
            return Err(format!(
                "{who}: {flag} '{text}' uses the variable {var}, which the container's env does not set to a literal value (valueFrom and envFrom are resolved by the kubelet, after admission), so the policy cannot read it: write the value itself"
            ));
        }
        fn at<T>(value: T, flag: &str, text: &str, who: &str) -> Found<T> {
            Found {
                value,
                flag: flag.to_string(),
                text: text.to_string(),
                container: who.to_string(),
            }
        }
        let bad = |what: &str| {
            if text.is_empty() {
                format!("{who}: {flag} is nothing, not {what}")
            } else {
                format!("{who}: {flag} is '{text}', not {what}")
            }
        };
        match key {
            Key::Model => {
                if text.is_empty() {
                    return Err(bad("a model id or path"));
                }
                let path = text.starts_with('/')
                    || text.starts_with("./")
                    || text.starts_with("../")
                    || text.starts_with('~')
                    || text == ".";
                self.model = Some(at(
                    if path {
                        ModelArg::Path(text.to_string())
                    } else {
                        ModelArg::Id(text.to_string())
                    },
                    flag,
                    text,
                    who,
                ));
            }
            Key::ServedName => {
                // vLLM takes several names; the first is the model's.
                if let Some(name) = text.split_whitespace().next() {
                    self.served_name = Some(at(name.to_string(), flag, text, who));
                }
            }
            Key::ContextLength => {
                let n = tokens(text)
                    .filter(|n| (1..=MAX_TOKENS).contains(n))
                    .ok_or_else(|| {
                        bad(&format!(
                            "a number of tokens from 1 to {MAX_TOKENS} (like 8192 or 32k)"
                        ))
                    })?;
                self.context_length = Some(at(n, flag, text, who));
            }
            Key::MaxNumSeqs => {
                let n = whole(text, 1, MAX_SEQS)
                    .ok_or_else(|| bad(&format!("a whole number from 1 to {MAX_SEQS}")))?;
                self.max_num_seqs = Some(at(n, flag, text, who));
            }
            Key::TensorParallel | Key::PipelineParallel => {
                let n = whole(text, 1, MAX_PARALLEL)
                    .ok_or_else(|| bad(&format!("a GPU count from 1 to {MAX_PARALLEL}")))?;
                if key == Key::TensorParallel {
                    self.tensor_parallel = Some(at(n, flag, text, who));
                } else {
                    self.pipeline_parallel = Some(at(n, flag, text, who));
                }
            }
            Key::GpuMemory => {
                let percent = super::numbers::parse_thousandths(text)
                    .filter(|t| (10..=1000).contains(t))
                    .map(|t| t / 10)
                    .ok_or_else(|| {
                        bad("a fraction of each GPU's memory from 0.01 to 1 (like 0.9)")
                    })?;
                self.usable_percent = Some(at(percent, flag, text, who));
            }
            Key::Quantization => {
                let lower = text.to_ascii_lowercase();
                let dtype = QUANTIZATION
                    .iter()
                    .find(|(m, _)| m.replace('_', "-") == lower.replace('_', "-"))
                    .map(|(_, d)| *d);
                self.quantization = Some(at(dtype, flag, text, who));
            }
            Key::KvCacheDtype => {
                let lower = text.to_ascii_lowercase();
                let choice = if lower == "auto" {
                    Choice::Auto
                } else if lower.starts_with("fp8") {
                    Choice::Known(Dtype::Fp8)
                } else {
                    Dtype::parse(&lower).map_or(Choice::Unknown, Choice::Known)
                };
                self.kv_cache_dtype = Some(at(choice, flag, text, who));
            }
            Key::Dtype => {
                let lower = text.to_ascii_lowercase();
                let choice = match lower.as_str() {
                    "auto" => Choice::Auto,
                    "float" => Choice::Known(Dtype::Fp32),
                    _ => match Dtype::parse(&lower) {
                        Some(d @ (Dtype::Fp32 | Dtype::Bf16 | Dtype::Fp16)) => Choice::Known(d),
                        _ => Choice::Unknown,
                    },
                };
                self.dtype = Some(at(choice, flag, text, who));
            }
        }
        Ok(())
    }

    /// The parallel sizes the server shards the model over, if it names any: tensor x
    /// pipeline (each 1 when not given).
    pub fn parallel_gpus(&self) -> Option<u64> {
        if self.tensor_parallel.is_none() && self.pipeline_parallel.is_none() {
            return None;
        }
        let tp = self.tensor_parallel.as_ref().map_or(1, |f| f.value);
        let pp = self.pipeline_parallel.as_ref().map_or(1, |f| f.value);
        Some(tp.saturating_mul(pp))
    }

    /// `--tensor-parallel-size 4`, `--tensor-parallel-size 4 x --pipeline-parallel-size 2`.
    pub fn parallel_text(&self) -> String {
        [&self.tensor_parallel, &self.pipeline_parallel]
            .into_iter()
            .flatten()
            .map(Found::shown)
            .collect::<Vec<_>>()
            .join(" x ")
    }
}

/// A model's registry entry with what the server arguments change applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub model: Model,
    /// The settings that changed the estimate (`--max-model-len 131072`).
    pub applied: Vec<String>,
    /// Settings read but not counted, with why.
    pub ignored: Vec<String>,
    /// The containers the applied settings come from.
    pub containers: Vec<String>,
}

impl Applied {
    /// `--max-model-len 131072, --max-num-seqs 64 from container vllm`, or `None`.
    pub fn clause(&self) -> Option<String> {
        (!self.applied.is_empty()).then(|| {
            format!(
                "{} from {}",
                self.applied.join(", "),
                self.containers.join(", ")
            )
        })
    }
}

/// The size of the KV cache a server argument sets (context length, concurrency).
type KvSize = fn(&mut KvCache) -> &mut u64;

/// `model` with the context length, concurrency, dtypes of `args` (usable memory and
/// parallel sizes are not part of the model: the caller applies them).
pub fn apply(model: &Model, args: &ServerArgs) -> Applied {
    let mut out = Applied {
        model: model.clone(),
        applied: Vec::new(),
        ignored: Vec::new(),
        containers: Vec::new(),
    };
    let Need::Estimate(description) = &mut out.model.need else {
        out.ignored = [
            args.context_length.as_ref().map(Found::shown),
            args.max_num_seqs.as_ref().map(Found::shown),
            args.quantization.as_ref().map(Found::shown),
            args.kv_cache_dtype.as_ref().map(Found::shown),
            args.dtype.as_ref().map(Found::shown),
        ]
        .into_iter()
        .flatten()
        .map(|s| format!("{s} (the registry gives vramGiB)"))
        .collect();
        return out;
    };
    let mut applied = Vec::new();
    let mut containers = Vec::new();
    let mut ignored = Vec::new();
    let no_kv = "the registry describes no KV cache for this model";
    let kv_sizes: [(_, KvSize); 2] = [
        (&args.context_length, |kv| &mut kv.context_length),
        (&args.max_num_seqs, |kv| &mut kv.concurrency),
    ];
    for (found, size) in kv_sizes {
        let Some(f) = found else { continue };
        match &mut description.kv {
            Some(kv) => {
                *size(kv) = f.value;
                used(f, &mut applied, &mut containers);
            }
            None => ignored.push(format!("{} ({no_kv})", f.shown())),
        }
    }

    let registry_dtype = description.dtype;
    let unquantized = registry_dtype.bits() >= 16;
    let mut weights = registry_dtype;
    let mut quantized_by_flag = false;
    if let Some(q) = &args.quantization {
        match q.value {
            Some(d) if unquantized => {
                weights = d;
                quantized_by_flag = true;
                used(q, &mut applied, &mut containers);
            }
            Some(_) => ignored.push(format!(
                "{} (the registry's dtype {registry_dtype} is already quantized)",
                q.shown()
            )),
            None => ignored.push(format!(
                "{} (not a method the policy knows: weights counted as {registry_dtype})",
                q.shown()
            )),
        }
    }
    let mut activation: Option<Dtype> = None;
    if let Some(d) = &args.dtype {
        match d.value {
            Choice::Known(dt) => {
                activation = Some(dt);
                if unquantized && !quantized_by_flag {
                    weights = dt;
                }
                used(d, &mut applied, &mut containers);
            }
            Choice::Auto => {}
            Choice::Unknown => ignored.push(format!(
                "{} (not a dtype the policy knows: weights counted as {registry_dtype})",
                d.shown()
            )),
        }
    }
    description.dtype = weights;
    if let Some(kv) = &mut description.kv {
        let default_kv = activation.unwrap_or(weights.default_kv());
        match args.kv_cache_dtype.as_ref() {
            Some(f) => match f.value {
                Choice::Known(d) => {
                    kv.dtype = d;
                    used(f, &mut applied, &mut containers);
                }
                Choice::Auto => {
                    kv.dtype = default_kv;
                    used(f, &mut applied, &mut containers);
                }
                Choice::Unknown => ignored.push(format!(
                    "{} (not a dtype the policy knows: KV cache counted as {})",
                    f.shown(),
                    kv.dtype
                )),
            },
            None if !kv.dtype_given => kv.dtype = default_kv,
            None => {}
        }
    } else if let Some(f) = &args.kv_cache_dtype {
        ignored.push(format!("{} ({no_kv})", f.shown()));
    }
    out.applied = applied;
    out.containers = containers;
    out.ignored = ignored;
    out
}

/// Notes that `found` changed the estimate.
fn used<T>(found: &Found<T>, applied: &mut Vec<String>, containers: &mut Vec<String>) {
    applied.push(found.shown());
    if !containers.contains(&found.container) {
        containers.push(found.container.clone());
    }
}

/// The name of a command without its directory (`/usr/local/bin/vllm` -> `vllm`).
fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// The container's variables with literal values, in Kubernetes' order: each value may
/// use the variables defined before it. `None` marks a variable set with `valueFrom`.
fn literal_env(env: &[EnvVar]) -> BTreeMap<String, Option<String>> {
    let mut out: BTreeMap<String, Option<String>> = BTreeMap::new();
    for var in env {
        let value = if var.value_from {
            None
        } else {
            Some(expand_kubernetes(var.value.as_deref().unwrap_or(""), &out).text)
        };
        out.insert(var.name.clone(), value);
    }
    out
}

/// Kubernetes' expansion of `command`, `args` and env values: `$(NAME)` becomes the value
/// of a variable defined literally, `$$` is a `$`, and anything else is kept as written.
fn expand_kubernetes(text: &str, env: &BTreeMap<String, Option<String>>) -> Word {
    let mut out = String::with_capacity(text.len());
    let mut unresolved = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(') {
            // No `)` here means none after either: the rest is kept as written (and
            // searching again for every later `$(` would take quadratic time).
            let Some(end) = inner.find(')') else {
                out.push_str(&rest[at..]);
                rest = "";
                break;
            };
            let name = &inner[..end];
            match env.get(name) {
                Some(Some(value)) => out.push_str(value),
                _ => {
                    out.push_str(&rest[at..at + 2 + end + 1]);
                    unresolved.push(format!("$({name})"));
                }
            }
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Word {
        text: out,
        unresolved,
    }
}

/// A shell's expansion of `$NAME` and `${NAME}` in one word of a script, from the
/// container's literal env.
fn expand_shell(word: &str, env: &BTreeMap<String, Option<String>>) -> Word {
    let mut out = String::with_capacity(word.len());
    let mut unresolved = Vec::new();
    let mut rest = word;
    let name_len = |s: &str| {
        s.bytes()
            .enumerate()
            .take_while(|(i, b)| {
                b.is_ascii_alphabetic() || *b == b'_' || (*i > 0 && b.is_ascii_digit())
            })
            .count()
    };
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, tail, written) = if let Some(inner) = after.strip_prefix('{') {
            // As for `$(`: without a `}` the rest is kept as written.
            let Some(end) = inner.find('}') else {
                out.push_str(&rest[at..]);
                rest = "";
                break;
            };
            (
                &inner[..end],
                &inner[end + 1..],
                &rest[at..at + 2 + end + 1],
            )
        } else {
            let n = name_len(after);
            (&after[..n], &after[n..], &rest[at..at + 1 + n])
        };
        if name.is_empty() {
            out.push('$');
            rest = after;
            continue;
        }
        match env.get(name) {
            Some(Some(value)) => out.push_str(value),
            _ => {
                out.push_str(written);
                unresolved.push(format!("${name}"));
            }
        }
        rest = tail;
    }
    out.push_str(rest);
    Word {
        text: out,
        unresolved,
    }
}

/// The command lines a container runs: its words, or for `sh -c <script>` the commands
/// of the script (only those naming a model server, when any does).
fn command_lines(words: Vec<Word>, env: &BTreeMap<String, Option<String>>) -> Vec<Vec<Word>> {
    let shell = words.first().is_some_and(|w| {
        matches!(
            basename(&w.text),
            "sh" | "bash" | "dash" | "ash" | "zsh" | "ksh"
        )
    });
    if !shell {
        return vec![words];
    }
    let Some(script) = words
        .iter()
        .skip(1)
        .position(|w| {
            let t = &w.text;
            t.len() >= 2
                && t.starts_with('-')
                && !t.starts_with("--")
                && t[1..].bytes().all(|b| b.is_ascii_alphabetic())
                && t.contains('c')
        })
        .and_then(|i| words.get(i + 2))
    else {
        // A script file (`bash /start.sh`): its content is not in the pod spec.
        return Vec::new();
    };
    let joined = script.text.replace("\\\n", " ");
    let mut lines: Vec<Vec<Word>> = Vec::new();
    let split: Option<Vec<Vec<String>>> = joined
        .lines()
        .map(shlex::split)
        .collect::<Option<Vec<_>>>()
        .or_else(|| shlex::split(&joined).map(|w| vec![w]));
    for line in split.unwrap_or_default() {
        let mut current: Vec<Word> = Vec::new();
        for raw in line {
            let (text, ends) = match raw.strip_suffix(';') {
                Some(t) => (t.to_string(), true),
                None => (raw, false),
            };
            if matches!(text.as_str(), ";" | "&&" | "||" | "|" | "&") {
                lines.push(std::mem::take(&mut current));
                continue;
            }
            if !text.is_empty() {
                let mut word = expand_shell(&text, env);
                word.unresolved.extend(script.unresolved.iter().cloned());
                current.push(word);
            }
            if ends {
                lines.push(std::mem::take(&mut current));
            }
        }
        lines.push(current);
    }
    lines.retain(|l| !l.is_empty());
    let servers: Vec<Vec<Word>> = lines
        .iter()
        .filter(|l| {
            l.iter().any(|w| {
                let lower = w.text.to_ascii_lowercase();
                SERVER_MARKERS.iter().any(|m| lower.contains(m))
            })
        })
        .cloned()
        .collect();
    if servers.is_empty() { lines } else { servers }
}

/// A whole number in `min..=max`.
fn whole(text: &str, min: u64, max: u64) -> Option<u64> {
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse::<u64>().ok())
        .flatten()
        .filter(|n| (min..=max).contains(n))
}

/// Tokens as vLLM reads them: `8192`, `32k` (x 1000), `32K` (x 1024), `1m`, `1M`, `25.6k`
/// (decimals only with the decimal multipliers).
fn tokens(text: &str) -> Option<u64> {
    let (number, multiplier, decimal) = match text.as_bytes().last()? {
        b'k' => (&text[..text.len() - 1], 1_000u128, true),
        b'm' => (&text[..text.len() - 1], 1_000_000, true),
        b'g' => (&text[..text.len() - 1], 1_000_000_000, true),
        b'K' => (&text[..text.len() - 1], 1 << 10, false),
        b'M' => (&text[..text.len() - 1], 1 << 20, false),
        b'G' => (&text[..text.len() - 1], 1 << 30, false),
        _ => (text, 1, false),
    };
    if !decimal && number.contains('.') {
        return None;
    }
    let thousandths = u128::from(super::numbers::parse_thousandths(number)?);
    let scaled = thousandths.checked_mul(multiplier)?;
    (scaled % 1000 == 0)
        .then(|| u64::try_from(scaled / 1000).ok())
        .flatten()
}

impl fmt::Display for ModelArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelArg::Id(s) | ModelArg::Path(s) => f.write_str(s),
        }
    }
}

#[cfg(test)]
mod tests;
