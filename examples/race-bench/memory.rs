//! The benchmark client's own peak memory.

/// The peak resident set size of this process in KiB (`VmHWM` in
/// `/proc/self/status`); `None` where procfs is unavailable.
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

#[cfg(test)]
mod tests {
    #[test]
    fn peak_rss_is_readable_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(super::peak_rss_kib().is_some_and(|kib| kib > 0));
        }
    }
}
