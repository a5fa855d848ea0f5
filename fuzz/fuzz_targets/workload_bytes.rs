#![no_main]
//! Pod-template extraction and GPU demand on arbitrary JSON bytes.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = gpu_admission_fuzz::replay::workload(data) {
        panic!("{e}");
    }
});
