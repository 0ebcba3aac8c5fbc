//! The benchmark drivers: each runs a benchmark of `examples/` at small
//! scale and checks what its run must show (every object written, the
//! tables consistent, the safe strategies losing nothing). They print
//! figures and never assert them.
//!
//! ```text
//! cargo test -p concord-tests --test bench                    # every driver
//! cargo test -p concord-tests --test bench race_bench:: -- --nocapture   # one, with its tables
//! ```

mod memory_bench;
mod race_bench;
mod shard_bench;
mod stale_bench;
