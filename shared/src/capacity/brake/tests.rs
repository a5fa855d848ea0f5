//! [`check`] on pod times alone: the window's edges, the time to try again.

use super::*;
use crate::capacity::timeline::{PodTime, PodTimes};

/// Pods of one namespace holding 2 GPUs each, created at `created` (None: unknown).
fn times(created: &[Option<i64>]) -> PodTimes {
    PodTimes {
        pods: created
            .iter()
            .map(|c| PodTime {
                created: *c,
                in_namespace: true,
                team: None,
                shape: 0,
                owner: 0,
            })
            .collect(),
        shapes: vec![GpuCounts::from([("nvidia.com/gpu".to_string(), 2)])],
        teams: Vec::new(),
        owners: vec!["deployment llm".into()],
    }
}

fn judge(created: &[Option<i64>], incoming: u64) -> BrakeCheck {
    let brake = Brake {
        gpus: 6,
        per: "100s".into(),
    };
    let incoming = GpuCounts::from([("nvidia.com/gpu".to_string(), incoming)]);
    let mut checks = check(
        &times(created),
        &|p| p.in_namespace,
        &brake,
        &Scope::Namespace("ml".into()),
        "a100",
        &incoming,
        1000,
    );
    assert_eq!(checks.len(), 1);
    checks.remove(0)
}

#[test]
fn the_window_is_open_at_its_start_and_counts_unknown_and_future_times() {
    // Created at 900 (exactly now - per): out; 901: in; in the future: in; unknown: in.
    let nothing = GpuCounts::from([("nvidia.com/gpu".to_string(), 0)]);
    let brake = Brake {
        gpus: 1,
        per: "1s".into(),
    };
    let scope = Scope::Namespace("ml".into());
    let t = times(&[None]);
    assert!(check(&t, &|_| true, &brake, &scope, "a100", &nothing, 0).is_empty());
    let c = judge(&[Some(900), Some(901), Some(1005), None], 1);
    assert_eq!((c.tally.used, c.pods, c.tally.fits()), (6, 3, false));
    // 1 over: the oldest counted pod (901) leaves at 1001.
    assert_eq!(c.retry_at, Some(1001));
}

#[test]
fn the_time_to_try_again_frees_enough_for_the_workload() {
    // 3 pods (6 GPUs) + 4 = 10 of 6: two pods must leave, at 1050 and 1060.
    let c = judge(&[Some(960), Some(950), Some(990)], 4);
    assert_eq!(c.retry_at, Some(1060));
    // A workload of exactly the brake with nothing counted fits; above it never fits.
    assert!(judge(&[], 6).tally.fits());
    let c = judge(&[], 7);
    assert_eq!((c.tally.fits(), c.retry_at), (false, None));
}
