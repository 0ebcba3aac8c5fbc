//! A global allocator that counts, so the operator can report allocations
//! per reconcile and the heap it holds: [`CountingAlloc`] wraps the system
//! allocator, adds one to a counter on every `alloc` (and `realloc`, which
//! may move a block), and keeps the bytes live and their peak.
//!
//! The heap figures are what the program holds, not what the process
//! keeps resident: glibc rarely gives freed memory back, so VmRSS never
//! falls below VmHWM and cannot tell a transient peak (the initial list)
//! from the steady state. The allocator's own count can.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The system allocator, counting.
///
/// ```no_run
/// #[global_allocator]
/// static ALLOC: concord_memory_bench::CountingAlloc = concord_memory_bench::CountingAlloc::new();
/// println!("{} allocations, {:?}", ALLOC.allocations(), ALLOC.heap());
/// ```
#[derive(Debug)]
pub struct CountingAlloc {
    allocations: AtomicU64,
    live: AtomicUsize,
    peak: AtomicUsize,
}

/// The bytes a program holds through its allocator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Heap {
    /// Bytes allocated and not yet freed, now.
    pub live: usize,
    /// The most `live` has been since the process started.
    pub peak: usize,
}

impl CountingAlloc {
    /// A counter at zero.
    pub const fn new() -> Self {
        CountingAlloc {
            allocations: AtomicU64::new(0),
            live: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }

    /// Allocations so far.
    pub fn allocations(&self) -> u64 {
        self.allocations.load(Ordering::Relaxed)
    }

    /// The bytes held now, and their peak.
    pub fn heap(&self) -> Heap {
        Heap {
            live: self.live.load(Ordering::Relaxed),
            peak: self.peak.load(Ordering::Relaxed),
        }
    }

    fn grew(&self, bytes: usize) {
        let live = self.live.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.peak.fetch_max(live, Ordering::Relaxed);
    }

    fn shrank(&self, bytes: usize) {
        self.live.fetch_sub(bytes, Ordering::Relaxed);
    }
}

impl Default for CountingAlloc {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: every call is forwarded unchanged to `System`, which upholds
// `GlobalAlloc`'s contract; the counters are atomics that never allocate.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.allocations.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's `layout` obligations are passed on as they are.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            self.grew(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.allocations.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            self.grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through this allocator with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        self.shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.allocations.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as `dealloc`, with the caller's `new_size` obligations.
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        // On failure the old block stays allocated, unchanged.
        if !moved.is_null() {
            if new_size >= layout.size() {
                self.grew(new_size - layout.size());
            } else {
                self.shrank(layout.size() - new_size);
            }
        }
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heap_follows_allocations_and_keeps_its_peak() {
        let counting = CountingAlloc::new();
        let small = Layout::from_size_align(64, 8).expect("a layout");
        // SAFETY: each block is freed once, with the layout it was given.
        unsafe {
            let a = counting.alloc(small);
            let b = counting.alloc_zeroed(small);
            assert_eq!(
                counting.heap(),
                Heap {
                    live: 128,
                    peak: 128
                }
            );
            let b = counting.realloc(b, small, 256);
            assert_eq!(
                counting.heap(),
                Heap {
                    live: 320,
                    peak: 320
                }
            );
            counting.dealloc(a, small);
            let b = counting.realloc(b, Layout::from_size_align(256, 8).expect("a layout"), 32);
            assert_eq!(
                counting.heap(),
                Heap {
                    live: 32,
                    peak: 320
                }
            );
            counting.dealloc(b, Layout::from_size_align(32, 8).expect("a layout"));
        }
        assert_eq!(counting.heap(), Heap { live: 0, peak: 320 });
        assert_eq!(counting.allocations(), 4);
    }
}
