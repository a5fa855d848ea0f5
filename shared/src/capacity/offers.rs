//! Node offers (`nodeOffers`): a charged pod template that selects a GPU product (its
//! `nodeSelector` or required node affinity on a product label of the shared inventory), a
//! MIG profile (a `nvidia.com/mig-<profile>` resource), or a least driver or CUDA version
//! (the template's label or annotation `gpu-admission/min-driver-version` or
//! `gpu-admission/min-cuda-version`) that no schedulable node of its pool offers is denied,
//! naming what the pool's nodes offer.
//!
//! The nodes are the pool's own Node list, read once more for the labels it already carries
//! ([`crate::pools::read_offer_labelled`]: no host call is added), and only when a template
//! charged to the pool selects one of these; the reading and the matching are the shared
//! inventory's ([`crate::inventory::parse_inventory`], [`crate::inventory::check`]), as VRAM
//! fit's `nodeInventory` uses them.
//!
//! A pool that can add nodes (it has a ceiling: `maxAllocatable`, a Karpenter NodePool or a
//! cluster-autoscaler node group) may add nodes whose labels nothing in its settings or its
//! NodePool's limits tells: what its nodes do not offer now is only warned about. A pool
//! whose capacity is declared lists no Node and is not checked.

use crate::admission::AdmissionRequest;
use crate::clock::UnixSeconds;
use crate::gpu::{GpuCounts, MIG_PREFIX};
use crate::inventory::{self, Demand, Inventory, InventorySettings, LabelKeys};
use crate::podspec::{ObjectMeta, PodSpec};
use crate::pools::{Ceiling, CeilingSource};
use crate::scheduling::required_label_values;
use crate::settings::Action;

/// The rule name exceptions give to excuse these denials.
pub const RULE: &str = "nodeOffers";

/// The key of a note that is a warning to the client, not an audit annotation (the gate's
/// `audit::WARNING`).
const WARNING: &str = "";

/// What one pod of a template selects of its node's GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Products (restricted by `product_key`), GPUs per pod, least versions.
    pub demand: Demand,
    /// The node label the products are selected by.
    pub product_key: String,
}

/// What a template selects that the nodes' labels tell (`None`: nothing: no product label,
/// no MIG resource, no least version), or why its version label or annotation cannot be
/// read. `per_pod`: the GPUs one of its pods holds. The product label is the first of
/// the inventory's product keys (NVIDIA's, AMD's, Intel's) the template restricts.
pub fn selection(
    spec: &PodSpec,
    meta: &ObjectMeta,
    location: &str,
    per_pod: &GpuCounts,
) -> Option<Result<Selection, String>> {
    let keys = LabelKeys::default();
    let products = [&keys.product, &keys.amd_product, &keys.intel_product]
        .into_iter()
        .find_map(|key| required_label_values(spec, key).map(|p| (key.clone(), p)));
    let versions = match InventorySettings::default().min_versions(
        &meta.labels,
        &meta.annotations,
        location,
    ) {
        Ok(v) => v,
        Err(e) => return Some(Err(e)),
    };
    let mig = per_pod
        .iter()
        .any(|(r, n)| *n > 0 && r.starts_with(MIG_PREFIX));
    if products.is_none() && !mig && versions.iter().all(Option::is_none) {
        return None;
    }
    let [min_driver, min_cuda] = versions;
    let (product_key, products) = match products {
        Some((key, p)) => (key, Some(p)),
        None => (keys.product, None),
    };
    Some(Ok(Selection {
        demand: Demand {
            products,
            gpus: per_pod.clone(),
            min_driver,
            min_cuda,
        },
        product_key,
    }))
}

/// What one template selects: its location and its [`selection`].
pub type Selected<'a> = (&'a str, Option<&'a Result<Selection, String>>);

/// What the pool's nodes do not offer of what its templates select: one clause per
/// template (`spec.template.spec: no node offers GPU product ...`). None when the pool has
/// no GPU node (the threshold check says so).
pub fn check<'a>(
    inventory: &Inventory,
    templates: impl IntoIterator<Item = Selected<'a>>,
) -> Vec<String> {
    if inventory.gpu_nodes.is_empty() {
        return Vec::new();
    }
    templates
        .into_iter()
        .filter_map(|(location, selects)| {
            let refused = match selects? {
                Ok(s) => inventory::check(inventory, &s.demand, &s.product_key)
                    .err()?
                    .message()
                    .to_string(),
                Err(e) => e.clone(),
            };
            Some(format!("{location}: {refused}"))
        })
        .collect()
}

/// What a pool's ceiling says of the nodes it can add, for the warning: `maxAllocatable
/// in settings`, `Karpenter NodePool gpu-a100`, `clusterAutoscaler: up to 8 nodes`.
pub fn grows(ceiling: &Ceiling) -> String {
    match &ceiling.source {
        CeilingSource::MaxAllocatable => "maxAllocatable in settings".into(),
        CeilingSource::NodePool(name) => format!("Karpenter NodePool {name}"),
        CeilingSource::ClusterAutoscaler { max_nodes } => {
            format!("clusterAutoscaler: up to {max_nodes} nodes")
        }
    }
}

/// What the pool's nodes do not offer, and what the gate makes of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// One clause per template ([`check`]).
    pub clauses: Vec<String>,
    /// `nodeOffers`, or `warn` where a `deny` meets a pool that can add nodes.
    pub action: Action,
    /// The pool's ceiling, when it turned a `deny` into a warning.
    pub grows: Option<String>,
    /// An exception for [`RULE`] that has ended, named at the end of the denial.
    pub expired: Option<String>,
}

impl Found {
    /// The clauses of `inventory` for `templates`, with `action` (`nodeOffers`) applied to
    /// a pool whose ceiling is `grows` (where it comes from) when it has one.
    pub fn of<'a>(
        inventory: &Inventory,
        templates: impl IntoIterator<Item = Selected<'a>>,
        action: Action,
        grows: Option<String>,
    ) -> Found {
        let clauses = check(inventory, templates);
        let (action, grows) = match (action, grows) {
            (Action::Deny, Some(from)) => (Action::Warn, Some(from)),
            (action, _) => (action, None),
        };
        Found {
            clauses,
            action,
            grows,
            expired: None,
        }
    }

    /// True when it denies.
    pub fn denies(&self) -> bool {
        self.action == Action::Deny && !self.clauses.is_empty()
    }

    /// The denial of pool `pool`.
    pub fn denial(&self, pool: &str) -> Option<String> {
        self.denies().then(|| {
            let expired = self
                .expired
                .as_ref()
                .map(|note| format!(" ({note}; renew it or fix the workload)"))
                .unwrap_or_default();
            format!(
                "pool {pool}: {}. Select a GPU product, MIG profile and driver or CUDA version the pool's nodes offer, or target a pool whose nodes offer them (nodeOffers: deny).{expired}",
                self.clauses.join("; ")
            )
        })
    }

    /// The warning of pool `pool`, when it warns.
    pub fn warning(&self, pool: &str) -> Option<String> {
        if self.action != Action::Warn || self.clauses.is_empty() {
            return None;
        }
        let why = match &self.grows {
            Some(from) => format!(
                "the pool can add nodes ({from}) whose labels are unknown, so this only warns (nodeOffers: deny)"
            ),
            None => "nodeOffers: warn".into(),
        };
        Some(format!(
            "pool {pool}: {}. Its pods stay Pending until the pool has a node that offers it ({why}).",
            self.clauses.join("; ")
        ))
    }

    /// The audit line of pool `pool`.
    pub fn audit(&self, pool: &str) -> Option<String> {
        (!self.clauses.is_empty()).then(|| format!("{pool}: {}", self.clauses.join("; ")))
    }
}

/// An exception for [`RULE`] that applies to the request: its audit, warning and the
/// denial it excuses become notes; `None` when none applies (then `expired` names one that
/// ended).
pub fn excused(
    settings: &super::settings::Settings,
    request: &AdmissionRequest,
    denial: &str,
    now: UnixSeconds,
) -> Result<Vec<(&'static str, String)>, Option<String>> {
    let excuse = super::brake::excuse(settings, request, RULE, now);
    match excuse.applies {
        Some((audit, warning)) => {
            let mut notes = vec![
                (crate::exceptions::AUDIT_KEY, audit),
                (crate::exceptions::AUDIT_EXCUSED, denial.to_string()),
            ];
            notes.extend(warning.map(|w| (WARNING, w)));
            Ok(notes)
        }
        None => Err(excuse.expired),
    }
}

#[cfg(test)]
mod tests;
