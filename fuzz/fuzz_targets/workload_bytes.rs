#![no_main]
//! Pod-template extraction and GPU demand on arbitrary JSON bytes.
use gpu_rules::gpu::{GpuResources, workload_gpus};
use gpu_rules::workload::{Workload, presets};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(object) = serde_json::from_slice::<serde_json::Value>(data) {
        if let Ok(w) = Workload::from_object(&object, &presets::all()) {
            let _ = workload_gpus(&w, &GpuResources::default());
            let _ = w.pods();
        }
    }
});
