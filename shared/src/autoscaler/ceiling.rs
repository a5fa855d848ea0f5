//! How many replicas fit: under a pool's ceiling (per GPU resource) and under the
//! namespace's maximum (all GPUs together).
//!
//! A pool's ceiling is the `capacity` declared in settings, or else the allocatable GPUs
//! of the pool's schedulable Nodes, listed with the capacity gate's own query (the same
//! label selector and field masks, so policy-server keeps one watch for both policies)
//! and summed by the gate's own reader.

use super::settings::Pool;
use crate::capacity::state::{self, HostError, HostFailure};
use crate::cluster::Cluster;
use crate::gpu::{GpuCounts, GpuResources};

/// What a pool can ever hold, per GPU resource, and where that comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ceiling {
    pub gpus: GpuCounts,
    pub source: CeilingSource,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CeilingSource {
    /// `pools[].capacity` in settings.
    Declared,
    /// The pool's Nodes: how many match its selector, how many take new pods.
    Nodes {
        nodes: u64,
        schedulable: u64,
        selector: String,
    },
}

/// The ceiling of `pool`: declared, or read from its Nodes (one host call).
pub fn read(
    cluster: &dyn Cluster,
    pool: &Pool,
    names: &GpuResources,
) -> Result<Ceiling, HostFailure> {
    if let Some(gpus) = pool.declared_capacity() {
        return Ok(Ceiling {
            gpus,
            source: CeilingSource::Declared,
        });
    }
    let request = state::node_query(pool);
    let bytes = state::call(cluster, &request)?;
    let totals = state::parse_nodes(&bytes, names).map_err(|e| HostFailure {
        request: Box::new(request.clone()),
        error: HostError::Unreadable(e.to_string()),
    })?;
    Ok(Ceiling {
        gpus: totals.allocatable,
        source: CeilingSource::Nodes {
            nodes: totals.nodes,
            schedulable: totals.schedulable,
            selector: pool.node_selector.to_query(),
        },
    })
}

/// The replicas that fit under `ceiling` when each holds `per_replica`, and the resource
/// that binds (the one with the fewest fitting replicas; ties: the first by name).
pub fn fit(per_replica: &GpuCounts, ceiling: &GpuCounts) -> Option<(u64, String)> {
    per_replica
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(resource, n)| {
            let held = ceiling.get(resource).copied().unwrap_or(0);
            (held / n, resource.clone())
        })
        .min_by_key(|(fits, _)| *fits)
}

impl Ceiling {
    /// `64 nvidia.com/gpu allocatable on its 8 schedulable nodes`, for messages about
    /// `resource`.
    pub fn describe(&self, resource: &str) -> String {
        let held = self.gpus.get(resource).copied().unwrap_or(0);
        match &self.source {
            CeilingSource::Declared if !self.gpus.contains_key(resource) => {
                format!("its capacity in the policy settings declares no {resource}")
            }
            CeilingSource::Declared => {
                format!("{held} {resource} declared as its capacity in the policy settings")
            }
            CeilingSource::Nodes {
                nodes: 0, selector, ..
            } => format!("no node matches {selector}"),
            CeilingSource::Nodes {
                nodes, schedulable, ..
            } => {
                let on = if nodes == schedulable {
                    format!("its {nodes} {}", plural(*nodes, "node"))
                } else {
                    format!(
                        "its {schedulable} schedulable {} of {nodes}",
                        plural(*schedulable, "node")
                    )
                };
                format!("{held} {resource} allocatable on {on}")
            }
        }
    }

    /// `a100: 64 nvidia.com/gpu (nodes)`, for the audit annotation.
    pub fn audit(&self) -> String {
        let source = match self.source {
            CeilingSource::Declared => "declared",
            CeilingSource::Nodes { .. } => "nodes",
        };
        if self.gpus.is_empty() {
            return format!("none ({source})");
        }
        format!("{} ({source})", super::target::describe(&self.gpus))
    }
}

fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        word.to_string()
    } else {
        format!("{word}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterRequest;
    use serde_json::json;

    fn counts(pairs: &[(&str, u64)]) -> GpuCounts {
        pairs.iter().map(|(r, n)| (r.to_string(), *n)).collect()
    }

    #[test]
    fn the_binding_resource_decides() {
        assert_eq!(
            fit(
                &counts(&[("nvidia.com/gpu", 2)]),
                &counts(&[("nvidia.com/gpu", 64)])
            ),
            Some((32, "nvidia.com/gpu".into()))
        );
        assert_eq!(
            fit(
                &counts(&[("nvidia.com/gpu", 3)]),
                &counts(&[("nvidia.com/gpu", 64)])
            ),
            Some((21, "nvidia.com/gpu".into())),
            "rounded down"
        );
        assert_eq!(
            fit(
                &counts(&[("nvidia.com/mig-1g.10gb", 1), ("nvidia.com/gpu", 1)]),
                &counts(&[("nvidia.com/gpu", 64), ("nvidia.com/mig-1g.10gb", 7)])
            ),
            Some((7, "nvidia.com/mig-1g.10gb".into()))
        );
        assert_eq!(
            fit(
                &counts(&[("amd.com/gpu", 1)]),
                &counts(&[("nvidia.com/gpu", 64)])
            ),
            Some((0, "amd.com/gpu".into())),
            "a resource the pool lacks fits nothing"
        );
        assert_eq!(fit(&counts(&[]), &counts(&[("nvidia.com/gpu", 1)])), None);
    }

    #[test]
    fn descriptions() {
        let nodes = |n, s| Ceiling {
            gpus: counts(&[("nvidia.com/gpu", 56)]),
            source: CeilingSource::Nodes {
                nodes: n,
                schedulable: s,
                selector: "gpu-admission/pool=a100".into(),
            },
        };
        assert_eq!(
            nodes(8, 7).describe("nvidia.com/gpu"),
            "56 nvidia.com/gpu allocatable on its 7 schedulable nodes of 8"
        );
        assert_eq!(
            nodes(7, 7).describe("nvidia.com/gpu"),
            "56 nvidia.com/gpu allocatable on its 7 nodes"
        );
        assert_eq!(
            nodes(0, 0).describe("nvidia.com/gpu"),
            "no node matches gpu-admission/pool=a100"
        );
        let declared = Ceiling {
            gpus: counts(&[("nvidia.com/gpu", 512)]),
            source: CeilingSource::Declared,
        };
        assert_eq!(
            declared.describe("nvidia.com/gpu"),
            "512 nvidia.com/gpu declared as its capacity in the policy settings"
        );
        assert_eq!(
            declared.describe("amd.com/gpu"),
            "its capacity in the policy settings declares no amd.com/gpu"
        );
        assert_eq!(declared.audit(), "512 nvidia.com/gpu (declared)");
    }

    struct Nodes(&'static str);
    impl Cluster for Nodes {
        fn call(&self, request: &ClusterRequest) -> Result<Vec<u8>, String> {
            assert_eq!(request.what(), "v1/Node");
            Ok(self.0.as_bytes().to_vec())
        }
    }

    #[test]
    fn declared_pools_make_no_call_and_node_pools_sum_schedulable_nodes() {
        let declared: Pool =
            serde_json::from_value(json!({"name": "burst", "capacity": {"nvidia.com/gpu": 128}}))
                .unwrap();
        struct NoCall;
        impl Cluster for NoCall {
            fn call(&self, request: &ClusterRequest) -> Result<Vec<u8>, String> {
                panic!("unexpected call {request:?}")
            }
        }
        let names = GpuResources::default();
        assert_eq!(
            read(&NoCall, &declared, &names).unwrap().gpus,
            counts(&[("nvidia.com/gpu", 128)])
        );
        let pool: Pool = serde_json::from_value(
            json!({"name": "a100", "nodeSelector": {"matchLabels": {"gpu-admission/pool": "a100"}}}),
        )
        .unwrap();
        let list = r#"{"items": [
            {"metadata": {"name": "a"}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}},
            {"metadata": {"name": "b"}, "spec": {"unschedulable": true}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
        ]}"#;
        let ceiling = read(&Nodes(list), &pool, &names).unwrap();
        assert_eq!(ceiling.gpus, counts(&[("nvidia.com/gpu", 8)]));
        assert_eq!(
            ceiling.describe("nvidia.com/gpu"),
            "8 nvidia.com/gpu allocatable on its 1 schedulable node of 2"
        );
        let failure = read(&Nodes("{not json"), &pool, &names).unwrap_err();
        assert!(
            failure
                .explanation()
                .starts_with("cannot list v1/Node: the answer could not be read"),
            "{}",
            failure.explanation()
        );
    }
}
