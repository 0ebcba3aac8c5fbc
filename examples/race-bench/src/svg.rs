//! `results.svg`: writes/s and lost writes per contender, drawn by hand.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;

use crate::Report;

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

/// The chart as SVG text: writes/s, then (with a baseline) each ratio to
/// it with its 95% interval and the floor, then lost writes.
pub(crate) fn render(report: &Report) -> String {
    let panels = if report.baseline.is_some() { 3.0 } else { 2.0 };
    let height = TOP + panels * (PANEL + GAP) - GAP + 40.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">\
         race-bench {}: {} pods, {} rounds, {} writers, race {}</text>\n",
        WIDTH / 2.0,
        escape(&report.scenario),
        report.pods,
        report.rounds,
        report.writers,
        escape(&report.race)
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
        "successful writes/s over all rounds (higher is better)",
        &speeds,
        "#3b7dd8",
        0,
    );
    let mut top = TOP + PANEL + GAP;
    if let Some(base) = &report.baseline {
        intervals(&mut svg, top, report, base);
        top += PANEL + GAP;
    }
    panel(
        &mut svg,
        top,
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

/// The ratio of every contender to `base` as a dot with its 95% interval,
/// and the floor `1 - max_regression` as a dashed line.
fn intervals(svg: &mut String, top: f64, report: &Report, base: &str) {
    let floor = 1.0 - report.max_regression / 100.0;
    let rows: Vec<(&str, f64, f64, f64)> = report
        .results
        .iter()
        .filter_map(|r| {
            r.vs_baseline.map(|i| {
                let hi = if i.hi.is_finite() { i.hi } else { i.ratio };
                let lo = if i.hi.is_finite() { i.lo } else { i.ratio };
                (r.strategy.as_str(), i.ratio, lo, hi)
            })
        })
        .collect();
    let max = rows.iter().map(|r| r.3).fold(1.1_f64, f64::max).min(10.0);
    let inner = WIDTH - LEFT - RIGHT;
    let slot = inner / rows.len().max(1) as f64;
    let bottom = top + PANEL;
    let y = |v: f64| bottom - (v.min(max) / max) * (PANEL - 20.0);
    let _ = writeln!(
        svg,
        "<text x=\"{LEFT}\" y=\"{}\" font-weight=\"bold\">writes/s ratio to {} with 95% interval, paired by round (dashed: floor {floor:.2})</text>",
        top - 8.0,
        escape(base)
    );
    let _ = writeln!(
        svg,
        "<line x1=\"{LEFT}\" y1=\"{bottom}\" x2=\"{}\" y2=\"{bottom}\" stroke=\"#333\"/>",
        WIDTH - RIGHT
    );
    let _ = writeln!(
        svg,
        "<line x1=\"{LEFT}\" y1=\"{0:.1}\" x2=\"{1}\" y2=\"{0:.1}\" stroke=\"#d8453b\" stroke-dasharray=\"5,4\"/>",
        y(floor),
        WIDTH - RIGHT
    );
    for (label, value) in [(format!("{max:.2}"), max), ("1.00".to_owned(), 1.0)] {
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{label}</text>",
            LEFT - 6.0,
            y(value) + 4.0
        );
    }
    for (i, (name, ratio, lo, hi)) in rows.iter().enumerate() {
        let cx = LEFT + slot * (i as f64 + 0.5);
        let _ = writeln!(
            svg,
            "<line class=\"ci\" x1=\"{cx:.1}\" y1=\"{:.1}\" x2=\"{cx:.1}\" y2=\"{:.1}\" stroke=\"#333\" stroke-width=\"2\"/>",
            y(*lo),
            y(*hi)
        );
        let _ = writeln!(
            svg,
            "<circle cx=\"{cx:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"#3b7dd8\"/>",
            y(*ratio)
        );
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\">{ratio:.2} [{lo:.2}, {hi:.2}]</text>",
            cx + 6.0,
            y(*ratio) - 6.0
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
    use crate::stats::Interval;
    use crate::test_support::{report, result};

    #[test]
    fn chart_has_a_bar_per_contender_and_an_interval_per_ratio() {
        let mut strict = result("strict", 90.0, 0);
        strict.vs_baseline = Some(Interval {
            ratio: 0.9,
            lo: 0.85,
            hi: 0.95,
            rounds: 3,
        });
        let mut r = report(vec![result("lax", 100.0, 3), strict]);
        let svg = render(&r);
        assert_eq!(svg.matches("<rect x=").count(), 4);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        r.baseline = Some("lax".into());
        let svg = render(&r);
        assert_eq!(svg.matches("class=\"ci\"").count(), 1);
        assert!(svg.contains("0.90 [0.85, 0.95]"));
    }
}
