//! gpu-capacity-gate-policy: waPC registration only. The rules live in `gpu_rules::capacity`;
//! pools, quotas, scaled workloads and DRA claims are read with the host's `list_resources_all`
//! and `get_resource`. The host calls it may make are
//! `gpu_rules::policies::CapacityGate::HOST_CALLS`, the ones its metadata.yml declares.

gpu_rules::kubewarden_policy!(gpu_rules::policies::CapacityGate);
