//! gpu-bench: how fast and how small the policies are, run by `make bench`.
//!
//! It measures the **built modules** in the e2e harness's runtime (`gpu_e2e`: wapc +
//! wasmtime, the pieces Kubewarden's policy-evaluator is built on) and the same rules
//! called natively, and writes `BENCHMARKS.md`:
//!
//! - [`wasm`]: module compile and instantiate times; `validate` on representative
//!   requests ([`cases`]) in a kept instance and in a fresh instance per call, against
//!   [`native`] calls of the same rules.
//! - [`pools`]: the capacity gate over synthetic pools ([`synth`]) of 100 to 50,000 GPU
//!   pods, masked vs whole objects vs a naive full-object parse.
//! - [`teams`]: the capacity gate's namespace quotas and a team budget of 50 namespaces
//!   with 2,000 GPU pods (`gpu-bench teams`).
//! - [`guest_work`]: wasm instructions per `validate` (wasmi's fuel metering), a count that does
//!   not depend on the machine (`gpu-bench guest-work`).
//! - [`profiles`]: module sizes and the release-profile experiment (opt-level, LTO,
//!   codegen units, panic, strip, wasm-opt).
//! - [`report`]: the Markdown, with the targets (its constants) checked; [`machine`]: what the
//!   numbers were taken on; [`stats`]: timing loops.
//!
//! Not a test: nothing here asserts timings. `make test` runs only the unit tests below.

pub mod cases;
pub mod guest_work;
pub mod machine;
pub mod native;
pub mod pools;
pub mod profiles;
pub mod report;
pub mod stats;
pub mod synth;
pub mod teams;
pub mod wasm;
