//! GPUs held by the allocated DRA ResourceClaims of a pool's Pods (`countDraClaims: true`,
//! pools with `usage: pods`).
//!
//! A pod holding GPUs through Dynamic Resource Allocation requests no GPU resource: its
//! devices are in the claims it references, `spec.resourceClaims[].resourceClaimName` (a
//! claim shared by name) and, for a claim made from a ResourceClaimTemplate,
//! `status.resourceClaimStatuses[].resourceClaimName` (the name the claim controller gave
//! it). With the setting on, the pool's Pods are listed with those two fields too
//! ([`POD_CLAIM_FIELD_MASKS`]), and when some pod references a claim, every ResourceClaim
//! of the cluster is listed once per decision ([`claim_query`], one watch, masked to
//! [`CLAIM_FIELD_MASKS`]; [`Memo`] answers the pools after the first). A claim counts:
//!
//! - when it is **allocated**: each device of `status.allocation.devices.results` is one
//!   GPU of the resource its request's device class counts as, a `mig.nvidia.com` device
//!   as the profile its request's selector names ([`crate::dra::request_resource`], the
//!   rule of the claims a workload asks for); a result whose request the claim does not
//!   name counts as its `driver` (the built-in drivers share their class's name); results
//!   with `adminAccess: true` hold no device (monitoring access, granted in namespaces an
//!   admin labels) and count nothing. A claim not allocated yet (pending) counts nothing:
//!   its pod holds no GPU yet.
//! - **once**, however many pods of the pool reference it (a claim shared by name).
//!
//! Pods with no claim make no claim list. Claims made for extended resources by the
//! scheduler (`status.extendedResourceClaimStatus`) are not read: those pods' GPUs are in
//! their containers' resources, counted already.

use crate::cluster::{Cluster, ClusterRequest, HostError, HostFailure, ListAll, call};
use crate::dra::{DeviceRequest, DraSettings, request_resource};
use crate::gpu::GpuCounts;
use crate::lists::{ListError, for_each_item, json_string};
use crate::podspec::null_as_default;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};

/// What crosses the host boundary for each Pod besides its resources (`countDraClaims`):
/// the names of the claims it references.
pub const POD_CLAIM_FIELD_MASKS: &[&str] = &[
    "spec.resourceClaims.resourceClaimName",
    "status.resourceClaimStatuses.resourceClaimName",
];

/// What crosses the host boundary for each ResourceClaim: its device requests (the class
/// and selectors each device of its allocation is counted by) and its allocation.
pub const CLAIM_FIELD_MASKS: &[&str] =
    &["spec.devices.requests", "status.allocation.devices.results"];

/// Every ResourceClaim of the cluster, in the DRA version of the settings: no selector
/// can pick a pool's (a claim carries no pod label), so the same list serves every pool.
pub fn claim_query(dra: &DraSettings) -> ClusterRequest {
    ClusterRequest::ListAll(ListAll {
        api_version: dra.api_version.clone(),
        kind: "ResourceClaim".into(),
        label_selector: None,
        field_selector: None,
        field_masks: Some(CLAIM_FIELD_MASKS.iter().map(|s| s.to_string()).collect()),
    })
}

/// `pods` (a pool's Pod list request) with the claim fields added to its masks.
pub fn with_claim_masks(mut pods: ClusterRequest) -> ClusterRequest {
    if let ClusterRequest::ListAll(list) = &mut pods {
        let masks = list.field_masks.get_or_insert_with(BTreeSet::new);
        masks.extend(POD_CLAIM_FIELD_MASKS.iter().map(|s| s.to_string()));
    }
    pods
}

/// What the claims of a pool's pods hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimUse {
    /// Distinct claims the pool's pods reference.
    pub referenced: u64,
    /// Of those, the allocated ones (each counted once).
    pub allocated: u64,
    /// Of the allocated ones, those referenced by more than one pod of the pool.
    pub shared: u64,
    /// GPUs the allocated claims hold, per resource.
    pub gpus: GpuCounts,
}

impl ClaimUse {
    /// For the `dra-claims` audit annotation: `a100: 3 of 4 ResourceClaims of the pool's
    /// pods allocated, holding 12 nvidia.com/gpu (1 shared by several pods, counted once;
    /// 1 not allocated, not counted)`.
    pub fn audit(&self, pool: &str) -> String {
        let held = if self.gpus.is_empty() {
            "no GPU".to_string()
        } else {
            self.gpus
                .iter()
                .map(|(r, n)| format!("{n} {r}"))
                .collect::<Vec<_>>()
                .join(" and ")
        };
        let mut notes = Vec::new();
        if self.shared > 0 {
            notes.push(format!(
                "{} shared by several pods, counted once",
                self.shared
            ));
        }
        let pending = self.referenced - self.allocated;
        if pending > 0 {
            notes.push(format!("{pending} not allocated, not counted"));
        }
        let notes = if notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", notes.join("; "))
        };
        format!(
            "{pool}: {} of {} ResourceClaims of the pool's pods allocated, holding {held}{notes}",
            self.allocated, self.referenced
        )
    }
}

/// The `dra-claims` audit annotation of the pools whose claims were counted: (pool,
/// what its claims hold) each.
pub fn audit<'a>(pools: impl Iterator<Item = (&'a str, &'a ClaimUse)>) -> Option<String> {
    let counted: Vec<String> = pools.map(|(pool, c)| c.audit(pool)).collect();
    (!counted.is_empty()).then(|| counted.join("; "))
}

/// The claims the pods of a Pod list answer reference: (namespace, claim name) -> how
/// many pods reference it.
pub fn referenced_claims(pods: &[u8]) -> Result<HashMap<(String, String), u64>, ListError> {
    referenced_claims_where(pods, None)
}

/// [`referenced_claims`] of the pods whose label `label.0` is `label.1` (all pods: `None`).
pub fn referenced_claims_where(
    pods: &[u8],
    label: Option<(&str, &str)>,
) -> Result<HashMap<(String, String), u64>, ListError> {
    let mut out: HashMap<(String, String), u64> = HashMap::new();
    let label_path = ["metadata", "labels", label.map_or("", |(k, _)| k)];
    for_each_item(
        pods,
        [
            &["metadata", "namespace"],
            &["spec", "resourceClaims"],
            &["status", "resourceClaimStatuses"],
            &label_path,
        ],
        |[namespace, in_spec, in_status, value]: [Option<&RawValue>; 4]| {
            if in_spec.is_none() && in_status.is_none() {
                return Ok::<(), ListError>(());
            }
            if let Some((_, wanted)) = label {
                let value = value.map(|v| json_string(v.get())).transpose()?;
                if value.as_deref() != Some(wanted) {
                    return Ok(());
                }
            }
            let namespace = namespace.map_or(Ok(String::new()), |n| json_string(n.get()))?;
            let mut names = BTreeSet::new();
            for raw in [in_spec, in_status].into_iter().flatten() {
                let entries: Vec<NamedEntry> = serde_json::from_str(raw.get())?;
                names.extend(
                    entries
                        .into_iter()
                        .filter_map(|e| e.resource_claim_name)
                        .filter(|n| !n.is_empty()),
                );
            }
            for name in names {
                *out.entry((namespace.clone(), name)).or_insert(0) += 1;
            }
            Ok(())
        },
    )?;
    Ok(out)
}

/// An entry of `spec.resourceClaims` or `status.resourceClaimStatuses`.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct NamedEntry {
    resource_claim_name: Option<String>,
}

/// One device of an allocation.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct AllocationResult {
    /// The request it satisfies: `<request>` or `<request>/<firstAvailable alternative>`.
    #[serde(deserialize_with = "null_as_default")]
    request: String,
    #[serde(deserialize_with = "null_as_default")]
    driver: String,
    admin_access: Option<bool>,
}

/// Sums the devices of the allocated claims of a `ResourceClaimList` answer that
/// `referenced` names, each claim once.
pub fn count_claims(
    claims: &[u8],
    referenced: &HashMap<(String, String), u64>,
    dra: &DraSettings,
) -> Result<ClaimUse, ListError> {
    let mut used = ClaimUse {
        referenced: referenced.len() as u64,
        ..ClaimUse::default()
    };
    for_each_item(
        claims,
        [
            &["metadata", "namespace"],
            &["metadata", "name"],
            &["spec", "devices", "requests"],
            &["status", "allocation", "devices", "results"],
        ],
        |[namespace, name, requests, results]: [Option<&RawValue>; 4]| {
            let key = (
                namespace.map_or(Ok(String::new()), |n| json_string(n.get()))?,
                name.map_or(Ok(String::new()), |n| json_string(n.get()))?,
            );
            let Some(pods) = referenced.get(&key) else {
                return Ok::<(), ListError>(());
            };
            let Some(results) = results else {
                return Ok(());
            };
            let results: Vec<AllocationResult> = serde_json::from_str(results.get())?;
            let requests: Vec<DeviceRequest> = requests
                .map(|r| serde_json::from_str(r.get()))
                .transpose()?
                .unwrap_or_default();
            used.allocated += 1;
            if *pods > 1 {
                used.shared += 1;
            }
            for result in results.iter().filter(|r| r.admin_access != Some(true)) {
                if let Some(resource) = result_resource(result, &requests, dra) {
                    let n = used.gpus.entry(resource).or_insert(0);
                    *n = n.saturating_add(1);
                }
            }
            Ok(())
        },
    )?;
    Ok(used)
}

/// The GPU resource one allocated device counts as: that of the request (or
/// `firstAvailable` alternative) it satisfies, else that of its driver.
fn result_resource(
    result: &AllocationResult,
    requests: &[DeviceRequest],
    dra: &DraSettings,
) -> Option<String> {
    let (request, alternative) = match result.request.split_once('/') {
        Some((r, a)) => (r, Some(a)),
        None => (result.request.as_str(), None),
    };
    let exact = requests
        .iter()
        .find(|r| r.name == request)
        .and_then(|r| match alternative {
            Some(a) => r.first_available.iter().find(|x| x.name == a).cloned(),
            None => Some(r.exact()),
        })
        .filter(|e| {
            e.device_class_name
                .as_deref()
                .is_some_and(|c| !c.is_empty())
        });
    match exact {
        Some(e) => request_resource(&e, dra),
        None => dra.gpu_resource(&result.driver).map(str::to_string),
    }
}

/// Reads what the allocated claims of the pods in `pods` (a pool's Pod list answer,
/// listed with [`with_claim_masks`]) hold: no call when no pod references a claim, else
/// the one claim list.
pub fn read(
    cluster: &dyn Cluster,
    pods: &[u8],
    dra: &DraSettings,
) -> Result<ClaimUse, HostFailure> {
    read_by_label(cluster, &[pods], dra, "", &[]).map(|(total, _)| total)
}

/// What the allocated claims of the pods of several Pod list answers hold (`lists`, each
/// listed with [`with_claim_masks`]: a team's pods), in total and for each value of
/// label `key` in `values` (the pools a team budget limits): no call when no pod
/// references a claim, else the one claim list. Each claim counts once in each sum.
pub fn read_by_label(
    cluster: &dyn Cluster,
    lists: &[&[u8]],
    dra: &DraSettings,
    key: &str,
    values: &[&str],
) -> Result<(ClaimUse, Vec<(String, ClaimUse)>), HostFailure> {
    let request = claim_query(dra);
    let unreadable = |e: ListError| HostFailure {
        request: Box::new(request.clone()),
        error: HostError::Unreadable(e.to_string()),
    };
    let merged = |label: Option<(&str, &str)>| -> Result<_, HostFailure> {
        let mut all: HashMap<(String, String), u64> = HashMap::new();
        for pods in lists {
            for (claim, n) in referenced_claims_where(pods, label).map_err(unreadable)? {
                *all.entry(claim).or_insert(0) += n;
            }
        }
        Ok(all)
    };
    let referenced = merged(None)?;
    if referenced.is_empty() {
        return Ok((ClaimUse::default(), Vec::new()));
    }
    let claims = call(cluster, &request)?;
    let total = count_claims(&claims, &referenced, dra).map_err(unreadable)?;
    let mut per_value = Vec::new();
    for value in values {
        let referenced = merged(Some((key, value)))?;
        if !referenced.is_empty() {
            let used = count_claims(&claims, &referenced, dra).map_err(unreadable)?;
            per_value.push((value.to_string(), used));
        }
    }
    Ok((total, per_value))
}

/// A host call and its answer.
type Answered = (ClusterRequest, Result<Vec<u8>, String>);

/// A cluster that answers the claim list once per decision, whichever pools ask for it
/// (the pools a workload targets, their alternatives), and passes every other call on.
pub struct Memo<'a> {
    inner: &'a dyn Cluster,
    claims: RefCell<Option<Answered>>,
}

impl<'a> Memo<'a> {
    pub fn new(inner: &'a dyn Cluster) -> Self {
        Memo {
            inner,
            claims: RefCell::new(None),
        }
    }
}

impl Cluster for Memo<'_> {
    fn call(&self, request: &ClusterRequest) -> Result<Vec<u8>, String> {
        let is_claim_list =
            matches!(request, ClusterRequest::ListAll(l) if l.kind == "ResourceClaim");
        if !is_claim_list {
            return self.inner.call(request);
        }
        if let Some((asked, answer)) = self.claims.borrow().as_ref()
            && asked == request
        {
            return answer.clone();
        }
        let answer = self.inner.call(request);
        *self.claims.borrow_mut() = Some((request.clone(), answer.clone()));
        answer
    }

    fn oci_manifest_config(
        &self,
        request: &crate::cluster::OciManifestConfig,
    ) -> Result<Vec<u8>, String> {
        self.inner.oci_manifest_config(request)
    }
}

#[cfg(test)]
mod tests;
