#![no_main]
//! gpu-autoscaler-policy: `validate` on structure-aware admission requests (seed requests and
//! built ones, edited), with fuzz-driven host answers. `FUZZ_DUMP=<file>` writes the fixture.
use gpu_admission_fuzz::input::RequestInput;
use gpu_admission_fuzz::replay::Policy;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: RequestInput| gpu_admission_fuzz::request(Policy::Autoscaler, &input));
