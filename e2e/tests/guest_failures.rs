//! Guest failures become policy-evaluator's 500 response, never a harness panic.
//! The modules are tiny waPC guests written in WAT (wasmtime compiles text too).

use gpu_e2e::Policy;
use serde_json::json;

/// A guest whose every call traps (like a Rust policy panicking with `panic = "abort"`).
const TRAPPING_GUEST: &str = r#"
(module
  (memory (export "memory") 1)
  (func (export "__guest_call") (param i32 i32) (result i32)
    unreachable))
"#;

/// A guest whose every call fails with an error message (a policy returning `Err`).
const FAILING_GUEST: &str = r#"
(module
  (import "wapc" "__guest_error" (func $guest_error (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "policy exploded")
  (func (export "__guest_call") (param i32 i32) (result i32)
    (call $guest_error (i32.const 16) (i32.const 15))
    (i32.const 0)))
"#;

/// A guest that never returns.
const LOOPING_GUEST: &str = r#"
(module
  (memory (export "memory") 1)
  (func (export "__guest_call") (param i32 i32) (result i32)
    (loop $forever (br $forever))
    (i32.const 1)))
"#;

fn request() -> serde_json::Value {
    json!({"uid": "u-1", "object": {"kind": "Pod"}})
}

#[test]
fn trap_gives_internal_server_error() {
    let policy = Policy::from_bytes("trapping.wat", TRAPPING_GUEST.as_bytes()).unwrap();
    let response = policy.validate(&request(), &json!({}), None).unwrap();
    assert!(!response.allowed);
    assert_eq!(response.uid, "u-1");
    assert_eq!(response.code(), Some(500));
    let message = response.message().unwrap();
    // wasmtime-provider reports the trap with its wasm backtrace (the trap kind is
    // only in the error's cause chain), exactly as policy-evaluator shows it.
    assert!(
        message.starts_with(
            "internal server error: Guest call failure: error while executing at wasm backtrace:"
        ),
        "{message}"
    );
}

#[test]
fn guest_error_gives_internal_server_error() {
    let policy = Policy::from_bytes("failing.wat", FAILING_GUEST.as_bytes()).unwrap();
    let response = policy.validate(&request(), &json!({}), None).unwrap();
    assert_eq!(response.code(), Some(500));
    assert_eq!(
        response.message(),
        Some("internal server error: Guest call failure: policy exploded")
    );
    // Settings validation fails the same way policy-evaluator reports it.
    let settings = policy.validate_settings(&json!({})).unwrap();
    assert!(!settings.valid);
    assert_eq!(
        settings.message.as_deref(),
        Some("Error invoking settings validation callback: Guest call failure: policy exploded")
    );
    assert!(policy.protocol_version().is_err());
}

#[test]
fn endless_loop_hits_the_deadline() {
    let policy = Policy::from_bytes("looping.wat", LOOPING_GUEST.as_bytes())
        .unwrap()
        .with_timeout(std::time::Duration::from_millis(200));
    let response = policy.validate(&request(), &json!({}), None).unwrap();
    assert_eq!(response.code(), Some(500));
    assert_eq!(
        response.message(),
        Some(
            "internal server error: Guest call failure: guest code interrupted, execution deadline exceeded"
        )
    );
}

#[test]
fn invalid_module_is_a_load_error() {
    let err = Policy::from_bytes("garbage.wasm", b"\0asm\x01\0\0\0\xff").unwrap_err();
    assert!(
        format!("{err:#}").contains("cannot compile the module"),
        "{err:#}"
    );
}
