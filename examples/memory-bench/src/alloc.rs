//! A global allocator that counts, so the operator can report allocations
//! per reconcile and the heap it holds: [`CountingAlloc`] wraps one of
//! three allocators ([`Allocator`]: the system's, jemalloc, mimalloc),
//! adds one to a counter on every `alloc` (and `realloc`, which may move a
//! block), and keeps the bytes live and their peak. The count is the same
//! whichever allocator is underneath, so heap figures compare across them.
//!
//! The heap figures are what the program holds, not what the process
//! keeps resident: an allocator keeps freed memory for reuse (glibc in one
//! arena per thread that allocated, rarely giving it back), so VmRSS can
//! stay well above the heap after a burst of work. [`malloc_info`] reads
//! glibc's side of that gap.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};

/// The environment variable that chooses the allocator under the counter,
/// read on the process's first allocation (before `main`, so that every
/// block is freed by the allocator that gave it).
pub const ALLOCATOR_VAR: &str = "MEMORY_BENCH_ALLOCATOR";

/// The allocators [`CountingAlloc`] can wrap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Allocator {
    /// Rust's `System`: glibc's malloc on Linux.
    #[default]
    System,
    /// jemalloc (`tikv-jemallocator`), with its default options.
    Jemalloc,
    /// mimalloc (`mimalloc`), with its default options.
    Mimalloc,
}

impl Allocator {
    /// The word used on command lines, in [`ALLOCATOR_VAR`] and in reports.
    pub const fn as_str(self) -> &'static str {
        match self {
            Allocator::System => "system",
            Allocator::Jemalloc => "jemalloc",
            Allocator::Mimalloc => "mimalloc",
        }
    }

    fn from_bytes(word: &[u8]) -> Option<Self> {
        [Allocator::System, Allocator::Jemalloc, Allocator::Mimalloc]
            .into_iter()
            .find(|a| a.as_str().as_bytes() == word)
    }
}

/// Not chosen yet; otherwise `Allocator as u8 + 1`.
const UNCHOSEN: u8 = 0;

/// The chosen allocator, counting.
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
    /// Which allocator serves the blocks, once chosen.
    chosen: AtomicU8,
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
    /// A counter at zero over the allocator [`ALLOCATOR_VAR`] names
    /// (`system` when it is unset or names none).
    pub const fn new() -> Self {
        CountingAlloc {
            allocations: AtomicU64::new(0),
            live: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            chosen: AtomicU8::new(UNCHOSEN),
        }
    }

    /// A counter at zero over `allocator`, whatever the environment says.
    pub const fn over(allocator: Allocator) -> Self {
        CountingAlloc {
            allocations: AtomicU64::new(0),
            live: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            chosen: AtomicU8::new(allocator as u8 + 1),
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

    /// The allocator under the counter.
    pub fn allocator(&self) -> Allocator {
        match self.chosen.load(Ordering::Relaxed) {
            UNCHOSEN => {
                let allocator = from_environment();
                // Threads racing here read the same variable, so any
                // winner stores the same choice.
                self.chosen.store(allocator as u8 + 1, Ordering::Relaxed);
                allocator
            }
            n if n == Allocator::Jemalloc as u8 + 1 => Allocator::Jemalloc,
            n if n == Allocator::Mimalloc as u8 + 1 => Allocator::Mimalloc,
            _ => Allocator::System,
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

/// The allocator [`ALLOCATOR_VAR`] names, without allocating: this runs
/// inside the first allocation.
fn from_environment() -> Allocator {
    let name = c"MEMORY_BENCH_ALLOCATOR";
    // SAFETY: `name` is NUL-terminated; getenv returns NULL or a pointer
    // into the environment, read at once and before any thread of ours
    // could change it (the harness sets it for the child, not at run time).
    let value = unsafe { libc::getenv(name.as_ptr()) };
    if value.is_null() {
        return Allocator::System;
    }
    // SAFETY: a non-NULL getenv result is a NUL-terminated string.
    let bytes = unsafe { std::ffi::CStr::from_ptr(value) }.to_bytes();
    Allocator::from_bytes(bytes).unwrap_or_default()
}

static JEMALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
static MIMALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The allocator behind `allocator`.
fn inner(allocator: Allocator) -> &'static dyn GlobalAlloc {
    match allocator {
        Allocator::System => &System,
        Allocator::Jemalloc => &JEMALLOC,
        Allocator::Mimalloc => &MIMALLOC,
    }
}

// SAFETY: every call is forwarded unchanged to one allocator, the same for
// the life of the process (chosen once, on the first call), which upholds
// `GlobalAlloc`'s contract; the counters are atomics that never allocate.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.allocations.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's `layout` obligations are passed on as they are.
        let ptr = unsafe { inner(self.allocator()).alloc(layout) };
        if !ptr.is_null() {
            self.grew(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.allocations.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as `alloc`.
        let ptr = unsafe { inner(self.allocator()).alloc_zeroed(layout) };
        if !ptr.is_null() {
            self.grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from the same allocator through this one with
        // `layout`.
        unsafe { inner(self.allocator()).dealloc(ptr, layout) };
        self.shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.allocations.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as `dealloc`, with the caller's `new_size` obligations.
        let moved = unsafe { inner(self.allocator()).realloc(ptr, layout, new_size) };
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

/// glibc's own account of its arenas (`mallinfo2`), in KiB: what the
/// allocator holds from the system against what the program uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MallocInfo {
    /// Bytes in the arenas' heaps (`arena`: the main arena's `brk` heap
    /// and the other arenas' mmapped heaps).
    pub arena_kib: u64,
    /// Bytes in blocks mmapped on their own (`hblkhd`).
    pub mmap_kib: u64,
    /// Bytes free inside the arenas (`fordblks`): held, not used.
    pub free_kib: u64,
}

/// glibc's account of its arenas; `None` off glibc.
pub fn malloc_info() -> Option<MallocInfo> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 takes no arguments and returns a plain struct.
        let info = unsafe { libc::mallinfo2() };
        let kib = |bytes: usize| u64::try_from(bytes / 1024).unwrap_or(u64::MAX);
        Some(MallocInfo {
            arena_kib: kib(info.arena),
            mmap_kib: kib(info.hblkhd),
            free_kib: kib(info.fordblks),
        })
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heap_follows_allocations_and_keeps_its_peak() {
        for allocator in [Allocator::System, Allocator::Jemalloc, Allocator::Mimalloc] {
            let counting = CountingAlloc::over(allocator);
            assert_eq!(counting.allocator(), allocator);
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

    #[test]
    fn allocator_names_read_back() {
        for allocator in [Allocator::System, Allocator::Jemalloc, Allocator::Mimalloc] {
            assert_eq!(
                Allocator::from_bytes(allocator.as_str().as_bytes()),
                Some(allocator)
            );
        }
        assert_eq!(Allocator::from_bytes(b"tcmalloc"), None);
    }

    #[test]
    fn glibc_accounts_for_its_arenas() {
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            let info = malloc_info().expect("glibc's mallinfo2");
            assert!(info.arena_kib > 0, "{info:?}");
        }
    }
}
