//! gpu-vram-fit-policy: waPC registration only. The rules live in `gpu_rules::vram`; the model
//! registry ConfigMap and DRA claims are read with the host's `get_resource`, server images'
//! labels (when `imageLabels` is enabled) with `oci/v1/oci_manifest_config`. The host calls it
//! may make are `gpu_rules::policies::VramFit::HOST_CALLS`, the ones its metadata.yml declares.

gpu_rules::kubewarden_policy!(gpu_rules::policies::VramFit);
