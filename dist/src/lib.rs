//! gpu-dist: distribution of the gpu-admission policies.
//!
//! - [`policies`]: the policy crates of the workspace and their files.
//! - [`checks`]: `metadata.yml` against `Cargo.toml`, kwctl and Artifact Hub.
//! - [`oci`]: push and pull Kubewarden OCI artifacts (`kwctl push` / `kwctl pull`).
//! - [`artifacthub`]: `artifacthub-pkg.yml` and `artifacthub-repo.yml`
//!   (`kwctl scaffold artifacthub`).
//! - [`sign`]: cosign signatures of pushed policies (`make sign`).
//! - [`kinds`]: the objects a policy's README says it judges, against `rules`.
//! - [`security`]: every row of SECURITY.md names a test that exists.
//! - [`manifests`]: the example ClusterAdmissionPolicy / ClusterAdmissionPolicyGroup
//!   manifests, and how their modules map to the policies.
//!
//! The annotation itself (`make annotate`) is `gpu-kwctl annotate`, in the
//! harness crate, next to the policy-evaluator `Metadata` model it shares.

#![warn(missing_docs)]

pub mod artifacthub;
pub mod checks;
pub mod kinds;
pub mod manifests;
pub mod oci;
pub mod policies;
pub mod security;
pub mod sign;
