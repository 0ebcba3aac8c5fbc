//! `results.json`.

use std::path::Path;

use anyhow::Context as _;

use crate::race::Report;

/// Write `report` to `dir/results.json`, creating `dir` if needed.
///
/// # Errors
///
/// When the directory or file cannot be written.
pub(crate) fn write(dir: &Path, report: &Report) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join("results.json");
    let mut text = serde_json::to_string_pretty(report)?;
    text.push('\n');
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use crate::race::{Report, StrategyResult};

    #[test]
    fn results_json_has_exactly_the_documented_keys() {
        let report = Report {
            scenario: "kueue".into(),
            pods: 1,
            writers: 1,
            results: vec![StrategyResult {
                strategy: "lax".into(),
                wall_s: 1.0,
                writes_per_s: 1.0,
                p50_ms: 1.0,
                p99_ms: 1.0,
                requests: 1,
                conflicts: 0,
                retries: 0,
                errors: 0,
                lost_writes: 0,
                requests_by_verb: [0, 1, 0, 0],
            }],
        };
        let v = serde_json::to_value(&report).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["pods", "results", "scenario", "writers"]);
        let r = v["results"][0].as_object().unwrap();
        let mut keys: Vec<&str> = r.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "conflicts",
                "errors",
                "lost_writes",
                "p50_ms",
                "p99_ms",
                "requests",
                "retries",
                "strategy",
                "wall_s",
                "writes_per_s"
            ]
        );
    }
}
