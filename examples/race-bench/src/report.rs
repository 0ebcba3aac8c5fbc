//! The Markdown table printed on stdout.

use std::fmt::Write as _;

use crate::Report;

/// `report` as a Markdown table: per contender the successful writes/s
/// (median of the rounds, with their range), with a baseline its ratio and
/// 95% interval, the fraction of `ceiling`, latencies, requests and every
/// kind of failure.
pub fn markdown(report: &Report) -> String {
    let mut out = format!(
        "race-bench: scenario {}, {} pods per contender in {} rounds of {}, {} writers, race {}{}, seed {}\n\n",
        report.scenario,
        report.pods,
        report.rounds,
        report.pods_per_round,
        report.writers,
        report.race,
        if report.race == "lockstep" {
            format!(" (intensity {})", report.race_intensity)
        } else {
            String::new()
        },
        report.seed,
    );
    let baseline = report.baseline.as_deref();
    out.push_str("| contender | writes/s | median [min–max] per round |");
    if let Some(name) = baseline {
        let _ = write!(out, " vs {name} [95% CI] |");
    }
    out.push_str(
        " vs direct call [95% CI] | of ceiling | p50 ms | p99 ms | requests | conflicts | retries | errors | failed | lost | raced | fallbacks | re-reads cache / GET | CPU ms/write | peak RSS MiB | requests by verb |\n",
    );
    out.push_str("| --- | ---: | ---: |");
    if baseline.is_some() {
        out.push_str(" ---: |");
    }
    out.push_str(" ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
    for r in &report.results {
        let (min, max) = r
            .rounds_writes_per_s
            .iter()
            .fold((f64::INFINITY, 0.0_f64), |(lo, hi), v| {
                (lo.min(*v), hi.max(*v))
            });
        let _ = write!(
            out,
            "| {} | {:.0} | {:.0} [{:.0}–{:.0}] |",
            r.strategy,
            r.writes_per_s,
            r.median_writes_per_s,
            if min.is_finite() { min } else { 0.0 },
            max
        );
        if baseline.is_some() {
            match r.vs_baseline {
                Some(i) if i.hi.is_finite() => {
                    let _ = write!(out, " {:.3}x [{:.3}, {:.3}]", i.ratio, i.lo, i.hi);
                    if let Some(v) = r.verdict {
                        let _ = write!(out, " {}", v.as_str());
                    }
                    out.push_str(" |");
                }
                Some(i) => {
                    let _ = write!(out, " {:.3}x [one round: no interval] |", i.ratio);
                }
                None => out.push_str(" - |"),
            }
        }
        match r.vs_direct {
            Some(i) if i.hi.is_finite() => {
                let _ = write!(out, " {:.3}x [{:.3}, {:.3}] |", i.ratio, i.lo, i.hi);
            }
            Some(i) => {
                let _ = write!(out, " {:.3}x |", i.ratio);
            }
            None => out.push_str(" - |"),
        }
        let _ = writeln!(
            out,
            " {} | {:.1} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.fraction_of_ceiling
                .map_or("-".into(), |f| format!("{:.2}", f)),
            r.p50_ms,
            r.p99_ms,
            r.requests,
            r.conflicts,
            r.retries,
            r.errors,
            r.failed_writes,
            r.lost_writes,
            r.raced_writes,
            r.fallbacks,
            match (r.rereads_from_cache, r.rereads_by_get) {
                (Some(cache), Some(get)) => format!("{cache} / {get}"),
                _ => "-".into(),
            },
            r.cpu_ms_per_write.map_or("-".into(), |c| format!("{c:.3}")),
            r.peak_rss_mib.map_or("-".into(), |m| format!("{m:.1}")),
            r.verbs()
        );
    }
    out.push_str(&crate::targets::markdown(report));
    if report
        .results
        .iter()
        .any(|r| r.rereads_from_cache.is_some() || r.rereads_by_get.is_some())
    {
        out.push_str(
            "\nRe-reads after a conflict: every concord contender re-reads from a watch cache, as the \
             controller-runtime peer reads its informer's: `manager-*` from the manager's shared cache, the \
             direct ones from the benchmark's own pod watch (a GET only when it has not caught up within \
             50 ms). `raw` has no cache: every re-read of its is a GET. `-`: not counted (not concord).\n",
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Interval;
    use crate::test_support::{report, result};

    #[test]
    fn the_table_shows_the_interval_and_its_verdict() {
        let mut strict = result("strict", 95.0, 0);
        let i = Interval {
            ratio: 0.95,
            lo: 0.91,
            hi: 0.99,
            rounds: 5,
        };
        strict.vs_baseline = Some(i);
        strict.verdict = Some(i.against(0.95));
        let mut r = report(vec![result("lax", 100.0, 3), strict]);
        r.baseline = Some("lax".into());
        let table = markdown(&r);
        assert!(table.contains("| vs lax [95% CI] |"), "{table}");
        assert!(table.contains("0.950x [0.910, 0.990] undecided"), "{table}");
    }
}
