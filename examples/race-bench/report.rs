//! The Markdown table printed on stdout.

use std::fmt::Write as _;

use crate::race::Report;

/// `report` as a Markdown table; with a `baseline`, a column comparing every
/// contender's writes/s with it.
pub fn markdown(report: &Report, baseline: Option<&str>) -> String {
    let base = baseline
        .and_then(|b| report.result(b))
        .map(|r| r.writes_per_s);
    let mut out = format!(
        "race-bench: scenario {}, {} pods, {} writers\n\n",
        report.scenario, report.pods, report.writers
    );
    out.push_str("| strategy | wall s | writes/s |");
    if let Some(name) = baseline {
        let _ = write!(out, " vs {name} |");
    }
    out.push_str(" p50 ms | p99 ms | requests | conflicts | retries | errors | lost writes | requests by verb |\n");
    out.push_str("| --- | ---: | ---: |");
    if baseline.is_some() {
        out.push_str(" ---: |");
    }
    out.push_str(" ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
    for r in &report.results {
        let _ = write!(
            out,
            "| {} | {:.2} | {:.0} |",
            r.strategy, r.wall_s, r.writes_per_s
        );
        if baseline.is_some() {
            match base.filter(|b| *b > 0.0) {
                Some(b) => {
                    let _ = write!(out, " {:.3}x |", r.writes_per_s / b);
                }
                None => out.push_str(" - |"),
            }
        }
        let _ = writeln!(
            out,
            " {:.1} | {:.1} | {} | {} | {} | {} | {} | {} |",
            r.p50_ms,
            r.p99_ms,
            r.requests,
            r.conflicts,
            r.retries,
            r.errors,
            r.lost_writes,
            r.verbs()
        );
    }
    out
}
