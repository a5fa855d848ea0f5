#![no_main]
//! A DRA ResourceClaim or ResourceClaimTemplate on arbitrary JSON: never panics, counts
//! stay within the limits, and a pod naming the claim counts what the claim counts.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = gpu_admission_fuzz::replay::dra_claim(data) {
        panic!("{e}");
    }
});
