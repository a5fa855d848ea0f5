use super::*;
use crate::vram::catalog::model::tests::model;
use rstest::rstest;
use serde_json::{Value, json};

fn container(v: Value) -> Container {
    serde_json::from_value(v).unwrap()
}

fn read(v: Value) -> Result<ServerArgs, String> {
    ServerArgs::read(&container(v), "container vllm")
}

fn args(list: &[&str]) -> ServerArgs {
    read(json!({"name": "vllm", "args": list})).unwrap()
}

fn llama_8b() -> Model {
    model(
        json!({"parametersBillions": 8.03, "dtype": "bf16", "layers": 32, "kvHeads": 8,
                 "headDim": 128, "contextLength": 8192, "attentionHeads": 32}),
    )
}

/// Every setting, in both spellings (and KServe's underscores).
#[rstest]
#[case::model(&["--model", "meta-llama/Llama-3.1-8B-Instruct"], &["--model=meta-llama/Llama-3.1-8B-Instruct"])]
#[case::model_path(&["--model-path", "Qwen/Qwen2.5-7B-Instruct"], &["--model-path=Qwen/Qwen2.5-7B-Instruct"])]
#[case::model_id(&["--model-id", "mistralai/Mistral-7B-v0.1"], &["--model_id=mistralai/Mistral-7B-v0.1"])]
#[case::served(&["--served-model-name", "chat"], &["--served-model-name=chat"])]
#[case::max_model_len(&["--max-model-len", "16384"], &["--max-model-len=16384"])]
#[case::kserve_max_model_len(&["--max_model_len", "16384"], &["--max_model_len=16384"])]
#[case::context_length(&["--context-length", "16384"], &["--context-length=16384"])]
#[case::max_total_tokens(&["--max-total-tokens", "16384"], &["--max-total-tokens=16384"])]
#[case::max_num_seqs(&["--max-num-seqs", "64"], &["--max-num-seqs=64"])]
#[case::tensor_parallel(&["--tensor-parallel-size", "4"], &["--tensor-parallel-size=4"])]
#[case::tp_size(&["--tp-size", "4"], &["--tp-size=4"])]
#[case::num_shard(&["--num-shard", "4"], &["--num-shard=4"])]
#[case::pipeline_parallel(&["--pipeline-parallel-size", "2"], &["--pipeline-parallel-size=2"])]
#[case::gpu_memory(&["--gpu-memory-utilization", "0.95"], &["--gpu-memory-utilization=0.95"])]
#[case::mem_fraction(&["--mem-fraction-static", "0.95"], &["--mem-fraction-static=0.95"])]
#[case::quantization(&["--quantization", "awq"], &["--quantization=awq"])]
#[case::kv_cache_dtype(&["--kv-cache-dtype", "fp8"], &["--kv-cache-dtype=fp8"])]
#[case::dtype(&["--dtype", "half"], &["--dtype=half"])]
fn both_spellings_read_the_same(#[case] spaced: &[&str], #[case] joined: &[&str]) {
    let (a, b) = (args(spaced), args(joined));
    assert!(!a.is_empty(), "{spaced:?} read nothing");
    assert_eq!(values(&a), values(&b));
}

/// The values read, without how they were written.
fn values(a: &ServerArgs) -> Vec<String> {
    fn v<T: std::fmt::Debug>(f: &Option<Found<T>>) -> String {
        format!("{:?}", f.as_ref().map(|f| &f.value))
    }
    vec![
        v(&a.model),
        v(&a.served_name),
        v(&a.context_length),
        v(&a.max_num_seqs),
        v(&a.tensor_parallel),
        v(&a.pipeline_parallel),
        v(&a.usable_percent),
        v(&a.quantization),
        v(&a.kv_cache_dtype),
        v(&a.dtype),
    ]
}

#[test]
fn values_are_typed() {
    let a = args(&[
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--max-model-len",
        "32k",
        "--max-num-seqs",
        "64",
        "--tensor-parallel-size",
        "2",
        "--pipeline-parallel-size",
        "2",
        "--gpu-memory-utilization",
        "0.955",
        "--quantization",
        "awq",
        "--kv-cache-dtype",
        "fp8_e5m2",
        "--dtype",
        "bfloat16",
        "--port",
        "8000",
        "--trust-remote-code",
    ]);
    assert_eq!(
        a.model.as_ref().unwrap().value,
        ModelArg::Id("meta-llama/Llama-3.1-8B-Instruct".into())
    );
    assert_eq!(a.context_length.as_ref().unwrap().value, 32_000);
    assert_eq!(a.max_num_seqs.as_ref().unwrap().value, 64);
    assert_eq!(a.parallel_gpus(), Some(4));
    assert_eq!(
        a.parallel_text(),
        "--tensor-parallel-size 2 x --pipeline-parallel-size 2"
    );
    assert_eq!(a.usable_percent.as_ref().unwrap().value, 95, "rounded down");
    assert_eq!(a.quantization.as_ref().unwrap().value, Some(Dtype::Int4));
    assert_eq!(
        a.kv_cache_dtype.as_ref().unwrap().value,
        Choice::Known(Dtype::Fp8)
    );
    assert_eq!(a.dtype.as_ref().unwrap().value, Choice::Known(Dtype::Bf16));
    assert_eq!(
        a.model.as_ref().unwrap().source(),
        "argument --model of container vllm"
    );
}

#[rstest]
#[case::plain("8192", Some(8192))]
#[case::decimal_k("32k", Some(32_000))]
#[case::binary_k("32K", Some(32_768))]
#[case::fraction_k("25.6k", Some(25_600))]
#[case::mega("1M", Some(1_048_576))]
#[case::binary_fraction("1.5K", None)]
#[case::words("lots", None)]
#[case::negative("-1", None)]
#[case::empty("", None)]
fn token_counts(#[case] text: &str, #[case] expected: Option<u64>) {
    assert_eq!(tokens(text), expected);
}

#[test]
fn vllm_serve_takes_the_model_positionally() {
    let a = read(json!({"name": "vllm", "command": ["vllm", "serve"],
        "args": ["Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192"]}))
    .unwrap();
    let m = a.model.unwrap();
    assert_eq!(m.value, ModelArg::Id("Qwen/Qwen2.5-7B-Instruct".into()));
    assert_eq!(m.shown(), "vllm serve Qwen/Qwen2.5-7B-Instruct");
    assert_eq!(m.source(), "argument vllm serve of container vllm");
    let a = read(json!({"command": ["/usr/local/bin/vllm", "serve", "org/a", "--model", "org/b"]}))
        .unwrap();
    assert_eq!(
        a.model.unwrap().value,
        ModelArg::Id("org/a".into()),
        "the positional model wins, as in vLLM"
    );
}

#[test]
fn paths_are_told_apart_from_ids() {
    for path in ["/mnt/models", "./m", "../m", "~/m"] {
        assert_eq!(
            args(&["--model", path]).model.unwrap().value,
            ModelArg::Path(path.into())
        );
    }
    assert_eq!(
        args(&["--model", "hf://org/m"]).model.unwrap().value,
        ModelArg::Id("hf://org/m".into())
    );
}

#[test]
fn kubernetes_expands_literal_env_in_args() {
    let a = read(json!({"name": "vllm",
        "args": ["--model", "$(MODEL)", "--max-model-len", "$(LEN)", "--served-model-name", "$$(LITERAL)"],
        "env": [{"name": "ORG", "value": "meta-llama"},
                {"name": "MODEL", "value": "$(ORG)/Llama-3.1-8B-Instruct"},
                {"name": "LEN", "value": "16384"}]}))
    .unwrap();
    assert_eq!(
        a.model.unwrap().value,
        ModelArg::Id("meta-llama/Llama-3.1-8B-Instruct".into()),
        "env values use the variables defined before them"
    );
    assert_eq!(a.context_length.unwrap().value, 16384);
    assert_eq!(a.served_name.unwrap().value, "$(LITERAL)", "$$ escapes");
}

#[test]
fn variables_the_policy_cannot_see_are_named() {
    let e = read(
        json!({"name": "vllm", "args": ["--max-model-len", "$(LEN)"],
        "env": [{"name": "LEN", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "len"}}}]}),
    )
    .unwrap_err();
    assert_eq!(
        e,
        "container vllm: --max-model-len '$(LEN)' uses the variable $(LEN), which the container's env does not set to a literal value (valueFrom and envFrom are resolved by the kubelet, after admission), so the policy cannot read it: write the value itself"
    );
    assert!(read(json!({"args": ["--model=$(UNSET)"]})).is_err());
    // Unknown flags may use anything.
    assert!(
        read(json!({"args": ["--port", "$(PORT)"]}))
            .unwrap()
            .is_empty()
    );
}

#[rstest]
#[case::not_a_number(&["--max-model-len", "long"], "container vllm: --max-model-len is 'long', not a number of tokens from 1 to 100000000 (like 8192 or 32k)")]
#[case::zero_seqs(&["--max-num-seqs=0"], "container vllm: --max-num-seqs is '0', not a whole number from 1 to 1000000")]
#[case::fraction_tp(&["--tensor-parallel-size", "1.5"], "container vllm: --tensor-parallel-size is '1.5', not a GPU count from 1 to 4096")]
#[case::percent(&["--gpu-memory-utilization", "90"], "container vllm: --gpu-memory-utilization is '90', not a fraction of each GPU's memory from 0.01 to 1 (like 0.9)")]
#[case::missing(&["--model"], "container vllm: --model is given without a value")]
#[case::flag_as_value(&["--max-model-len", "--model", "x"], "container vllm: --max-model-len is given without a value")]
#[case::short_flag_as_value(&["--model", "-tp", "2"], "container vllm: --model is given without a value")]
#[case::negative(&["--max-num-seqs", "-1"], "container vllm: --max-num-seqs is '-1', not a whole number from 1 to 1000000")]
#[case::empty(&["--model="], "container vllm: --model is nothing, not a model id or path")]
fn malformed_values_of_known_flags_are_errors(#[case] list: &[&str], #[case] message: &str) {
    assert_eq!(
        read(json!({"name": "vllm", "args": list})).unwrap_err(),
        message
    );
}

#[test]
fn unknown_flags_and_values_are_ignored() {
    let a = args(&[
        "--port",
        "8000",
        "--enable-prefix-caching",
        "serve",
        "--host=0.0.0.0",
    ]);
    assert!(a.is_empty(), "{a:?}");
    let a = args(&[
        "--quantization",
        "gguf",
        "--kv-cache-dtype",
        "q4",
        "--dtype",
        "int4",
    ]);
    assert_eq!(a.quantization.unwrap().value, None);
    assert_eq!(a.kv_cache_dtype.unwrap().value, Choice::Unknown);
    assert_eq!(a.dtype.unwrap().value, Choice::Unknown);
}

#[test]
fn the_last_occurrence_wins() {
    let a = args(&["--max-model-len", "4096", "--max-model-len=8192"]);
    assert_eq!(a.context_length.unwrap().value, 8192);
}

#[test]
fn shell_scripts_are_split_and_only_server_commands_read() {
    let a = read(json!({"name": "vllm", "command": ["/bin/sh", "-c"],
        "args": ["pip install x --model ignored && exec vllm serve \"meta-llama/Llama-3.1-8B-Instruct\" \\\n  --max-model-len ${LEN} --max-num-seqs $SEQS; echo done"],
        "env": [{"name": "LEN", "value": "16384"}, {"name": "SEQS", "value": "8"}]}))
    .unwrap();
    assert_eq!(
        a.model.unwrap().value,
        ModelArg::Id("meta-llama/Llama-3.1-8B-Instruct".into())
    );
    assert_eq!(a.context_length.unwrap().value, 16384);
    assert_eq!(a.max_num_seqs.unwrap().value, 8);
    let e = read(json!({"command": ["bash", "-ec", "python3 -m sglang.launch_server --context-length $CTX"]}))
        .unwrap_err();
    assert!(e.contains("uses the variable $CTX"), "{e}");
    assert!(
        read(json!({"command": ["bash", "/start.sh", "--model", "x"]}))
            .unwrap()
            .is_empty(),
        "a script file is not read"
    );
    assert!(
        read(json!({"command": ["sh", "-c", "vllm serve 'unbalanced"]}))
            .unwrap()
            .is_empty(),
        "a script a shell cannot split is not read"
    );
}

#[test]
fn tgi_reads_its_environment_and_flags_win() {
    let tgi = json!({"name": "tgi", "image": "ghcr.io/huggingface/text-generation-inference:2.4",
        "env": [{"name": "MODEL_ID", "value": "mistralai/Mistral-7B-v0.1"},
                {"name": "MAX_TOTAL_TOKENS", "value": "4096"},
                {"name": "NUM_SHARD", "value": "2"}]});
    let a = ServerArgs::read(&container(tgi.clone()), "container tgi").unwrap();
    assert_eq!(
        a.model.as_ref().unwrap().source(),
        "env MODEL_ID of container tgi"
    );
    assert_eq!(
        a.context_length.as_ref().unwrap().shown(),
        "env MAX_TOTAL_TOKENS=4096"
    );
    assert_eq!(a.tensor_parallel.unwrap().value, 2);
    let mut with_flag = tgi.clone();
    with_flag["args"] = json!(["--max-total-tokens", "8192"]);
    let a = ServerArgs::read(&container(with_flag), "container tgi").unwrap();
    assert_eq!(a.context_length.unwrap().value, 8192);
    // The same variables in another server's container are not TGI's.
    let mut other = tgi;
    other["image"] = json!("vllm/vllm-openai:v0.6.3");
    assert!(
        ServerArgs::read(&container(other), "container x")
            .unwrap()
            .is_empty()
    );
    let secret = json!({"name": "tgi", "command": ["text-generation-launcher"],
        "env": [{"name": "MODEL_ID", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]});
    assert_eq!(
        ServerArgs::read(&container(secret), "container tgi").unwrap_err(),
        "container tgi: env MODEL_ID is set with valueFrom, which the policy cannot read at admission: set its value in the pod spec"
    );
}

#[test]
fn containers_of_one_unit_must_agree() {
    let leader = ServerArgs::read(
        &container(json!({"args": ["--model", "m", "--tensor-parallel-size", "8"]})),
        "container leader",
    )
    .unwrap();
    let worker = ServerArgs::read(
        &container(json!({"args": ["--model", "m", "--max-model-len", "8192"]})),
        "container worker",
    )
    .unwrap();
    let merged = ServerArgs::merge(vec![leader.clone(), worker]).unwrap();
    assert_eq!(merged.tensor_parallel.unwrap().value, 8);
    assert_eq!(merged.context_length.unwrap().value, 8192);
    let other = ServerArgs::read(
        &container(json!({"args": ["--model", "n"]})),
        "container worker",
    )
    .unwrap();
    assert_eq!(
        ServerArgs::merge(vec![leader, other]).unwrap_err(),
        "--model m of container leader and --model n of container worker disagree: the servers of one serving unit run one model with one configuration, so give them the same value"
    );
}

#[test]
fn context_and_sequences_replace_the_registry_figures() {
    let a = args(&["--max-model-len", "131072", "--max-num-seqs", "64"]);
    let applied = apply(&llama_8b(), &a);
    let Need::Estimate(d) = &applied.model.need else {
        panic!()
    };
    let kv = d.kv.as_ref().unwrap();
    assert_eq!((kv.context_length, kv.concurrency), (131072, 64));
    assert_eq!(
        applied.clause().as_deref(),
        Some("--max-model-len 131072, --max-num-seqs 64 from container vllm")
    );
    assert!(applied.model.estimate(1).total_mib > llama_8b().estimate(1).total_mib);
}

/// The dtypes of the weights and the KV cache of `model` served with `list`.
fn dtypes(model: &Model, list: &[&str]) -> (Dtype, Dtype) {
    let applied = apply(model, &args(list));
    let Need::Estimate(d) = &applied.model.need else {
        panic!("{:?}", applied.model.need)
    };
    (d.dtype, d.kv.as_ref().unwrap().dtype)
}

#[test]
fn dtypes_follow_the_server() {
    // fp8 weights from --quantization: the KV cache stays bf16 (vLLM's auto).
    assert_eq!(
        dtypes(&llama_8b(), &["--quantization", "fp8"]),
        (Dtype::Fp8, Dtype::Bf16)
    );
    // --dtype float32: weights and KV cache in fp32.
    assert_eq!(
        dtypes(&llama_8b(), &["--dtype", "float"]),
        (Dtype::Fp32, Dtype::Fp32)
    );
    // An AWQ model registered as int4 keeps its weights; --dtype half is its activations.
    let awq = model(
        json!({"parametersBillions": 8, "dtype": "int4", "layers": 32, "kvHeads": 8,
                           "headDim": 128, "contextLength": 8192}),
    );
    let awq_half = ["--quantization", "awq", "--dtype", "half"];
    assert_eq!(dtypes(&awq, &awq_half), (Dtype::Int4, Dtype::Fp16));
    assert_eq!(
        apply(&awq, &args(&awq_half)).ignored,
        vec!["--quantization awq (the registry's dtype int4 is already quantized)"]
    );
    // An explicit registry kvCacheDtype stays unless the server names one.
    let fp8_kv = model(
        json!({"parametersBillions": 8, "dtype": "bf16", "layers": 32, "kvHeads": 8,
                              "headDim": 128, "contextLength": 8192, "kvCacheDtype": "fp8"}),
    );
    assert_eq!(dtypes(&fp8_kv, &["--dtype", "half"]).1, Dtype::Fp8);
    assert_eq!(
        dtypes(&fp8_kv, &["--kv-cache-dtype", "auto"]).1,
        Dtype::Bf16
    );
}

#[test]
fn what_cannot_be_counted_is_said() {
    let explicit = model(json!({"vramGiB": 20}));
    let a = apply(&explicit, &args(&["--max-model-len", "131072"]));
    assert_eq!(a.model, explicit);
    assert_eq!(a.clause(), None);
    assert_eq!(
        a.ignored,
        vec!["--max-model-len 131072 (the registry gives vramGiB)"]
    );
    let weights_only = model(json!({"parametersBillions": 1, "dtype": "bf16"}));
    let a = apply(
        &weights_only,
        &args(&["--max-num-seqs", "8", "--quantization", "gguf"]),
    );
    assert_eq!(
        a.ignored,
        vec![
            "--max-num-seqs 8 (the registry describes no KV cache for this model)",
            "--quantization gguf (not a method the policy knows: weights counted as bf16)"
        ]
    );
}

#[test]
fn unclosed_references_are_kept_as_written() {
    let env = BTreeMap::from([("A".to_string(), Some("x".to_string()))]);
    assert_eq!(expand_kubernetes("$(A)-$(B", &env).text, "x-$(B");
    assert_eq!(expand_shell("${A}-${B", &env).text, "x-${B");
    // Many unclosed references are read in one pass.
    let long = "$(".repeat(200_000);
    assert_eq!(expand_kubernetes(&long, &env).text, long);
    let long = "${".repeat(200_000);
    assert_eq!(expand_shell(&long, &env).text, long);
}
