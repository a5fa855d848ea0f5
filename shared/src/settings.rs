//! The settings vocabulary every policy speaks, with validation that names the field it
//! found wrong.
//!
//! | what | type | spelling |
//! |---|---|---|
//! | an error | [`FieldError`] | `<path>: <reason>` (`pools[1].nodeSelector: ...`) |
//! | a wildcard | [`wildcard`] | `*` any characters, `?` one; names and resources: a trailing `*` only |
//! | what to do about a case | [`Action`] | `deny`, `warn`, `allow` |
//! | the pool label | `poolLabelKey` | default [`DEFAULT_POOL_LABEL_KEY`] |
//! | a pool's nodes | [`read_node_selector`] | a label selector (`matchLabels`, `matchExpressions`); a map of labels reads as `matchLabels` |
//! | a reference to a pool | [`check_pool_ref`] | the pool's `name` |
//! | an amount within a window of time | [`WindowRule`] | `{gpus: 32, per: 10m}` |
//!
//! The fields every policy shares (`extraGpuResources`, `customKinds`, `exemptNamespaces`,
//! `dra`, `fractionalGpus`, and `exceptions` where the policy takes them) are declared once
//! by `policy_settings!` and checked once by the `validate_shared` it gives: serde's
//! `deny_unknown_fields` (which every policy uses, so that a typo cannot silently turn a
//! rule off) does not combine with `flatten`, so they cannot be a nested struct.

mod action;
mod error;
mod node_selector;
mod shared;
pub mod wildcard;
mod window;

pub use action::{Action, UnreadableCluster};
pub use error::FieldError;
#[cfg(feature = "kubewarden")]
pub(crate) use error::path_of;
pub use node_selector::{check_labels_only, read_node_selector};
pub(crate) use shared::policy_settings;
pub use shared::{check_pool_ref, check_unique_pool_name, check_window_ref};
pub use window::WindowRule;

/// What every policy reads of its settings before its rules: given by `policy_settings!`.
pub trait Common {
    /// The namespaces whose requests the policy lets through unchecked.
    fn exempt_namespaces(&self) -> &NamespaceList;

    /// The settings' exceptions (and the custom kinds a workload's labels are read with);
    /// `None` for settings without `exceptions`.
    fn exceptions(&self) -> Option<&dyn crate::exceptions::HasExceptions> {
        None
    }
}

/// A policy's settings in the form its rules take (schedules, windows, percentages,
/// selectors as typed values), built once from the settings as read, `S`
/// ([`crate::policy::Policy::Checked`]).
pub trait CheckedForm<S: ValidateSettings>: Holds<S> + Sized {
    /// The settings checked (the first field found wrong, as `validate_settings` says it),
    /// in their checked form: by default [`ValidateSettings::validate`], then
    /// [`CheckedForm::prepare`]. Boxed: settings are large, and a policy module's frames are
    /// kept small (each stack page of a fresh instance costs a page fault).
    fn check(settings: Box<S>) -> Result<Box<Self>, FieldError> {
        settings.validate()?;
        Self::prepare(settings)
    }

    /// The checked form without the checks no request depends on (see
    /// [`crate::policy::Policy::prepare`]).
    fn prepare(settings: Box<S>) -> Result<Box<Self>, FieldError>;
}

/// What holds a policy's settings as read: its checked form, or the settings themselves
/// (a policy whose rules take them as read).
pub trait Holds<S> {
    fn settings(&self) -> &S;
}

impl<S> Holds<S> for S {
    fn settings(&self) -> &S {
        self
    }
}

/// [`Holds`] and `Deref` to the settings as read for a checked form that keeps them in its
/// field `settings`.
macro_rules! holds_settings {
    ($checked:ty => $settings:ty) => {
        impl $crate::settings::Holds<$settings> for $checked {
            fn settings(&self) -> &$settings {
                &self.settings
            }
        }

        impl std::ops::Deref for $checked {
            type Target = $settings;
            fn deref(&self) -> &$settings {
                &self.settings
            }
        }
    };
}
pub(crate) use holds_settings;

/// Settings that can check themselves: the first field found wrong, as a [`FieldError`]
/// rendered `<path>: <reason>` (the message `validate_settings` returns).
pub trait ValidateSettings {
    fn validate(&self) -> Result<(), FieldError>;
}

pub use crate::workload::CustomKind;
use serde::{Deserialize, Serialize};

/// Checks `extraGpuResources`-style lists: each entry a Kubernetes resource name with a
/// domain prefix (`example.com/tpu`), optionally ending in `*`.
pub fn validate_resource_names(field: &str, names: &[String]) -> Result<(), FieldError> {
    for (i, name) in names.iter().enumerate() {
        let (bare, prefix) = wildcard::prefix_of(name);
        let valid = match bare.split_once('/') {
            Some((domain, rest)) => {
                is_dns_subdomain(domain)
                    && rest.len() <= 63
                    && (rest.is_empty() && prefix
                        || !rest.is_empty()
                            && rest
                                .chars()
                                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)))
            }
            None => false,
        };
        if !valid {
            return Err(FieldError::new(
                format!("{field}[{i}]"),
                format!(
                    "'{name}' is not a resource name like example.com/gpu (a trailing * matches a prefix)"
                ),
            ));
        }
    }
    Ok(())
}

/// Checks a list of custom kinds; errors name `field[i]....`. Two entries for the same
/// group and kind are an error (which one would apply?).
pub fn validate_custom_kinds(field: &str, kinds: &[CustomKind]) -> Result<(), FieldError> {
    for (i, k) in kinds.iter().enumerate() {
        // Checked under an empty path, whose errors then get the entry's path: a policy
        // instance checks its settings on its first request, and most entries are fine.
        k.validate("")
            .map_err(|e| FieldError::new(format!("{field}[{i}]{}", e.path), e.reason))?;
        if kinds[..i]
            .iter()
            .any(|o| o.group == k.group && o.kind == k.kind)
        {
            return Err(FieldError::new(
                format!("{field}[{i}]"),
                format!("{}/{} is listed twice", k.group, k.kind),
            ));
        }
    }
    Ok(())
}

/// The pod template label that names a workload's pool: routing sets it, the capacity gate,
/// VRAM fit and the autoscaler policy read it (each policy's `poolLabelKey` defaults to it).
pub const DEFAULT_POOL_LABEL_KEY: &str = "gpu-admission/pool";

/// The pod template label that names a workload's team: routing stamps it from the
/// namespace's team label (users cannot set a namespace label, they can set a pod label),
/// the capacity gate counts a team's GPUs in use by listing the pods that carry it.
pub const TEAM_POD_LABEL_KEY: &str = "gpu-admission/team";

/// Namespace names, exact or a prefix ending in `*` (`kube-*`): the [`wildcard`] dialect.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NamespaceList(pub Vec<String>);

impl NamespaceList {
    /// True when `namespace` is in the list.
    pub fn contains(&self, namespace: &str) -> bool {
        self.0.iter().any(|p| wildcard::matches(p, namespace))
    }

    /// Each entry must be a namespace name (DNS label), optionally ending in `*`.
    pub fn validate(&self, field: &str) -> Result<(), FieldError> {
        for (i, ns) in self.0.iter().enumerate() {
            let (bare, prefix) = wildcard::prefix_of(ns);
            if !is_dns_label_prefix(bare, prefix) {
                return Err(FieldError::new(
                    format!("{field}[{i}]"),
                    format!(
                        "'{ns}' is not a namespace name (lowercase letters, digits and '-', optionally ending in *; a lone * would exempt everything)"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// A label key: optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters of alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric.
pub fn validate_label_key(field: &str, key: &str) -> Result<(), FieldError> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(is_dns_subdomain);
    if !prefix_ok || !is_label_name(name) {
        return Err(FieldError::new(
            field,
            format!(
                "'{key}' is not a valid label key (e.g. team or example.com/team; at most 63 characters of letters, digits, '-', '_', '.')"
            ),
        ));
    }
    Ok(())
}

/// A label value: empty, or at most 63 characters of alphanumerics, `-`, `_`, `.`,
/// starting and ending alphanumeric.
pub fn validate_label_value(field: &str, value: &str) -> Result<(), FieldError> {
    if value.is_empty() || is_label_name(value) {
        Ok(())
    } else {
        Err(FieldError::new(
            field,
            format!(
                "'{value}' is not a valid label value (at most 63 characters of letters, digits, '-', '_', '.', starting and ending with a letter or digit)"
            ),
        ))
    }
}

/// A kind named by API group and kind (an entry of `customKinds` or `suspendableKinds`,
/// `field`): both given; the error offers `example` as a group (`kubeflow.org`).
pub fn validate_group_kind(
    field: &str,
    group: &str,
    kind: &str,
    example: &str,
) -> Result<(), FieldError> {
    if group.trim().is_empty() {
        return Err(FieldError::new(
            format!("{field}.group"),
            format!("must name the API group, e.g. {example}"),
        ));
    }
    if kind.trim().is_empty() {
        return Err(FieldError::new(
            format!("{field}.kind"),
            "must not be empty",
        ));
    }
    Ok(())
}

/// A Kubernetes object name (DNS subdomain), such as a PriorityClass or a NodePool;
/// `what` names the kind in the message.
pub fn validate_object_name(field: &str, name: &str, what: &str) -> Result<(), FieldError> {
    if is_dns_subdomain(name) {
        Ok(())
    } else {
        Err(FieldError::new(
            field,
            format!("'{name}' is not a {what} name (lowercase letters, digits, '-' and '.')"),
        ))
    }
}

/// A ConfigMap named by `namespace`, `name` and optionally a data `key` (at `field`, e.g.
/// `teamBudgetsConfigMap`): a namespace name, a ConfigMap name, and a key of letters,
/// digits, `-`, `_` and `.` (an empty key is none).
pub fn validate_config_map_ref(
    field: &str,
    namespace: &str,
    name: &str,
    key: Option<&str>,
) -> Result<(), FieldError> {
    if !is_dns_label(namespace) {
        return Err(FieldError::new(
            format!("{field}.namespace"),
            format!("'{namespace}' is not a namespace name"),
        ));
    }
    validate_object_name(&format!("{field}.name"), name, "ConfigMap")?;
    if let Some(key) = key.filter(|k| !k.is_empty()) {
        let ok = key.len() <= 253
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b));
        if !ok {
            return Err(FieldError::new(
                format!("{field}.key"),
                format!("'{key}' is not a ConfigMap data key (letters, digits, '-', '_' and '.')"),
            ));
        }
    }
    Ok(())
}

fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
}

fn is_dns_label_prefix(s: &str, prefix: bool) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b.first()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && (prefix
            || b.last()
                .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit()))
}

/// An RFC 1123 DNS label (a namespace name): at most 63 lowercase letters, digits and `-`,
/// starting and ending with a letter or digit.
pub fn is_dns_label(s: &str) -> bool {
    is_dns_label_prefix(s, false)
}

/// An RFC 1123 DNS subdomain (most object names): DNS labels joined by `.`, at most 253
/// characters.
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::exact("example.com/tpu")]
    #[case::prefix("amd.com/cpx_*")]
    #[case::domain_prefix("habana.ai/*")]
    #[case::dots("nvidia.com/gpu.shared")]
    fn good_resource_names(#[case] name: &str) {
        validate_resource_names("extraGpuResources", &[name.to_string()]).unwrap();
    }

    #[rstest]
    #[case::no_domain("gpu")]
    #[case::empty("")]
    #[case::star("*")]
    #[case::upper_domain("Example.com/gpu")]
    #[case::space("example.com/g pu")]
    #[case::empty_name("example.com/")]
    fn bad_resource_names_name_the_index(#[case] name: &str) {
        let err =
            validate_resource_names("extraGpuResources", &["ok.io/a".into(), name.to_string()])
                .unwrap_err();
        assert_eq!(err.path, "extraGpuResources[1]", "{err}");
    }

    #[test]
    fn namespaces_exact_and_prefix() {
        let list = NamespaceList(vec!["kube-system".into(), "gpu-ops-*".into()]);
        list.validate("exemptNamespaces").unwrap();
        assert!(list.contains("kube-system"));
        assert!(list.contains("gpu-ops-team1"));
        assert!(!list.contains("kube-public"));
        assert!(!list.contains("gpu-ops"));
    }

    #[rstest]
    #[case::lone_star("*")]
    #[case::upper("Kube")]
    #[case::underscore("a_b")]
    #[case::empty("")]
    #[case::trailing_dash("ns-")]
    fn bad_namespaces(#[case] ns: &str) {
        let err = NamespaceList(vec![ns.into()])
            .validate("exemptNamespaces")
            .unwrap_err();
        assert_eq!(err.path, "exemptNamespaces[0]", "{err}");
    }

    #[rstest]
    #[case::plain("team", true)]
    #[case::prefixed("example.com/team", true)]
    #[case::kubernetes("app.kubernetes.io/name", true)]
    #[case::empty("", false)]
    #[case::too_long(&"a".repeat(64), false)]
    #[case::bad_prefix("Example_com/x", false)]
    #[case::bad_start("-team", false)]
    #[case::space("te am", false)]
    fn label_keys(#[case] key: &str, #[case] ok: bool) {
        let r = validate_label_key("requiredLabels[0].key", key);
        assert_eq!(r.is_ok(), ok, "{r:?}");
        if let Err(e) = r {
            assert_eq!(e.path, "requiredLabels[0].key", "{e}");
        }
    }

    #[rstest]
    #[case::empty("", true)]
    #[case::plain("batch", true)]
    #[case::dots("v1.2_x-y", true)]
    #[case::slash("a/b", false)]
    #[case::too_long(&"a".repeat(64), false)]
    #[case::ends_dash("a-", false)]
    fn label_values(#[case] value: &str, #[case] ok: bool) {
        assert_eq!(validate_label_value("f", value).is_ok(), ok);
    }

    #[test]
    fn duplicate_custom_kinds_are_rejected() {
        let k = crate::workload::presets::ray_cluster();
        let err = validate_custom_kinds("customKinds", &[k.clone(), k]).unwrap_err();
        assert_eq!(err.path, "customKinds[1]", "{err}");
        validate_custom_kinds("customKinds", &crate::workload::presets::all()).unwrap();
    }

    #[test]
    fn custom_kind_errors_carry_the_entry_path() {
        let read = |v: serde_json::Value| -> crate::workload::CustomKind {
            serde_json::from_value(v).unwrap()
        };
        let ray = crate::workload::presets::ray_cluster();
        let cases = [
            (
                read(serde_json::json!({"group": "apps", "kind": "Deployment"})),
                "customKinds[1]",
            ),
            (
                read(serde_json::json!({"group": "x.io", "kind": ""})),
                "customKinds[1].kind",
            ),
            (
                read(serde_json::json!({"group": "x.io", "kind": "X",
                    "templates": [{"path": "spec", "podSpec": "template.spec", "metadata": "template.metadata"}]})),
                "customKinds[1].templates[0].path",
            ),
        ];
        for (kind, path) in cases {
            let err = validate_custom_kinds("customKinds", &[ray.clone(), kind]).unwrap_err();
            assert_eq!(err.path, path, "{err}");
        }
    }

    #[test]
    fn group_kind_and_config_map_references_name_the_field() {
        validate_group_kind("k", "kubeflow.org", "PyTorchJob", "kubeflow.org").unwrap();
        for (group, kind, error) in [
            (
                " ",
                "X",
                "k.group: must name the API group, e.g. kubeflow.org",
            ),
            ("x.io", "", "k.kind: must not be empty"),
        ] {
            let err = validate_group_kind("k", group, kind, "kubeflow.org").unwrap_err();
            assert_eq!(err.to_string(), error);
        }
        validate_config_map_ref("c", "gpu-system", "budgets", None).unwrap();
        validate_config_map_ref("c", "gpu-system", "budgets", Some("")).unwrap();
        for (namespace, name, key, error) in [
            (
                "Gpu",
                "b",
                None,
                "c.namespace: 'Gpu' is not a namespace name",
            ),
            (
                "gpu",
                "B_",
                None,
                "c.name: 'B_' is not a ConfigMap name (lowercase letters, digits, '-' and '.')",
            ),
            (
                "gpu",
                "b",
                Some("a/b"),
                "c.key: 'a/b' is not a ConfigMap data key (letters, digits, '-', '_' and '.')",
            ),
        ] {
            let err = validate_config_map_ref("c", namespace, name, key).unwrap_err();
            assert_eq!(err.to_string(), error);
        }
    }
}
