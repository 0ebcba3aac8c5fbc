//! The status line both operators print on stdout, four times a second:
//!
//! ```text
//! status cached=10000 synced=true reconciles=20000 writes=10000 failed=0 allocs=123456 reconcile_us=4000000 decode_us=80000 heap_kib=30000 heap_peak_kib=31000 malloc_arena_kib=40000 malloc_free_kib=9000 trims=2 trim_us=3000
//! ```
//!
//! From `reconcile_us` on they are concord's only (the Go peer leaves them
//! out: 0): the time its reconciles took, the time its compact cache spent
//! decoding, the heap its allocator holds now and at its peak, glibc's
//! arenas and the bytes free in them (on glibc only), and the trims of
//! glibc's free memory it made and their time.

use std::fmt;

/// What an operator reports of itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// Objects in its cache.
    pub cached: u64,
    /// Whether its cache says it has listed everything once: the Go
    /// peer's `WaitForCacheSync`, the concord store's `wait_until_ready`.
    pub synced: bool,
    /// Reconciles started.
    pub reconciles: u64,
    /// Writes that succeeded.
    pub writes: u64,
    /// Writes that failed (a conflict the Go peer requeues counts here).
    pub failed: u64,
    /// Allocations so far: the counting allocator's count in concord's
    /// operator, `runtime.MemStats.Mallocs` in the Go peer.
    pub allocs: u64,
    /// Microseconds the reconciles took, summed (concord only).
    pub reconcile_us: u64,
    /// Microseconds a compact cache spent decoding copies (concord only).
    pub decode_us: u64,
    /// KiB the process holds through its allocator now (concord only).
    pub heap_kib: u64,
    /// The most `heap_kib` has been since the process started (concord
    /// only).
    pub heap_peak_kib: u64,
    /// KiB glibc's arenas hold from the system, including blocks mmapped
    /// on their own (concord on glibc only).
    pub malloc_arena_kib: u64,
    /// KiB free inside glibc's arenas (concord on glibc only).
    pub malloc_free_kib: u64,
    /// Trims of glibc's free memory so far (`malloc_trim`).
    pub trims: u64,
    /// Microseconds those trims took, summed.
    pub trim_us: u64,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "status cached={} synced={} reconciles={} writes={} failed={} allocs={} reconcile_us={} decode_us={} heap_kib={} heap_peak_kib={} malloc_arena_kib={} malloc_free_kib={} trims={} trim_us={}",
            self.cached,
            self.synced,
            self.reconciles,
            self.writes,
            self.failed,
            self.allocs,
            self.reconcile_us,
            self.decode_us,
            self.heap_kib,
            self.heap_peak_kib,
            self.malloc_arena_kib,
            self.malloc_free_kib,
            self.trims,
            self.trim_us
        )
    }
}

impl Status {
    /// Reads a status line; `None` for any other line.
    pub fn parse(line: &str) -> Option<Status> {
        let rest = line.strip_prefix("status ")?;
        let field = |name: &str| {
            rest.split_whitespace()
                .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
        };
        let number = |name: &str| field(name)?.parse::<u64>().ok();
        Some(Status {
            cached: number("cached")?,
            synced: field("synced")?.parse().ok()?,
            reconciles: number("reconciles")?,
            writes: number("writes")?,
            failed: number("failed")?,
            allocs: number("allocs")?,
            reconcile_us: number("reconcile_us").unwrap_or(0),
            decode_us: number("decode_us").unwrap_or(0),
            heap_kib: number("heap_kib").unwrap_or(0),
            heap_peak_kib: number("heap_peak_kib").unwrap_or(0),
            malloc_arena_kib: number("malloc_arena_kib").unwrap_or(0),
            malloc_free_kib: number("malloc_free_kib").unwrap_or(0),
            trims: number("trims").unwrap_or(0),
            trim_us: number("trim_us").unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_printed_status_reads_back() {
        let status = Status {
            cached: 3,
            synced: true,
            reconciles: 5,
            writes: 2,
            failed: 1,
            allocs: 99,
            reconcile_us: 7,
            decode_us: 3,
            heap_kib: 40,
            heap_peak_kib: 41,
            malloc_arena_kib: 50,
            malloc_free_kib: 9,
            trims: 2,
            trim_us: 300,
        };
        assert_eq!(Status::parse(&status.to_string()), Some(status));
    }

    #[test]
    fn other_lines_are_not_statuses() {
        assert_eq!(Status::parse("created 3 pods"), None);
        assert_eq!(Status::parse("status cached=x synced=true"), None);
    }
}
