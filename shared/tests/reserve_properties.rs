//! Property tests of `pools[].reserve` in the capacity gate's decision: a reserve never
//! denies the type it reserves for more than the pool without it would (whatever other
//! reserves the pool has), reserves never accept what the threshold denies, the decision
//! of any type stays monotonic in its demand, a `headroom` only ever denies more, and a
//! window's reserves decide as the same reserves outside any window. The pool generators
//! are `capacity_properties`' ([`pool_gen`]). (Run natively; the unit tests also run in
//! wasm.)
#![cfg(not(target_arch = "wasm32"))]

use gpu_rules::capacity::PoolSnapshot;
use gpu_rules::gpu::GpuCounts;
use gpu_rules::pools::reserve::{Amount, InForce};
use proptest::prelude::*;

mod pool_gen;
use pool_gen::{allowed_in, counts, demand};

const TYPES: [&str; 3] = ["interactive", "serving", "batch"];

/// A pool's state: allocatable, GPUs held per workload type, and by unlabelled pods.
fn snapshot() -> impl Strategy<Value = PoolSnapshot> {
    (
        counts(256),
        prop::collection::vec(counts(64), TYPES.len()),
        counts(64),
    )
        .prop_map(|(allocatable, per_type, unlabelled)| {
            let mut used = unlabelled;
            for c in &per_type {
                gpu_rules::gpu::add_into(&mut used, c);
            }
            PoolSnapshot {
                nodes: 4,
                schedulable_nodes: 4,
                allocatable,
                used,
                used_by_type: TYPES.iter().map(|t| t.to_string()).zip(per_type).collect(),
                ..PoolSnapshot::default()
            }
        })
}

fn amount() -> impl Strategy<Value = Amount> {
    prop_oneof![
        (1u64..128).prop_map(Amount::Gpus),
        (1u32..=50).prop_map(Amount::Percent)
    ]
}

/// Reserves for some of `TYPES`, in type order as the settings read them.
fn reserves() -> impl Strategy<Value = Vec<(String, Amount)>> {
    prop::collection::btree_map(
        prop::sample::select(TYPES.to_vec()).prop_map(str::to_string),
        amount(),
        0..=TYPES.len(),
    )
    .prop_map(|m| m.into_iter().collect())
}

/// The workload's type: one of `TYPES`, or none.
fn workload_type() -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![
        prop::sample::select(TYPES.to_vec()).prop_map(Some),
        Just(None)
    ]
}

fn allowed(
    s: &PoolSnapshot,
    d: &GpuCounts,
    threshold: u32,
    reserve: &[(String, Amount)],
    workload_type: Option<&str>,
) -> bool {
    allowed_in(
        s,
        d,
        threshold,
        InForce {
            reserve,
            ..InForce::default()
        },
        workload_type,
    )
}

proptest! {
    /// Adding a reserve for type X (or changing its amount) never changes the decision for
    /// X's workloads: with no other reserve, X is judged as the pool without reserves judges it.
    #[test]
    fn a_reserve_never_denies_its_own_type(
        s in snapshot(), d in demand(), threshold in 1u32..=100,
        others in reserves(), x in prop::sample::select(TYPES.to_vec()), a in amount(),
    ) {
        let without: Vec<(String, Amount)> =
            others.iter().filter(|(t, _)| t != x).cloned().collect();
        let mut with = without.clone();
        with.push((x.to_string(), a));
        with.sort_by(|l, r| l.0.cmp(&r.0));
        prop_assert_eq!(
            allowed(&s, &d, threshold, &with, Some(x)),
            allowed(&s, &d, threshold, &without, Some(x))
        );
        prop_assert_eq!(
            allowed(&s, &d, threshold, &[(x.to_string(), a)], Some(x)),
            allowed(&s, &d, threshold, &[], Some(x))
        );
    }

    /// Reserves only ever deny more: what a pool with reserves accepts, the pool without
    /// them accepts too.
    #[test]
    fn reserves_never_accept_what_the_threshold_denies(
        s in snapshot(), d in demand(), threshold in 1u32..=100,
        r in reserves(), t in workload_type(),
    ) {
        if allowed(&s, &d, threshold, &r, t) {
            prop_assert!(allowed(&s, &d, threshold, &[], t));
        }
    }

    /// For any type, with reserves, a denied demand stays denied when it grows.
    #[test]
    fn monotonic_in_demand_with_reserves(
        s in snapshot(), d in demand(), threshold in 1u32..=100,
        r in reserves(), t in workload_type(), extra in 1u64..32,
    ) {
        let (resource, _) = d.iter().next().map(|(k, v)| (k.clone(), *v)).unwrap();
        let mut more = d.clone();
        *more.get_mut(&resource).unwrap() += extra;
        if !allowed(&s, &d, threshold, &r, t) {
            prop_assert!(!allowed(&s, &more, threshold, &r, t));
        }
    }

    /// A headroom only ever denies more, for every type, with or without reserves; and the
    /// pool without a headroom accepts what the pool with one accepts.
    #[test]
    fn a_headroom_never_accepts_what_the_pool_without_it_denies(
        s in snapshot(), d in demand(), threshold in 1u32..=100,
        r in reserves(), t in workload_type(), h in amount(),
    ) {
        let with = InForce { reserve: &r, window: None, headroom: Some(h) };
        let without = InForce { reserve: &r, window: None, headroom: None };
        if allowed_in(&s, &d, threshold, with, t) {
            prop_assert!(allowed_in(&s, &d, threshold, without, t));
        }
    }

    /// The window that set the reserves in force changes the words, never the decision.
    #[test]
    fn a_window_reserve_decides_as_the_same_reserve_without_a_window(
        s in snapshot(), d in demand(), threshold in 1u32..=100,
        r in reserves(), t in workload_type(),
    ) {
        let in_window = InForce { reserve: &r, window: Some("peak"), headroom: None };
        prop_assert_eq!(
            allowed_in(&s, &d, threshold, in_window, t),
            allowed(&s, &d, threshold, &r, t)
        );
    }
}
