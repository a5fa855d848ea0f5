//! Runs the policies on one object as the API server would send it to Kubewarden: the
//! policies whose rules and selectors cover it, the mutating ones first (each patch applied
//! before the next policy sees the object), then the validating ones and groups on the
//! patched object.

use std::collections::BTreeMap;
use std::sync::Arc;

use gpu_e2e::{Evaluation, HostResponder};
use serde::Serialize;
use serde_json::Value;

use crate::cluster::{NO_CLUSTER, Snapshot, labels_of};
use crate::input::Manifest;
use crate::policies::{Body, Member, PolicyManifest};
use crate::request::{UserInfo, admission_request, describe, namespace_of, resource_of};

/// What a policy decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Admitted (possibly with a patch or warnings).
    Admitted,
    /// Denied.
    Denied,
    /// Not evaluated: it needed the cluster and none was given.
    Skipped,
}

impl Verdict {
    /// The word shown in the table.
    pub fn word(self) -> &'static str {
        match self {
            Self::Admitted => "admitted",
            Self::Denied => "DENIED",
            Self::Skipped => "skipped",
        }
    }
}

/// One line of the report: one policy (or group member) on one object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// `file:line` of the object's document.
    pub file: String,
    /// `Kind namespace/name`.
    pub object: String,
    /// `CREATE` or `UPDATE`.
    pub operation: String,
    /// The policy (`gpu-admission/labels` for a group member, `-` when none judges the
    /// object).
    pub policy: String,
    /// What it decided.
    pub verdict: Verdict,
    /// The message (the denial's, a warning's, or why it was skipped).
    pub message: String,
    /// The patch, as `op path` items (empty when none).
    pub patch: Vec<String>,
    /// Warnings the policy returned.
    pub warnings: Vec<String>,
}

/// Where host calls are answered.
#[derive(Clone)]
pub enum Cluster {
    /// Nowhere: evaluations that read the cluster are skipped.
    None,
    /// A snapshot file.
    Snapshot(Arc<Snapshot>),
    /// A live cluster (read-only).
    Live(Arc<dyn HostResponder>),
    /// A kwctl session, replayed from its start for each object.
    Replay(Arc<crate::cluster::Replay>),
}

impl Cluster {
    fn responder(&self) -> Arc<dyn HostResponder> {
        match self {
            Self::None => Arc::new(crate::cluster::NoCluster),
            Self::Snapshot(s) => s.clone(),
            Self::Live(l) => l.clone(),
            Self::Replay(r) => r.clone(),
        }
    }
}

/// The policies, the cluster, and how requests are made.
pub struct Checker {
    /// The policy manifests.
    pub policies: Vec<PolicyManifest>,
    /// Where context-aware policies read.
    pub cluster: Cluster,
    /// The namespace of objects that name none.
    pub default_namespace: String,
    /// Who the requests come from.
    pub user: UserInfo,
}

/// One member's result.
struct Outcome {
    verdict: Verdict,
    message: String,
    patch: Vec<Value>,
    warnings: Vec<String>,
}

impl Checker {
    /// The labels a `namespaceSelector` is matched against: the name label every
    /// namespace carries, and the Namespace's own labels when the snapshot has it.
    fn namespace_labels(&self, namespace: &str) -> BTreeMap<String, String> {
        let mut labels = match &self.cluster {
            Cluster::Snapshot(s) => s.namespace_labels(namespace).unwrap_or_default(),
            _ => BTreeMap::new(),
        };
        labels.insert("kubernetes.io/metadata.name".into(), namespace.into());
        labels
    }

    /// The policies that judge `object` for `operation`.
    fn judging(&self, object: &Value, operation: &str) -> Vec<&PolicyManifest> {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let resource = resource_of(object["kind"].as_str().unwrap_or_default());
        let namespace = namespace_of(object, &self.default_namespace);
        let object_labels = labels_of(object);
        self.policies
            .iter()
            .filter(|p| p.rules_match(api_version, &resource, operation))
            .filter(|p| match (&p.own_namespace, &namespace) {
                (Some(own), Some(ns)) => own == ns,
                (Some(_), None) => false,
                (None, _) => true,
            })
            .filter(|p| {
                namespace
                    .as_ref()
                    .is_none_or(|ns| p.namespace_selector.matches(&self.namespace_labels(ns)))
            })
            .filter(|p| p.object_selector.matches(&object_labels))
            .collect()
    }

    /// Evaluates one member on `request`.
    fn run(&self, member: &Member, request: &Value, mutating: bool, policy: &str) -> Outcome {
        let evaluation =
            member
                .policy
                .evaluate_with(request, &member.settings, self.cluster.responder());
        let evaluation: Evaluation = match evaluation {
            Ok(e) => e,
            Err(e) => {
                return Outcome {
                    verdict: Verdict::Denied,
                    message: format!("cannot evaluate {}: {e:#}", member.module_source),
                    patch: vec![],
                    warnings: vec![],
                };
            }
        };
        let unanswered: Vec<String> = evaluation
            .host_calls
            .iter()
            .filter(|c| c.outcome.as_ref().is_err_and(|e| e.ends_with(NO_CLUSTER)))
            .map(|c| describe_call(&c.operation, &c.payload))
            .collect();
        if !unanswered.is_empty() {
            return Outcome {
                verdict: Verdict::Skipped,
                message: format!(
                    "context-aware: needs the cluster ({}); not evaluated without --snapshot or --kubeconfig",
                    unanswered.join(", ")
                ),
                patch: vec![],
                warnings: vec![],
            };
        }
        let response = evaluation.response;
        let patch = response.patch_ops().unwrap_or_default();
        let warnings = response.warnings.clone().unwrap_or_default();
        if response.allowed && !patch.is_empty() && !mutating {
            // policy-server's answer when a policy not marked mutating changes the object.
            return Outcome {
                verdict: Verdict::Denied,
                message: format!(
                    "Request rejected by policy {policy}. The policy attempted to mutate the request, but it is currently configured to not allow mutations."
                ),
                patch: vec![],
                warnings,
            };
        }
        Outcome {
            verdict: if response.allowed {
                Verdict::Admitted
            } else {
                Verdict::Denied
            },
            message: response
                .message()
                .map(str::to_string)
                .or_else(|| warnings.first().map(|w| format!("warning: {w}")))
                .unwrap_or_default(),
            patch,
            warnings,
        }
    }

    /// Every row for one object: CREATE, or UPDATE of `old`. `index` makes the request uid.
    pub fn check(&self, manifest: &Manifest, old: Option<&Value>, index: usize) -> Vec<Row> {
        let operation = if old.is_some() { "UPDATE" } else { "CREATE" };
        if let Cluster::Replay(replay) = &self.cluster {
            replay.rewind();
        }
        let object_name = describe(&manifest.object, &self.default_namespace);
        let row = |policy: String, outcome: &Outcome| Row {
            file: manifest.location(),
            object: object_name.clone(),
            operation: operation.to_string(),
            policy,
            verdict: outcome.verdict,
            message: outcome.message.clone(),
            patch: outcome.patch.iter().map(patch_item).collect(),
            warnings: outcome.warnings.clone(),
        };
        let judging = self.judging(&manifest.object, operation);
        if judging.is_empty() {
            let api_version = manifest.object["apiVersion"].as_str().unwrap_or_default();
            let kind = manifest.object["kind"].as_str().unwrap_or_default();
            if let Cluster::Snapshot(snapshot) = &self.cluster {
                let request = admission_request(
                    "-",
                    &manifest.object,
                    old,
                    &self.default_namespace,
                    &self.user,
                );
                snapshot.apply(request["object"].clone());
            }
            return vec![row(
                "-".into(),
                &Outcome {
                    verdict: Verdict::Admitted,
                    message: format!(
                        "no policy judges {kind} ({api_version} {}, {operation}): not in any policy's rules or selectors",
                        resource_of(kind)
                    ),
                    patch: vec![],
                    warnings: vec![],
                },
            )];
        }
        let uid = format!("gpu-admission-check-{index}");
        let mut rows = Vec::new();
        let mut object = manifest.object.clone();
        for policy in judging.iter().filter(|p| p.mutating) {
            let Body::Single(member) = &policy.body else {
                continue;
            };
            let request =
                admission_request(&uid, &object, old, &self.default_namespace, &self.user);
            let outcome = self.run(member, &request, true, &policy.name);
            if outcome.verdict == Verdict::Admitted && !outcome.patch.is_empty() {
                let mut patched = request["object"].clone();
                match serde_json::from_value::<json_patch::Patch>(Value::Array(
                    outcome.patch.clone(),
                ))
                .map_err(|e| e.to_string())
                .and_then(|p| json_patch::patch(&mut patched, &p).map_err(|e| e.to_string()))
                {
                    Ok(()) => object = patched,
                    Err(e) => {
                        rows.push(row(
                            policy.name.clone(),
                            &Outcome {
                                verdict: Verdict::Denied,
                                message: format!("the policy's patch does not apply: {e}"),
                                patch: outcome.patch,
                                warnings: outcome.warnings,
                            },
                        ));
                        continue;
                    }
                }
            }
            rows.push(row(policy.name.clone(), &outcome));
        }
        let request = admission_request(&uid, &object, old, &self.default_namespace, &self.user);
        for policy in judging.iter().filter(|p| !p.mutating) {
            match &policy.body {
                Body::Single(member) => {
                    let outcome = self.run(member, &request, false, &policy.name);
                    rows.push(row(policy.name.clone(), &outcome));
                }
                Body::Group {
                    expression,
                    message,
                    members,
                } => {
                    let mut verdicts = BTreeMap::new();
                    let mut causes = Vec::new();
                    for member in members {
                        let name = format!("{}/{}", policy.name, member.name);
                        let outcome = self.run(member, &request, false, &name);
                        verdicts.insert(member.name.clone(), outcome.verdict);
                        if outcome.verdict == Verdict::Denied {
                            causes.push(member.name.clone());
                        }
                        rows.push(row(name, &outcome));
                    }
                    // A skipped member counts as admitting: only what was evaluated denies.
                    let admitted =
                        expression.eval(&|name| verdicts.get(name) != Some(&Verdict::Denied));
                    if !admitted {
                        rows.push(row(
                            policy.name.clone(),
                            &Outcome {
                                verdict: Verdict::Denied,
                                message: format!(
                                    "{message} (denied by {}: their lines above)",
                                    causes.join(", ")
                                ),
                                patch: vec![],
                                warnings: vec![],
                            },
                        ));
                    }
                }
            }
        }
        // Admitted: in the cluster from now on, for the objects after it.
        if let Cluster::Snapshot(snapshot) = &self.cluster
            && !rows.iter().any(|r| r.verdict == Verdict::Denied)
        {
            snapshot.apply(request["object"].clone());
        }
        rows
    }
}

/// `op path` of one JSONPatch operation.
fn patch_item(op: &Value) -> String {
    format!(
        "{} {}",
        op["op"].as_str().unwrap_or("?"),
        op["path"].as_str().unwrap_or("?")
    )
}

/// A host call in a few words: `list v1/Node gpu-admission/pool=a100`, `get v1/Namespace ml`.
fn describe_call(operation: &str, payload: &str) -> String {
    let p: Value = serde_json::from_str(payload).unwrap_or(Value::Null);
    let what = format!(
        "{}/{}",
        p["api_version"].as_str().unwrap_or("?"),
        p["kind"].as_str().unwrap_or("?")
    );
    match operation {
        "get_resource" => format!("get {what} {}", p["name"].as_str().unwrap_or("?")),
        "list_resources_all" | "list_resources_by_namespace" => {
            let mut text = format!("list {what}");
            if let Some(ns) = p["namespace"].as_str() {
                text.push_str(&format!(" in {ns}"));
            }
            if let Some(sel) = p["label_selector"].as_str() {
                text.push_str(&format!(" {sel}"));
            }
            text
        }
        "v1/oci_manifest_config" => format!("image {}", p.as_str().unwrap_or("?")),
        other => other.to_string(),
    }
}
