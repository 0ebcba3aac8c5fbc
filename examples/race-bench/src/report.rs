//! The Markdown table printed on stdout.

use std::fmt::Write as _;

use crate::Report;

/// `report` as two Markdown tables. First what each contender's writes cost
/// — per write: requests, body bytes sent and received, the client's CPU
/// time and the API server's — which the machine's load barely moves; then
/// the successful writes/s (median of the rounds, with their range), with a
/// baseline its ratio, interval, verdict and the round that decided it, the
/// fraction of `ceiling`, latencies, requests and every kind of failure.
pub fn markdown(report: &Report) -> String {
    let mut out = format!(
        "race-bench: scenario {}, {} pods per contender in {} rounds of {}{}, {} writers, race {}{}, seed {}{}\n\n",
        report.scenario,
        report.rounds * report.pods_per_round,
        report.rounds,
        report.pods_per_round,
        match report.stopping.as_str() {
            "until-decided" => format!(
                " (until decided: at most {}, stopped: {}; every interval at {:.2}% per look, Bonferroni over the looks)",
                report.max_rounds,
                report.stopped_because,
                report.alpha_per_look * 100.0
            ),
            _ => String::new(),
        },
        report.writers,
        report.race,
        if report.race == "lockstep" {
            format!(" (intensity {})", report.race_intensity)
        } else {
            String::new()
        },
        report.seed,
        match &report.manager_cache {
            Some(layout) => format!(", the manager's cache {layout}"),
            None => String::new(),
        },
    );
    out.push_str(&costs(report));
    let baseline = report.baseline.as_deref();
    out.push_str("| contender | writes/s | median [min–max] per round |");
    if let Some(name) = baseline {
        let _ = write!(out, " vs {name} [95% CI] |");
    }
    out.push_str(
        " vs direct call [95% CI] | of ceiling | p50 ms | p99 ms | requests | conflicts | retries | errors | failed | lost | raced | fallbacks | re-reads cache / GET | peak RSS MiB | requests by verb |\n",
    );
    out.push_str("| --- | ---: | ---: |");
    if baseline.is_some() {
        out.push_str(" ---: |");
    }
    out.push_str(" ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
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
                        let _ = write!(
                            out,
                            " {} after {} rounds",
                            v.as_str(),
                            r.decided_after_rounds.unwrap_or(i.rounds as u64)
                        );
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
            " {} | {:.1} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
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

/// The first table: what a write costs each contender, figures that do
/// not move with the machine's load as writes/s does. `n/a`: not measured
/// (the API server's process is not known), never 0.
fn costs(report: &Report) -> String {
    let mut out = String::from(
        "costs per write (client: this process, or the peer's; server: the API server's process)\n\n\
         | contender | writes | requests/write | bytes sent/write | bytes received/write | client CPU ms/write | client CPU vs direct call [95% CI] | server CPU ms/write | failed | lost |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    let na = |v: Option<f64>, digits: usize| v.map_or("n/a".into(), |v| format!("{v:.digits$}"));
    for r in &report.results {
        let cpu_vs_direct = match r.cpu_vs_direct {
            Some(i) if i.hi.is_finite() => format!("{:.3}x [{:.3}, {:.3}]", i.ratio, i.lo, i.hi),
            Some(i) => format!("{:.3}x", i.ratio),
            None => "-".into(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {:.3} | {} | {} | {} | {} | {} | {} | {} |",
            r.strategy,
            r.writes,
            r.requests_per_write,
            na(r.bytes_sent_per_write, 0),
            na(r.bytes_received_per_write, 0),
            na(r.cpu_ms_per_write, 3),
            cpu_vs_direct,
            na(r.server_cpu_ms_per_write, 3),
            r.failed_writes,
            r.lost_writes
        );
    }
    if let Some(p) = &report.server_process {
        let _ = writeln!(out, "\nserver CPU: {p}");
    }
    out.push('\n');
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
        assert!(
            table.contains("0.950x [0.910, 0.990] undecided after 5 rounds"),
            "{table}"
        );
    }

    #[test]
    fn the_costs_come_first_and_an_unmeasured_server_is_not_zero() {
        let mut lax = result("lax", 100.0, 3);
        lax.server_cpu_ms_per_write = None;
        let mut guarded = result("guarded", 100.0, 0);
        guarded.server_cpu_ms_per_write = Some(1.25);
        let table = markdown(&report(vec![lax, guarded]));
        let costs = table.find("| contender | writes | requests/write |");
        let speed = table.find("| contender | writes/s |");
        assert!(costs.is_some() && costs < speed, "{table}");
        assert!(
            table.contains("| lax | 1 | 1.000 | 100 | 2000 | 0.100 | - | n/a | 0 | 3 |"),
            "{table}"
        );
        assert!(
            table.contains("| guarded | 1 | 1.000 | 100 | 2000 | 0.100 | - | 1.250 | 0 | 0 |"),
            "{table}"
        );
    }

    #[test]
    fn a_managers_client_cpu_is_shown_against_the_direct_calls() {
        let mut manager = result("manager-guarded", 90.0, 0);
        manager.cpu_vs_direct = Some(Interval {
            ratio: 1.36,
            lo: 1.3,
            hi: 1.42,
            rounds: 40,
        });
        let table = markdown(&report(vec![result("guarded", 100.0, 0), manager]));
        assert!(
            table.contains("| client CPU ms/write | client CPU vs direct call [95% CI] |"),
            "{table}"
        );
        assert!(
            table.contains("| 0.100 | 1.360x [1.300, 1.420] | "),
            "{table}"
        );
    }
}
