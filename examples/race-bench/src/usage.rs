//! What the benchmark client itself uses: CPU time and peak memory, read
//! from procfs.

/// The peak resident set size of this process in KiB (`VmHWM` in
/// `/proc/self/status`); `None` where procfs is unavailable.
pub fn peak_rss_kib() -> Option<u64> {
    concord_examples::procfs::memory(None)
        .ok()
        .map(|m| m.hwm_kib)
}

/// Start a new peak: reset `VmHWM` to the current resident set (writing
/// `5` to `/proc/self/clear_refs`), so that [`peak_rss_kib`] afterwards is
/// the peak of what ran in between. Whether the reset worked; where it
/// does not, the peak stays the process-wide one.
pub(crate) fn reset_peak_rss() -> bool {
    concord_examples::procfs::reset_peak(None)
}

/// CPU time this process has used so far (user plus system), in
/// milliseconds; `None` where procfs is unavailable.
pub(crate) fn cpu_ms() -> Option<f64> {
    concord_examples::procfs::cpu_ms(None)
}

/// CPU time process `pid` has used so far (user plus system, its own
/// threads, not its children), in milliseconds; `None` when its
/// `/proc/<pid>/stat` cannot be read.
pub(crate) fn cpu_ms_of_pid(pid: u32) -> Option<f64> {
    concord_examples::procfs::cpu_ms(Some(pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_rss_is_readable_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(peak_rss_kib().is_some_and(|kib| kib > 0));
            assert!(cpu_ms().is_some());
        }
    }
}
