//! The case lists live in the harness library ([`gpu_e2e::cases`]), shared with the manifest
//! checker's kwctl comparison.

pub use gpu_e2e::cases::*;
