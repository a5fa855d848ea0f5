//! `gpu-admission check PATH...`: Kubernetes manifests checked against the gpu-admission
//! policies before they reach a cluster, with the modules, settings and grants of the
//! policies' own ClusterAdmissionPolicy and ClusterAdmissionPolicyGroup manifests, in the
//! runtime Kubewarden uses (wapc + wasmtime, through the project's harness `gpu-e2e`).
//!
//! - [`input`]: files, folders, `-` (stdin), several documents, Lists; bad input names the
//!   file and line.
//! - [`policies`]: the policy manifests and their modules (built in the repository, or
//!   pulled).
//! - [`request`]: the AdmissionRequest of each object (CREATE, or UPDATE of its old version).
//! - [`evaluate`]: mutating policies first (their patch applied), then the validating ones
//!   and groups.
//! - [`cluster`] and [`kube`]: what context-aware policies read: a snapshot, a live cluster,
//!   or nothing (then skipped, and said so).
//! - [`report`]: table, JSON, JUnit.

#![warn(missing_docs)]

pub mod cli;
pub mod cluster;
pub mod evaluate;
pub mod expression;
pub mod input;
pub mod kube;
pub mod policies;
pub mod report;
pub mod request;

/// Exit status: everything admitted.
pub const EXIT_ADMITTED: i32 = 0;
/// Exit status: a denial (or, with `--warnings-as-errors`, a warning).
pub const EXIT_DENIED: i32 = 1;
/// Exit status: bad input (malformed manifests, policy manifests, settings, usage).
pub const EXIT_BAD_INPUT: i32 = 2;
