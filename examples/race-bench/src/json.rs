//! `results.json`, and `results.md` beside it (the table printed on stdout).

use std::path::Path;

use anyhow::Context as _;

use crate::Report;

/// Write `report` to `dir/results.json` and its Markdown table to
/// `dir/results.md`, creating `dir` if needed.
///
/// # Errors
///
/// When the directory or file cannot be written.
pub(crate) fn write(dir: &Path, report: &Report) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join("results.json");
    let mut text = serde_json::to_string_pretty(report)?;
    text.push('\n');
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    // The table printed on stdout, as a file a book page can include.
    let path = dir.join("results.md");
    std::fs::write(&path, crate::markdown(report))
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use crate::test_support::{report, result};

    /// The keys `results.json` has always had; new keys are only added.
    const OLD_RESULT_KEYS: [&str; 10] = [
        "conflicts",
        "errors",
        "lost_writes",
        "p50_ms",
        "p99_ms",
        "requests",
        "retries",
        "strategy",
        "wall_s",
        "writes_per_s",
    ];

    #[test]
    fn results_json_keeps_the_old_keys_and_adds_the_new() {
        let v = serde_json::to_value(report(vec![result("lax", 1.0, 0)])).unwrap();
        let top = v.as_object().unwrap();
        for key in ["pods", "results", "scenario", "writers", "rounds", "race"] {
            assert!(top.contains_key(key), "{key}");
        }
        let r = v["results"][0].as_object().unwrap();
        for key in OLD_RESULT_KEYS.iter().chain(&[
            "failed_writes",
            "fallbacks",
            "rereads_from_cache",
            "rereads_by_get",
            "cpu_ms_per_write",
            "peak_rss_mib",
            "rounds_writes_per_s",
            "vs_baseline",
            "fraction_of_ceiling",
        ]) {
            assert!(r.contains_key(*key), "{key}");
        }
        assert!(!r.contains_key("requests_by_verb"));
    }
}
