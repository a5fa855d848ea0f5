//! A model's description in the registry and the GPU memory it needs.
//!
//! The estimate (gpu.md §4), all in integers with explicit rounding up:
//!
//! ```text
//! weights  = parameters x bits(dtype) / 8                         (int4 = half a byte)
//! KV cache = 2 x layers x KV heads x head dim x bits(KV dtype) / 8 x context length x concurrency
//! total    = (weights + KV cache) x (100 + overhead%) / 100
//! ```
//!
//! With tensor parallelism over more GPUs than the model has KV heads, each GPU still
//! holds at least one head (heads are replicated), so the KV cache grows to
//! `max(KV heads, TP)` heads.

use super::super::numbers::{MIB, NumText, Round, Thousandths, bytes_to_mib_ceil, div_ceil, gib};
use crate::settings::FieldError;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use std::cell::OnceCell;
use std::fmt;

/// How weights or the KV cache are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    Fp32,
    Bf16,
    Fp16,
    Fp8,
    Int8,
    Int4,
}

impl Dtype {
    /// The names settings accept.
    pub const NAMES: &'static str = "fp32, bf16, fp16, fp8, int8, int4";

    /// Reads `bf16`, `bfloat16`, `FP8`...
    pub fn parse(text: &str) -> Option<Dtype> {
        Some(match text.trim().to_ascii_lowercase().as_str() {
            "fp32" | "float32" => Dtype::Fp32,
            "bf16" | "bfloat16" => Dtype::Bf16,
            "fp16" | "float16" | "half" => Dtype::Fp16,
            "fp8" => Dtype::Fp8,
            "int8" => Dtype::Int8,
            "int4" => Dtype::Int4,
            _ => return None,
        })
    }

    /// Bits per element.
    pub fn bits(self) -> u128 {
        match self {
            Dtype::Fp32 => 32,
            Dtype::Bf16 | Dtype::Fp16 => 16,
            Dtype::Fp8 | Dtype::Int8 => 8,
            Dtype::Int4 => 4,
        }
    }

    /// The KV cache dtype when none is given: the weights' dtype for unquantized models;
    /// bf16 for quantized ones, because inference servers keep the KV cache in the
    /// activation dtype (vLLM's `--kv-cache-dtype auto`), not in the weights' format.
    pub fn default_kv(self) -> Dtype {
        match self {
            Dtype::Fp32 | Dtype::Bf16 | Dtype::Fp16 => self,
            Dtype::Fp8 | Dtype::Int8 | Dtype::Int4 => Dtype::Bf16,
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dtype::Fp32 => "fp32",
            Dtype::Bf16 => "bf16",
            Dtype::Fp16 => "fp16",
            Dtype::Fp8 => "fp8",
            Dtype::Int8 => "int8",
            Dtype::Int4 => "int4",
        })
    }
}

/// A registry entry as settings or the registry ConfigMap give it: either `vramGiB`, or
/// a description to estimate from. Checked by [`ModelSpec::resolve`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ModelSpec {
    /// GPU memory the model needs, in GiB (up to 3 decimals). Excludes the other fields
    /// except `attentionHeads` and `aliases`.
    #[serde(rename = "vramGiB")]
    pub vram_gib: Option<NumText>,
    /// Total parameters in billions (for mixture-of-experts models: all experts).
    pub parameters_billions: Option<NumText>,
    pub dtype: Option<String>,
    pub layers: Option<NumText>,
    /// Key/value heads (`num_key_value_heads`), not attention heads.
    pub kv_heads: Option<NumText>,
    pub head_dim: Option<NumText>,
    /// Tokens per sequence the server reserves KV cache for (vLLM `--max-model-len`).
    pub context_length: Option<NumText>,
    /// Sequences served at once at full context (default 1).
    pub concurrency: Option<NumText>,
    pub kv_cache_dtype: Option<String>,
    /// Activations, CUDA graphs and framework overhead (default 10).
    pub overhead_percent: Option<NumText>,
    /// Attention heads: tensor-parallel sizes must divide it (used in suggestions).
    pub attention_heads: Option<NumText>,
    /// Other names the model is found under (label values cannot hold `/`).
    pub aliases: Vec<String>,
}

/// A `models` entry of the settings, kept as its JSON text: its aliases are read when a
/// lookup first compares them, the whole entry is read and checked when a request names
/// it ([`ModelEntry::model`]). policy-server answers each request on a fresh instance,
/// which reads the settings again: reading every entry into a [`ModelSpec`] and checking
/// it cost about 17k x86 instructions an entry, for entries the request does not name.
/// `validate_settings` still reads and checks them all.
#[derive(Debug, Clone)]
pub struct ModelEntry {
    text: Box<RawValue>,
    aliases: OnceCell<Vec<String>>,
    model: OnceCell<Result<Model, FieldError>>,
}

/// An entry's aliases, read without the rest of it.
#[derive(Deserialize)]
struct Aliases {
    #[serde(default)]
    aliases: Vec<String>,
}

impl<'de> Deserialize<'de> for ModelEntry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(ModelEntry {
            text: Box::<RawValue>::deserialize(deserializer)?,
            aliases: OnceCell::new(),
            model: OnceCell::new(),
        })
    }
}

impl ModelEntry {
    /// Other names the model is found under, as the entry gives them (none when they
    /// cannot be read: [`ModelEntry::model`] says why).
    pub fn aliases(&self) -> &[String] {
        self.aliases.get_or_init(|| {
            serde_json::from_str::<Aliases>(self.text.get())
                .map(|a| a.aliases)
                .unwrap_or_default()
        })
    }

    /// Whether `name` is one of the aliases (`exact`, or ignoring ASCII case).
    pub fn has_alias(&self, name: &str, exact: bool) -> bool {
        self.aliases().iter().any(|a| {
            if exact {
                a == name
            } else {
                a.eq_ignore_ascii_case(name)
            }
        })
    }

    /// The entry read and checked, the first time it is asked (an instance keeps the
    /// answer); errors start with `models[<id>]`.
    pub fn model(&self, id: &str) -> &Result<Model, FieldError> {
        self.model.get_or_init(|| {
            let field = || format!("models[{id}]");
            FieldError::read_json::<ModelSpec>(field, self.text.get())?.resolve_at(field)
        })
    }
}

/// The default `overheadPercent`.
pub const DEFAULT_OVERHEAD_PERCENT: u64 = 10;

/// Upper bounds that keep every product far from overflow and catch unit mistakes.
const MAX_VRAM_THOUSANDTHS: u64 = 1_000_000_000; // 1,000,000 GiB
const MAX_PARAMS_THOUSANDTHS: u64 = 100_000_000; // 100,000 billion
const MAX_LAYERS: u64 = 10_000;
const MAX_HEADS: u64 = 100_000;
const MAX_HEAD_DIM: u64 = 65_536;
const MAX_CONTEXT: u64 = 100_000_000;
const MAX_CONCURRENCY: u64 = 1_000_000;
const MAX_OVERHEAD: u64 = 1_000;

/// A checked registry entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model {
    pub need: Need,
    pub attention_heads: Option<u64>,
}

/// How the memory need is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// `vramGiB`, in thousandths of a GiB.
    Explicit {
        gib_thousandths: u64,
    },
    Estimate(Description),
}

/// What the estimate is computed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description {
    /// Parameters in millions.
    pub params_millions: u64,
    pub dtype: Dtype,
    pub kv: Option<KvCache>,
    pub overhead_percent: u64,
}

/// The KV cache's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvCache {
    pub layers: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub context_length: u64,
    pub concurrency: u64,
    pub dtype: Dtype,
    /// True when the registry gives `kvCacheDtype` (else `dtype` is the default for the
    /// weights' dtype, which a server's `--dtype` changes).
    pub dtype_given: bool,
}

impl ModelSpec {
    /// [`ModelSpec::resolve`] with the field's name built only for an error.
    pub fn resolve_at(&self, field: impl FnOnce() -> String) -> Result<Model, FieldError> {
        self.resolve("")
            .map_err(|e| FieldError::new(format!("{}{}", field(), e.path), e.reason))
    }

    /// Checks the entry; errors start with `field` (`models[meta-llama/Llama-3.1-8B]`).
    pub fn resolve(&self, field: &str) -> Result<Model, FieldError> {
        let attention_heads = self
            .attention_heads
            .as_ref()
            .map(|n| named(field, "attentionHeads", |f| n.whole(f, 1, MAX_HEADS)))
            .transpose()?;
        for (i, alias) in self.aliases.iter().enumerate() {
            if alias.trim().is_empty() {
                return Err(FieldError::new(
                    format!("{field}.aliases[{i}]"),
                    "must not be empty",
                ));
            }
        }
        let estimate_fields: Vec<&str> = [
            ("parametersBillions", self.parameters_billions.is_some()),
            ("dtype", self.dtype.is_some()),
            ("layers", self.layers.is_some()),
            ("kvHeads", self.kv_heads.is_some()),
            ("headDim", self.head_dim.is_some()),
            ("contextLength", self.context_length.is_some()),
            ("concurrency", self.concurrency.is_some()),
            ("kvCacheDtype", self.kv_cache_dtype.is_some()),
            ("overheadPercent", self.overhead_percent.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, given)| given.then_some(name))
        .collect();

        if let Some(vram) = &self.vram_gib {
            if !estimate_fields.is_empty() {
                return Err(FieldError::new(
                    field,
                    format!(
                        "give either vramGiB or a description (parametersBillions, dtype, ...), not both (found vramGiB and {})",
                        estimate_fields.join(", ")
                    ),
                ));
            }
            let gib_thousandths = named(field, "vramGiB", |f| {
                vram.thousandths(f, 1, MAX_VRAM_THOUSANDTHS)
            })?;
            return Ok(Model {
                need: Need::Explicit { gib_thousandths },
                attention_heads,
            });
        }
        let (Some(params), Some(dtype)) = (&self.parameters_billions, &self.dtype) else {
            let missing = if self.parameters_billions.is_none() {
                "parametersBillions"
            } else {
                "dtype"
            };
            return Err(FieldError::new(
                field,
                format!(
                    "give vramGiB, or describe the model with parametersBillions and dtype (missing {missing})"
                ),
            ));
        };
        let params_millions = named(field, "parametersBillions", |f| {
            params.thousandths(f, 1, MAX_PARAMS_THOUSANDTHS)
        })?;
        let dtype = named(field, "dtype", |f| parse_dtype(f, dtype))?;
        let overhead_percent = match &self.overhead_percent {
            Some(n) => named(field, "overheadPercent", |f| n.whole(f, 0, MAX_OVERHEAD))?,
            None => DEFAULT_OVERHEAD_PERCENT,
        };

        let kv_fields = [
            ("layers", &self.layers),
            ("kvHeads", &self.kv_heads),
            ("headDim", &self.head_dim),
            ("contextLength", &self.context_length),
        ];
        let missing: Vec<&str> = kv_fields
            .iter()
            .filter(|(_, v)| v.is_none())
            .map(|(n, _)| *n)
            .collect();
        let kv = if missing.len() == kv_fields.len() {
            if let Some(extra) = [
                ("concurrency", self.concurrency.is_some()),
                ("kvCacheDtype", self.kv_cache_dtype.is_some()),
            ]
            .iter()
            .find(|(_, given)| *given)
            {
                return Err(FieldError::new(
                    format!("{field}.{}", extra.0),
                    "describes the KV cache; also give layers, kvHeads, headDim and contextLength",
                ));
            }
            None
        } else if !missing.is_empty() {
            return Err(FieldError::new(
                field,
                format!(
                    "the KV cache needs layers, kvHeads, headDim and contextLength (missing {})",
                    missing.join(", ")
                ),
            ));
        } else {
            let num = |name: &str, v: &Option<NumText>, max: u64| -> Result<u64, FieldError> {
                v.as_ref()
                    .map(|n| named(field, name, |f| n.whole(f, 1, max)))
                    .unwrap_or(Ok(1))
            };
            let kv_heads = num("kvHeads", &self.kv_heads, MAX_HEADS)?;
            if let Some(heads) = attention_heads
                && heads % kv_heads != 0
            {
                return Err(FieldError::new(
                    format!("{field}.kvHeads"),
                    format!(
                        "{kv_heads} KV heads must divide the {heads} attentionHeads (use num_key_value_heads from config.json)"
                    ),
                ));
            }
            Some(KvCache {
                layers: num("layers", &self.layers, MAX_LAYERS)?,
                kv_heads,
                head_dim: num("headDim", &self.head_dim, MAX_HEAD_DIM)?,
                context_length: num("contextLength", &self.context_length, MAX_CONTEXT)?,
                concurrency: num("concurrency", &self.concurrency, MAX_CONCURRENCY)?,
                dtype: match &self.kv_cache_dtype {
                    Some(d) => named(field, "kvCacheDtype", |f| parse_dtype(f, d))?,
                    None => dtype.default_kv(),
                },
                dtype_given: self.kv_cache_dtype.is_some(),
            })
        };
        Ok(Model {
            need: Need::Estimate(Description {
                params_millions,
                dtype,
                kv,
                overhead_percent,
            }),
            attention_heads,
        })
    }
}

/// `check` of the field `field.name`, its path built only for an error: `check` is given an
/// empty field name, and every message it gives starts with that name and a colon.
fn named<T>(
    field: &str,
    name: &str,
    check: impl FnOnce(&str) -> Result<T, FieldError>,
) -> Result<T, FieldError> {
    check("").map_err(|e| FieldError::new(format!("{field}.{name}{}", e.path), e.reason))
}

fn parse_dtype(field: &str, text: &str) -> Result<Dtype, FieldError> {
    Dtype::parse(text).ok_or_else(|| {
        FieldError::new(
            field,
            format!("'{text}' is not a dtype; use one of {}", Dtype::NAMES),
        )
    })
}

/// The memory a model needs on a given number of tensor-parallel GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Estimate {
    /// Everything, in MiB (rounded up).
    pub total_mib: u64,
    /// The parts, when estimated from a description.
    pub parts: Option<Parts>,
}

/// The parts of an estimate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parts {
    pub weights_bytes: u128,
    pub kv_bytes: u128,
    pub dtype: Dtype,
    pub kv: Option<KvCache>,
    /// KV heads held over all GPUs when TP exceeds the KV heads (`Some(tp)`), else `None`.
    pub replicated_kv_heads: Option<u64>,
    pub overhead_percent: u64,
}

impl Model {
    /// The need with `tp` GPUs per pod sharing the model by tensor parallelism (>= 1).
    pub fn estimate(&self, tp: u64) -> Estimate {
        match &self.need {
            Need::Explicit { gib_thousandths } => Estimate {
                total_mib: u64::try_from(div_ceil(u128::from(*gib_thousandths) * 1024, 1000))
                    .unwrap_or(u64::MAX),
                parts: None,
            },
            Need::Estimate(d) => {
                let weights_bits = u128::from(d.params_millions) * 1_000_000 * d.dtype.bits();
                let weights_bytes = div_ceil(weights_bits, 8);
                let (kv_bytes, replicated) = match &d.kv {
                    None => (0, None),
                    Some(kv) => {
                        let heads = kv.kv_heads.max(tp);
                        let bits = 2u128
                            .saturating_mul(u128::from(kv.layers))
                            .saturating_mul(u128::from(heads))
                            .saturating_mul(u128::from(kv.head_dim))
                            .saturating_mul(kv.dtype.bits())
                            .saturating_mul(u128::from(kv.context_length))
                            .saturating_mul(u128::from(kv.concurrency));
                        (div_ceil(bits, 8), (heads > kv.kv_heads).then_some(heads))
                    }
                };
                let total = div_ceil(
                    (weights_bytes.saturating_add(kv_bytes))
                        .saturating_mul(u128::from(100 + d.overhead_percent)),
                    100,
                );
                Estimate {
                    total_mib: bytes_to_mib_ceil(total),
                    parts: Some(Parts {
                        weights_bytes,
                        kv_bytes,
                        dtype: d.dtype,
                        kv: d.kv.clone(),
                        replicated_kv_heads: replicated,
                        overhead_percent: d.overhead_percent,
                    }),
                }
            }
        }
    }

    /// True when `tp` GPUs can split the attention heads evenly (always, when unknown).
    pub fn tp_ok(&self, tp: u64) -> bool {
        match self.attention_heads {
            Some(heads) => tp > 0 && heads % tp == 0,
            None => true,
        }
    }

    /// The same model with its weights in `dtype`, if it is described (for hints).
    pub fn with_dtype(&self, dtype: Dtype) -> Option<Model> {
        match &self.need {
            Need::Explicit { .. } => None,
            Need::Estimate(d) => Some(Model {
                need: Need::Estimate(Description {
                    dtype,
                    kv: d.kv.clone().map(|kv| KvCache {
                        dtype: kv.dtype.min_bits(dtype.default_kv()),
                        ..kv
                    }),
                    ..d.clone()
                }),
                attention_heads: self.attention_heads,
            }),
        }
    }
}

impl Dtype {
    fn min_bits(self, other: Dtype) -> Dtype {
        if other.bits() < self.bits() {
            other
        } else {
            self
        }
    }
}

impl Estimate {
    /// `~168 GiB` (estimated) or `40 GiB` (given).
    pub fn total_text(&self) -> String {
        match self.parts {
            Some(_) => format!("~{}", gib(self.total_mib, Round::Up)),
            None => gib(self.total_mib, Round::Up),
        }
    }

    /// `weights 131 GiB bf16, KV cache 20 GiB for 8 x 8192 tokens, overhead 10%`, or
    /// `as given in the model registry`.
    pub fn breakdown(&self) -> String {
        let Some(p) = &self.parts else {
            return "as given in the model registry".into();
        };
        let mib = |bytes: u128| u64::try_from(div_ceil(bytes, MIB)).unwrap_or(u64::MAX);
        let mut out = format!(
            "weights {} {}",
            gib(mib(p.weights_bytes), Round::Up),
            p.dtype
        );
        if let Some(kv) = &p.kv {
            out.push_str(&format!(", KV cache {}", gib(mib(p.kv_bytes), Round::Up)));
            if kv.dtype != p.dtype {
                out.push_str(&format!(" {}", kv.dtype));
            }
            out.push_str(&format!(
                " for {} x {} tokens",
                kv.concurrency, kv.context_length
            ));
            if let Some(heads) = p.replicated_kv_heads {
                out.push_str(&format!(
                    " (tensor parallel {heads} > {} KV heads: heads replicated)",
                    kv.kv_heads
                ));
            }
        }
        out.push_str(&format!(", overhead {}%", p.overhead_percent));
        out
    }
}

/// Parameters in billions for messages: 70600 -> `70.6B`.
pub fn billions(params_millions: u64) -> String {
    format!("{}B", Thousandths(params_millions))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{Value, json};

    fn spec(v: Value) -> ModelSpec {
        serde_json::from_value(v).unwrap()
    }

    /// The model of the models entry `v` (named m), which must check.
    pub(crate) fn model(v: Value) -> Model {
        spec(v).resolve("models[m]").unwrap()
    }

    fn err(v: Value) -> String {
        spec(v).resolve("models[m]").unwrap_err().to_string()
    }

    fn llm(params: &str, dtype: &str, layers: u64, kv_heads: u64, ctx: u64, conc: u64) -> Value {
        json!({"parametersBillions": params, "dtype": dtype, "layers": layers, "kvHeads": kv_heads,
               "headDim": 128, "contextLength": ctx, "concurrency": conc})
    }

    // Hand-computed figures (gpu.md §4.3 configs); bytes, then MiB = ceil(bytes / 2^20).
    // Llama-3.1-8B bf16, 8k x 1: weights 8.03e9 x 2 = 16,060,000,000 B;
    //   KV 2 x 32 x 8 x 128 x 2 B = 131,072 B/token x 8192 = 1,073,741,824 B;
    //   total (17,133,741,824 x 110) / 100 = 18,847,116,006.4 -> 18,847,116,007 B = 17,975 MiB.
    // Llama-3.1-70B bf16, 8k x 8: weights 141,200,000,000 B; KV 327,680 x 65,536 =
    //   21,474,836,480 B; total 178,942,320,128 B -> 170,653 MiB.
    // Mixtral-8x7B bf16 (46.7B total), 32k x 1: weights 93,400,000,000 B;
    //   KV 131,072 x 32,768 = 4,294,967,296 B; total 107,464,464,025.6 -> 102,487 MiB.
    // Qwen2.5-7B bf16, 32k x 4: weights 15,200,000,000 B; KV 2 x 28 x 4 x 128 x 2 =
    //   57,344 B/token x 131,072 = 7,516,192,768 B; total 24,987,812,044.8 -> 23,831 MiB.
    // Llama-3.1-70B int4 (AWQ), KV bf16 by default, 8k x 1: weights 35,300,000,000 B;
    //   KV 327,680 x 8192 = 2,684,354,560 B; total 41,782,790,016 B -> 39,848 MiB.
    #[rstest]
    #[case::llama_3_1_8b(
        llm("8.03", "bf16", 32, 8, 8192, 1),
        16_060_000_000,
        1_073_741_824,
        17_975
    )]
    #[case::llama_3_1_70b(
        llm("70.6", "bf16", 80, 8, 8192, 8),
        141_200_000_000,
        21_474_836_480,
        170_653
    )]
    #[case::mixtral_8x7b(
        llm("46.7", "bf16", 32, 8, 32768, 1),
        93_400_000_000,
        4_294_967_296,
        102_487
    )]
    #[case::qwen2_5_7b(
        llm("7.6", "bf16", 28, 4, 32768, 4),
        15_200_000_000,
        7_516_192_768,
        23_831
    )]
    #[case::llama_70b_int4(
        llm("70.6", "int4", 80, 8, 8192, 1),
        35_300_000_000,
        2_684_354_560,
        39_848
    )]
    fn estimates_match_hand_computed_figures(
        #[case] description: Value,
        #[case] weights: u128,
        #[case] kv: u128,
        #[case] total_mib: u64,
    ) {
        let e = model(description).estimate(1);
        let parts = e.parts.clone().unwrap();
        assert_eq!(parts.weights_bytes, weights);
        assert_eq!(parts.kv_bytes, kv);
        assert_eq!(e.total_mib, total_mib);
    }

    #[test]
    fn message_parts_for_llama_70b() {
        let e = model(llm("70.6", "bf16", 80, 8, 8192, 8)).estimate(2);
        assert_eq!(e.total_text(), "~167 GiB");
        assert_eq!(
            e.breakdown(),
            "weights 132 GiB bf16, KV cache 20 GiB for 8 x 8192 tokens, overhead 10%"
        );
    }

    #[test]
    fn fp8_kv_cache_halves_it_and_is_named() {
        let mut d = llm("70.6", "bf16", 80, 8, 8192, 8);
        d["kvCacheDtype"] = json!("fp8");
        let e = model(d).estimate(1);
        assert_eq!(e.parts.as_ref().unwrap().kv_bytes, 10_737_418_240);
        assert!(
            e.breakdown().contains("KV cache 10 GiB fp8 for 8 x 8192"),
            "{}",
            e.breakdown()
        );
    }

    #[test]
    fn kv_heads_are_replicated_beyond_their_count() {
        // Qwen2.5-7B has 4 KV heads: on 8 GPUs every GPU holds one, 8 in all.
        let m = model(llm("7.6", "bf16", 28, 4, 32768, 4));
        let four = m.estimate(4).parts.unwrap();
        let eight = m.estimate(8).parts.unwrap();
        assert_eq!(four.replicated_kv_heads, None);
        assert_eq!(eight.kv_bytes, 2 * four.kv_bytes);
        assert_eq!(eight.replicated_kv_heads, Some(8));
        assert!(
            m.estimate(8)
                .breakdown()
                .contains("tensor parallel 8 > 4 KV heads")
        );
    }

    #[test]
    fn explicit_need_is_taken_as_given() {
        let m = model(json!({"vramGiB": 40, "attentionHeads": 32}));
        let e = m.estimate(4);
        assert_eq!(e.total_mib, 40 * 1024);
        assert_eq!(e.total_text(), "40 GiB");
        assert_eq!(e.breakdown(), "as given in the model registry");
        let fractional = model(json!({"vramGiB": "0.001"})).estimate(1);
        assert_eq!(fractional.total_mib, 2, "1.024 MiB rounds up");
    }

    #[test]
    fn weights_only_models_have_no_kv_cache() {
        let e = model(json!({"parametersBillions": 1, "dtype": "fp32", "overheadPercent": 0}))
            .estimate(1);
        assert_eq!(e.parts.as_ref().unwrap().kv_bytes, 0);
        assert_eq!(e.total_mib, 3815); // 4e9 B / 2^20 = 3814.7
        assert_eq!(e.breakdown(), "weights 3.8 GiB fp32, overhead 0%");
    }

    #[rstest]
    #[case::fp32("fp32", Dtype::Fp32, Dtype::Fp32)]
    #[case::bfloat16("bfloat16", Dtype::Bf16, Dtype::Bf16)]
    #[case::fp16_upper("FP16", Dtype::Fp16, Dtype::Fp16)]
    #[case::fp8("fp8", Dtype::Fp8, Dtype::Bf16)]
    #[case::int8("int8", Dtype::Int8, Dtype::Bf16)]
    #[case::int4("int4", Dtype::Int4, Dtype::Bf16)]
    fn dtypes(#[case] text: &str, #[case] dtype: Dtype, #[case] kv: Dtype) {
        assert_eq!(Dtype::parse(text), Some(dtype));
        assert_eq!(dtype.default_kv(), kv);
    }

    #[rstest]
    #[case::both(json!({"vramGiB": 40, "parametersBillions": 8, "dtype": "bf16"}),
        "models[m]: give either vramGiB or a description (parametersBillions, dtype, ...), not both (found vramGiB and parametersBillions, dtype)")]
    #[case::neither(json!({"aliases": ["x"]}),
        "models[m]: give vramGiB, or describe the model with parametersBillions and dtype (missing parametersBillions)")]
    #[case::no_dtype(json!({"parametersBillions": 8}),
        "models[m]: give vramGiB, or describe the model with parametersBillions and dtype (missing dtype)")]
    #[case::bad_dtype(json!({"parametersBillions": 8, "dtype": "bf32"}),
        "models[m].dtype: 'bf32' is not a dtype; use one of fp32, bf16, fp16, fp8, int8, int4")]
    #[case::bad_kv_dtype(json!({"parametersBillions": 8, "dtype": "bf16", "layers": 1, "kvHeads": 1, "headDim": 1, "contextLength": 1, "kvCacheDtype": "q4"}),
        "models[m].kvCacheDtype: 'q4' is not a dtype; use one of fp32, bf16, fp16, fp8, int8, int4")]
    #[case::zero_layers(json!({"parametersBillions": 8, "dtype": "bf16", "layers": 0, "kvHeads": 8, "headDim": 128, "contextLength": 8192}),
        "models[m].layers: must be a whole number from 1 to 10000, got '0'")]
    #[case::negative_size(json!({"vramGiB": -4}),
        "models[m].vramGiB: must be a number from 0.001 to 1000000 with at most 3 decimals, got '-4'")]
    #[case::zero_params(json!({"parametersBillions": 0, "dtype": "bf16"}),
        "models[m].parametersBillions: must be a number from 0.001 to 100000 with at most 3 decimals, got '0'")]
    #[case::partial_kv(json!({"parametersBillions": 8, "dtype": "bf16", "layers": 32, "kvHeads": 8}),
        "models[m]: the KV cache needs layers, kvHeads, headDim and contextLength (missing headDim, contextLength)")]
    #[case::concurrency_alone(json!({"parametersBillions": 8, "dtype": "bf16", "concurrency": 4}),
        "models[m].concurrency: describes the KV cache; also give layers, kvHeads, headDim and contextLength")]
    #[case::fractional_context(json!({"parametersBillions": 8, "dtype": "bf16", "layers": 32, "kvHeads": 8, "headDim": 128, "contextLength": 8192.5}),
        "models[m].contextLength: must be a whole number from 1 to 100000000, got '8192.5'")]
    #[case::kv_heads_not_dividing(json!({"parametersBillions": 8, "dtype": "bf16", "layers": 32, "kvHeads": 6, "headDim": 128, "contextLength": 8192, "attentionHeads": 32}),
        "models[m].kvHeads: 6 KV heads must divide the 32 attentionHeads (use num_key_value_heads from config.json)")]
    #[case::overhead_too_big(json!({"parametersBillions": 8, "dtype": "bf16", "overheadPercent": 5000}),
        "models[m].overheadPercent: must be a whole number from 0 to 1000, got '5000'")]
    #[case::empty_alias(json!({"vramGiB": 8, "aliases": [" "]}),
        "models[m].aliases[0]: must not be empty")]
    fn invalid_entries_name_the_field(#[case] v: Value, #[case] message: &str) {
        assert_eq!(err(v), message);
    }

    #[test]
    fn unknown_fields_are_refused() {
        assert!(serde_json::from_value::<ModelSpec>(json!({"vramGb": 4})).is_err());
    }

    #[test]
    fn an_entry_answers_for_its_aliases_however_its_text_spells_them() {
        let entry = |text: &str| serde_json::from_str::<ModelEntry>(text).unwrap();
        let plain = entry(r#"{"vramGiB": 4, "aliases": ["Llama-3.1-8b", "l8"]}"#);
        assert!(plain.has_alias("Llama-3.1-8b", true));
        assert!(!plain.has_alias("llama-3.1-8B", true));
        assert!(plain.has_alias("llama-3.1-8B", false));
        assert!(
            !plain.has_alias("llama-3.1", false),
            "a part of an alias is not one"
        );
        assert!(
            !plain.has_alias("vramGiB", false),
            "a field name is not an alias"
        );
        // `\u0038` is `8`.
        let escaped = entry(r#"{"vramGiB": 4, "aliases": ["llama-3.1-\u0038b"]}"#);
        assert!(escaped.has_alias("llama-3.1-8b", true));
        let unreadable = entry(r#"{"vramGiB": 4, "aliases": "llama"}"#);
        assert!(!unreadable.has_alias("llama", false));
        assert!(unreadable.model("m").is_err());
        assert_eq!(
            plain.model("m").as_ref().unwrap().need,
            Need::Explicit {
                gib_thousandths: 4000
            }
        );
    }

    #[test]
    fn quantized_hint_model() {
        let m = model(llm("70.6", "bf16", 80, 8, 8192, 8));
        let fp8 = m.with_dtype(Dtype::Fp8).unwrap();
        assert!(fp8.estimate(1).total_mib < m.estimate(1).total_mib);
        assert!(
            model(json!({"vramGiB": 1}))
                .with_dtype(Dtype::Fp8)
                .is_none()
        );
        assert_eq!(billions(70600), "70.6B");
    }

    #[test]
    fn tensor_parallel_sizes_divide_attention_heads() {
        let m = model(json!({"vramGiB": 1, "attentionHeads": 64}));
        assert!(m.tp_ok(1) && m.tp_ok(2) && m.tp_ok(8));
        assert!(!m.tp_ok(3) && !m.tp_ok(0));
        assert!(model(json!({"vramGiB": 1})).tp_ok(3));
    }
}
