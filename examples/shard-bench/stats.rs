//! Percentiles and the table rows the benchmarks print.

use std::time::Duration;

/// The nearest-rank percentile `p` (0–100) of `values`; `None` when empty.
pub fn percentile(values: &[Duration], p: f64) -> Option<Duration> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Seconds with two decimals, or `-`.
pub fn secs(value: Option<Duration>) -> String {
    value.map_or_else(|| "-".into(), |d| format!("{:.2}", d.as_secs_f64()))
}

/// One row: `label`, p50, p90, max of `values`, and a note.
pub fn row(label: &str, values: &[Duration], note: &str) -> String {
    format!(
        "  {label:<44} {:>6} {:>6} {:>6}  {note}",
        secs(percentile(values, 50.0)),
        secs(percentile(values, 90.0)),
        secs(values.iter().max().copied()),
    )
}

/// The header above [`row`]s.
pub fn header(title: &str) -> String {
    format!(
        "{title}\n  {:<44} {:>6} {:>6} {:>6}",
        "phase (s after the event)", "p50", "p90", "max"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let ms = |v: &[u64]| {
            v.iter()
                .map(|m| Duration::from_millis(*m))
                .collect::<Vec<_>>()
        };
        let values = ms(&[5, 1, 4, 2, 3]);
        assert_eq!(percentile(&values, 50.0), Some(Duration::from_millis(3)));
        assert_eq!(percentile(&values, 90.0), Some(Duration::from_millis(5)));
        assert_eq!(percentile(&[], 50.0), None);
    }
}
