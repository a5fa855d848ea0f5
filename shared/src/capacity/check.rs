//! The capacity gate's settings checked: the pool set as [`crate::pools`] checks it for
//! every policy (with the gate's `usage` default and its schedules), the gate's own fields,
//! the fields every policy shares, exceptions, and team budgets ([`super::teams`]); and
//! [`Checked`], the form its rules take.

use super::settings::{BUILTIN_SUSPENDABLE, RULE_NAMES, Settings};
use super::teams::{TeamBudget, parse_budgets};
use crate::pools::checked::{forms_with_thresholds, named_schedules};
use crate::pools::{CheckedPool, PoolChecks, PoolForm};
use crate::settings::{
    Action, CheckedForm, FieldError, UnreadableCluster, ValidateSettings, validate_group_kind,
    validate_label_key, validate_object_name,
};

/// The gate's settings in the form its rules take: the settings as written (through
/// `Deref`), each pool's [`PoolForm`] (declared GPUs and settings ceilings as counts, the
/// node selector as a query, thresholds with their windows' schedules read) and the
/// `teamBudgets` read. A request parses none of them again.
#[derive(Debug, Clone)]
pub struct Checked {
    settings: Box<Settings>,
    /// One form per pool, in the order of `pools`.
    forms: Vec<PoolForm>,
    /// `teamBudgets`, read: (team, budget).
    pub budgets: Vec<(String, TeamBudget)>,
}

impl CheckedForm<Settings> for Checked {
    /// The form the rules take, without the checks no request depends on: the schedules
    /// the pools' thresholds name and the team budgets are read, and refused when they do
    /// not read.
    fn prepare(settings: Box<Settings>) -> Result<Box<Checked>, FieldError> {
        let schedules = named_schedules(&settings.pools, &settings.schedules)?;
        let forms = forms_with_thresholds(&settings.pools, &schedules);
        let budgets = parse_budgets("teamBudgets", &settings.team_budgets)?;
        Ok(Box::new(Checked {
            settings,
            forms,
            budgets,
        }))
    }
}

impl Checked {
    /// The `i`th pool, in the form the rules take.
    pub fn pool(&self, i: usize) -> Option<CheckedPool<'_>> {
        CheckedPool::at(&self.settings.pools, &self.forms, i)
    }

    /// The pool named `name`, with its index.
    pub fn pool_named(&self, name: &str) -> Option<(usize, CheckedPool<'_>)> {
        let (i, _) = self.settings.pool_named(name)?;
        Some((i, self.pool(i)?))
    }
}

crate::settings::holds_settings!(Checked => Settings);

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
        super::reserve::validate(self, &schedules)?;
        super::settings::brakes::validate(
            self.burst_brakes.as_ref(),
            &self.team_label_key,
            self.pools
                .iter()
                .enumerate()
                .map(|(i, p)| (i, p, self.usage_of(p))),
        )?;
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
            validate_group_kind(&field, &k.group, &k.kind, "kubeflow.org")?;
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
