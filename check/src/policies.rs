//! The policies to run: read from ClusterAdmissionPolicy, AdmissionPolicy,
//! ClusterAdmissionPolicyGroup and AdmissionPolicyGroup manifests, with their settings,
//! `contextAwareResources`, evaluation deadlines, rules and selectors, on modules found
//! locally or pulled.
//!
//! A `registry://` module that is a release of a policy of the repository (same OCI
//! repository as its `metadata.yml`, any tag) runs the module built in the repository
//! (`policies/<name>/annotated-policy.wasm`, else `policy.wasm`), unless pulling is asked
//! for; any other `registry://` module is pulled with the distribution crate's OCI client.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use gpu_e2e::metadata::Metadata;
use gpu_e2e::{ContextAwareAccess, Policy};
use gpu_rules::selector::LabelSelector;
use serde_json::Value;

use crate::expression::Expr;
use crate::input::{InputError, Manifest, parse_objects};
use crate::request::group_version;

/// Policy kinds with one module.
const POLICY_KINDS: &[&str] = gpu_dist::manifests::POLICY_KINDS;
/// Policy kinds with members.
const GROUP_KINDS: &[&str] = gpu_dist::manifests::GROUP_KINDS;

/// policy-server's evaluation deadline when `timeoutEvalSeconds` is not set.
pub const DEFAULT_EVAL_TIMEOUT: Duration = Duration::from_secs(10);

/// One module with its settings: a policy, or a member of a group.
#[derive(Debug, Clone)]
pub struct Member {
    /// The member's name (`labels`), or the policy's name for a single policy.
    pub name: String,
    /// The module reference as written.
    pub module: String,
    /// The file the module was loaded from (or the reference it was pulled from).
    pub module_source: String,
    /// Its settings (`{}` when absent).
    pub settings: Value,
    /// The loaded module, with the granted resources and the evaluation deadline.
    pub policy: Policy,
}

/// What a policy manifest runs.
#[derive(Debug, Clone)]
pub enum Body {
    /// One module.
    Single(Box<Member>),
    /// Members combined by an expression.
    Group {
        /// `spec.expression`.
        expression: Expr,
        /// `spec.message`: the rejection's message.
        message: String,
        /// The members, in the manifest's order.
        members: Vec<Member>,
    },
}

/// A policy manifest, ready to run.
#[derive(Debug, Clone)]
pub struct PolicyManifest {
    /// `metadata.name`.
    pub name: String,
    /// Its kind.
    pub kind: String,
    /// Where it was read (`file:line`).
    pub location: String,
    /// `spec.mode` (`protect` when absent).
    pub mode: String,
    /// `spec.mutating` (groups never mutate).
    pub mutating: bool,
    /// `spec.rules`.
    pub rules: Vec<Value>,
    /// `spec.namespaceSelector`.
    pub namespace_selector: LabelSelector,
    /// `spec.objectSelector`.
    pub object_selector: LabelSelector,
    /// The namespace of an AdmissionPolicy / AdmissionPolicyGroup (it judges only there).
    pub own_namespace: Option<String>,
    /// What it runs.
    pub body: Body,
}

impl PolicyManifest {
    /// Its members (one for a single policy).
    pub fn members(&self) -> Vec<&Member> {
        match &self.body {
            Body::Single(m) => vec![m.as_ref()],
            Body::Group { members, .. } => members.iter().collect(),
        }
    }

    /// Whether its rules cover `operation` on the object's group, version and resource.
    pub fn rules_match(&self, api_version: &str, resource: &str, operation: &str) -> bool {
        let (group, version) = group_version(api_version);
        let covers = |list: &Value, item: &str| {
            list.as_array()
                .is_some_and(|l| l.iter().any(|v| v == "*" || v == item))
        };
        self.rules.iter().any(|rule| {
            covers(&rule["apiGroups"], group)
                && covers(&rule["apiVersions"], version)
                && rule["resources"]
                    .as_array()
                    .is_some_and(|l| l.iter().any(|r| r == "*" || r == resource || r == "*/*"))
                && covers(&rule["operations"], operation)
        })
    }
}

/// Finds modules: the repository's built policies, and pulls.
pub struct Modules {
    root: PathBuf,
    local: BTreeMap<String, Metadata>,
    built_dir: Option<PathBuf>,
    pull: bool,
    pulled: BTreeMap<String, Policy>,
}

impl Modules {
    /// The policies of the repository at `root` (none when it has no `policies/`); `pull`
    /// pulls every `registry://` module, the repository's own too. `built_dir` (cargo's
    /// `target/wasm32-wasip1/release`) is looked in first for the repository's modules.
    pub fn new(root: &Path, built_dir: Option<&Path>, pull: bool) -> Self {
        let local = gpu_dist::policies::workspace_policies(root)
            .map(|dirs| {
                dirs.into_iter()
                    .filter_map(|d| Some((d.name.clone(), d.metadata().ok()?)))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            root: root.to_path_buf(),
            local,
            built_dir: built_dir.map(Path::to_path_buf),
            pull,
            pulled: BTreeMap::new(),
        }
    }

    /// The module `reference` names, and where it was loaded from.
    pub fn load(&mut self, reference: &str, base: &Path) -> Result<(Policy, String), String> {
        if let Some(path) = reference.strip_prefix("file://") {
            return load_file(Path::new(path));
        }
        if !reference.contains("://") && reference.ends_with(".wasm") {
            let path = base.join(reference);
            return load_file(&path);
        }
        let reference = gpu_dist::manifests::normalize_module(reference);
        if !reference.starts_with("registry://") {
            return Err(format!(
                "module {reference}: only registry://, file:// and local .wasm paths are read"
            ));
        }
        if !self.pull
            && let Some(name) = gpu_dist::manifests::policy_of_module(&reference, &self.local)
        {
            let dir = self.root.join("policies").join(name);
            let in_built_dir = self
                .built_dir
                .as_ref()
                .map(|d| d.join(format!("{}.wasm", name.replace('-', "_"))));
            let built = in_built_dir
                .into_iter()
                .chain([dir.join("annotated-policy.wasm"), dir.join("policy.wasm")])
                .find(|p| p.is_file())
                .ok_or_else(|| {
                    format!(
                        "module {reference} is {name}, not built in {}: run `make build` (or pass --pull to pull it)",
                        dir.display()
                    )
                })?;
            return load_file(&built);
        }
        if let Some(policy) = self.pulled.get(&reference) {
            return Ok((policy.clone(), reference));
        }
        let pulled = gpu_dist::oci::block_on(gpu_dist::oci::pull(
            &reference,
            gpu_dist::oci::Transport::Auto,
        ))
        .and_then(|r| r)
        .map_err(|e| format!("{e:#}"))?;
        let policy = Policy::from_bytes(&reference, &pulled.module)
            .map_err(|e| format!("module {reference}: {e:#}"))?;
        self.pulled.insert(reference.clone(), policy.clone());
        Ok((policy, reference))
    }
}

fn load_file(path: &Path) -> Result<(Policy, String), String> {
    let policy = Policy::load(path).map_err(|e| format!("{e:#}"))?;
    Ok((policy, path.display().to_string()))
}

/// The policy manifests of `files`: every ClusterAdmissionPolicy, AdmissionPolicy and group
/// in them (other objects, such as the PriorityClasses beside routing's policy, are left
/// out). Settings are checked by each module's own `validate_settings`, as policy-server
/// does at start-up: invalid ones are an error.
pub fn read_policy_manifests(
    files: &[PathBuf],
    modules: &mut Modules,
) -> Result<Vec<PolicyManifest>, Vec<InputError>> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for file in files {
        let name = file.display().to_string();
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => {
                errors.push(InputError::whole_file(
                    name,
                    format!("cannot read the policy manifest: {e}"),
                ));
                continue;
            }
        };
        let objects = match parse_objects(&name, &text) {
            Ok(o) => o,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        let base = file.parent().unwrap_or(Path::new("."));
        for manifest in objects {
            let kind = manifest.object["kind"].as_str().unwrap_or_default();
            if !POLICY_KINDS.contains(&kind) && !GROUP_KINDS.contains(&kind) {
                continue;
            }
            match policy_manifest(&manifest, base, modules) {
                Ok(p) => out.push(p),
                Err(message) => errors.push(InputError {
                    file: manifest.file.clone(),
                    line: Some(manifest.line),
                    message,
                }),
            }
        }
    }
    if out.is_empty() && errors.is_empty() {
        let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        errors.push(InputError::whole_file(
            names.join(", "),
            "no ClusterAdmissionPolicy, AdmissionPolicy or policy group found",
        ));
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

fn selector(spec: &Value, field: &str) -> Result<LabelSelector, String> {
    match &spec[field] {
        Value::Null => Ok(LabelSelector::default()),
        v => serde_json::from_value(v.clone()).map_err(|e| format!("spec.{field}: {e}")),
    }
}

fn access(value: &Value, field: &str) -> Result<ContextAwareAccess, String> {
    let resources =
        gpu_dist::manifests::context_aware_resources(value).map_err(|e| format!("{field}{e}"))?;
    Ok(ContextAwareAccess::Only(
        resources
            .into_iter()
            .map(|r| (r.api_version, r.kind))
            .collect::<BTreeSet<_>>(),
    ))
}

fn eval_timeout(value: &Value, field: &str) -> Result<Duration, String> {
    match value {
        Value::Null => Ok(DEFAULT_EVAL_TIMEOUT),
        v => v
            .as_u64()
            .filter(|s| *s > 0)
            .map(Duration::from_secs)
            .ok_or_else(|| format!("{field} must be a whole number of seconds, got {v}")),
    }
}

/// Loads one member: its module, grants, deadline; checks its settings.
fn member(
    name: &str,
    spec: &Value,
    field: &str,
    base: &Path,
    modules: &mut Modules,
) -> Result<Member, String> {
    let module = spec["module"]
        .as_str()
        .ok_or_else(|| format!("{field}module is missing"))?;
    let (policy, module_source) = modules
        .load(module, base)
        .map_err(|e| format!("{field}module: {e}"))?;
    let policy = policy
        .with_context_aware_access(access(&spec["contextAwareResources"], field)?)
        .with_timeout(eval_timeout(
            &spec["timeoutEvalSeconds"],
            &format!("{field}timeoutEvalSeconds"),
        )?);
    let settings = match &spec["settings"] {
        Value::Null => Value::Object(Default::default()),
        s if s.is_object() => s.clone(),
        s => return Err(format!("{field}settings must be a mapping, got {s}")),
    };
    let validation = policy
        .validate_settings(&settings)
        .map_err(|e| format!("{field}settings: {e:#}"))?;
    if !validation.valid {
        return Err(format!(
            "{field}settings are not valid for {module}: {}",
            validation.message.unwrap_or_default()
        ));
    }
    Ok(Member {
        name: name.to_string(),
        module: module.to_string(),
        module_source,
        settings,
        policy,
    })
}

fn policy_manifest(
    manifest: &Manifest,
    base: &Path,
    modules: &mut Modules,
) -> Result<PolicyManifest, String> {
    let object = &manifest.object;
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    let name = object["metadata"]["name"]
        .as_str()
        .ok_or("metadata.name is missing")?
        .to_string();
    let spec = &object["spec"];
    let group = GROUP_KINDS.contains(&kind.as_str());
    let body = if group {
        let expression = spec["expression"]
            .as_str()
            .ok_or("spec.expression is missing")?;
        let expression = Expr::parse(expression).map_err(|e| format!("spec.expression: {e}"))?;
        let Some(members) = spec["policies"].as_object() else {
            return Err("spec.policies must be a mapping of member name to policy".into());
        };
        let mut loaded = Vec::new();
        for (member_name, member_spec) in members {
            loaded.push(member(
                member_name,
                member_spec,
                &format!("spec.policies.{member_name}."),
                base,
                modules,
            )?);
        }
        let names: BTreeSet<String> = loaded.iter().map(|m| m.name.clone()).collect();
        if let Some(unknown) = expression.calls().difference(&names).next() {
            return Err(format!(
                "spec.expression calls {unknown}() which is not a member"
            ));
        }
        Body::Group {
            expression,
            message: spec["message"].as_str().unwrap_or_default().to_string(),
            members: loaded,
        }
    } else {
        Body::Single(Box::new(member(&name, spec, "spec.", base, modules)?))
    };
    Ok(PolicyManifest {
        own_namespace: kind.starts_with("AdmissionPolicy").then(|| {
            object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_string()
        }),
        name,
        location: manifest.location(),
        mode: spec["mode"].as_str().unwrap_or("protect").to_string(),
        mutating: !group && spec["mutating"].as_bool().unwrap_or(false),
        rules: spec["rules"].as_array().cloned().unwrap_or_default(),
        namespace_selector: selector(spec, "namespaceSelector")?,
        object_selector: selector(spec, "objectSelector")?,
        kind,
        body,
    })
}

/// The default policy manifests of the repository at `root`: the validating group and
/// routing's example.
pub fn default_policy_files(root: &Path) -> Vec<PathBuf> {
    vec![
        root.join("deploy/cluster-admission-policy-group.yaml"),
        root.join("policies/gpu-pool-routing-policy/examples/cluster-admission-policy.yaml"),
    ]
}
