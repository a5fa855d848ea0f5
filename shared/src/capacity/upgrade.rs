//! Defaults safe to upgrade into, for the namespace-quota check: it is on by default and
//! needs a grant the previous release did not need (`list`/`watch` on `resourcequotas`,
//! and `{apiVersion: v1, kind: ResourceQuota}` in the policy's contextAwareResources).
//!
//! - **On by default** (`checkNamespaceQuotas` left out): a missing grant (the policy's
//!   contextAwareResources lack the kind, or RBAC forbids the list) is reported, not
//!   enforced: the workload is accepted with a warning naming what to grant and the
//!   `quota` and `host-error` audit annotations. Kubernetes enforces the quotas on the
//!   pods anyway, so the check brings earlier feedback, not a new boundary.
//! - **On explicitly** (`checkNamespaceQuotas: true`): a missing grant fails closed like
//!   every host error of the gate (`unreadableCluster` applies).
//! - Any other failure (API server unreachable, timed out, an unreadable answer) is no
//!   upgrade matter: it fails closed either way.
//! - `unreadableNamespaceQuotas`, when written, decides every failure.

use super::settings::Settings;
use crate::cluster::{FailureClass, HostFailure};
use crate::settings::Action;

impl Settings {
    /// True when the namespace's ResourceQuotas are checked (the default).
    pub fn checks_namespace_quotas(&self) -> bool {
        self.check_namespace_quotas.unwrap_or(true)
    }

    /// What to do when the namespace's ResourceQuotas could not be read.
    pub fn on_unreadable_namespace_quotas(&self, failure: &HostFailure) -> Action {
        if let Some(action) = self.unreadable_namespace_quotas {
            return action;
        }
        if self.check_namespace_quotas.is_none() && is_missing_grant(failure) {
            Action::Warn
        } else {
            Action::Deny
        }
    }
}

/// The warning of a check on by default whose grant is missing: what was not checked,
/// what to grant, and how to choose.
pub fn not_granted_warning(context: &str, failure: &HostFailure) -> String {
    format!(
        "{context} were not checked: {} (checkNamespaceQuotas is on by default and only warns until it is granted; set checkNamespaceQuotas: true to deny instead, or false to skip the check; Kubernetes still enforces the quotas when the pods are created)",
        failure.explanation()
    )
}

/// True when the host refused the call for want of a grant: the policy's
/// contextAwareResources do not list the kind ([`FailureClass::NotGranted`]), or RBAC
/// forbids the policy-server's ServiceAccount ([`FailureClass::Forbidden`]).
pub fn is_missing_grant(failure: &HostFailure) -> bool {
    matches!(
        failure.class(),
        FailureClass::NotGranted | FailureClass::Forbidden
    )
}
