//! The report: every round's figures, their medians and ranges, the
//! concord/controller-runtime ratios with their intervals, the burst; as a
//! table for people and as JSON.

use std::fmt::Write as _;

use concord_race_bench::{Interval, median};
use serde::Serialize;

use crate::args::Args;
use crate::burst::BurstReport;
use crate::choice::AllocatorChoice;
use crate::measure::RunFigures;
use crate::objects::Kind;
use crate::operator::CacheMode;
use crate::summary::{OPERATORS, Ratio, Spread, side, tables};

/// Reads one figure of a run.
type Read = fn(&RunFigures) -> f64;

/// The figures summarised, each read from a [`RunFigures`].
const FIGURES: [(&str, Read); 6] = [
    ("synced VmHWM MiB", |r| mib(r.synced.hwm_kib)),
    ("synced VmRSS MiB", |r| mib(r.synced.rss_kib)),
    ("written VmHWM MiB", |r| mib(r.written.hwm_kib)),
    ("written VmRSS MiB", |r| mib(r.written.rss_kib)),
    ("lifetime VmHWM MiB", |r| mib(r.lifetime_hwm_kib)),
    ("allocations/reconcile", |r| r.allocations_per_reconcile),
];

/// The figures whose concord/controller-runtime ratio is reported.
const RATIOS: [&str; 3] = [
    "synced VmHWM MiB",
    "written VmHWM MiB",
    "lifetime VmHWM MiB",
];

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Everything one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// What the operators held.
    pub kind: Kind,
    /// How many.
    pub objects: usize,
    /// Rounds reported.
    pub rounds: usize,
    /// Rounds run first, not reported.
    pub warmup: usize,
    /// The concord operator's cache mode.
    pub cache: CacheMode,
    /// How the concord operator's cache held the objects.
    pub layout: concord::cache::CacheLayout,
    /// What the concord operator allocated with, each in every round; the
    /// first is the one compared with controller-runtime.
    pub allocators: Vec<AllocatorChoice>,
    /// The controller-runtime operator's (differs for `view` only).
    pub peer_cache: CacheMode,
    /// Seconds of settling before each reading.
    pub settle_secs: u64,
    /// Reconciles at once, in both operators.
    pub concurrency: u16,
    /// Every operator process of every round.
    pub runs: Vec<RunFigures>,
    /// Median, min and max of each figure per operator.
    pub spreads: Vec<Spread>,
    /// The ratios.
    pub ratios: Vec<Ratio>,
    /// The burst, when it ran.
    pub burst: Option<BurstReport>,
    /// With `--example`: the shipped example holding the objects.
    pub hold: Option<crate::hold::HoldReport>,
}

impl Report {
    /// An empty report for `args`.
    pub(crate) fn new(args: &Args) -> Self {
        Report {
            kind: args.kind,
            objects: args.pods,
            rounds: args.rounds,
            warmup: args.warmup,
            cache: args.cache,
            layout: args.layout,
            allocators: args.allocators.clone(),
            peer_cache: args.cache.peer(),
            settle_secs: args.settle_secs,
            concurrency: args.concurrency,
            runs: Vec::new(),
            spreads: Vec::new(),
            ratios: Vec::new(),
            burst: None,
            hold: None,
        }
    }

    /// The values of `figure` for `operator`, one per round in order:
    /// concord's on its first allocator choice.
    fn values(&self, operator: &str, read: Read) -> Vec<f64> {
        let first = self.allocators.first().copied().unwrap_or_default();
        let mut runs: Vec<&RunFigures> = self
            .runs
            .iter()
            .filter(|r| {
                r.operator == operator
                    && (r.operator != OPERATORS[0] || r.allocator == first.as_str())
            })
            .collect();
        runs.sort_by_key(|r| r.round);
        runs.into_iter().map(read).collect()
    }

    /// Computes the spreads and ratios from the runs.
    pub(crate) fn summarise(&mut self) {
        self.spreads.clear();
        self.ratios.clear();
        for (figure, read) in FIGURES {
            for operator in OPERATORS {
                let values = self.values(operator, read);
                if values.is_empty() {
                    continue;
                }
                let (median, min, max) = median_min_max(&values);
                self.spreads.push(Spread {
                    operator: operator.to_owned(),
                    figure: figure.to_owned(),
                    median,
                    min,
                    max,
                });
            }
            if RATIOS.contains(&figure) {
                let ours = self.values(OPERATORS[0], read);
                let theirs = self.values(OPERATORS[1], read);
                if let Some(interval) = Interval::paired(&ours, &theirs) {
                    self.ratios.push(Ratio {
                        figure: figure.to_owned(),
                        interval,
                        against_peer: side(&interval, 1.0, ["lower", "higher"]),
                        against_half: side(&interval, 0.5, ["within", "beyond"]),
                    });
                }
            }
        }
    }

    /// The spread of `figure` for `operator`.
    pub fn spread(&self, operator: &str, figure: &str) -> Option<&Spread> {
        self.spreads
            .iter()
            .find(|s| s.operator == operator && s.figure == figure)
    }
}

/// The median, the smallest and the largest of `values`.
fn median_min_max(values: &[f64]) -> (f64, f64, f64) {
    (
        median(values),
        values.iter().copied().fold(f64::INFINITY, f64::min),
        values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    )
}

/// One line about one operator process, printed as the rounds go.
pub(crate) fn run_line(r: &RunFigures) -> String {
    format!(
        "round {} {:<20} synced in {:>5.1} s: VmHWM {:>6.1} MiB, VmRSS {:>6.1} MiB | \
         {} of {} written in {:>5.1} s ({} writes, {} failed, {} reconciles, {:.0} allocations each): \
         VmHWM {:>6.1} MiB{}, VmRSS {:>6.1} MiB, CPU {:.1} s{}",
        r.round,
        if r.operator == OPERATORS[0] {
            format!("{}/{}", r.operator, r.allocator)
        } else {
            r.operator.to_owned()
        },
        r.sync_s,
        mib(r.synced.hwm_kib),
        mib(r.synced.rss_kib),
        r.written_objects,
        r.objects,
        r.write_pass_s,
        r.writes,
        r.failed,
        r.reconciles,
        r.allocations_per_reconcile,
        mib(r.written.hwm_kib),
        if r.peak_reset { " (write pass)" } else { "" },
        mib(r.written.rss_kib),
        r.write_cpu_ms / 1000.0,
        if r.synced_heap_kib > 0 {
            format!(
                " | heap: list peak {:.1} MiB, synced {:.1} MiB, written {:.1} MiB | glibc arenas {:.1} MiB ({:.1} free) synced, {:.1} MiB ({:.1} free) written | {} trims, {:.1} ms",
                mib(r.list_heap_peak_kib),
                mib(r.synced_heap_kib),
                mib(r.written_heap_kib),
                mib(r.synced_malloc.arena_kib),
                mib(r.synced_malloc.free_kib),
                mib(r.written_malloc.arena_kib),
                mib(r.written_malloc.free_kib),
                r.trims,
                r.trim_ms
            )
        } else {
            String::new()
        },
    )
}

/// The report as text tables.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    if !report.runs.is_empty() {
        let _ = writeln!(
            out,
            "\n{} {}, {} round(s) after {} warm-up, cache {}{}{}, concurrency {}, readings {} s after each phase\n",
            report.objects,
            report.kind.as_str(),
            report.rounds,
            report.warmup,
            report.cache.as_str(),
            match report.layout {
                concord::cache::CacheLayout::Decoded => "",
                concord::cache::CacheLayout::Compact => " in concord's compact layout",
            },
            if report.cache.peer() == report.cache {
                String::new()
            } else {
                format!(" (controller-runtime: {})", report.cache.peer().as_str())
            },
            report.concurrency,
            report.settle_secs
        );
        let figures: Vec<&str> = FIGURES.iter().map(|(figure, _)| *figure).collect();
        out.push_str(&tables(&report.spreads, &figures, &report.ratios));
        let failed: u64 = report.runs.iter().map(|r| r.failed).sum();
        let _ = writeln!(out, "\nfailed writes over all rounds: {failed}");
        if report.layout == concord::cache::CacheLayout::Compact {
            let concord: Vec<&RunFigures> = report
                .runs
                .iter()
                .filter(|r| r.operator == "concord")
                .collect();
            let decode = median(
                &concord
                    .iter()
                    .map(|r| r.decode_us_per_reconcile)
                    .collect::<Vec<_>>(),
            );
            let reconcile = median(&concord.iter().map(|r| r.reconcile_us).collect::<Vec<_>>());
            let _ = writeln!(
                out,
                "\ncompact cache, write pass (median of rounds): {decode:.1} µs of decoding per reconcile, {:.1}% of a reconcile's {reconcile:.0} µs",
                100.0 * decode / reconcile.max(f64::MIN_POSITIVE)
            );
        }
        out.push_str(&list_peak(report));
        out.push_str(&allocators(report));
    }
    if let Some(hold) = &report.hold {
        out.push_str(&crate::hold::table(hold));
    }
    if let Some(burst) = &report.burst {
        out.push_str(&crate::burst::table(burst));
    }
    out
}

/// concord's VmRSS once synced and after the write pass on each allocator
/// choice, with its heap and the write pass's time and CPU: medians over
/// the rounds. Empty when there is one choice on the default allocator.
fn allocators(report: &Report) -> String {
    if report.allocators == [AllocatorChoice::System] {
        return String::new();
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nconcord on each allocator (median over rounds; VmRSS written/synced is per round, then the median):\n"
    );
    let _ = writeln!(
        out,
        "| allocator | synced VmRSS MiB | written VmRSS MiB | written / synced | synced heap MiB | written heap MiB | glibc free at written MiB | write pass s | write-pass CPU s | trims (ms) |"
    );
    let _ = writeln!(
        out,
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for choice in &report.allocators {
        let runs: Vec<&RunFigures> = report
            .runs
            .iter()
            .filter(|r| r.operator == OPERATORS[0] && r.allocator == choice.as_str())
            .collect();
        if runs.is_empty() {
            continue;
        }
        let m = |read: &dyn Fn(&RunFigures) -> f64| {
            median(&runs.iter().map(|r| read(r)).collect::<Vec<_>>())
        };
        let glibc = if choice.allocator() == crate::alloc::Allocator::System {
            format!("{:.1}", m(&|r| mib(r.written_malloc.free_kib)))
        } else {
            "-".to_owned()
        };
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.1} | {:.2} | {:.1} | {:.1} | {glibc} | {:.0} | {:.1} | {:.0} ({:.1}) |",
            choice.as_str(),
            m(&|r| mib(r.synced.rss_kib)),
            m(&|r| mib(r.written.rss_kib)),
            m(&|r| r.written.rss_kib as f64 / r.synced.rss_kib.max(1) as f64),
            m(&|r| mib(r.synced_heap_kib)),
            m(&|r| mib(r.written_heap_kib)),
            m(&|r| r.write_pass_s),
            m(&|r| r.write_cpu_ms / 1000.0),
            m(&|r| r.trims as f64),
            m(&|r| r.trim_ms),
        );
    }
    out
}

/// The line on concord's heap through its initial list: the allocator's
/// peak from the start to the synced reading against what it held then,
/// median (min–max) over the rounds. Empty when no round reported it.
fn list_peak(report: &Report) -> String {
    let concord: Vec<&RunFigures> = report
        .runs
        .iter()
        .filter(|r| r.operator == OPERATORS[0] && r.synced_heap_kib > 0)
        .collect();
    if concord.is_empty() {
        return String::new();
    }
    let spread = |read: &dyn Fn(&RunFigures) -> f64| {
        median_min_max(&concord.iter().map(|r| read(r)).collect::<Vec<_>>())
    };
    let (peak, peak_lo, peak_hi) = spread(&|r| mib(r.list_heap_peak_kib));
    let (held, held_lo, held_hi) = spread(&|r| mib(r.synced_heap_kib));
    let (ratio, ratio_lo, ratio_hi) =
        spread(&|r| r.list_heap_peak_kib as f64 / r.synced_heap_kib as f64);
    format!(
        "\nconcord's heap (its allocator's live bytes, median (min–max) of rounds): \
         peak while the cache first filled {peak:.1} MiB ({peak_lo:.1}–{peak_hi:.1}), \
         held once synced {held:.1} MiB ({held_lo:.1}–{held_hi:.1}); \
         the initial list's peak is {ratio:.2}× ({ratio_lo:.2}–{ratio_hi:.2}) the steady state\n"
    )
}
