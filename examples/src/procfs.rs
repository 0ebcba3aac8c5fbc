//! A process's resident memory, read from `/proc/<pid>/status`: what the
//! benchmarks report for their own process and for the operator processes
//! they start.

/// A process's resident set, in KiB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Memory {
    /// `VmRSS`: resident now.
    pub rss_kib: u64,
    /// `VmHWM`: the most ever resident (since the start, or since
    /// [`reset_peak`]).
    pub hwm_kib: u64,
}

/// Which process to read: this one, or another by pid.
fn status_path(pid: Option<u32>) -> String {
    match pid {
        Some(pid) => format!("/proc/{pid}/status"),
        None => "/proc/self/status".to_owned(),
    }
}

/// The resident memory of process `pid` (`None`: this process).
///
/// # Errors
///
/// When the status file cannot be read (no procfs, or the process is gone)
/// or lacks `VmRSS`/`VmHWM`; the message names the file.
pub fn memory(pid: Option<u32>) -> anyhow::Result<Memory> {
    let path = status_path(pid);
    let status =
        std::fs::read_to_string(&path).map_err(|e| anyhow::anyhow!("reading {path}: {e}"))?;
    let kib = |key: &str| kib_of(&status, key).ok_or_else(|| anyhow::anyhow!("no {key} in {path}"));
    Ok(Memory {
        rss_kib: kib("VmRSS:")?,
        hwm_kib: kib("VmHWM:")?,
    })
}

/// The value of `key` (such as `VmHWM:`) in a status file, in KiB.
fn kib_of(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Starts a new peak for process `pid` (`None`: this process): resets
/// `VmHWM` to the current resident set by writing `5` to
/// `/proc/<pid>/clear_refs`. Whether the reset worked; where it does not,
/// the peak stays the process-wide one.
pub fn reset_peak(pid: Option<u32>) -> bool {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/clear_refs"),
        None => "/proc/self/clear_refs".to_owned(),
    };
    std::fs::write(path, "5").is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_values_are_read_in_kib() {
        let status = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n";
        assert_eq!(kib_of(status, "VmHWM:"), Some(2048));
        assert_eq!(kib_of(status, "VmRSS:"), Some(1024));
        assert_eq!(kib_of(status, "VmSwap:"), None);
    }

    #[test]
    fn this_process_is_readable_on_linux() {
        if cfg!(target_os = "linux") {
            let m = memory(None).unwrap();
            assert!(m.rss_kib > 0 && m.hwm_kib >= m.rss_kib, "{m:?}");
        }
    }
}
