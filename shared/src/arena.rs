//! The policies' global allocator: a bump arena for what one admission request allocates,
//! in front of the system allocator.
//!
//! A request is read into many small allocations (every key and string of the object,
//! each map node, the typed pod templates, the messages), all dropped when the answer is
//! written. Inside [`RequestArena::scope`] an allocation is a pointer bump in a chunk the
//! arena keeps across requests, and freeing one only counts it. On the labels policy's GPU
//! Pod this took 14% of the instructions of a native call (callgrind) and 42% of the wasm
//! instructions of a `validate` (wasmi fuel), which in `kwctl bench` is a few percent of
//! the time: see BENCHMARKS.md. Outside a scope, and for what does not fit in the chunk, the
//! system allocator (dlmalloc in wasm32-wasip1) serves as usual.
//!
//! Nothing is ever reused while it may still be referenced: each chunk counts its live
//! allocations, and its space is reused only once every one of them was freed. Memory
//! that outlives its request (the settings a policy keeps, a table built on first use)
//! keeps its chunk alive: at the end of the scope that chunk is set aside, the next
//! request takes a fresh one, and the set-aside chunk goes back to the system allocator
//! when its last allocation is freed. With every chunk slot taken by such chunks, a scope
//! simply runs on the system allocator.
//!
//! The state is not synchronised: the arena is for single-threaded wasm32 modules (waPC
//! guests), where [`RequestArena`] is `Sync` so it can be the `#[global_allocator]`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, UnsafeCell};

thread_local! {
    /// Inside [`leaving_released`]: [`release`] leaves values in memory.
    static LEAVING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, in which [`release`] leaves what it is given in memory instead of freeing it,
/// when `leave` is true: for the first request of a policy instance. A host that runs every
/// request on a fresh instance (policy-server) discards the instance's memory with it, so
/// freeing a request, its settings and its answer piece by piece (a tree of maps and
/// strings) is work no one gains from. An instance that is kept (kwctl) frees from its second
/// request on; what its first request left holds one chunk set aside for the instance's life.
pub fn leaving_released<R>(leave: bool, f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            LEAVING.set(self.0);
        }
    }
    let _reset = Reset(LEAVING.replace(leave));
    f()
}

/// Drops `value`, or leaves it in memory inside [`leaving_released`] (never dropped: for
/// values whose drop only frees memory).
pub fn release<T>(value: T) {
    if LEAVING.get() {
        std::mem::forget(value);
    } else {
        drop(value);
    }
}

/// Bytes in one chunk. A GPU Pod or Deployment request allocates a few KiB; what does not
/// fit is served by the system allocator.
pub const CHUNK_BYTES: usize = 256 * 1024;

/// Chunks the arena tracks at once: the one in use and those set aside because some of
/// their allocations outlived a request.
const SLOTS: usize = 8;

/// A chunk as the system allocator is asked for it.
const CHUNK_LAYOUT: Layout = match Layout::from_size_align(CHUNK_BYTES, 16) {
    Ok(layout) => layout,
    Err(_) => panic!("the chunk layout is valid"),
};

#[derive(Clone, Copy)]
struct Chunk {
    /// 0: the slot is empty.
    base: usize,
    /// The next free byte.
    next: usize,
    /// Allocations made from this chunk and not yet freed.
    live: usize,
}

impl Chunk {
    const EMPTY: Chunk = Chunk {
        base: 0,
        next: 0,
        live: 0,
    };

    fn holds(&self, ptr: usize) -> bool {
        self.base != 0 && ptr.wrapping_sub(self.base) < CHUNK_BYTES
    }

    fn end(&self) -> usize {
        self.base + CHUNK_BYTES
    }
}

struct State {
    /// Every chunk the arena holds. The current one's `next` and `live` are kept in `hot`
    /// while its scope is open, and written back when it closes.
    chunks: [Chunk; SLOTS],
    /// The slot of the open scope's chunk.
    current: Option<usize>,
    /// The open scope's chunk (`Chunk::EMPTY` without one): what every allocation and
    /// free of a request reads first, without looking up a slot.
    hot: Chunk,
    /// Where bumping stops: the current chunk's end while the scope bumps, 0 outside a
    /// scope and inside [`RequestArena::outside`], so the bound check alone sends those
    /// allocations to the system allocator.
    limit: usize,
    /// Open scopes (a scope inside a scope belongs to the outer one).
    depth: usize,
    /// Allocations served from chunks and by the system allocator inside scopes, for
    /// tests and measurements.
    stats: Stats,
}

/// How the arena served the allocations of the scopes so far (counts wrap: a kept instance
/// may serve billions of allocations).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Allocations bumped from a chunk.
    pub bumped: usize,
    /// Allocations inside a scope that the chunk had no room for (system allocator).
    pub overflowed: usize,
    /// Scopes that ended with allocations still live, whose chunk was set aside.
    pub set_aside: usize,
}

/// A bump arena for one request at a time, in front of the system allocator.
pub struct RequestArena {
    state: UnsafeCell<State>,
}

// SAFETY: waPC guests are single-threaded wasm32 modules (no `atomics` target feature), so
// the state is never touched by two threads.
#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
unsafe impl Sync for RequestArena {}

impl Default for RequestArena {
    fn default() -> Self {
        Self::new()
    }
}

impl RequestArena {
    pub const fn new() -> Self {
        RequestArena {
            state: UnsafeCell::new(State {
                chunks: [Chunk::EMPTY; SLOTS],
                current: None,
                hot: Chunk::EMPTY,
                limit: 0,
                depth: 0,
                stats: Stats {
                    bumped: 0,
                    overflowed: 0,
                    set_aside: 0,
                },
            }),
        }
    }

    #[allow(clippy::mut_from_ref)]
    fn state(&self) -> &mut State {
        // SAFETY: single-threaded (see the `Sync` impl), and no reference to the state
        // outlives one method call of the arena.
        unsafe { &mut *self.state.get() }
    }

    /// Runs `f` with its allocations served from the arena. What `f` allocates and frees
    /// costs a pointer bump; what it returns or keeps may still be used afterwards.
    pub fn scope<R>(&self, f: impl FnOnce() -> R) -> R {
        self.open();
        let _close = Close(self);
        f()
    }

    /// Runs `f` with its allocations served by the system allocator, inside a scope: for
    /// what must outlive the scope without holding its chunk (the answer handed to the host).
    pub fn outside<R>(&self, f: impl FnOnce() -> R) -> R {
        let limit = std::mem::replace(&mut self.state().limit, 0);
        let result = f();
        self.state().limit = limit;
        result
    }

    /// How the scopes so far were served.
    pub fn stats(&self) -> Stats {
        self.state().stats
    }

    fn open(&self) {
        let s = self.state();
        s.depth += 1;
        if s.depth > 1 {
            return;
        }
        // A chunk whose allocations were all freed, else a new one in an empty slot.
        s.current = s.chunks.iter().position(|c| c.base != 0 && c.live == 0);
        match s.current {
            Some(i) => s.chunks[i].next = s.chunks[i].base,
            None => {
                if let Some(i) = s.chunks.iter().position(|c| c.base == 0) {
                    // SAFETY: the layout has a non-zero size.
                    let base = unsafe { System.alloc(CHUNK_LAYOUT) } as usize;
                    if base != 0 {
                        s.chunks[i] = Chunk {
                            base,
                            next: base,
                            live: 0,
                        };
                        s.current = Some(i);
                    }
                }
            }
        }
        if let Some(i) = s.current {
            s.hot = s.chunks[i];
            s.limit = s.hot.end();
        }
    }

    fn close(&self) {
        let s = self.state();
        s.depth -= 1;
        if s.depth > 0 {
            return;
        }
        s.limit = 0;
        let hot = std::mem::replace(&mut s.hot, Chunk::EMPTY);
        if let Some(i) = s.current.take() {
            s.chunks[i] = hot;
            if hot.live > 0 {
                s.stats.set_aside = s.stats.set_aside.wrapping_add(1);
            }
        }
    }

    /// Bumps `layout` from the current chunk; None without a scope, inside
    /// [`RequestArena::outside`], or without room.
    #[inline(always)]
    fn bump(&self, layout: Layout) -> Option<*mut u8> {
        let s = self.state();
        // A layout's alignment is a power of two: rounding up is a mask, not a division.
        let mask = layout.align() - 1;
        let start = s.hot.next.wrapping_add(mask) & !mask;
        let end = start.wrapping_add(layout.size());
        // `limit` is 0 when nothing may be bumped, and a layout's size is never 0, so
        // `end` is then over it. Either addition wrapping around is caught by the order.
        if start < s.hot.next || end < start || end > s.limit {
            if s.limit != 0 {
                s.stats.overflowed = s.stats.overflowed.wrapping_add(1);
            }
            return None;
        }
        s.hot.next = end;
        s.hot.live += 1;
        s.stats.bumped = s.stats.bumped.wrapping_add(1);
        Some(start as *mut u8)
    }

    /// Frees `ptr` of a chunk other than the current one; false when no chunk holds it.
    fn free_set_aside(&self, ptr: usize) -> bool {
        let s = self.state();
        let Some(chunk) = s.chunks.iter_mut().find(|c| c.holds(ptr)) else {
            return false;
        };
        chunk.live -= 1;
        if chunk.live == 0 {
            let base = chunk.base;
            *chunk = Chunk::EMPTY;
            // SAFETY: the chunk was allocated by the system allocator with this layout,
            // and nothing allocated from it is live.
            unsafe { System.dealloc(base as *mut u8, CHUNK_LAYOUT) };
        }
        true
    }
}

struct Close<'a>(&'a RequestArena);

impl Drop for Close<'_> {
    fn drop(&mut self) {
        self.0.close();
    }
}

// SAFETY: every pointer handed out is either the system allocator's (and given back to
// it) or a range of a chunk no other live allocation overlaps: a chunk's space is handed
// out once, by bumping `next`, and handed out again only after every allocation made
// from it was freed (`live == 0`) or, for the newest one, at its own end.
unsafe impl GlobalAlloc for RequestArena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match self.bump(layout) {
            Some(ptr) => ptr,
            // SAFETY: the caller's layout, as given.
            None => unsafe { System.alloc(layout) },
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match self.bump(layout) {
            Some(ptr) => {
                // SAFETY: the range was just bumped for this layout.
                unsafe { ptr.write_bytes(0, layout.size()) };
                ptr
            }
            // SAFETY: the caller's layout, as given.
            None => unsafe { System.alloc_zeroed(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let s = self.state();
        let at = ptr as usize;
        if s.hot.holds(at) {
            s.hot.live -= 1;
            // The newest allocation gives its bytes back (a temporary buffer, a string
            // built and dropped).
            if at + layout.size() == s.hot.next {
                s.hot.next = at;
            }
        } else if !self.free_set_aside(at) {
            // SAFETY: not a chunk's, so the system allocator's, with this layout.
            unsafe { System.dealloc(ptr, layout) };
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let s = self.state();
        let at = ptr as usize;
        if s.hot.holds(at) {
            // The newest allocation of the current chunk grows or shrinks in place.
            if at + layout.size() == s.hot.next {
                if let Some(end) = at.checked_add(new_size)
                    && end <= s.hot.end()
                {
                    s.hot.next = end;
                    return ptr;
                }
            } else if new_size <= layout.size() {
                return ptr;
            }
        } else if s.chunks.iter().any(|c| c.holds(at)) {
            if new_size <= layout.size() {
                return ptr;
            }
        } else {
            // SAFETY: the system allocator's pointer, with its layout.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: the caller's layout, with the new size (valid by realloc's contract).
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: a non-zero size, by realloc's contract.
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both ranges are valid for the smaller size and do not overlap.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
    }
}

#[cfg(test)]
mod tests;
