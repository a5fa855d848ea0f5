//! gpu-labels-policy: waPC registration only. The rules live in `gpu_rules::labels`.

use gpu_rules::kubewarden::{self as glue, HostCluster};
use gpu_rules::labels::{Settings, evaluate};
use kubewarden_policy_sdk::protocol_version_guest;
use kubewarden_policy_sdk::wapc_guest::{self as guest, CallResult};

#[unsafe(no_mangle)]
pub extern "C" fn wapc_init() {
    guest::register_function("validate", validate);
    guest::register_function("validate_settings", validate_settings);
    guest::register_function("protocol_version", protocol_version_guest);
}

/// Decides one admission request; DRA claims are read with Kubernetes host calls.
pub fn validate(payload: &[u8]) -> CallResult {
    glue::validate(payload, |request, settings: &Settings| {
        evaluate(request, settings, &HostCluster::<{ glue::GET_RESOURCE }>)
    })
}

/// Checks the policy settings.
pub fn validate_settings(payload: &[u8]) -> CallResult {
    glue::validate_settings::<Settings>(payload)
}
