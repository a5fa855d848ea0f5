//! The capacity gate's settings checked: the pool set as [`crate::pools`] checks it for
//! every policy (with the gate's `usage` default and its schedules), the gate's own fields,
//! the fields every policy shares, exceptions, and team budgets ([`super::teams`]).

use super::settings::{BUILTIN_SUSPENDABLE, RULE_NAMES, Settings};
use crate::pools::PoolChecks;
use crate::settings::{
    Action, FieldError, UnreadableCluster, ValidateSettings, validate_label_key,
    validate_object_name,
};

impl ValidateSettings for Settings {
    fn validate(&self) -> Result<(), FieldError> {
        if self.pools.is_empty() {
            return Err(FieldError::new(
                "pools",
                "define at least one pool, e.g. {name: a100, nodeSelector: {matchLabels: {gpu-admission/pool: a100}}}; without pools the gate has nothing to measure",
            ));
        }
        let schedules = crate::schedule::check_all(&self.schedules, "schedules")?;
        self.pool_set().check(&PoolChecks {
            names: self.gpu_resources(),
            default_usage: Some(self.usage),
            schedules: Some(&schedules),
        })?;
        super::queue::validate(self)?;
        let warn_or_deny = [Action::Warn, Action::Deny];
        self.fragmentation
            .check_one_of("fragmentation", &warn_or_deny)?;
        if let Some(action) = self.unreadable_namespace_quotas {
            action.check_one_of("unreadableNamespaceQuotas", &warn_or_deny)?;
        }
        UnreadableCluster::of(self.unreadable_cluster, self.fail_open).check()?;
        if !self.queue_label_key.is_empty() {
            validate_label_key("queueLabelKey", &self.queue_label_key)?;
        }
        for (i, k) in self.suspendable_kinds.iter().enumerate() {
            let field = format!("suspendableKinds[{i}]");
            if k.group.trim().is_empty() {
                return Err(FieldError::new(
                    format!("{field}.group"),
                    "must name the API group, e.g. kubeflow.org",
                ));
            }
            if k.kind.trim().is_empty() {
                return Err(FieldError::new(
                    format!("{field}.kind"),
                    "must not be empty",
                ));
            }
            if k.path.is_empty() || k.path.split('.').any(|s| s.is_empty()) {
                return Err(FieldError::new(
                    format!("{field}.path"),
                    format!("'{}' must be a dot path like spec.suspend", k.path),
                ));
            }
            if BUILTIN_SUSPENDABLE
                .iter()
                .any(|(g, kind, _)| *g == k.group && *kind == k.kind)
            {
                return Err(FieldError::new(
                    field,
                    format!(
                        "{}/{} is built in (its suspend field is known); remove it",
                        k.group, k.kind
                    ),
                ));
            }
        }
        self.validate_shared()?;
        crate::exceptions::HasExceptions::validate_exceptions(self, &RULE_NAMES)?;
        for (i, class) in self.exempt_priority_classes.iter().enumerate() {
            validate_object_name(
                &format!("exemptPriorityClasses[{i}]"),
                class,
                "PriorityClass",
            )?;
        }
        super::teams::validate_settings(self)
    }
}
