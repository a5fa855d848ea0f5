//! The same rules, called natively: what each policy's `validate` does inside the
//! module (`gpu_rules::kubewarden::validate_cached` over the policy's `evaluate`: parse the
//! payload, its settings read and checked once per policy as a kept instance does, decide, serialize the
//! answer), with host calls served from the same replay sessions as in wasm.

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use anyhow::{Result, anyhow, bail};
use gpu_e2e::{CallbackRequest, ReplaySession};
use gpu_rules::cluster::{Cluster, ClusterRequest};
use gpu_rules::kubewarden::{SettingsCache, validate as glue, validate_cached};
use gpu_rules::policies::{Autoscaler, CapacityGate, Labels, Routing, VramFit};
use gpu_rules::policy::Policy;
use naive_capacity_gate::NaiveCapacityGate;

/// Host calls answered from a replay session, as the harness does for wasm.
#[derive(Debug, Default)]
pub struct ReplayCluster {
    session: RefCell<Option<ReplaySession>>,
}

impl ReplayCluster {
    pub fn new(session: Option<ReplaySession>) -> ReplayCluster {
        ReplayCluster {
            session: RefCell::new(session),
        }
    }
}

impl Cluster for ReplayCluster {
    fn call(&self, request: &ClusterRequest) -> Result<Vec<u8>, String> {
        let request = CallbackRequest::from_guest_payload(request.operation(), &request.payload())
            .map_err(|e| format!("{e:#}"))?;
        match self.session.borrow_mut().as_mut() {
            Some(session) => session.answer(&request).map_err(|e| e.to_string()),
            None => Err("no replay session".into()),
        }
    }
}

/// The module name of the benchmark's naive capacity gate.
pub const NAIVE_CAPACITY: &str = "naive-capacity-gate";

/// Whether `policy` has a native counterpart here.
pub fn supported(policy: &str) -> bool {
    policy == NAIVE_CAPACITY || POLICIES.iter().any(|(name, _)| *name == policy)
}

type Native = fn(&[u8], &ReplayCluster) -> Result<Vec<u8>, String>;

/// Every policy, by module name.
const POLICIES: [(&str, Native); 5] = [
    (Labels::NAME, native::<Labels>),
    (Routing::NAME, native::<Routing>),
    (VramFit::NAME, native::<VramFit>),
    (CapacityGate::NAME, native::<CapacityGate>),
    (Autoscaler::NAME, native::<Autoscaler>),
];

/// `validate` of the policy `P`, natively, with one settings cache per policy (as the
/// module keeps one per instance).
fn native<P: Policy>(payload: &[u8], cluster: &ReplayCluster) -> Result<Vec<u8>, String>
where
    P::Checked: 'static,
{
    thread_local! {
        static CACHES: RefCell<HashMap<TypeId, Rc<dyn Any>>> = RefCell::new(HashMap::new());
    }
    let cache = CACHES.with(|caches| {
        let any = Rc::clone(
            caches
                .borrow_mut()
                .entry(TypeId::of::<P::Checked>())
                .or_insert_with(|| Rc::new(SettingsCache::<P::Checked>::new())),
        );
        any.downcast::<SettingsCache<P::Checked>>()
            .expect("one cache per settings type")
    });
    validate_cached::<P, _>(payload, &cache, |r, s| P::evaluate_owned(r, s, cluster))
        .map_err(|e| e.to_string())
}

/// `validate` of `policy`, natively: the bytes the module would answer.
pub fn validate(policy: &str, payload: &[u8], session: Option<ReplaySession>) -> Result<Vec<u8>> {
    let cluster = ReplayCluster::new(session);
    let answer = if policy == NAIVE_CAPACITY {
        glue::<NaiveCapacityGate, _>(payload, |r, s| NaiveCapacityGate::evaluate(&r, s, &cluster))
            .map_err(|e| e.to_string())
    } else {
        match POLICIES.iter().find(|(name, _)| *name == policy) {
            Some((_, run)) => run(payload, &cluster),
            None => bail!("no native counterpart for {policy}"),
        }
    };
    answer.map_err(|e| anyhow!("native validate of {policy} failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn answers_like_the_module() {
        let payload = json!({"request": {"uid": "1", "operation": "DELETE"}, "settings": {}});
        let bytes = validate("gpu-labels-policy", payload.to_string().as_bytes(), None).unwrap();
        let answer: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(answer["accepted"], true);
        assert!(validate("nope", b"{}", None).is_err());
        assert!(supported(NAIVE_CAPACITY) && !supported("nope"));
    }

    #[test]
    fn host_calls_without_a_session_fail_with_a_message() {
        let cluster = ReplayCluster::new(None);
        let request =
            gpu_rules::capacity::queries::parent_query("apps/v1", "Deployment", "x", "ml");
        assert_eq!(cluster.call(&request), Err("no replay session".into()));
    }
}
