//! `burstBrakes`: at most `gpus` GPUs of each resource newly admitted per namespace, and
//! per team, within a sliding window of `per`, in each pool (judged by
//! [`crate::capacity::brake`]).
//!
//! ```yaml
//! burstBrakes:
//!   perNamespace: {gpus: 32, per: 10m}
//!   perTeam: {gpus: 64, per: 10m}
//! ```

use crate::pools::{Pool, Usage};
use crate::settings::{FieldError, WindowRule};
use serde::{Deserialize, Serialize};

/// The longest window a brake may look back over (a day).
pub const MAX_WINDOW_SECONDS: i64 = 86_400;

/// The burst brakes of the gate; either may be left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct BurstBrakes {
    /// Per namespace of the workload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_namespace: Option<Brake>,
    /// Per team (the Namespace label `teamLabelKey`; pods by the team label
    /// gpu-pool-routing-policy stamps), across the team's namespaces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_team: Option<Brake>,
}

/// At most `gpus` GPUs of each resource admitted within `per`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Brake {
    pub gpus: u64,
    /// The window: `10m`, `90s`, `1h`.
    pub per: String,
}

impl WindowRule for Brake {
    fn amount_and_window(&self) -> (u64, &str) {
        (self.gpus, &self.per)
    }
}

impl Brake {
    fn validate(&self, field: &str) -> Result<(), FieldError> {
        if self.gpus == 0 {
            return Err(FieldError::new(
                format!("{field}.gpus"),
                "give the most GPUs admitted within the window, at least 1, e.g. 32",
            ));
        }
        self.check_window(
            format!("{field}.per"),
            "window",
            MAX_WINDOW_SECONDS,
            "10m or 1h30m",
        )
    }
}

impl BurstBrakes {
    /// The namespace brake, if set.
    pub fn namespace(&self) -> Option<&Brake> {
        self.per_namespace.as_ref().filter(|b| b.is_set())
    }

    /// The team brake, if set.
    pub fn team(&self) -> Option<&Brake> {
        self.per_team.as_ref().filter(|b| b.is_set())
    }

    /// True when some brake is set.
    pub fn any(&self) -> bool {
        self.namespace().is_some() || self.team().is_some()
    }

    /// Each brake's count and window, naming the field (`burstBrakes.perNamespace.per`).
    pub fn validate(&self) -> Result<(), FieldError> {
        if let Some(b) = self.namespace() {
            b.validate("burstBrakes.perNamespace")?;
        }
        if let Some(b) = self.team() {
            b.validate("burstBrakes.perTeam")?;
        }
        Ok(())
    }
}

/// `burstBrakes` and `pools[].sustained`: each brake's count and window, the team brake's
/// `teamLabelKey`, and the pools whose pods the rules read (`pools`: index, pool, where
/// its GPUs in use come from), which must count them from Pods.
pub fn validate<'a>(
    brakes: Option<&BurstBrakes>,
    team_label_key: &str,
    pools: impl Iterator<Item = (usize, &'a Pool, Usage)>,
) -> Result<(), FieldError> {
    let brakes = brakes.filter(|b| b.any());
    if let Some(b) = brakes {
        b.validate()?;
        if b.team().is_some() && team_label_key.is_empty() {
            return Err(FieldError::new(
                "burstBrakes.perTeam",
                "a team brake finds the team of a namespace by its label teamLabelKey; set teamLabelKey",
            ));
        }
    }
    for (i, pool, usage) in pools {
        let sustained = pool.sustained.as_ref().filter(|s| s.is_set());
        let field = match (brakes, sustained) {
            (_, Some(s)) => {
                let field = format!("pools[{i}].sustained");
                s.validate(&field)?;
                field
            }
            (Some(_), None) => "burstBrakes".to_string(),
            (None, None) => continue,
        };
        if usage != Usage::Pods {
            return Err(FieldError::new(
                field,
                format!(
                    "pools[{i}] ({}) counts its GPUs in use from ResourceQuotas (usage: quotas), which do not say when pods were created; this rule reads the pool's Pods: set the pool's usage to pods",
                    pool.name
                ),
            ));
        }
    }
    Ok(())
}
