//! gpu-labels-policy: waPC registration only. The rules live in `gpu_rules::labels`; DRA claims
//! are read with the host's `get_resource`. The host calls it may make are
//! `gpu_rules::policies::Labels::HOST_CALLS`, the ones its metadata.yml declares.

gpu_rules::kubewarden_policy!(gpu_rules::policies::Labels);
