//! The input of `vram_args`: a model-server container (its `command`, `args`, `env` and
//! image) built from the flags, values and variables the VRAM policy reads, and arbitrary
//! words, written as the container's JSON (the file the regression test reads).

use arbitrary::Arbitrary;
use serde_json::{Value, json};

/// Words the server-argument reader compares against, known flags in both spellings.
const FLAGS: &[&str] = &[
    "--model",
    "--model-path",
    "--model-id",
    "--model_id",
    "--served-model-name",
    "--model_name",
    "--max-model-len",
    "--max_model_len",
    "--context-length",
    "--max-total-tokens",
    "--max-length",
    "--max-num-seqs",
    "--tensor-parallel-size",
    "-tp",
    "--tp-size",
    "--num-shard",
    "--pipeline-parallel-size",
    "-pp",
    "--gpu-memory-utilization",
    "--mem-fraction-static",
    "--quantization",
    "-q",
    "--quantize",
    "--kv-cache-dtype",
    "--dtype",
    "--port",
    "--trust-remote-code",
    "--",
    "serve",
    "vllm",
    "exec",
    "-c",
];

/// Values, good and bad, with variable references of both kinds and shell syntax.
const VALUES: &[&str] = &[
    "meta-llama/Llama-3.1-8B-Instruct",
    "m",
    "/mnt/models",
    "hf://org/m:rev",
    "8192",
    "32k",
    "1M",
    "25.6k",
    "1.5K",
    "0",
    "-1",
    "100000001",
    "2",
    "0.9",
    "0.001",
    "1.5",
    "auto",
    "fp8",
    "fp8_e5m2",
    "awq",
    "bitsandbytes",
    "half",
    "bfloat16",
    "float",
    "gguf",
    "",
    " ",
    "$(LEN)",
    "$$(LEN)",
    "$(UNSET)",
    "${LEN}",
    "$LEN",
    "$(",
    "${",
    "a;b",
    "&&",
    ";",
    "|",
    "'",
    "\"",
    "\\\n",
    "# comment",
];

/// Commands a container may start with.
const COMMANDS: &[&[&str]] = &[
    &[],
    &["vllm", "serve"],
    &["python3", "-m", "vllm.entrypoints.openai.api_server"],
    &["python3", "-m", "sglang.launch_server"],
    &["text-generation-launcher"],
    &["python", "-m", "huggingfaceserver"],
    &["/bin/sh", "-c"],
    &["bash", "-ec"],
    &["sh"],
];

const ENV_NAMES: &[&str] = &[
    "LEN",
    "MODEL",
    "MODEL_ID",
    "MAX_TOTAL_TOKENS",
    "NUM_SHARD",
    "SEQS",
];

const IMAGES: &[&str] = &[
    "vllm/vllm-openai:v0.6.3",
    "ghcr.io/huggingface/text-generation-inference:2.4.0",
    "lmsysorg/sglang:v0.4.0-cu124",
    "kserve/huggingfaceserver:v0.14.0",
];

/// One word of the command line.
#[derive(Arbitrary, Debug)]
pub enum Word {
    Flag(u8),
    Value(u8),
    /// `--flag=value`.
    Joined(u8, u8),
    Raw(String),
    /// A shell script: its words joined by spaces, as one argument.
    Script(Vec<ScriptWord>),
}

/// One word of a script.
#[derive(Arbitrary, Debug)]
pub enum ScriptWord {
    Flag(u8),
    Value(u8),
    Joined(u8, u8),
    Raw(String),
}

/// An `env` entry's value.
#[derive(Arbitrary, Debug)]
pub enum EnvValue {
    Literal(u8),
    Raw(String),
    /// `valueFrom` (a Secret key).
    From,
    /// Neither `value` nor `valueFrom`.
    Missing,
}

/// Input of `vram_args`.
#[derive(Arbitrary, Debug)]
pub struct CommandLineInput {
    pub command: u8,
    pub image: u8,
    pub args: Vec<Word>,
    pub env: Vec<(u8, EnvValue)>,
    pub gpus: u8,
}

fn pick(items: &[&'static str], i: u8) -> &'static str {
    items[usize::from(i) % items.len()]
}

fn script_word(w: &ScriptWord) -> String {
    match w {
        ScriptWord::Flag(f) => pick(FLAGS, *f).to_string(),
        ScriptWord::Value(v) => pick(VALUES, *v).to_string(),
        ScriptWord::Joined(f, v) => format!("{}={}", pick(FLAGS, *f), pick(VALUES, *v)),
        ScriptWord::Raw(s) => s.clone(),
    }
}

impl CommandLineInput {
    /// The container, as JSON.
    pub fn to_json(&self) -> Value {
        let args: Vec<String> = self
            .args
            .iter()
            .map(|w| match w {
                Word::Flag(f) => pick(FLAGS, *f).to_string(),
                Word::Value(v) => pick(VALUES, *v).to_string(),
                Word::Joined(f, v) => format!("{}={}", pick(FLAGS, *f), pick(VALUES, *v)),
                Word::Raw(s) => s.clone(),
                Word::Script(words) => words.iter().map(script_word).collect::<Vec<_>>().join(" "),
            })
            .collect();
        let env: Vec<Value> = self
            .env
            .iter()
            .map(|(name, value)| {
                let name = pick(ENV_NAMES, *name);
                match value {
                    EnvValue::Literal(v) => json!({"name": name, "value": pick(VALUES, *v)}),
                    EnvValue::Raw(s) => json!({"name": name, "value": s}),
                    EnvValue::From => json!({"name": name,
                        "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}),
                    EnvValue::Missing => json!({"name": name}),
                }
            })
            .collect();
        json!({
            "name": "server",
            "image": pick(IMAGES, self.image),
            "command": COMMANDS[usize::from(self.command) % COMMANDS.len()],
            "args": args,
            "env": env,
            "resources": {"limits": {"nvidia.com/gpu": (self.gpus % 8 + 1).to_string()}},
        })
    }
}
