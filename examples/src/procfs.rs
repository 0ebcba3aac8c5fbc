//! A process's resident memory, read from `/proc/<pid>/status`, and its
//! CPU time, read from `/proc/<pid>/stat`: what the benchmarks report for
//! their own process and for the operator processes they start.

/// Clock ticks per second of `/proc/<pid>/stat`'s CPU times (`USER_HZ`,
/// 100 on every Linux architecture the benchmarks run on).
const TICKS_PER_SECOND: f64 = 100.0;

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

/// CPU time process `pid` (`None`: this process) has used so far, user
/// plus system, its own threads and not its children, in milliseconds;
/// `None` when its `/proc/<pid>/stat` cannot be read.
pub fn cpu_ms(pid: Option<u32>) -> Option<f64> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/stat"),
        None => "/proc/self/stat".to_owned(),
    };
    cpu_ms_of(&std::fs::read_to_string(path).ok()?)
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
            assert!(cpu_ms(None).is_some());
        }
    }

    #[test]
    fn cpu_fields_are_counted_after_the_command_name() {
        let stat = "42 (race bench) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0";
        assert_eq!(cpu_ms_of(stat), Some(3000.0));
    }
}
