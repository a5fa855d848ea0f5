//! Pools that lend their nodes to another pool's workloads inside a time window
//! (`lendTo: [{pool: batch, window: off-peak}]`: interactive GPUs idle at night run batch).
//!
//! A workload of the borrowing pool created while the window is open joins the lending
//! pool: its nodes, tolerations and affinity, its pool label, and the lending pool's
//! `guestPriorityClassName` when it has one, so the lender's own workloads preempt the
//! guests once the window has closed (routing never moves a running pod: preemption by
//! priority is what takes the GPUs back). A workload already on a lending pool stays
//! there when it is updated, and so do the objects its controller creates from a lent
//! template (Pods, ReplicaSets, Jobs): routing is idempotent, whatever the time. A
//! workload that names the lending pool itself outside the window is judged like any pool
//! label that disagrees.

use super::settings::{Checked, Pool};
use crate::clock::{UnixSeconds, rfc3339};
use crate::workload::At;
use crate::workload::PodTemplate;
use serde_json::Value;

/// Why a template goes to a lending pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lent {
    /// The window is open now.
    Window { window: String },
    /// It was lent before (its pool label names the lender) and is being updated, or it
    /// is a Pod created by the controller of a lent template.
    Stays,
}

/// The pool `template` (of pool `own`) is lent to, if any, with why.
pub fn lender<'s>(
    settings: &'s Checked,
    own: &Pool,
    template: &PodTemplate,
    keeps_lent: bool,
    now: UnixSeconds,
) -> Option<(&'s Pool, Lent)> {
    let label = template.meta.labels.get(&settings.pool_label_key);
    let lenders = settings
        .pools
        .iter()
        .filter_map(|l| Some((l, l.lend_to.iter().find(|e| e.pool == own.name)?)));
    let mut open = None;
    for (lender, lend) in lenders {
        if keeps_lent && label == Some(&lender.name) {
            return Some((lender, Lent::Stays));
        }
        if open.is_none()
            && settings
                .windows
                .get(&lend.window)
                .is_some_and(|s| s.contains(now))
        {
            open = Some((
                lender,
                Lent::Window {
                    window: lend.window.clone(),
                },
            ));
        }
    }
    open
}

/// The pool as its guests join it: the lender's nodes, with the guest priority class
/// (or the borrower's own) as the class set and allowed.
pub fn as_guest_pool(lender: &Pool, own: &Pool) -> Pool {
    let class = lender
        .guest_priority_class_name
        .clone()
        .or_else(|| own.priority_class_name.clone());
    let mut allowed: Vec<String> = own.allowed_priority_classes.clone().unwrap_or_default();
    if let Some(c) = &class
        && !allowed.contains(c)
    {
        allowed.push(c.clone());
    }
    Pool {
        priority_class_name: class,
        allowed_priority_classes: Some(allowed),
        ..lender.clone()
    }
}

/// True when a lent pool label is kept: on UPDATE, and for an object created by a
/// controller (a Pod, the ReplicaSet of a Deployment, the Job of a CronJob: its template
/// was lent when the controller's object was admitted, and denying it would stop the
/// controller).
pub fn keeps_lent(is_update: bool, object: &Value) -> bool {
    is_update
        || object
            .at("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|refs| {
                refs.iter()
                    .any(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
            })
}

/// The audit annotation value for a lent template.
pub fn audit(location: &str, lender: &Pool, own: &Pool, why: &Lent, now: UnixSeconds) -> String {
    match why {
        Lent::Window { window } => format!(
            "{location}: pool {} lends its nodes to pool {} during {window}, open at {}",
            lender.name,
            own.name,
            rfc3339(now)
        ),
        Lent::Stays => format!(
            "{location}: stays on pool {}, which lends to pool {} (lent when it was created)",
            lender.name, own.name
        ),
    }
}

#[cfg(test)]
mod tests;
