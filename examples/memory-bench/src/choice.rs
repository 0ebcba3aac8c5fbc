//! What the concord operator allocates with: an allocator under the
//! counting wrapper, and whether it trims glibc's free memory when idle.

use crate::alloc::{ALLOCATOR_VAR, Allocator};

/// One way for the concord operator to hold its memory, compared in the
/// same rounds with `--allocators`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AllocatorChoice {
    /// glibc's malloc (Rust's `System`), as it comes: the manager's
    /// `MemoryRelease::Off`.
    #[default]
    System,
    /// glibc's malloc, with `malloc_trim(0)` each time reconciles stop for
    /// a second: the manager's `MemoryRelease::WhenIdle` (its default).
    SystemTrim,
    /// glibc's malloc with at most two arenas (`MALLOC_ARENA_MAX=2`)
    /// instead of up to eight per core.
    SystemArenas2,
    /// glibc's malloc with one arena (`MALLOC_ARENA_MAX=1`): every
    /// thread allocates from, and frees into, the same one.
    SystemArena1,
    /// jemalloc, with its default options.
    Jemalloc,
    /// mimalloc, with its default options.
    Mimalloc,
}

impl AllocatorChoice {
    /// The word used on command lines and in reports.
    pub const fn as_str(self) -> &'static str {
        match self {
            AllocatorChoice::System => "system",
            AllocatorChoice::SystemTrim => "system-trim",
            AllocatorChoice::SystemArenas2 => "system-arenas2",
            AllocatorChoice::SystemArena1 => "system-arena1",
            AllocatorChoice::Jemalloc => "jemalloc",
            AllocatorChoice::Mimalloc => "mimalloc",
        }
    }

    /// The allocator under the counter.
    pub const fn allocator(self) -> Allocator {
        match self {
            AllocatorChoice::System
            | AllocatorChoice::SystemTrim
            | AllocatorChoice::SystemArenas2
            | AllocatorChoice::SystemArena1 => Allocator::System,
            AllocatorChoice::Jemalloc => Allocator::Jemalloc,
            AllocatorChoice::Mimalloc => Allocator::Mimalloc,
        }
    }

    /// Whether the operator trims when idle.
    pub const fn trims(self) -> bool {
        matches!(self, AllocatorChoice::SystemTrim)
    }

    /// The variables added to the operator's environment.
    pub(crate) fn env(self) -> Vec<(&'static str, &'static str)> {
        let mut env = vec![(ALLOCATOR_VAR, self.allocator().as_str())];
        match self {
            AllocatorChoice::SystemArenas2 => env.push(("MALLOC_ARENA_MAX", "2")),
            AllocatorChoice::SystemArena1 => env.push(("MALLOC_ARENA_MAX", "1")),
            AllocatorChoice::System
            | AllocatorChoice::SystemTrim
            | AllocatorChoice::Jemalloc
            | AllocatorChoice::Mimalloc => {}
        }
        env
    }
}
