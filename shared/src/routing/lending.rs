//! Pools that lend their nodes to another pool's workloads inside a time window
//! (`lendTo: [{pool: batch, window: off-peak}]`: interactive GPUs idle at night run batch).
//!
//! A workload of the borrowing pool created while the window is open joins the lending
//! pool: its nodes, tolerations and affinity, its pool label, and the lending pool's
//! `guestPriorityClassName` when it has one, so the lender's own workloads preempt the
//! guests once the window has closed (routing never moves a running pod: preemption by
//! priority is what takes the GPUs back). Outside the window a workload already on a
//! lending pool stays there when an UPDATE changes neither its pool label nor its pod
//! templates, and so do the objects its controller creates from a lent template (Pods,
//! ReplicaSets, Jobs): routing is idempotent, whatever the time. Any other workload that
//! names the lending pool outside the window is denied with the reason ([`update`]).

pub mod update;

use super::settings::{Checked, Pool};
use crate::clock::{UnixSeconds, rfc3339};
use crate::workload::PodTemplate;

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
    stay: update::Stay,
    now: UnixSeconds,
) -> Option<(&'s Pool, Lent)> {
    let label = template.meta.labels.get(&settings.pool_label_key);
    let lenders = settings
        .pools
        .iter()
        .filter_map(|l| Some((l, l.lend_to.iter().find(|e| e.pool == own.name)?)));
    let mut open = None;
    for (lender, lend) in lenders {
        if stay == update::Stay::Keep && label == Some(&lender.name) {
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
            "{location}: stays on pool {}, which lends to pool {} (lent before, unchanged by this request)",
            lender.name, own.name
        ),
    }
}

#[cfg(test)]
mod tests;
