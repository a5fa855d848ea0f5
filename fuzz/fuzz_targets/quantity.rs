#![no_main]
//! The quantity parser on arbitrary text: never panics; accepted values are bounded and
//! display in a form that parses back to the same value.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = gpu_admission_fuzz::replay::quantity(data) {
        panic!("{e}");
    }
});
