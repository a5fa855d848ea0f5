//! When a pool's pods were created: what the burst brakes ([`super::brake`]) and the
//! sustained rule ([`super::sustained`]) read from the pool's Pod list, the list the gate
//! reads anyway (no other host call).
//!
//! A Pod's `metadata.creationTimestamp` is set by the API server when the pod is created
//! (users cannot set it) and never changes; the list holds the pods that exist and have
//! not finished. So the list tells, for each pod still there, since when it exists; it
//! says nothing of pods that finished or were deleted. Each pod's owner workload (its
//! controller, a ReplicaSet read as its Deployment) says whose admissions those were.

use super::pods::{SpecParts, spec_gpus};
use super::settings::Settings;
use crate::clock::{UnixSeconds, parse_end};
use crate::cluster::ClusterRequest;
use crate::gpu::{GpuCounts, GpuResources};
use crate::lists::{ListError, for_each_item, json_string, raw_str};
use crate::pools::Pool;
use crate::settings::{TEAM_POD_LABEL_KEY, WindowRule};
use serde_json::value::RawValue;
use std::collections::HashMap;

/// One pod of the pool that holds GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodTime {
    /// `metadata.creationTimestamp`; `None` when absent or unreadable.
    pub created: Option<UnixSeconds>,
    /// True when the pod is in the request's namespace.
    pub in_namespace: bool,
    /// Its team label (index in [`PodTimes::teams`]).
    pub team: Option<usize>,
    /// Its GPUs (index in [`PodTimes::shapes`]).
    pub shape: usize,
    /// Its owner workload (index in [`PodTimes::owners`]).
    pub owner: usize,
}

/// The pool's pods that hold GPUs, with when they were created.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodTimes {
    pub pods: Vec<PodTime>,
    /// The GPUs of each distinct pod spec.
    pub shapes: Vec<GpuCounts>,
    /// The distinct values of the team label.
    pub teams: Vec<String>,
    /// The distinct owner workloads, as [`owner_text`] names them.
    pub owners: Vec<String>,
}

impl PodTimes {
    /// The GPUs of `resource` one pod holds.
    pub fn gpus(&self, pod: &PodTime, resource: &str) -> u64 {
        self.shapes[pod.shape].get(resource).copied().unwrap_or(0)
    }

    /// The index of team `team`, if some pod carries it.
    pub fn team_index(&self, team: &str) -> Option<usize> {
        self.teams.iter().position(|t| t == team)
    }
}

/// True when the gate reads when the pool's pods were created: a burst brake is set, or
/// the pool has a sustained rule.
pub fn wanted(settings: &Settings, pool: &Pool) -> bool {
    settings.burst_brakes.as_ref().is_some_and(|b| b.any())
        || pool.sustained.as_ref().is_some_and(|s| s.is_set())
}

/// The label a Deployment's ReplicaSet puts on its pods: the ReplicaSet is named
/// `<deployment>-<hash>`.
const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// What crosses the host boundary for each Pod besides its GPUs when [`wanted`]: its
/// namespace, creation time, team label and owner workload (policy-server never masks
/// metadata; these keep them where a host does).
pub fn masks() -> [String; 6] {
    [
        "metadata.creationTimestamp".into(),
        "metadata.namespace".into(),
        format!("metadata.labels.{TEAM_POD_LABEL_KEY}"),
        "metadata.name".into(),
        "metadata.ownerReferences".into(),
        format!("metadata.labels.{POD_TEMPLATE_HASH}"),
    ]
}

/// A pod's owner workload as messages name it: its controller (`deployment llm` for a
/// ReplicaSet `llm-<hash>` whose pods carry that hash, `statefulset db`, `job train`), or
/// `pod <name>` when it has none. `owner_references` is the pod's `ownerReferences`.
pub fn owner_text(owner_references: Option<&str>, hash: Option<&str>, name: &str) -> String {
    let owners: serde_json::Value = owner_references
        .and_then(|o| serde_json::from_str(o).ok())
        .unwrap_or_default();
    let owners = owners.as_array().map(Vec::as_slice).unwrap_or_default();
    let field = |o: &serde_json::Value, key: &str| -> String {
        o.get(key)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let controller = owners.iter().find(|o| {
        o.get("controller").and_then(serde_json::Value::as_bool) == Some(true)
            && !field(o, "name").is_empty()
    });
    match controller {
        Some(o) => {
            let (kind, owner) = (field(o, "kind"), field(o, "name"));
            let deployment = (kind == "ReplicaSet")
                .then(|| hash.and_then(|h| owner.strip_suffix(h)?.strip_suffix('-')))
                .flatten()
                .filter(|d| !d.is_empty());
            match deployment {
                Some(d) => format!("deployment {d}"),
                None => format!("{} {owner}", kind.to_ascii_lowercase()),
            }
        }
        None if name.is_empty() => "pod (unnamed)".to_string(),
        None => format!("pod {name}"),
    }
}

/// The pool's Pod query ([`super::queries::pod_query`]), with [`masks`] when [`wanted`].
pub fn pod_query(settings: &Settings, pool: &Pool) -> ClusterRequest {
    let mut query = super::queries::pod_query(&settings.pool_label_key, pool);
    if wanted(settings, pool)
        && let ClusterRequest::ListAll(list) = &mut query
        && let Some(m) = list.field_masks.as_mut()
    {
        m.extend(masks());
    }
    query
}

/// Reads the pods of a `PodList` that hold GPUs: when each was created, whether it is in
/// `namespace`, its team label, its owner workload, its GPUs (each distinct spec read
/// once).
pub fn read<'a>(
    bytes: &'a [u8],
    names: &GpuResources,
    namespace: &str,
) -> Result<PodTimes, ListError> {
    let mut out = PodTimes::default();
    let mut seen: HashMap<SpecParts<'a>, usize> = HashMap::new();
    // (each distinct `ownerReferences` text, or name of a pod without one, read once)
    let mut owners: HashMap<&'a str, usize> = HashMap::new();
    let paths: [&[&str]; 10] = [
        &["spec", "containers"],
        &["spec", "initContainers"],
        &["spec", "ephemeralContainers"],
        &["spec", "resources"],
        &["metadata", "namespace"],
        &["metadata", "creationTimestamp"],
        &["metadata", "labels", TEAM_POD_LABEL_KEY],
        &["metadata", "name"],
        &["metadata", "ownerReferences"],
        &["metadata", "labels", POD_TEMPLATE_HASH],
    ];
    let on_pod = |[
        containers,
        init,
        ephemeral,
        resources,
        ns,
        created,
        team,
        name,
        owner_refs,
        hash,
    ]: [Option<&'a RawValue>; 10]|
     -> Result<(), ListError> {
        let key: SpecParts = [containers, init, ephemeral, resources].map(|p| p.map(RawValue::get));
        let shape = match seen.get(&key) {
            Some(s) => *s,
            None => {
                let gpus = spec_gpus(&key, names)?;
                let s = if gpus.is_empty() {
                    usize::MAX
                } else {
                    out.shapes.push(gpus);
                    out.shapes.len() - 1
                };
                seen.insert(key, s);
                s
            }
        };
        if shape == usize::MAX {
            return Ok(());
        }
        let text = |raw: Option<&RawValue>| -> Result<Option<String>, ListError> {
            raw.map(|r| match raw_str(r.get()) {
                Some(t) => Ok(t.to_string()),
                None => json_string(r.get()),
            })
            .transpose()
        };
        let in_namespace = ns.is_some_and(|r| raw_str(r.get()) == Some(namespace))
            || text(ns)?.as_deref() == Some(namespace);
        let team = match text(team)? {
            Some(t) => Some(match out.teams.iter().position(|x| *x == t) {
                Some(i) => i,
                None => {
                    out.teams.push(t);
                    out.teams.len() - 1
                }
            }),
            None => None,
        };
        let created = text(created).ok().flatten().and_then(|t| parse_end(&t));
        let key = owner_refs.or(name).map_or("", RawValue::get);
        let owner = match owners.get(key) {
            Some(o) => *o,
            None => {
                out.owners.push(owner_text(
                    owner_refs.map(RawValue::get),
                    text(hash).ok().flatten().as_deref(),
                    text(name).ok().flatten().as_deref().unwrap_or(""),
                ));
                owners.insert(key, out.owners.len() - 1);
                out.owners.len() - 1
            }
        };
        out.pods.push(PodTime {
            created,
            in_namespace,
            team,
            shape,
            owner,
        });
        Ok(())
    };
    for_each_item(bytes, paths, on_pod)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pods_are_read_with_their_creation_namespace_and_team() {
        let list = json!({"items": [
            {"metadata": {"namespace": "ml-a", "creationTimestamp": "2026-12-01T00:00:10Z",
                          "labels": {"gpu-admission/team": "ml"}},
             "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}},
            {"metadata": {"namespace": "ml-b", "creationTimestamp": "yesterday"},
             "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}},
            {"metadata": {"namespace": "ml-a", "creationTimestamp": "2026-12-01T00:00:00Z"},
             "spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}}
        ]})
        .to_string();
        let names = GpuResources::default();
        let t = read(list.as_bytes(), &names, "ml-a").unwrap();
        // The pod without GPUs is left out; both GPU pods share one shape.
        assert_eq!(t.pods.len(), 2);
        assert_eq!(t.shapes.len(), 1);
        assert_eq!(t.pods[0].created, Some(1_796_083_210));
        assert!(t.pods[0].in_namespace);
        assert_eq!(t.pods[0].team, t.team_index("ml"));
        assert_eq!(t.gpus(&t.pods[0], "nvidia.com/gpu"), 2);
        assert_eq!(
            (t.pods[1].created, t.pods[1].in_namespace, t.pods[1].team),
            (None, false, None)
        );
        assert!(read(b"{\"items\": 3}", &names, "ml-a").is_err());
    }

    #[rstest::rstest]
    #[case::replicaset_of_a_deployment(
        Some(r#"[{"kind":"ReplicaSet","name":"llm-7d9f8","controller":true}]"#),
        Some("7d9f8"),
        "deployment llm"
    )]
    #[case::replicaset_without_its_hash(
        Some(r#"[{"kind":"ReplicaSet","name":"llm-7d9f8","controller":true}]"#),
        None,
        "replicaset llm-7d9f8"
    )]
    #[case::the_controller_among_owners(
        Some(r#"[{"kind":"ConfigMap","name":"x"},{"kind":"StatefulSet","name":"db","controller":true}]"#), None, "statefulset db")]
    #[case::no_controller(Some(r#"[{"kind":"Job","name":"train"}]"#), None, "pod p-0")]
    #[case::malformed(Some("{"), None, "pod p-0")]
    #[case::none(None, None, "pod p-0")]
    fn a_pods_owner_workload_is_its_controller(
        #[case] owners: Option<&str>,
        #[case] hash: Option<&str>,
        #[case] want: &str,
    ) {
        assert_eq!(owner_text(owners, hash, "p-0"), want);
    }

    #[test]
    fn pods_of_one_workload_share_an_owner() {
        let pod = |name: &str, rs: &str| {
            json!({"metadata": {"name": name, "namespace": "ml-a",
                                "labels": {"pod-template-hash": "abc12"},
                                "ownerReferences": [{"kind": "ReplicaSet", "name": rs, "controller": true}]},
                   "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
        };
        let list = json!({"items": [pod("llm-1", "llm-abc12"), pod("llm-2", "llm-abc12"),
                                    pod("db-0", "db-abc12")]})
        .to_string();
        let t = read(list.as_bytes(), &GpuResources::default(), "ml-a").unwrap();
        assert_eq!(t.owners, ["deployment llm", "deployment db"]);
        assert_eq!(
            t.pods.iter().map(|p| p.owner).collect::<Vec<_>>(),
            [0, 0, 1]
        );
    }
}
