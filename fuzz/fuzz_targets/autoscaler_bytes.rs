#![no_main]
//! gpu-autoscaler-policy: `validate` and `validate_settings` on arbitrary bytes.
use gpu_admission_fuzz::replay::Policy;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gpu_admission_fuzz::bytes(Policy::Autoscaler, data));
