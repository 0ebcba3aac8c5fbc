//! `results.svg`: writes/s and lost writes per contender, drawn by hand.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;

use crate::race::Report;

const WIDTH: f64 = 760.0;
const PANEL: f64 = 170.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 50.0;
const GAP: f64 = 70.0;

/// Write `report` as a two-panel bar chart to `dir/results.svg`.
///
/// # Errors
///
/// When the file cannot be written.
pub(crate) fn write(dir: &Path, report: &Report) -> anyhow::Result<()> {
    let path = dir.join("results.svg");
    std::fs::write(&path, render(report)).with_context(|| format!("writing {}", path.display()))
}

/// The chart as SVG text.
pub(crate) fn render(report: &Report) -> String {
    let height = TOP + 2.0 * PANEL + GAP + 40.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">\
         race-bench {}: {} pods, {} writers</text>\n",
        WIDTH / 2.0,
        escape(&report.scenario),
        report.pods,
        report.writers
    );
    let rows: Vec<(&str, f64, f64)> = report
        .results
        .iter()
        .map(|r| (r.strategy.as_str(), r.writes_per_s, r.lost_writes as f64))
        .collect();
    let speeds: Vec<(&str, f64)> = rows.iter().map(|(n, s, _)| (*n, *s)).collect();
    let lost: Vec<(&str, f64)> = rows.iter().map(|(n, _, l)| (*n, *l)).collect();
    panel(
        &mut svg,
        TOP,
        "writes/s (higher is better)",
        &speeds,
        "#3b7dd8",
        0,
    );
    panel(
        &mut svg,
        TOP + PANEL + GAP,
        "lost writes (must be 0)",
        &lost,
        "#d8453b",
        0,
    );
    svg.push_str("</svg>\n");
    svg
}

/// One bar panel with its title, axis and value labels.
fn panel(
    svg: &mut String,
    top: f64,
    title: &str,
    bars: &[(&str, f64)],
    color: &str,
    decimals: usize,
) {
    let max = bars
        .iter()
        .map(|(_, v)| *v)
        .fold(0.0_f64, f64::max)
        .max(1.0);
    let inner = WIDTH - LEFT - RIGHT;
    let slot = inner / bars.len().max(1) as f64;
    let bottom = top + PANEL;
    let _ = writeln!(
        svg,
        "<text x=\"{LEFT}\" y=\"{}\" font-weight=\"bold\">{}</text>",
        top - 8.0,
        escape(title)
    );
    let _ = writeln!(
        svg,
        "<line x1=\"{LEFT}\" y1=\"{bottom}\" x2=\"{}\" y2=\"{bottom}\" stroke=\"#333\"/>",
        WIDTH - RIGHT
    );
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{max:.decimals$}</text>",
        LEFT - 6.0,
        top + 10.0
    );
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"{bottom}\" text-anchor=\"end\">0</text>",
        LEFT - 6.0
    );
    for (i, (name, value)) in bars.iter().enumerate() {
        let h = (value / max * (PANEL - 20.0)).max(0.0);
        let x = LEFT + slot * i as f64 + slot * 0.15;
        let w = slot * 0.7;
        let cx = x + w / 2.0;
        let _ = writeln!(
            svg,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{color}\"/>",
            bottom - h
        );
        let _ = writeln!(
            svg,
            "<text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{value:.decimals$}</text>",
            bottom - h - 4.0
        );
        let _ = writeln!(
            svg,
            "<text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            bottom + 16.0,
            escape(name)
        );
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::race::StrategyResult;

    #[test]
    fn chart_has_a_bar_per_contender_and_panel() {
        let result = |name: &str| StrategyResult {
            strategy: name.into(),
            wall_s: 1.0,
            writes_per_s: 100.0,
            p50_ms: 1.0,
            p99_ms: 2.0,
            requests: 100,
            conflicts: 0,
            retries: 0,
            errors: 0,
            lost_writes: 3,
            requests_by_verb: [0; 4],
        };
        let report = Report {
            scenario: "kueue".into(),
            pods: 100,
            writers: 4,
            results: vec![result("lax"), result("strict")],
        };
        let svg = render(&report);
        assert_eq!(svg.matches("<rect x=").count(), 4);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
    }
}
