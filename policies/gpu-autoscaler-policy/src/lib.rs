//! gpu-autoscaler-policy: waPC registration only. The rules live in `gpu_rules::autoscaler`;
//! the scale target, DRA claims and a pool's Nodes are read with the host's `get_resource` and
//! `list_resources_all`. The host calls it may make are
//! `gpu_rules::policies::Autoscaler::HOST_CALLS`, the ones its metadata.yml declares.

gpu_rules::kubewarden_policy!(gpu_rules::policies::Autoscaler);
