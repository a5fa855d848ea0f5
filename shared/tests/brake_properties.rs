//! Property tests of the burst brakes (`burstBrakes`): the brake is monotonic in recent
//! admissions: one more pod admitted within the window, or a pod created later than it
//! was, never turns a denial into an acceptance; and a denial's time to try again is when
//! the workload fits; the owner workloads a denial names hold what it counts. (Run natively; the unit tests also run in wasm.)
#![cfg(not(target_arch = "wasm32"))]

use gpu_rules::capacity::brake::{BrakeCheck, Scope, check};
use gpu_rules::capacity::settings::brakes::Brake;
use gpu_rules::capacity::timeline::{PodTime, PodTimes};
use gpu_rules::gpu::GpuCounts;
use gpu_rules::settings::WindowRule;
use proptest::prelude::*;

mod pool_gen;
use pool_gen::{counts, demand};

const NOW: i64 = 1_796_083_200;

/// Pods created from two windows ago to a little after now, in the namespace or not.
fn pods() -> impl Strategy<Value = Vec<(i64, bool, GpuCounts)>> {
    prop::collection::vec((-1200i64..=30, any::<bool>(), counts(16)), 0..24)
}

fn times(pods: &[(i64, bool, GpuCounts)]) -> PodTimes {
    let mut t = PodTimes::default();
    for (offset, in_namespace, gpus) in pods {
        if gpus.is_empty() {
            continue;
        }
        t.shapes.push(gpus.clone());
        t.pods.push(PodTime {
            created: Some(NOW + offset),
            in_namespace: *in_namespace,
            team: None,
            shape: t.shapes.len() - 1,
            owner: t.pods.len() % 3,
        });
    }
    t.owners = ["deployment llm", "job train", "pod notebook"]
        .map(String::from)
        .to_vec();
    t
}

fn judge(
    pods: &[(i64, bool, GpuCounts)],
    brake: &Brake,
    incoming: &GpuCounts,
    now: i64,
) -> Vec<BrakeCheck> {
    check(
        &times(pods),
        &|p| p.in_namespace,
        brake,
        &Scope::Namespace("ml".into()),
        "a100",
        incoming,
        now,
    )
}

fn denied(checks: &[BrakeCheck]) -> bool {
    checks.iter().any(|c| !c.tally.fits())
}

fn brake() -> impl Strategy<Value = Brake> {
    (1u64..96, 1i64..=20).prop_map(|(gpus, minutes)| Brake {
        gpus,
        per: format!("{minutes}m"),
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// One more pod of the namespace admitted within the window never turns a denial into
    /// an acceptance.
    #[test]
    fn one_more_recent_admission_never_turns_a_denial_into_an_acceptance(
        pods in pods(), brake in brake(), incoming in demand(), ago in 0i64..1200, gpus in counts(16),
    ) {
        let before = denied(&judge(&pods, &brake, &incoming, NOW));
        let mut more = pods.clone();
        more.push((-ago.min(brake.seconds() - 1), true, gpus));
        let after = denied(&judge(&more, &brake, &incoming, NOW));
        prop_assert!(!before || after, "denied with {pods:?}, accepted with one more: {more:?}");
    }

    /// A pod created later than it was (more recent) never turns a denial into an acceptance.
    #[test]
    fn a_more_recent_creation_never_turns_a_denial_into_an_acceptance(
        pods in pods(), brake in brake(), incoming in demand(), which in 0usize..24, later in 1i64..1200,
    ) {
        prop_assume!(!pods.is_empty());
        let i = which % pods.len();
        let before = denied(&judge(&pods, &brake, &incoming, NOW));
        let mut moved = pods.clone();
        moved[i].0 += later;
        prop_assert!(!before || denied(&judge(&moved, &brake, &incoming, NOW)));
    }

    /// A denial's time to try again is exact: at that time (with the same pods) the
    /// workload fits, one second before it does not; a workload larger than the brake has
    /// no such time.
    #[test]
    fn the_time_to_try_again_is_when_the_workload_fits(
        pods in pods(), brake in brake(), incoming in demand(),
    ) {
        for c in judge(&pods, &brake, &incoming, NOW).iter().filter(|c| !c.tally.fits()) {
            let only = |n: u64| GpuCounts::from([(c.resource.clone(), n)]);
            match c.retry_at {
                None => prop_assert!(c.tally.incoming > c.tally.limit, "{c:?}"),
                Some(t) => {
                    prop_assert!(t > NOW);
                    let at = judge(&pods, &brake, &only(c.tally.incoming), t);
                    prop_assert!(at[0].tally.fits(), "at {t}: {at:?}");
                    let before = judge(&pods, &brake, &only(c.tally.incoming), t - 1);
                    prop_assert!(!before[0].tally.fits(), "at {}: {before:?}", t - 1);
                }
            }
        }
    }

    /// The owner workloads a check names hold exactly the GPUs it counts, most first, and
    /// its denial names at most three of them.
    #[test]
    fn the_workloads_named_hold_what_is_counted(
        pods in pods(), brake in brake(), incoming in demand(),
    ) {
        for c in judge(&pods, &brake, &incoming, NOW) {
            let held: u64 = c.workloads.iter().map(|(_, g)| g).sum();
            prop_assert_eq!(held, c.tally.used);
            prop_assert!(c.workloads.windows(2).all(|w| w[0].1 >= w[1].1), "{:?}", c.workloads);
            if !c.tally.fits() {
                let clause = c.clause();
                let named = c.workloads.iter().filter(|(w, _)| clause.contains(w.as_str())).count();
                prop_assert_eq!(named, c.workloads.len().min(3), "{}", clause);
            }
        }
    }
}
