//! The host's floor: a Kubewarden policy that accepts every request and every settings
//! document without reading either.
//!
//! The benchmarks run it with each static policy's own settings and requests
//! (`bench/kubewarden/kwctl_bench.py`, `bench/kubewarden/policy_server_bench.py`): whatever
//! kwctl or policy-server spends on such a call (serializing the request and the settings into
//! the payload, instantiating a module, reading the answer) is spent before any policy runs, so
//! no module can answer that request with those settings faster in that host.

use kubewarden_policy_sdk::protocol_version_guest;
use kubewarden_policy_sdk::wapc_guest::prelude::*;

/// The waPC entry point: registers the three functions Kubewarden calls.
#[unsafe(no_mangle)]
pub extern "C" fn wapc_init() {
    register_function("validate", validate);
    register_function("validate_settings", validate_settings);
    register_function("protocol_version", protocol_version_guest);
}

fn validate(_payload: &[u8]) -> CallResult {
    Ok(br#"{"accepted":true}"#.to_vec())
}

fn validate_settings(_payload: &[u8]) -> CallResult {
    Ok(br#"{"valid":true}"#.to_vec())
}
