//! End-to-end harness for gpu-admission's Kubewarden policies.
//!
//! It runs *built* `.wasm` policy modules the way Kubewarden's policy-evaluator
//! (and so `kwctl run` and policy-server) does, on the same runtime pieces
//! (`wapc` + `wasmtime-provider`):
//!
//! - [`Policy::load`] compiles a module once per process; every call then runs in
//!   a fresh waPC instance.
//! - [`Policy::validate`] sends `{"request", "settings"}` to the guest's `validate`
//!   and turns its `ValidationResponse` into the Kubernetes [`AdmissionResponse`]
//!   kwctl prints (JSONPatch diff, `internal server error` on guest failures).
//! - Host capabilities (`kubewarden`/`kubernetes`/`get_resource`,
//!   `list_resources_all`, `list_resources_by_namespace`) are served from a
//!   [`ReplaySession`] in kwctl's own session format, with kwctl's error texts.
//! - [`wasm_sections`] reads and writes custom sections (`io.kubewarden.metadata`).
//! - [`annotate`] is `kwctl annotate` without kwctl (`gpu-kwctl annotate`).
//! - [`metadata`] is policy-evaluator's `Metadata` model: what `kwctl annotate`
//!   embeds, and its validation; [`wasm_scanner`] finds the host capabilities a
//!   module calls, like `kwctl annotate` does.
//!
//! ```no_run
//! use gpu_e2e::{Policy, ReplaySession, module_path};
//! use serde_json::json;
//!
//! let policy = Policy::load(module_path("fixture-policy")?)?;
//! let request = gpu_e2e::read_admission_request("e2e/fixture-policy/test_data/pod_in_team_a.json")?;
//! let session = ReplaySession::from_file("e2e/fixture-policy/test_data/session_namespace_allowed.yml")?;
//! let response = policy.validate(&request, &json!({"lookupNamespace": true}), Some(session))?;
//! assert!(response.allowed);
//! # anyhow::Ok(())
//! ```

#![warn(missing_docs)]

pub mod annotate;
pub mod cases;
pub mod flags;
mod host;
mod inputs;
pub mod kwctl;
pub mod metadata;
mod modules;
mod policy;
pub mod replay;
mod response;
pub mod wasm_scanner;
pub mod wasm_sections;

pub use host::{CALLBACK_FAILURE, ContextAwareAccess, HostCall, HostResponder};
pub use inputs::{
    admission_request_from_str, parse_json_or_yaml, read_admission_request, read_settings,
};
pub use modules::{WASM_DIR_ENV, module_path, policy_names, target_dir, wasm_dir, workspace_root};
pub use policy::{DEFAULT_TIMEOUT, Evaluation, Instance, Policy, WASM_PAGE_SIZE};
pub use replay::{
    Call, CallbackRequest, Exchange, GetCall, ListCall, RecordedResponse, ReplayError,
    ReplaySession,
};
pub use response::{
    AdmissionResponse, AdmissionResponseStatus, MUTATION_WITHOUT_OBJECT, SettingsValidation,
    ValidationResponse,
};
pub use wasm_sections::{
    KUBEWARDEN_METADATA_SECTION, add_custom_section, read_kubewarden_metadata, wasm_custom_section,
};
