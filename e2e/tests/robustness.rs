//! Robustness of the built labels, routing, VRAM-fit and capacity-gate modules:
//! malformed payloads, settings of the wrong type, an object over the size limit,
//! 10,000 containers, too many resource names and deep nesting are each answered with a
//! well-formed `ValidationResponse` that rejects with a clear message and the designed
//! code, never a trap (a 500), within the runtime's deadline and a cap on the guest's
//! linear memory; inputs at the limits, and GPU workloads as large as the limits allow,
//! are judged with short answers.
//!
//! Every module runs under [`MEMORY_BOUND`] (wasmtime-provider's `ResourceLimits`): a guest
//! that needed more would trap, and these tests would fail. The deadline is the harness's
//! [`gpu_e2e::DEFAULT_TIMEOUT`]; a call that hit it fails the same way. The ignored test
//! `guest_memory_and_time_per_hostile_input` measures how large each guest's memory grows
//! and how long each call takes, and prints the table:
//! `cargo test -p gpu-e2e --test robustness -- --ignored --nocapture`.
//!
//! The limits themselves are in `shared/src/limits.rs`; the numbers quoted here are the
//! messages users see, also quoted in each policy README ("Limits") and in SECURITY.md.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use gpu_e2e::{
    Policy, SettingsValidation, ValidationResponse, module_path, read_settings, workspace_root,
};
use serde_json::{Value, json};

const MIB: usize = 1024 * 1024;

/// The guest-memory cap every call here runs under. The largest measured peak is 49.4 MiB
/// (routing on one affinity expression of 150,000 values; see the table printed by
/// `guest_memory_and_time_per_hostile_input`), so this leaves 2.5x headroom.
const MEMORY_BOUND: usize = 128 * MIB;

/// One built policy module and settings it accepts.
struct Module {
    name: &'static str,
    /// A valid settings file in its `test_data/`, or `{}`.
    settings: Option<&'static str>,
}

const MODULES: [Module; 4] = [
    Module {
        name: "gpu-labels-policy",
        settings: None,
    },
    Module {
        name: "gpu-pool-routing-policy",
        settings: Some("settings.yml"),
    },
    Module {
        name: "gpu-vram-fit-policy",
        settings: Some("settings.yml"),
    },
    Module {
        name: "gpu-capacity-gate-policy",
        settings: Some("settings.yml"),
    },
];

impl Module {
    /// The module, loaded once per test binary, capped at [`MEMORY_BOUND`].
    fn policy(&self) -> Policy {
        static POLICIES: [OnceLock<Policy>; 4] = [const { OnceLock::new() }; 4];
        let index = MODULES.iter().position(|m| m.name == self.name).unwrap();
        POLICIES[index]
            .get_or_init(|| {
                let path = module_path(self.name).unwrap_or_else(|e| panic!("{e:#}"));
                Policy::load(path)
                    .and_then(|p| p.with_memory_limit(MEMORY_BOUND))
                    .unwrap_or_else(|e| panic!("{e:#}"))
            })
            .clone()
    }

    fn settings(&self) -> Value {
        match self.settings {
            Some(file) => read_settings(
                workspace_root()
                    .join("policies")
                    .join(self.name)
                    .join("test_data")
                    .join(file),
            )
            .unwrap(),
            None => json!({}),
        }
    }

    /// Calls `validate` with raw bytes. Panics when the guest traps or hits the deadline
    /// (the harness's error), or answers something that is not a `ValidationResponse`.
    fn validate_raw(&self, payload: &[u8]) -> (ValidationResponse, Duration) {
        let started = Instant::now();
        let bytes = self
            .policy()
            .call("validate", payload)
            .unwrap_or_else(|e| panic!("{}: validate failed (trap or deadline): {e:#}", self.name));
        let elapsed = started.elapsed();
        let response = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            panic!(
                "{}: validate answered something that is not a ValidationResponse ({e}): {}",
                self.name,
                String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
            )
        });
        (response, elapsed)
    }

    /// `validate` on `object` (CREATE in namespace ml) with this module's settings.
    fn validate(&self, object: &Value) -> ValidationResponse {
        self.validate_raw(&payload(&request(object), &self.settings()))
            .0
    }

    /// Calls `validate_settings` with raw bytes; panics on a trap or an unreadable answer.
    fn validate_settings_raw(&self, payload: &[u8]) -> SettingsValidation {
        let bytes = self
            .policy()
            .call("validate_settings", payload)
            .unwrap_or_else(|e| panic!("{}: validate_settings failed: {e:#}", self.name));
        serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            panic!(
                "{}: validate_settings answered something unreadable ({e})",
                self.name
            )
        })
    }
}

/// Asserts a rejection with `code` whose message contains every one of `words`.
fn assert_rejected(module: &Module, case: &str, r: &ValidationResponse, code: u16, words: &[&str]) {
    let message = r.message.as_deref().unwrap_or_default();
    assert!(!r.accepted, "{} / {case}: accepted", module.name);
    assert_eq!(
        r.code,
        Some(code),
        "{} / {case}: code {:?}, message {message}",
        module.name,
        r.code
    );
    for word in words {
        assert!(
            message.contains(word),
            "{} / {case}: message does not contain {word:?}: {message}",
            module.name
        );
    }
}

/// The `validate` payload policy-evaluator sends.
fn payload(request: &Value, settings: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"request": request, "settings": settings})).unwrap()
}

/// A CREATE of `object` in namespace `ml` by alice.
fn request(object: &Value) -> Value {
    let kind = object["kind"].as_str().unwrap_or("Pod");
    let (group, resource) = match kind {
        "Deployment" => ("apps", "deployments"),
        _ => ("", "pods"),
    };
    json!({
        "uid": "robustness",
        "kind": {"group": group, "version": "v1", "kind": kind},
        "resource": {"group": group, "version": "v1", "resource": resource},
        "name": "big",
        "namespace": "ml",
        "operation": "CREATE",
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": object,
        "oldObject": null,
        "dryRun": false
    })
}

/// A Deployment of one replica whose pod template has `spec`.
fn deployment(spec: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "big", "namespace": "ml"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "big"}},
            "template": {"metadata": {"labels": {"app": "big"}}, "spec": spec}
        }
    })
}

/// A Pod with `spec`.
fn pod(spec: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "big", "namespace": "ml", "labels": {"app": "big"}},
        "spec": spec
    })
}

/// `n` plain containers (no GPU).
fn containers(n: usize) -> Value {
    (0..n)
        .map(|i| json!({"name": format!("c{i}"), "image": "busybox"}))
        .collect()
}

/// A GPU-free Deployment of about 10 MB: one container whose annotation-like env value
/// holds the bulk (built once: the tests must not be slow).
fn ten_megabyte_object() -> &'static Value {
    static OBJECT: OnceLock<Value> = OnceLock::new();
    OBJECT.get_or_init(|| {
        let mut d = deployment(json!({"containers": containers(1)}));
        d["metadata"]["annotations"] = json!({"bulk": "x".repeat(10_000_000)});
        d
    })
}

/// `depth` nested arrays: `[[[...]]]`.
fn nested_arrays(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// A `validate` payload whose object holds 10,000 nested arrays (as text: `serde_json`
/// could not build it as a `Value` either).
fn deeply_nested_payload(module: &Module) -> Vec<u8> {
    let mut request = request(&deployment(json!({"containers": containers(1)})));
    request["object"]["spec"]["deep"] = json!("DEEP");
    let text = payload(&request, &module.settings());
    String::from_utf8(text)
        .unwrap()
        .replace("\"DEEP\"", &nested_arrays(10_000))
        .into_bytes()
}

#[test]
fn malformed_payloads_are_rejected_with_400() {
    let valid = payload(&request(&pod(json!({}))), &json!({}));
    let cases: [(&str, &[u8]); 6] = [
        ("empty", b""),
        ("not JSON", b"GET / HTTP/1.1\r\n"),
        ("truncated JSON", &valid[..valid.len() / 2]),
        ("an array", b"[1, 2, 3]"),
        (
            "request is a string",
            br#"{"request": "pod", "settings": {}}"#,
        ),
        ("no request", br#"{"settings": {}}"#),
    ];
    for module in &MODULES {
        for (case, bytes) in cases {
            let (r, _) = module.validate_raw(bytes);
            assert_rejected(
                module,
                case,
                &r,
                400,
                &["the admission request could not be read"],
            );
        }
        // The shape is right but a field has the wrong type: the message names it.
        let mut wrong = request(&pod(json!({})));
        wrong["operation"] = json!(["CREATE"]);
        let (r, _) = module.validate_raw(&payload(&wrong, &module.settings()));
        assert_rejected(
            module,
            "operation is a list",
            &r,
            400,
            &["request.operation"],
        );
    }
}

/// Settings of the wrong type, for every policy (all share these fields).
const WRONG_SETTINGS: [(&str, &str, &str); 5] = [
    (
        "a string where a list is",
        r#"{"exemptNamespaces": "kube-system"}"#,
        "exemptNamespaces",
    ),
    (
        "a number where an object is",
        r#"{"customKinds": [42]}"#,
        "customKinds[0]",
    ),
    (
        "a list where a string is",
        r#"{"extraGpuResources": [["example.com/tpu"]]}"#,
        "extraGpuResources[0]",
    ),
    (
        "an unknown field",
        r#"{"exemptNamespace": ["kube-system"]}"#,
        "unknown field `exemptNamespace`",
    ),
    (
        "an unknown field inside a list",
        r#"{"customKinds": [{"group": "ray.io", "kind": "RayCluster", "templats": []}]}"#,
        "customKinds[0]: unknown field `templats`",
    ),
];

/// This module's valid settings with one field replaced by `wrong`.
fn settings_with(module: &Module, wrong: &str) -> Value {
    let mut settings = module.settings();
    let wrong: Value = serde_json::from_str(wrong).unwrap();
    for (key, value) in wrong.as_object().unwrap() {
        settings[key] = value.clone();
    }
    settings
}

#[test]
fn settings_of_the_wrong_type_are_invalid_and_named() {
    for module in &MODULES {
        for (case, wrong, field) in WRONG_SETTINGS {
            let settings = settings_with(module, wrong);
            let v = module.validate_settings_raw(&serde_json::to_vec(&settings).unwrap());
            let message = v.message.as_deref().unwrap_or_default();
            assert!(!v.valid, "{} / {case}: valid", module.name);
            assert!(
                message.starts_with(&format!("settings: {field}")),
                "{} / {case}: the message does not start with the field: {message}",
                module.name
            );
            // validate with the same settings (Kubewarden never sends them: it checks
            // settings first) is a rejection naming the field, not a trap or a 500.
            let (r, _) = module.validate_raw(&payload(&request(&pod(json!({}))), &settings));
            let qualified = if field.starts_with("unknown field") {
                format!("settings: {field}")
            } else {
                format!("settings.{field}")
            };
            assert_rejected(module, case, &r, 400, &[qualified.as_str()]);
        }
        for (case, bytes) in [
            ("not JSON", b"settings".as_slice()),
            ("a list", b" []"),
            ("a string", br#""exemptNamespaces""#),
            ("a number", b"42"),
        ] {
            let v = module.validate_settings_raw(bytes);
            assert!(!v.valid, "{} / {case}: valid", module.name);
            assert!(
                v.message
                    .as_deref()
                    .unwrap_or_default()
                    .starts_with("settings: "),
                "{} / {case}: {:?}",
                module.name,
                v.message
            );
        }
    }
}

#[test]
fn an_object_over_the_size_limit_is_rejected_with_413() {
    let object = ten_megabyte_object();
    for module in &MODULES {
        let bytes = payload(&request(object), &module.settings());
        assert!(bytes.len() > 8 * MIB);
        let (r, _) = module.validate_raw(&bytes);
        assert_rejected(
            module,
            "10 MB object",
            &r,
            413,
            &[
                "the admission request is 9.6 MiB",
                "gpu-admission policies read at most 8 MiB",
                "the API server itself accepts objects up to 3 MiB",
            ],
        );
    }
}

#[test]
fn settings_over_the_size_limit_are_invalid() {
    for module in &MODULES {
        let mut settings = module.settings();
        settings["exemptNamespaces"] = (0..100_000).map(|i| format!("team-{i:012}")).collect();
        let bytes = serde_json::to_vec(&settings).unwrap();
        assert!(bytes.len() > MIB);
        let v = module.validate_settings_raw(&bytes);
        assert!(!v.valid, "{}: valid", module.name);
        let message = v.message.unwrap_or_default();
        assert!(
            message.starts_with("settings: the settings are 2.0 MiB; gpu-admission policies read at most 1 MiB of settings"),
            "{}: {message}",
            module.name
        );
    }
}

/// `MAX_REQUEST_VALUES` of `shared/src/limits.rs`, as the messages quote it.
const MAX_REQUEST_VALUES: usize = 200_000;

/// GPU-free Deployments holding nearly `MAX_REQUEST_VALUES` JSON values, each in a shape
/// that expands differently in the guest: the largest inputs the policies read. Built once.
fn at_the_value_limit() -> &'static [(&'static str, Value)] {
    static OBJECTS: OnceLock<Vec<(&'static str, Value)>> = OnceLock::new();
    OBJECTS.get_or_init(|| {
        let n = MAX_REQUEST_VALUES - 1_000;
        let with_args = |bulk: Value| {
            let mut d = deployment(json!({"containers": containers(1)}));
            d["spec"]["template"]["spec"]["containers"][0]["args"] = bulk;
            d
        };
        let keys = |n: usize| -> Value {
            (0..n)
                .map(|i| (format!("example.com/k{i}"), json!("v")))
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        vec![
            ("199,000 zeros", with_args(Value::Array(vec![json!(0); n]))),
            (
                "99,500 one-key maps",
                with_args(Value::Array(vec![json!({"a": 0}); n / 2])),
            ),
            (
                "199,000 strings",
                with_args(Value::Array(vec![json!("0123456789abcdef"); n])),
            ),
            ("199,000 template annotations", {
                let mut d = deployment(json!({"containers": containers(1)}));
                d["spec"]["template"]["metadata"]["annotations"] = keys(n);
                d
            }),
        ]
    })
}

#[test]
fn inputs_at_the_value_limit_are_read_and_judged() {
    for module in &MODULES {
        for (name, object) in at_the_value_limit() {
            let r = module.validate(object);
            // GPU-free, so every policy allows it: read in full, not rejected for size.
            assert!(r.accepted, "{} / {name}: {:?}", module.name, r.message);
        }
        // One value more than the limit is rejected before parsing.
        let over =
            deployment(json!({"containers": containers(1), "x": vec![0; MAX_REQUEST_VALUES]}));
        let r = module.validate(&over);
        assert_rejected(
            module,
            "over the value limit",
            &r,
            413,
            &["JSON values; gpu-admission policies read at most 200000"],
        );
    }
}

#[test]
fn ten_thousand_containers_are_denied_naming_the_limit() {
    for module in &MODULES {
        for (kind, object, location) in [
            (
                "Deployment",
                deployment(json!({"containers": containers(10_000)})),
                "spec.template.spec has 10000 containers",
            ),
            (
                "Pod",
                pod(
                    json!({"containers": containers(4_000), "initContainers": containers(3_000), "ephemeralContainers": containers(3_000)}),
                ),
                "spec has 10000 containers",
            ),
        ] {
            let r = module.validate(&object);
            assert_rejected(
                module,
                kind,
                &r,
                400,
                &[location, "gpu-admission policies read at most 256"],
            );
        }
        // At the limit: read and judged (no GPU, so allowed).
        let at_limit = deployment(json!({"containers": containers(256)}));
        let r = module.validate(&at_limit);
        assert!(
            r.accepted,
            "{}: 256 containers: {:?}",
            module.name, r.message
        );
    }
}

#[test]
fn a_container_with_too_many_resource_names_is_denied() {
    let limits = |n: usize| -> Value {
        (0..n)
            .map(|i| (format!("example.com/r{i}"), json!("1")))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    for module in &MODULES {
        let mut c = containers(1);
        c[0]["resources"] = json!({"limits": limits(1_000)});
        let r = module.validate(&pod(json!({"containers": c.clone()})));
        assert_rejected(
            module,
            "1,000 resource names",
            &r,
            400,
            &[
                "spec.containers[0].resources.limits has 1000 resource names; gpu-admission policies read at most 64 per list",
            ],
        );
        c[0]["resources"] = json!({"limits": limits(64)});
        let r = module.validate(&pod(json!({"containers": c})));
        assert!(
            r.accepted,
            "{}: 64 resource names: {:?}",
            module.name, r.message
        );
    }
}

#[test]
fn deep_nesting_is_rejected_with_400() {
    for module in &MODULES {
        let (r, _) = module.validate_raw(&deeply_nested_payload(module));
        assert_rejected(
            module,
            "10,000 nested arrays",
            &r,
            400,
            &[
                "the admission request could not be read",
                "nested more than 127 levels deep",
            ],
        );
        // Typed settings stop at the first value of the wrong type (here the first
        // array, where a map is expected), before the depth matters.
        let v = module.validate_settings_raw(nested_arrays(10_000).as_bytes());
        assert!(
            !v.valid,
            "{}: deeply nested settings are valid",
            module.name
        );
        assert!(
            v.message
                .as_deref()
                .unwrap_or_default()
                .starts_with("settings: "),
            "{}: {:?}",
            module.name,
            v.message
        );
    }
}

/// The longest message (or all warnings together) a policy may answer with: what users
/// read in `kubectl`'s output must stay readable, whatever the object.
const MAX_MESSAGE_BYTES: usize = 16 * 1024;

/// A GPU pod template (one GPU in its first container) with `extra` merged into its spec.
fn gpu_spec(mut containers: Value, extra: Value) -> Value {
    containers[0]["resources"] = json!({"limits": {"nvidia.com/gpu": "1"}});
    let mut spec = json!({"containers": containers});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    spec
}

/// GPU workloads as large as the limits allow in one dimension each, so that every rule
/// runs on them: `(name, object)`. Built once.
fn hostile_shapes() -> &'static [(&'static str, Value)] {
    static SHAPES: OnceLock<Vec<(&'static str, Value)>> = OnceLock::new();
    SHAPES.get_or_init(|| {
        // 256 containers, each asking for 64 bad GPU quantities (MIG names are GPUs) as
        // limits and 64 others as requests: every one a problem to report.
        let mut bad_gpus = containers(256);
        for c in bad_gpus.as_array_mut().unwrap() {
            let list = |from: usize| -> serde_json::Map<String, Value> {
                (from..from + 64)
                    .map(|j| (format!("nvidia.com/mig-1g.{j}gb"), json!("0.5")))
                    .collect()
            };
            c["resources"] = json!({"limits": list(0), "requests": list(64)});
        }
        let tolerations: Value = (0..20_000)
            .map(|i| json!({"key": format!("k{i}"), "operator": "Equal", "value": "v", "effect": "NoSchedule"}))
            .collect();
        let labels: serde_json::Map<String, Value> = (0..100_000)
            .map(|i| (format!("example.com/l{i}"), json!("v")))
            .collect();
        let terms: Value = (0..1_000)
            .map(|i| {
                let expressions: Value = (0..20)
                    .map(|j| json!({"key": format!("k{i}-{j}"), "operator": "In", "values": ["a", "b", "c"]}))
                    .collect();
                json!({"matchExpressions": expressions})
            })
            .collect();
        let values: Vec<String> = (0..150_000).map(|i| format!("product-{i}")).collect();
        let mut one_long_expression = deployment(gpu_spec(
            containers(1),
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": values}]}
            ]}}}}),
        ));
        one_long_expression["spec"]["template"]["metadata"]["labels"] =
            json!({"workload-type": "interactive", "team": "ml"});
        let mut labelled = deployment(gpu_spec(containers(1), json!({})));
        labelled["spec"]["template"]["metadata"]["labels"] = Value::Object(labels);
        vec![
            (
                "256 containers x 128 bad GPU quantities",
                deployment(json!({"containers": bad_gpus})),
            ),
            (
                "20,000 tolerations",
                deployment(gpu_spec(containers(1), json!({"tolerations": tolerations}))),
            ),
            ("100,000 labels", labelled),
            ("one affinity expression of 150,000 values", one_long_expression),
            (
                "1,000 affinity terms x 20 expressions",
                deployment(gpu_spec(
                    containers(1),
                    json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}),
                )),
            ),
        ]
    })
}

#[test]
fn hostile_shapes_under_the_limits_are_judged_with_short_answers() {
    for module in &MODULES {
        for (name, object) in hostile_shapes() {
            let bytes = payload(&request(object), &module.settings());
            assert!(bytes.len() < 8 * MIB, "{name}: {} bytes", bytes.len());
            let (r, _) = module.validate_raw(&bytes);
            let message = r.message.as_deref().unwrap_or_default();
            let warnings: usize = r.warnings.iter().flatten().map(String::len).sum();
            assert!(
                message.len() <= MAX_MESSAGE_BYTES && warnings <= MAX_MESSAGE_BYTES,
                "{} / {name}: a message of {} bytes, warnings of {warnings}: {}...",
                module.name,
                message.len(),
                &message[..message.len().min(500)]
            );
        }
    }
}

/// Hostile inputs, each as a `(name, operation, payload)` for `module`.
fn hostile_inputs(module: &Module) -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let settings = module.settings();
    let mut inputs = vec![
        (
            "10 MB object",
            "validate",
            payload(&request(ten_megabyte_object()), &settings),
        ),
        (
            "10,000 containers",
            "validate",
            payload(
                &request(&deployment(json!({"containers": containers(10_000)}))),
                &settings,
            ),
        ),
        (
            "10,000 nested arrays",
            "validate",
            deeply_nested_payload(module),
        ),
    ];
    for (name, object) in at_the_value_limit().iter().chain(hostile_shapes()) {
        inputs.push((name, "validate", payload(&request(object), &settings)));
    }
    inputs
}

/// A guest that starts with one page of memory and grows it to ten on every call (and
/// traps when it cannot).
const GROWING_GUEST: &str = r#"
(module
  (import "wapc" "__guest_response" (func $guest_response (param i32 i32)))
  (memory (export "memory") 1)
  (func (export "__guest_call") (param i32 i32) (result i32)
    (if (i32.eq (memory.grow (i32.const 9)) (i32.const -1)) (then unreachable))
    (call $guest_response (i32.const 0) (i32.const 0))
    (i32.const 1)))
"#;

#[test]
fn memory_cap_and_measurement_are_exact_on_a_known_guest() {
    let policy = Policy::from_bytes("growing.wat", GROWING_GUEST.as_bytes()).unwrap();
    let ten_pages = 10 * gpu_e2e::WASM_PAGE_SIZE;
    assert_eq!(
        policy.memory_needed("validate", b"", MEMORY_BOUND).unwrap(),
        ten_pages
    );
    let capped = policy.clone().with_memory_limit(ten_pages).unwrap();
    assert_eq!(capped.memory_limit(), Some(ten_pages));
    assert!(capped.call("validate", b"").is_ok());
    let too_small = policy.with_memory_limit(ten_pages - 1).unwrap();
    assert!(too_small.call("validate", b"").is_err());
}

/// Measures, by bisection over the memory cap, how large each guest's memory grows on
/// each hostile input, and times one call of each; prints the table (about two minutes:
/// ignored by default). The other tests already run every call under [`MEMORY_BOUND`].
#[test]
#[ignore = "measurement (about 2 minutes): cargo test -p gpu-e2e --test robustness -- --ignored --nocapture"]
fn guest_memory_and_time_per_hostile_input() {
    let mut table = String::from(
        "\n| module | input | payload | time | guest memory |\n|---|---|---|---|---|\n",
    );
    for module in &MODULES {
        let policy = module.policy();
        for (name, operation, bytes) in hostile_inputs(module) {
            let started = Instant::now();
            let answer = policy.call(operation, &bytes);
            let elapsed = started.elapsed();
            assert!(
                answer.is_ok(),
                "{} / {name}: the call failed: {answer:?}",
                module.name
            );
            let memory = policy
                .memory_needed(operation, &bytes, MEMORY_BOUND)
                .unwrap_or_else(|e| panic!("{} / {name}: {e:#}", module.name));
            assert!(memory <= MEMORY_BOUND);
            table.push_str(&format!(
                "| {} | {name} | {:.1} MiB | {} ms | {:.1} MiB |\n",
                module.name,
                bytes.len() as f64 / MIB as f64,
                elapsed.as_millis(),
                memory as f64 / MIB as f64
            ));
        }
    }
    eprintln!("{table}");
}

#[test]
fn readmes_quote_the_limit_messages() {
    let ten_thousand = deployment(json!({"containers": containers(10_000)}));
    for module in &MODULES {
        let readme_path = workspace_root()
            .join("policies")
            .join(module.name)
            .join("README.md");
        let readme = std::fs::read_to_string(&readme_path).unwrap();
        let (oversized, _) = module.validate_raw(&payload(
            &request(ten_megabyte_object()),
            &module.settings(),
        ));
        let containers = module.validate(&ten_thousand);
        let missing: Vec<String> = [oversized.message, containers.message]
            .into_iter()
            .flatten()
            .filter(|m| !readme.contains(m.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "{} does not quote:\n{}",
            readme_path.display(),
            missing.join("\n")
        );
    }
}
