//! gpu-autoscaler-policy: waPC registration only. The rules live in `gpu_rules::autoscaler`;
//! the scale target is read with the host's `get_resource`, a pool's Nodes (when it
//! declares no capacity) with `list_resources_all`.

use gpu_rules::autoscaler::{Settings, evaluate};
use gpu_rules::kubewarden::{self as glue, HostCluster};
use kubewarden_policy_sdk::protocol_version_guest;
use kubewarden_policy_sdk::wapc_guest::{self as guest, CallResult};

#[unsafe(no_mangle)]
pub extern "C" fn wapc_init() {
    guest::register_function("validate", validate);
    guest::register_function("validate_settings", validate_settings);
    guest::register_function("protocol_version", protocol_version_guest);
}

/// Decides one admission request; the target and the pools come from Kubewarden's host calls.
pub fn validate(payload: &[u8]) -> CallResult {
    glue::validate(payload, |request, settings: &Settings| {
        evaluate(
            request,
            settings,
            &HostCluster::<{ glue::GET_RESOURCE | glue::LIST_RESOURCES_ALL }>,
        )
    })
}

/// Checks the policy settings.
pub fn validate_settings(payload: &[u8]) -> CallResult {
    glue::validate_settings::<Settings>(payload)
}
