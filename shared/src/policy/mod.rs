//! What every policy shares at admission, and nothing of any policy's rules: the
//! [`Policy`] trait (settings read, checked once into the form the rules take, the opening
//! every policy shares, the one way to run a policy), the [`Admission`] a policy decides on,
//! and the words for the objects it decides about ([`describe`], [`unreadable`]). Each rules
//! module implements [`Policy`] beside its rules (`labels/policy.rs`, ...); each policy crate
//! registers its implementation with [`crate::kubewarden_policy!`] and holds nothing else.

mod describe;

pub use describe::{describe, object_name, request_namespace, unreadable};

use crate::admission::{AdmissionRequest, Verdict};
use crate::clock::{Clock, SystemClock};
use crate::cluster::Cluster;
use crate::settings::{CheckedForm, Common, FieldError, Holds, ValidateSettings};
use serde::de::DeserializeOwned;

/// `get_resource`, in [`Policy::HOST_CALLS`].
pub const GET_RESOURCE: u8 = 1;
/// `list_resources_all`, in [`Policy::HOST_CALLS`].
pub const LIST_RESOURCES_ALL: u8 = 2;
/// `list_resources_by_namespace`, in [`Policy::HOST_CALLS`].
pub const LIST_RESOURCES_BY_NAMESPACE: u8 = 4;
/// `oci/v1/oci_manifest_config`, in [`Policy::HOST_CALLS`].
pub const OCI_MANIFEST_CONFIG: u8 = 8;

/// What a policy decides on: the request, the policy's checked settings, the cluster it
/// reads (host calls) and the time.
pub struct Admission<'a, S> {
    pub request: &'a AdmissionRequest,
    pub settings: &'a S,
    pub cluster: &'a dyn Cluster,
    pub clock: &'a dyn Clock,
}

// By hand: derived, they would ask `S: Copy` of the settings only borrowed here.
impl<S> Clone for Admission<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Admission<'_, S> {}

/// Audit annotation of a request a policy let through unchecked: its namespace is in
/// the policy's `exemptNamespaces` (the capacity gate also names an exempt priority class).
pub const AUDIT_EXEMPT: &str = "exempt";

/// Audit annotation holding the host's own error text when a policy could not read the
/// cluster state it asked for (the capacity gate truncates it).
pub const AUDIT_HOST_ERROR: &str = "host-error";

/// A policy: its settings as the host sends them and as checked, the host calls it may
/// make, its decision.
///
/// Policies are run one way: [`Policy::evaluate_at`] (or [`Policy::evaluate`] at the host's
/// time, [`Policy::evaluate_owned`] on a request handed over) on settings from
/// [`Policy::check`]. The waPC glue, the benchmarks, the fuzz targets and the tests all go
/// through it.
pub trait Policy {
    /// The module's name (`gpu-labels-policy`).
    const NAME: &'static str;
    /// The host operations the module may call (a set of the constants above): the ones
    /// its `metadata.yml` declares in `hostCapabilities`.
    const HOST_CALLS: u8;
    /// The settings as the host sends them.
    type Settings: DeserializeOwned + Common + ValidateSettings;
    /// The settings checked, in the form the rules take: what the settings cache keeps.
    type Checked: CheckedForm<Self::Settings>;
    /// The rules its `exceptions` may name; the default [`Policy::excuse`] excuses denials
    /// of the first. None by default.
    const RULE_NAMES: &'static [&'static str] = &[];

    /// The settings checked (the first field found wrong, as `validate_settings` says it),
    /// in their checked form ([`CheckedForm::check`]).
    fn check(settings: Box<Self::Settings>) -> Result<Box<Self::Checked>, FieldError> {
        Self::Checked::check(settings)
    }

    /// The checked form of the settings a host sends with a request
    /// ([`CheckedForm::prepare`]). Hosts send only settings `validate_settings` accepted
    /// (kwctl and policy-server refuse the others when they load the policy), and
    /// policy-server answers each request on a fresh instance, which reads its settings
    /// again: a policy builds the same form without the checks no request depends on
    /// (routing: the overlap of its pools; VRAM fit: every `models` entry, which a request
    /// reads when it names one; the capacity gate and the autoscaler policy: every check,
    /// their pools' forms and the gate's team budgets are read; labels, whose rules take the
    /// settings as read: every check). Settings that cannot be put in that form (a schedule
    /// that does not read) are refused before the rules run.
    fn prepare(settings: Box<Self::Settings>) -> Result<Box<Self::Checked>, FieldError> {
        Self::Checked::prepare(settings)
    }

    /// The settings as read, from their checked form.
    fn settings(checked: &Self::Checked) -> &Self::Settings {
        Holds::<Self::Settings>::settings(checked)
    }

    /// Whether the policy judges `request` at all; every other request is accepted
    /// unchanged. Every policy judges CREATE and UPDATE.
    fn judges(request: &AdmissionRequest) -> bool {
        request.creates_or_updates()
    }

    /// The policy's rules, for a request it judges in a namespace it does not exempt.
    fn decide(a: Admission<'_, Self::Checked>) -> Verdict;

    /// `verdict` with the denials the policy's exceptions excuse: by default, a denial
    /// without a code, as one of the first of [`Policy::RULE_NAMES`], for a workload one of
    /// the settings' exceptions covers ([`crate::exceptions::excuse`]).
    fn excuse(verdict: Verdict, a: Admission<'_, Self::Checked>) -> Verdict {
        match (
            Self::settings(a.settings).exceptions(),
            Self::RULE_NAMES.first(),
        ) {
            (Some(settings), Some(rule)) => crate::exceptions::excuse(
                verdict,
                settings,
                Self::RULE_NAMES,
                rule,
                a.request,
                a.clock,
            ),
            _ => verdict,
        }
    }

    /// The opening every policy shares: the verdict on a request it does not judge or from
    /// a namespace it exempts; `None` for a request [`Policy::decide`] decides.
    fn opening(request: &AdmissionRequest, settings: &Self::Checked) -> Option<Verdict> {
        if !Self::judges(request) {
            return Some(Verdict::accept());
        }
        let namespace = request_namespace(request);
        if Self::settings(settings)
            .exempt_namespaces()
            .contains(namespace)
        {
            return Some(Verdict::accept().with_audit(
                AUDIT_EXEMPT,
                format!("namespace {namespace} is in exemptNamespaces: not checked"),
            ));
        }
        None
    }

    /// Decides one admission request at the time `clock` tells: [`Policy::opening`], then
    /// [`Policy::decide`] and [`Policy::excuse`].
    fn evaluate_at(
        request: &AdmissionRequest,
        settings: &Self::Checked,
        cluster: &dyn Cluster,
        clock: &dyn Clock,
    ) -> Verdict {
        Self::opening(request, settings).unwrap_or_else(|| {
            let a = Admission {
                request,
                settings,
                cluster,
                clock,
            };
            Self::excuse(Self::decide(a), a)
        })
    }

    /// [`Policy::evaluate_at`] at the host's time.
    fn evaluate(
        request: &AdmissionRequest,
        settings: &Self::Checked,
        cluster: &dyn Cluster,
    ) -> Verdict {
        Self::evaluate_at(request, settings, cluster, &SystemClock)
    }

    /// [`Policy::evaluate`] of a request the caller hands over (the waPC glue): the same
    /// verdict. A policy that changes objects moves the request's object into its answer
    /// instead of copying it.
    fn evaluate_owned(
        request: AdmissionRequest,
        settings: &Self::Checked,
        cluster: &dyn Cluster,
    ) -> Verdict {
        let verdict = Self::evaluate(&request, settings, cluster);
        crate::arena::release(request);
        verdict
    }
}

/// `settings` checked by policy `P`, for the unit tests' settings built in code: they are
/// valid, or the test fails naming the field.
#[cfg(test)]
pub(crate) fn checked<P: Policy>(settings: &P::Settings) -> Box<P::Checked>
where
    P::Settings: Clone,
{
    P::check(Box::new(settings.clone())).unwrap_or_else(|e| panic!("invalid settings: {e}"))
}
