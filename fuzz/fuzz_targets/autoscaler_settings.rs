#![no_main]
//! gpu-autoscaler-policy: structure-aware settings (settings files and trees, edited) through
//! `validate_settings` and `validate`. `FUZZ_DUMP=<file>` writes the fixture.
use gpu_admission_fuzz::input::SettingsInput;
use gpu_admission_fuzz::replay::Policy;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: SettingsInput| gpu_admission_fuzz::settings(Policy::Autoscaler, &input));
