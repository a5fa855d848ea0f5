use super::*;
use std::cell::Cell;
use std::rc::Rc;

fn layout(size: usize, align: usize) -> Layout {
    Layout::from_size_align(size, align).unwrap()
}

fn in_chunk(arena: &RequestArena, ptr: *mut u8) -> bool {
    let s = arena.state();
    s.hot.holds(ptr as usize) || s.chunks.iter().any(|c| c.holds(ptr as usize))
}

fn chunks_in_use(arena: &RequestArena) -> usize {
    arena.state().chunks.iter().filter(|c| c.base != 0).count()
}

#[test]
fn a_scope_bumps_and_the_next_scope_reuses_the_chunk() {
    let arena = RequestArena::new();
    let first = arena.scope(|| unsafe {
        let a = arena.alloc(layout(24, 8));
        let b = arena.alloc(layout(100, 1));
        assert!(in_chunk(&arena, a) && in_chunk(&arena, b));
        assert_eq!(b as usize, a as usize + 24, "a pointer bump");
        arena.dealloc(b, layout(100, 1));
        arena.dealloc(a, layout(24, 8));
        a
    });
    let second = arena.scope(|| unsafe {
        let a = arena.alloc(layout(24, 8));
        arena.dealloc(a, layout(24, 8));
        a
    });
    assert_eq!(
        first, second,
        "a chunk whose allocations were freed is reused"
    );
    assert_eq!(chunks_in_use(&arena), 1);
    assert_eq!(arena.stats().bumped, 3);
    assert_eq!(arena.stats().set_aside, 0);
}

#[test]
fn outside_a_scope_the_system_allocator_serves() {
    let arena = RequestArena::new();
    unsafe {
        let p = arena.alloc(layout(64, 8));
        assert!(!in_chunk(&arena, p));
        arena.dealloc(p, layout(64, 8));
    }
    arena.scope(|| unsafe {
        let kept = arena.outside(|| arena.alloc(layout(64, 8)));
        assert!(
            !in_chunk(&arena, kept),
            "outside() allocates from the system"
        );
        let inner = arena.alloc(layout(8, 8));
        assert!(
            in_chunk(&arena, inner),
            "and the scope bumps again after it"
        );
        arena.dealloc(inner, layout(8, 8));
        arena.dealloc(kept, layout(64, 8));
    });
    assert_eq!(arena.stats().set_aside, 0);
}

#[test]
fn memory_that_outlives_its_scope_is_never_handed_out_again_while_live() {
    let arena = RequestArena::new();
    let survivor = arena.scope(|| unsafe {
        let p = arena.alloc(layout(32, 8));
        p.write_bytes(0xAB, 32);
        p
    });
    assert_eq!(arena.stats().set_aside, 1);
    // The next scopes take another chunk and never overlap the survivor.
    for _ in 0..3 {
        arena.scope(|| unsafe {
            let p = arena.alloc(layout(32, 8));
            assert!(p != survivor && in_chunk(&arena, p));
            p.write_bytes(0, 32);
            arena.dealloc(p, layout(32, 8));
        });
    }
    assert_eq!(unsafe { *survivor.add(31) }, 0xAB);
    assert_eq!(chunks_in_use(&arena), 2);
    // Freed at last: its chunk goes back to the system allocator.
    unsafe { arena.dealloc(survivor, layout(32, 8)) };
    assert_eq!(chunks_in_use(&arena), 1);
}

#[test]
fn with_every_slot_held_a_scope_runs_on_the_system_allocator() {
    let arena = RequestArena::new();
    let survivors: Vec<*mut u8> = (0..SLOTS)
        .map(|_| arena.scope(|| unsafe { arena.alloc(layout(16, 8)) }))
        .collect();
    assert_eq!(chunks_in_use(&arena), SLOTS);
    arena.scope(|| unsafe {
        let p = arena.alloc(layout(16, 8));
        assert!(!in_chunk(&arena, p));
        arena.dealloc(p, layout(16, 8));
    });
    for p in survivors {
        unsafe { arena.dealloc(p, layout(16, 8)) };
    }
    assert_eq!(chunks_in_use(&arena), 0);
}

#[test]
fn what_does_not_fit_goes_to_the_system_allocator() {
    let arena = RequestArena::new();
    arena.scope(|| unsafe {
        let big = arena.alloc(layout(CHUNK_BYTES + 1, 8));
        assert!(!big.is_null() && !in_chunk(&arena, big));
        let small = arena.alloc(layout(8, 8));
        assert!(in_chunk(&arena, small), "the chunk still serves what fits");
        arena.dealloc(big, layout(CHUNK_BYTES + 1, 8));
        arena.dealloc(small, layout(8, 8));
    });
    assert_eq!(arena.stats().overflowed, 1);
}

#[test]
fn realloc_grows_the_newest_in_place_and_copies_the_others() {
    let arena = RequestArena::new();
    arena.scope(|| unsafe {
        let a = arena.alloc(layout(4, 1));
        a.copy_from_nonoverlapping(b"abcd".as_ptr(), 4);
        let grown = arena.realloc(a, layout(4, 1), 64);
        assert_eq!(grown, a, "the newest allocation grows in place");
        let b = arena.alloc(layout(4, 1));
        let moved = arena.realloc(grown, layout(64, 1), 128);
        assert!(moved != grown && in_chunk(&arena, moved));
        assert_eq!(std::slice::from_raw_parts(moved, 4), b"abcd");
        let shrunk = arena.realloc(moved, layout(128, 1), 2);
        assert_eq!(shrunk, moved);
        arena.dealloc(b, layout(4, 1));
        arena.dealloc(shrunk, layout(2, 1));
    });
    assert_eq!(arena.stats().set_aside, 0, "every allocation was freed");
}

#[test]
fn alignment_is_kept() {
    let arena = RequestArena::new();
    arena.scope(|| unsafe {
        let mut held = Vec::new();
        for (i, align) in [1, 2, 4, 8, 16, 64, 4096].into_iter().enumerate() {
            let l = layout(i + 1, align);
            let p = arena.alloc(l);
            assert_eq!(p as usize % align, 0, "align {align}");
            held.push((p, l));
            let z = arena.alloc_zeroed(layout(33, align));
            assert!(std::slice::from_raw_parts(z, 33).iter().all(|b| *b == 0));
            held.push((z, layout(33, align)));
        }
        for (p, l) in held {
            arena.dealloc(p, l);
        }
    });
}

/// Many scopes of allocations, reallocations and frees in a pseudo-random order, some
/// kept across scopes: every allocation keeps its bytes until it is freed.
#[test]
fn contents_survive_any_order_of_operations() {
    let arena = RequestArena::new();
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    // (pointer, layout, fill byte)
    let mut kept: Vec<(*mut u8, Layout, u8)> = Vec::new();
    let check = |(p, l, fill): &(*mut u8, Layout, u8)| unsafe {
        assert!(
            std::slice::from_raw_parts(*p, l.size())
                .iter()
                .all(|b| b == fill)
        )
    };
    for round in 0..200u32 {
        let mut live: Vec<(*mut u8, Layout, u8)> = std::mem::take(&mut kept);
        arena.scope(|| {
            for step in 0..100u32 {
                let fill = (round + step) as u8;
                match next(4) {
                    0 | 1 => {
                        let l = layout(1 + next(3000) as usize, 1 << next(5));
                        let p = unsafe { arena.alloc(l) };
                        unsafe { p.write_bytes(fill, l.size()) };
                        live.push((p, l, fill));
                    }
                    2 if !live.is_empty() => {
                        let i = next(live.len() as u64) as usize;
                        let (p, l, old) = live[i];
                        check(&live[i]);
                        let size = 1 + next(5000) as usize;
                        let q = unsafe { arena.realloc(p, l, size) };
                        let nl = layout(size, l.align());
                        let keep = l.size().min(size);
                        assert!(
                            unsafe { std::slice::from_raw_parts(q, keep) }
                                .iter()
                                .all(|b| *b == old)
                        );
                        unsafe { q.write_bytes(fill, size) };
                        live[i] = (q, nl, fill);
                    }
                    _ if !live.is_empty() => {
                        let i = next(live.len() as u64) as usize;
                        let e = live.swap_remove(i);
                        check(&e);
                        unsafe { arena.dealloc(e.0, e.1) };
                    }
                    _ => {}
                }
            }
            live.iter().for_each(check);
        });
        // A few allocations outlive their scope.
        while live.len() > 3 {
            let e = live.pop().unwrap();
            check(&e);
            unsafe { arena.dealloc(e.0, e.1) };
        }
        kept = live;
    }
    for e in kept {
        check(&e);
        unsafe { arena.dealloc(e.0, e.1) };
    }
    // Set-aside chunks went back to the system allocator with their last allocation; at
    // most the chunk of the last scope is kept, for the next one.
    assert!(chunks_in_use(&arena) <= 1);
    assert!(
        arena.stats().set_aside > 10,
        "the test kept allocations across scopes"
    );
    assert!(arena.stats().bumped > 5000);
}

/// Counts its drops.
struct Counted(Rc<Cell<usize>>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

#[test]
fn released_values_are_dropped_except_while_leaving() {
    let drops = Rc::new(Cell::new(0));
    release(Counted(Rc::clone(&drops)));
    assert_eq!(drops.get(), 1, "outside leaving_released: dropped");
    leaving_released(true, || release(Counted(Rc::clone(&drops))));
    assert_eq!(drops.get(), 1, "leaving: left in memory");
    leaving_released(false, || release(Counted(Rc::clone(&drops))));
    assert_eq!(drops.get(), 2, "not leaving: dropped");
    // Nested, and reset when the outer call ends (also by a panic).
    leaving_released(true, || {
        leaving_released(false, || release(Counted(Rc::clone(&drops)))); // dropped
        release(Counted(Rc::clone(&drops))); // left
    });
    assert_eq!(drops.get(), 3);
    // wasm32-wasip1 aborts on a panic: the reset after one is checked natively.
    #[cfg(panic = "unwind")]
    {
        let _ = std::panic::catch_unwind(|| leaving_released(true, || panic!("in a request")));
        release(Counted(Rc::clone(&drops)));
        assert_eq!(drops.get(), 4, "the flag is reset after a panic");
    }
}
