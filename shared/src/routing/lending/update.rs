//! Lending judged on the change. A template joins a lending pool when the window is open
//! now; outside the window it may only stay where it already is. An UPDATE keeps a lent
//! template on the lending pool only when the old object was already there (the same pool
//! label) and no pod template changed ([`Stay::Keep`]); an object a controller creates
//! from a lent template (the Pod of a ReplicaSet, the Job of a CronJob) keeps it too.
//! Anything else that names the lending pool outside its window is denied with the reason
//! ([`refusal`]): a workload moved onto the lending pool, or a lent workload whose
//! template changes (a rollout at noon would start new pods on the lender's nodes).

use super::super::conflicts::Conflict;
use super::super::settings::{Pool, Settings};
use crate::admission::AdmissionRequest;
use crate::clock::{UnixSeconds, rfc3339};
use crate::workload::{At, PodTemplate, Workload, pointer_to_location, value_at};
use serde_json::Value;

/// Whether the request's templates may keep a lending pool their pool label names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stay {
    /// They may: an UPDATE that changes no pod template and no pool label, or an object
    /// created by a controller (its template was lent when the controller's object was).
    Keep,
    /// A CREATE by no controller: only an open window lends.
    New,
    /// An UPDATE whose old object was elsewhere: its pool label, in some template, was not
    /// the new one (or the old object cannot be read).
    Moved,
    /// An UPDATE that changes a pod template.
    Changed,
}

/// The [`Stay`] of `request` (`custom` describes custom kinds).
pub fn stay(request: &AdmissionRequest, settings: &Settings) -> Stay {
    if !request.is_update() {
        return if created_by_controller(&request.object) {
            Stay::Keep
        } else {
            Stay::New
        };
    }
    let (Ok(new), Ok(old)) = (
        Workload::from_object(&request.object, &settings.custom_kinds),
        Workload::from_object(&request.old_object, &settings.custom_kinds),
    ) else {
        return Stay::Moved;
    };
    let key = &settings.pool_label_key;
    let mut changed = false;
    for t in &new.templates {
        let Some(o) = old.templates.iter().find(|o| o.location == t.location) else {
            return Stay::Moved;
        };
        if t.meta.labels.get(key) != o.meta.labels.get(key) {
            return Stay::Moved;
        }
        changed |= value_at(&request.object, &t.spec_pointer)
            != value_at(&request.old_object, &o.spec_pointer);
    }
    if changed { Stay::Changed } else { Stay::Keep }
}

/// True for an object with a controller owner.
fn created_by_controller(object: &Value) -> bool {
    object
        .at("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter()
                .any(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        })
}

/// The denial of a template of pool `own` whose pool label names a pool that lends to
/// `own`, when lending does not apply (the window is closed and it may not stay); `None`
/// when the label names no such lender.
pub fn refusal(
    settings: &Settings,
    own: &Pool,
    template: &PodTemplate,
    stay: Stay,
    now: UnixSeconds,
) -> Option<Conflict> {
    let key = &settings.pool_label_key;
    let label = template.meta.labels.get(key)?;
    let lender = settings.pool(label)?;
    let lend = lender.lend_to.iter().find(|e| e.pool == own.name)?;
    let why = match stay {
        Stay::Moved => format!(
            "the object was not on pool {} before this update: a workload joins a lending pool only while the window is open",
            lender.name
        ),
        Stay::Changed => format!(
            "this update changes its pod template: a lent workload stays on pool {} only while its template is unchanged, so that no new pod starts on the lender's nodes outside the window",
            lender.name
        ),
        Stay::New | Stay::Keep => {
            "a workload joins a lending pool only while the window is open".to_string()
        }
    };
    Some(Conflict::Lending {
        field: format!(
            "{}.labels.{key}",
            pointer_to_location(&template.metadata_pointer)
        ),
        reason: format!(
            "names pool {}, which lends its nodes to pool {} only during {}, closed at {}; {why}. Remove the label and the lending pool's nodeSelector, tolerations and priority class (the policy routes it to pool {}), or make the change while {} is open",
            lender.name,
            own.name,
            lend.window,
            rfc3339(now),
            own.name,
            lend.window
        ),
    })
}

#[cfg(test)]
mod tests;
