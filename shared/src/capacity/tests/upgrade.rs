//! Defaults safe to upgrade into ([`crate::capacity::upgrade`]): the namespace-quota
//! check, on by default, warns while its grant is missing and fails closed when switched
//! on explicitly or when the failure is not a missing grant.

use super::*;
use crate::capacity::queries::namespace_quota_query;
use crate::settings::Action;

const NOT_GRANTED: &str = "Policy has not been granted access to Kubernetes v1/ResourceQuota resources. The violation has been reported.";
const FORBIDDEN: &str = "resourcequotas is forbidden: User \"system:serviceaccount:kubewarden:policy-server-default\" cannot list resource \"resourcequotas\" in API group \"\" in the namespace \"ml\"";
const REFUSED: &str =
    "error trying to connect: tcp connect error: Connection refused (os error 111)";

/// The capacity gate as a previous release's settings leave it: `checkNamespaceQuotas`
/// and `unreadableNamespaceQuotas` not written.
fn upgraded() -> Settings {
    Settings {
        check_namespace_quotas: None,
        unreadable_namespace_quotas: None,
        ..settings()
    }
}

fn quotas_fail(error: &str) -> Script {
    Script::new(vec![(namespace_quota_query("ml"), Err(error.into()))])
}

fn one_gpu() -> AdmissionRequest {
    create(deployment(1, None, "1"))
}

#[test]
fn defaults_leave_the_check_on_and_unwritten() {
    let s = Settings::default();
    assert!(s.checks_namespace_quotas());
    let written = serde_json::to_value(&s).unwrap();
    assert!(written.get("checkNamespaceQuotas").is_none(), "{written}");
    assert!(
        written.get("unreadableNamespaceQuotas").is_none(),
        "{written}"
    );
    let off: Settings = serde_json::from_value(json!({"checkNamespaceQuotas": false})).unwrap();
    assert!(!off.checks_namespace_quotas());
}

#[rstest]
#[case::not_in_context_aware_resources(
    NOT_GRANTED,
    "add {apiVersion: v1, kind: ResourceQuota} to the ClusterAdmissionPolicy's contextAwareResources"
)]
#[case::forbidden_by_rbac(
    FORBIDDEN,
    "forbidden by RBAC: grant the policy-server's ServiceAccount list and watch on resourcequotas"
)]
fn on_by_default_a_missing_grant_warns_naming_it(#[case] error: &str, #[case] grant: &str) {
    let v = run(&one_gpu(), &upgraded(), &quotas_fail(error));
    assert!(v.allowed, "{v:?}");
    assert_eq!(v.warnings.len(), 1, "{v:?}");
    let w = &v.warnings[0];
    assert!(
        w.starts_with(
            "namespace ml: its ResourceQuotas were not checked: cannot list v1/ResourceQuota: "
        ),
        "{w}"
    );
    assert!(w.contains(grant), "{w}");
    assert!(
        w.ends_with("(checkNamespaceQuotas is on by default and only warns until it is granted; set checkNamespaceQuotas: true to deny instead, or false to skip the check; Kubernetes still enforces the quotas when the pods are created)"),
        "{w}"
    );
    assert_eq!(v.audit_annotations["host-error"], error);
    assert_eq!(v.audit_annotations["quota"], "namespace ml: not checked");
}

#[rstest]
#[case::not_granted(NOT_GRANTED)]
#[case::forbidden(FORBIDDEN)]
fn switched_on_explicitly_a_missing_grant_fails_closed(#[case] error: &str) {
    let s = Settings {
        check_namespace_quotas: Some(true),
        ..upgraded()
    };
    denies_starting(
        &run(&one_gpu(), &s, &quotas_fail(error)),
        "namespace ml: its ResourceQuotas: cannot list v1/ResourceQuota",
    );
}

#[test]
fn on_by_default_other_failures_fail_closed() {
    let v = run(&one_gpu(), &upgraded(), &quotas_fail(REFUSED));
    assert!(!v.allowed, "{v:?}");
    assert_eq!(v.audit_annotations["host-error"], REFUSED);
}

#[rstest]
#[case::deny_written(Some(Action::Deny), NOT_GRANTED, false)]
#[case::warn_written(Some(Action::Warn), REFUSED, true)]
fn a_written_unreadable_namespace_quotas_decides_every_failure(
    #[case] action: Option<Action>,
    #[case] error: &str,
    #[case] allowed: bool,
) {
    let s = Settings {
        unreadable_namespace_quotas: action,
        ..upgraded()
    };
    let v = run(&one_gpu(), &s, &quotas_fail(error));
    assert_eq!(v.allowed, allowed, "{v:?}");
}
