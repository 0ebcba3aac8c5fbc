//! What the benchmark client itself uses: CPU time and peak memory, read
//! from procfs.

/// Clock ticks per second of `/proc/self/stat`'s CPU times (`USER_HZ`,
/// 100 on every Linux architecture the benchmark runs on).
const TICKS_PER_SECOND: f64 = 100.0;

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
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    cpu_ms_of(&stat)
}

/// CPU time process `pid` has used so far (user plus system, its own
/// threads, not its children), in milliseconds; `None` when its
/// `/proc/<pid>/stat` cannot be read.
pub(crate) fn cpu_ms_of_pid(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    cpu_ms_of(&stat)
}

/// Fields 14 and 15 (`utime`, `stime`) of a `/proc/<pid>/stat` line, in
/// milliseconds. The command name (field 2) may hold spaces, so fields are
/// counted after its closing parenthesis.
fn cpu_ms_of(stat: &str) -> Option<f64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: f64 = fields.next()?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    Some((utime + stime) * 1000.0 / TICKS_PER_SECOND)
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

    #[test]
    fn cpu_fields_are_counted_after_the_command_name() {
        let stat = "42 (race bench) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0";
        assert_eq!(cpu_ms_of(stat), Some(3000.0));
    }
}
