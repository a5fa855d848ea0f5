//! What makes a policy: its settings, the host calls it may make, its decision. Each
//! policy crate registers one with [`crate::kubewarden_policy!`] and holds nothing else;
//! the benchmarks and fuzz targets reach every policy through the same trait.

use crate::admission::{AdmissionRequest, ValidateSettings, Verdict};
use crate::clock::{Clock, SystemClock};
use crate::cluster::Cluster;
use crate::settings::NamespaceList;
use crate::workload::At;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// `get_resource`, in [`Policy::HOST_CALLS`].
pub const GET_RESOURCE: u8 = 1;
/// `list_resources_all`, in [`Policy::HOST_CALLS`].
pub const LIST_RESOURCES_ALL: u8 = 2;
/// `list_resources_by_namespace`, in [`Policy::HOST_CALLS`].
pub const LIST_RESOURCES_BY_NAMESPACE: u8 = 4;
/// `oci/v1/oci_manifest_config`, in [`Policy::HOST_CALLS`].
pub const OCI_MANIFEST_CONFIG: u8 = 8;

/// What a policy decides on: the request, the policy's settings, the cluster it reads
/// (host calls) and the time.
#[derive(Clone, Copy)]
pub struct Admission<'a, S> {
    pub request: &'a AdmissionRequest,
    pub settings: &'a S,
    pub cluster: &'a dyn Cluster,
    pub clock: &'a dyn Clock,
}

/// Audit annotation of a request a policy let through unchecked: its namespace is in
/// the policy's `exemptNamespaces` (the capacity gate also names an exempt priority class).
pub const AUDIT_EXEMPT: &str = "exempt";

pub trait Policy {
    /// The module's name (`gpu-labels-policy`).
    const NAME: &'static str;
    /// The host operations the module may call (a set of the constants above): the ones
    /// its `metadata.yml` declares in `hostCapabilities`.
    const HOST_CALLS: u8;
    type Settings: DeserializeOwned + ValidateSettings;

    /// Whether the policy judges `request` at all; every other request is accepted
    /// unchanged. Every policy judges CREATE and UPDATE.
    fn judges(request: &AdmissionRequest) -> bool {
        request.creates_or_updates()
    }

    /// The namespaces whose requests the policy lets through unchecked.
    fn exempt_namespaces(settings: &Self::Settings) -> &NamespaceList;

    /// The policy's rules, for a request it judges in a namespace it does not exempt.
    fn decide(
        request: &AdmissionRequest,
        settings: &Self::Settings,
        cluster: &dyn Cluster,
        clock: &dyn Clock,
    ) -> Verdict;

    /// The opening every policy shares: the verdict on a request it does not judge or from
    /// a namespace it exempts; `None` for a request [`Policy::decide`] decides.
    fn opening(request: &AdmissionRequest, settings: &Self::Settings) -> Option<Verdict> {
        if !Self::judges(request) {
            return Some(Verdict::accept());
        }
        let namespace = request_namespace(request);
        if Self::exempt_namespaces(settings).contains(namespace) {
            return Some(Verdict::accept().with_audit(
                AUDIT_EXEMPT,
                format!("namespace {namespace} is in exemptNamespaces: not checked"),
            ));
        }
        None
    }

    /// Decides one admission request at the time `clock` tells: [`Policy::opening`], then
    /// [`Policy::decide`].
    fn evaluate_at(
        request: &AdmissionRequest,
        settings: &Self::Settings,
        cluster: &dyn Cluster,
        clock: &dyn Clock,
    ) -> Verdict {
        Self::opening(request, settings)
            .unwrap_or_else(|| Self::decide(request, settings, cluster, clock))
    }

    /// [`Policy::evaluate`] of a request the caller hands over (the waPC glue): the same
    /// verdict. A policy that changes objects moves the request's object into its answer
    /// instead of copying it.
    fn evaluate_owned(
        request: AdmissionRequest,
        settings: &Self::Settings,
        cluster: &dyn Cluster,
    ) -> Verdict {
        let verdict = Self::evaluate(&request, settings, cluster);
        crate::arena::release(request);
        verdict
    }

    /// [`Policy::evaluate_at`] at the host's time.
    fn evaluate(
        request: &AdmissionRequest,
        settings: &Self::Settings,
        cluster: &dyn Cluster,
    ) -> Verdict {
        Self::evaluate_at(request, settings, cluster, &SystemClock)
    }
}

/// The namespace of the request, or of its object when the request names none (a
/// request written by hand for `kwctl run`).
pub fn request_namespace(request: &AdmissionRequest) -> &str {
    if !request.namespace.is_empty() {
        return &request.namespace;
    }
    request
        .object
        .at("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The denial of an object the policy cannot read (its pod templates, or an autoscaler's
/// spec): one message for every policy, with code 400.
pub fn unreadable(request: &AdmissionRequest, reason: impl std::fmt::Display) -> Verdict {
    Verdict::reject(format!(
        "{} cannot be read, so it is denied: {reason}. Fix the manifest (for a custom resource, check its customKinds entry in the policy settings)",
        describe(request)
    ))
    .with_code(400)
}

/// The name of the request's object: the request's, else the object's `metadata.name`
/// (empty for an object with a generated name).
pub fn object_name(request: &AdmissionRequest) -> &str {
    if request.name.is_empty() {
        request
            .object
            .at("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    } else {
        request.name.as_str()
    }
}

/// `Deployment ml/llm` (`Pod ml/llm-*` for a generated name), for messages.
pub fn describe(request: &AdmissionRequest) -> String {
    let object = &request.object;
    let text = |p: &str| object.at(p).and_then(Value::as_str).unwrap_or("");
    let kind = Some(text("/kind"))
        .filter(|k| !k.is_empty())
        .unwrap_or(&request.kind.kind);
    let kind = if kind.is_empty() { "object" } else { kind };
    let name = match object_name(request) {
        "" => match text("/metadata/generateName") {
            "" => String::new(),
            prefix => format!("{prefix}*"),
        },
        name => name.to_string(),
    };
    match (request_namespace(request), name.as_str()) {
        (_, "") => kind.to_string(),
        ("", name) => format!("{kind} {name}"),
        (namespace, name) => format!("{kind} {namespace}/{name}"),
    }
}

/// gpu-labels-policy.
pub struct Labels;
/// gpu-pool-routing-policy.
pub struct Routing;
/// gpu-vram-fit-policy.
pub struct VramFit;
/// gpu-capacity-gate-policy.
pub struct CapacityGate;
/// gpu-autoscaler-policy.
pub struct Autoscaler;

/// `impl Policy` for a policy whose rules are the module `$rules` (`decide`, `Settings`).
/// `excused by RULE_NAMES`: the denials of its one rule are excused by its `exceptions`;
/// `judges f`: the requests it judges, when not every CREATE and UPDATE; `changes objects
/// by prepare`: its decision up to the changed object (`Ok` a change to write, see
/// [`crate::routing::prepare`]), so that [`Policy::evaluate_owned`] changes the request's
/// own object.
macro_rules! policy {
    ($policy:ty, $name:literal, $host_calls:expr, $rules:ident
        $(, excused by $rule_names:path)? $(, judges $judges:path)?
        $(, changes objects by $prepare:path)?) => {
        impl $policy {
            /// `verdict` with the denials the policy's exceptions excuse.
            #[allow(unused_variables)]
            fn excused(
                verdict: Verdict,
                r: &AdmissionRequest,
                s: &<Self as Policy>::Settings,
                clock: &dyn Clock,
            ) -> Verdict {
                $(
                    let verdict = crate::exceptions::excuse(
                        verdict,
                        s,
                        &$rule_names,
                        $rule_names[0],
                        r,
                        &s.custom_kinds,
                        clock,
                    );
                )?
                verdict
            }
        }

        impl Policy for $policy {
            const NAME: &'static str = $name;
            const HOST_CALLS: u8 = $host_calls;
            type Settings = crate::$rules::Settings;
            $(
                fn judges(r: &AdmissionRequest) -> bool {
                    $judges(r)
                }
            )?
            fn exempt_namespaces(s: &Self::Settings) -> &NamespaceList {
                &s.exempt_namespaces
            }
            fn decide(
                r: &AdmissionRequest,
                s: &Self::Settings,
                c: &dyn Cluster,
                clock: &dyn Clock,
            ) -> Verdict {
                let verdict = crate::$rules::decide(Admission {
                    request: r,
                    settings: s,
                    cluster: c,
                    clock,
                });
                Self::excused(verdict, r, s, clock)
            }
            $(
                fn evaluate_owned(
                    mut r: AdmissionRequest,
                    s: &Self::Settings,
                    c: &dyn Cluster,
                ) -> Verdict {
                    let clock = &SystemClock;
                    let verdict = if let Some(verdict) = Self::opening(&r, s) {
                        verdict
                    } else {
                        let admission = Admission {
                            request: &r,
                            settings: s,
                            cluster: c,
                            clock,
                        };
                        match $prepare(admission) {
                            // Allowed, or denied with a code: nothing for exceptions to excuse.
                            Ok(change) => change.apply(&mut r),
                            Err(verdict) => Self::excused(verdict, &r, s, clock),
                        }
                    };
                    crate::arena::release(r);
                    verdict
                }
            )?
        }
    };
}

policy!(Labels, "gpu-labels-policy", GET_RESOURCE, labels);
policy!(
    Routing,
    "gpu-pool-routing-policy",
    GET_RESOURCE,
    routing,
    excused by crate::routing::settings::RULE_NAMES,
    judges crate::routing::judges,
    changes objects by crate::routing::prepare
);
policy!(
    VramFit,
    "gpu-vram-fit-policy",
    GET_RESOURCE | OCI_MANIFEST_CONFIG,
    vram,
    excused by crate::vram::settings::RULE_NAMES
);
policy!(
    CapacityGate,
    "gpu-capacity-gate-policy",
    GET_RESOURCE | LIST_RESOURCES_ALL | LIST_RESOURCES_BY_NAMESPACE,
    capacity,
    excused by crate::capacity::settings::RULE_NAMES
);
policy!(
    Autoscaler,
    "gpu-autoscaler-policy",
    GET_RESOURCE | LIST_RESOURCES_ALL,
    autoscaler,
    judges crate::autoscaler::judges
);

/// `evaluate` and `evaluate_at` of the rules module it is called in: [`Policy::evaluate`]
/// and [`Policy::evaluate_at`] of `$policy`, for callers that hold the module's `Settings`.
macro_rules! entry_points {
    ($policy:ty) => {
        /// Decides one admission request at the host's time ([`crate::policy::Policy::evaluate`]).
        pub fn evaluate(
            request: &crate::admission::AdmissionRequest,
            settings: &Settings,
            cluster: &dyn crate::cluster::Cluster,
        ) -> crate::admission::Verdict {
            <$policy as crate::policy::Policy>::evaluate(request, settings, cluster)
        }

        /// Decides one admission request at the time `clock` tells
        /// ([`crate::policy::Policy::evaluate_at`]).
        pub fn evaluate_at(
            request: &crate::admission::AdmissionRequest,
            settings: &Settings,
            cluster: &dyn crate::cluster::Cluster,
            clock: &dyn crate::clock::Clock,
        ) -> crate::admission::Verdict {
            <$policy as crate::policy::Policy>::evaluate_at(request, settings, cluster, clock)
        }
    };
}
pub(crate) use entry_points;
