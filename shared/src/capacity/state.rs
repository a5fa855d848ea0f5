//! Reading a pool's state for the capacity gate: what it offers
//! ([`crate::pools::read_offer`]: its Nodes or declared capacity, and its ceiling), then
//! its GPUs in use, from its Pods ([`super::pods`]) and, with `countDraClaims`, the
//! allocated DRA claims they reference ([`super::claims`]), or from its ResourceQuotas
//! ([`super::pool_quotas`]).

use super::claims;
use super::decision::{CapacitySource, NodeUse, PoolSnapshot, UsageSource};
use super::pods::{parse_pods_by_label, parse_pods_on};
use super::pool_quotas::{QuotaTarget, parse_quotas, quota_usage};
use super::queries::quota_query;
use super::settings::{Settings, Usage};
use crate::cluster::{Cluster, ClusterRequest, HostError, HostFailure, call};
use crate::gpu::{GpuCounts, GpuResources};
use crate::labels::settings::WORKLOAD_TYPE_LABEL;
use crate::pools::{CheckedPool, read_offer_labelled};
use std::fmt;

/// Why a pool's state is not known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolError {
    /// A host call failed or its answer could not be read.
    Host(HostFailure),
    /// The pool's ResourceQuotas cannot count what the request needs (what is wrong and
    /// how to fix it).
    Uncountable(String),
}

impl From<HostFailure> for PoolError {
    fn from(f: HostFailure) -> Self {
        PoolError::Host(f)
    }
}

/// Reads what the pool offers (its Nodes, or the capacity declared in settings, and its
/// ceiling) and its GPUs in use (its Pods, or its ResourceQuotas), in that order. `namespace` and
/// `demand` are the request's: with quotas, the namespace must have its quota and every
/// quota must count the resources asked for. `labels`: read the GPU nodes' labels too
/// (`nodeOffers`: a template charged to the pool selects what they tell).
pub fn read_pool(
    cluster: &dyn Cluster,
    settings: &Settings,
    pool: CheckedPool,
    names: &GpuResources,
    namespace: &str,
    demand: &GpuCounts,
    labels: bool,
) -> Result<PoolSnapshot, PoolError> {
    let unreadable = |request: &ClusterRequest, e: &dyn fmt::Display| HostFailure {
        request: Box::new(request.clone()),
        error: HostError::Unreadable(e.to_string()),
    };
    let offer = read_offer_labelled(cluster, pool, names, labels)?;
    let mut snapshot = PoolSnapshot {
        allocatable: offer.allocatable,
        ceiling: offer.ceiling,
        plugin_down: offer.plugin_down,
        inventory: offer.inventory,
        ..PoolSnapshot::default()
    };
    let mut per_node = None;
    match offer.nodes {
        None => snapshot.allocatable_from = CapacitySource::Declared,
        Some(nodes) => {
            snapshot.nodes = nodes.nodes;
            snapshot.schedulable_nodes = nodes.schedulable;
            per_node = Some(nodes.per_node);
        }
    }
    match settings.usage_of(&pool) {
        Usage::Pods => {
            let mut pods_request = super::timeline::pod_query(settings, &pool);
            if settings.count_dra_claims {
                pods_request = claims::with_claim_masks(pods_request);
            }
            let pods_bytes = call(cluster, &pods_request)?;
            let nodes = per_node.unwrap_or_default();
            let (pods, used) = parse_pods_on(&pods_bytes, names, &nodes)
                .map_err(|e| unreadable(&pods_request, &e))?;
            snapshot.pods = pods.pods;
            snapshot.used = pods.used;
            if settings.count_dra_claims {
                let held = claims::read(cluster, &pods_bytes, &settings.dra)?;
                crate::gpu::add_into(&mut snapshot.used, &held.gpus);
                snapshot.claims = Some(held);
            }
            if pool.has_reserves() {
                // The same list, read again per workload type (pools with reserves only).
                let by_type = parse_pods_by_label(&pods_bytes, names, WORKLOAD_TYPE_LABEL)
                    .map_err(|e| unreadable(&pods_request, &e))?;
                snapshot.used_by_type = by_type.per_value;
                if settings.count_dra_claims {
                    add_claims_by_type(cluster, settings, &pool, &pods_bytes, &mut snapshot)?;
                }
            }
            if super::timeline::wanted(settings, &pool) {
                // The same list, read again for when its pods were created.
                snapshot.pod_times = Some(
                    super::timeline::read(&pods_bytes, names, namespace)
                        .map_err(|e| unreadable(&pods_request, &e))?,
                );
            }
            if pool.capacity().is_none() {
                snapshot.per_node = Some(
                    nodes
                        .into_iter()
                        .zip(used)
                        .map(|(n, used)| NodeUse {
                            name: n.name,
                            allocatable: n.allocatable,
                            used,
                        })
                        .collect(),
                );
                snapshot.per_node_used = true;
            }
        }
        Usage::Quotas => {
            let quotas_request = quota_query(&settings.pool_label_key, &pool);
            let quotas = call(cluster, &quotas_request)?;
            let quotas =
                parse_quotas(&quotas, names).map_err(|e| unreadable(&quotas_request, &e))?;
            let target = QuotaTarget {
                pool_label_key: &settings.pool_label_key,
                pool: pool.pool(),
                namespace,
                demand,
                allocatable: &snapshot.allocatable,
            };
            snapshot.used = quota_usage(&quotas, &target).map_err(PoolError::Uncountable)?;
            snapshot.used_from = UsageSource::Quotas(quotas.len() as u64);
            // Quotas say nothing of where pods run: only node sizes are known.
            snapshot.per_node = per_node.map(|nodes| {
                nodes
                    .into_iter()
                    .map(|n| NodeUse {
                        name: n.name,
                        allocatable: n.allocatable,
                        used: GpuCounts::new(),
                    })
                    .collect()
            });
        }
    }
    Ok(snapshot)
}

#[cfg(test)]
mod tests;

/// Adds to what each reserved workload type holds in the pool the devices of the allocated
/// claims its pods reference (`countDraClaims`; the decision's one claim list).
fn add_claims_by_type(
    cluster: &dyn Cluster,
    settings: &Settings,
    pool: &CheckedPool,
    pods: &[u8],
    snapshot: &mut PoolSnapshot,
) -> Result<(), HostFailure> {
    let mut types: Vec<&str> = pool
        .reserve
        .keys()
        .chain(pool.reserve_windows.iter().flat_map(|w| w.reserve.keys()))
        .map(String::as_str)
        .collect();
    types.sort_unstable();
    types.dedup();
    let (_, per_type) =
        claims::read_by_label(cluster, &[pods], &settings.dra, WORKLOAD_TYPE_LABEL, &types)?;
    for (workload_type, held) in per_type {
        match snapshot
            .used_by_type
            .iter_mut()
            .find(|(t, _)| *t == workload_type)
        {
            Some((_, used)) => crate::gpu::add_into(used, &held.gpus),
            None => snapshot.used_by_type.push((workload_type, held.gpus)),
        }
    }
    Ok(())
}
