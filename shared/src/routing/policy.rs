//! gpu-pool-routing-policy as a [`Policy`]: its settings checked ([`Checked`]), its rules
//! ([`super::prepare`]), the rules its exceptions may name, the host calls it may make. It changes objects: the
//! request handed over has its own object changed and moved into the answer.

use super::settings::{Checked, RULE_NAMES, Settings};
use crate::admission::{AdmissionRequest, Verdict};
use crate::clock::SystemClock;
use crate::cluster::Cluster;
use crate::policy::{Admission, GET_RESOURCE, Policy};

/// gpu-pool-routing-policy.
pub struct Routing;

impl Policy for Routing {
    const NAME: &'static str = "gpu-pool-routing-policy";
    const HOST_CALLS: u8 = GET_RESOURCE;
    type Settings = Settings;
    type Checked = Checked;
    const RULE_NAMES: &'static [&'static str] = &RULE_NAMES;

    fn judges(request: &AdmissionRequest) -> bool {
        super::judges(request)
    }

    fn decide(a: Admission<'_, Checked>) -> Verdict {
        super::decide(a)
    }

    /// [`super::prepare`], then the change written into the request's own object.
    fn evaluate_owned(
        mut request: AdmissionRequest,
        settings: &Checked,
        cluster: &dyn Cluster,
    ) -> Verdict {
        let clock = &SystemClock;
        let verdict = if let Some(verdict) = Self::opening(&request, settings) {
            verdict
        } else {
            let a = Admission {
                request: &request,
                settings,
                cluster,
                clock,
            };
            match super::prepare(a) {
                // Allowed, or denied with a code: nothing for exceptions to excuse.
                Ok(change) => change.apply(&mut request),
                Err(verdict) => Self::excuse(verdict, a),
            }
        };
        crate::arena::release(request);
        verdict
    }
}
