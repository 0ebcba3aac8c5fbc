//! The `report` benchmark's figures, verdicts and Markdown tables (the
//! book's scaling page includes the files [`write`] produces).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result};
use serde_json::{Value, json};

use crate::placement::{IN_FLIGHT, Placement};
use crate::stats::{percentile, secs};

/// Label placement must reach this fraction of the PATCH ceiling.
pub const PLACEMENT_TARGET: f64 = 0.8;

/// Handovers of each kind a verdict needs.
pub const MIN_EVENTS: usize = 20;

/// What one clean leave or crash took, each phase from the signal.
#[derive(Debug, Default)]
pub struct Sample {
    pub moved: usize,
    /// Crash: how old the killed replica's last renewal was at the kill.
    pub renewal_age: Option<Duration>,
    /// Clean leave: the leaver drained, deleted its Lease and exited.
    pub gone: Option<Duration>,
    /// The last survivor dropped the departed member from its view.
    pub dropped: Duration,
    /// The last survivor acknowledged the view without it.
    pub acked: Duration,
    /// The first moved object started on its new owner.
    pub first_start: Duration,
    /// Every moved object had finished a reconcile on its new owner.
    pub all_done: Duration,
}

/// Everything one run measured.
pub struct Figures {
    /// `--shards` of the handover replicas: `hash` or `selector`.
    pub mode: String,
    /// Objects written while the handover replicas ran.
    pub placement_writes: usize,
    pub replicas: usize,
    pub objects: usize,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    pub hold: Duration,
    /// `--cache-layout`: how each replica's cache held the objects.
    pub cache_layout: String,
    pub leaves: Vec<Sample>,
    pub crashes: Vec<Sample>,
    pub joins: Vec<Duration>,
    pub placement: Placement,
    pub handover_reconciles: usize,
    pub handover_double: usize,
    pub reconciles: usize,
    pub double: usize,
    pub wall: Duration,
}

/// A verdict against a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Met,
    Missed,
    Undecided,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::Missed => "missed",
            Verdict::Undecided => "undecided",
        }
    }
}

fn all_done(samples: &[Sample]) -> Vec<Duration> {
    samples.iter().map(|s| s.all_done).collect()
}

impl Figures {
    /// Lease duration + one retry period (the renew period).
    pub fn crash_target(&self) -> Duration {
        self.lease_duration + self.retry_period
    }

    pub fn crash_p99(&self) -> Option<Duration> {
        percentile(&all_done(&self.crashes), 99.0)
    }

    /// Crash p99 against its target; undecided below [`MIN_EVENTS`] crashes.
    pub fn crash_verdict(&self) -> Verdict {
        match self.crash_p99() {
            _ if self.crashes.len() < MIN_EVENTS => Verdict::Undecided,
            Some(p99) if p99 <= self.crash_target() => Verdict::Met,
            Some(_) => Verdict::Missed,
            None => Verdict::Undecided,
        }
    }

    /// Placement rate over the ceiling's rate, against the faster and the
    /// slower of the two ceiling runs.
    pub fn placement_ratios(&self) -> (f64, f64) {
        let p = &self.placement;
        let placed = p.placed.as_secs_f64().max(f64::EPSILON);
        let fast = p.ceiling_before.min(p.ceiling_after).as_secs_f64();
        let slow = p.ceiling_before.max(p.ceiling_after).as_secs_f64();
        (fast / placed, slow / placed)
    }

    /// Met when placement reaches the target against the faster ceiling
    /// run, missed when it falls short even of the slower one.
    pub fn placement_verdict(&self) -> Verdict {
        let (low, high) = self.placement_ratios();
        if low >= PLACEMENT_TARGET {
            Verdict::Met
        } else if high < PLACEMENT_TARGET {
            Verdict::Missed
        } else {
            Verdict::Undecided
        }
    }

    fn settings(&self) -> String {
        format!(
            "lease duration {} s, renew deadline {} s, retry period {} s, caches {}",
            secs(Some(self.lease_duration)),
            secs(Some(self.renew_deadline)),
            secs(Some(self.retry_period)),
            self.cache_layout
        )
    }
}

fn rate(objects: usize, took: Duration) -> String {
    format!(
        "{:.0}",
        objects as f64 / took.as_secs_f64().max(f64::EPSILON)
    )
}

/// The targets and their verdicts.
pub fn summary(f: &Figures) -> String {
    let (low, high) = f.placement_ratios();
    let crash = f.crash_verdict();
    let why = if f.crashes.len() < MIN_EVENTS {
        format!(" (fewer than {MIN_EVENTS} crashes)")
    } else {
        String::new()
    };
    let mut out = format!(
        "{} replica processes, {} ConfigMaps, {}; the run took {:.1} min.\n\n",
        f.replicas,
        f.objects,
        f.settings(),
        f.wall.as_secs_f64() / 60.0
    );
    out.push_str("| target | figure | verdict |\n| --- | --- | --- |\n");
    out.push_str(&format!(
        "| crash (SIGKILL) handover p99 ≤ lease duration + one retry period ({} s) | {} s over {} crashes | {}{why} |\n",
        secs(Some(f.crash_target())),
        secs(f.crash_p99()),
        f.crashes.len(),
        crash.as_str()
    ));
    out.push_str(&format!(
        "| `label` placement ≥ {PLACEMENT_TARGET} × the API server's PATCH ceiling | {low:.2}× against the faster ceiling run, {high:.2}× against the slower | {} |\n",
        f.placement_verdict().as_str()
    ));
    out.push_str(&format!(
        "| objects reconciled by two replicas at once: 0 | {} in {} reconciles over the whole run (placement and handovers) | {} |\n",
        f.double,
        f.reconciles,
        if f.double == 0 { "met" } else { "missed" }
    ));
    out
}

fn row(out: &mut String, label: &str, moved: &str, values: &[Duration]) {
    out.push_str(&format!(
        "| {label} | {} | {moved} | {} | {} | {} |\n",
        values.len(),
        secs(percentile(values, 50.0)),
        secs(percentile(values, 99.0)),
        secs(values.iter().max().copied())
    ));
}

/// The handover table.
pub fn handover(f: &Figures) -> String {
    let mut out = format!(
        "{} replica processes (`--shards={}`) on {} ConfigMaps, each reconcile held {} ms; {}. \
         A clean leave is SIGTERM (drain, delete the Lease, exit); a crash is SIGKILL (the Lease is left to expire), aimed at ages of its last renewal spread evenly over the retry period. \
         A replacement joins after each, and the ring settles before the next. \
         Seconds from the signal; p99 is the nearest rank, so below 100 events it is the maximum.\n\n",
        f.replicas,
        f.mode,
        f.objects,
        f.hold.as_millis(),
        f.settings()
    );
    out.push_str("| phase | events | objects moved (p50) | p50 (s) | p99 (s) | max (s) |\n");
    out.push_str("| --- | ---: | ---: | ---: | ---: | ---: |\n");
    let moved = |samples: &[Sample]| {
        let mut counts: Vec<usize> = samples.iter().map(|s| s.moved).collect();
        counts.sort_unstable();
        // The nearest-rank median, as `percentile` takes it.
        counts
            .get(counts.len().div_ceil(2).saturating_sub(1))
            .map_or_else(|| "-".into(), ToString::to_string)
    };
    let pick = |samples: &[Sample], f: fn(&Sample) -> Option<Duration>| -> Vec<Duration> {
        samples.iter().filter_map(f).collect()
    };
    let (l, c) = (f.leaves.as_slice(), f.crashes.as_slice());
    row(
        &mut out,
        "**clean leave: every moved object reconciled by its new owner**",
        &moved(l),
        &all_done(l),
    );
    row(
        &mut out,
        "clean leave: the leaver drained, deleted its Lease and exited",
        "",
        &pick(l, |s| s.gone),
    );
    row(
        &mut out,
        "clean leave: the last survivor dropped it from its view",
        "",
        &pick(l, |s| Some(s.dropped)),
    );
    row(
        &mut out,
        "crash: age of its last renewal at the kill",
        "",
        &pick(c, |s| s.renewal_age),
    );
    row(
        &mut out,
        "crash: the last survivor dropped it from its view",
        "",
        &pick(c, |s| Some(s.dropped)),
    );
    row(
        &mut out,
        "crash: the last survivor acknowledged the view without it",
        "",
        &pick(c, |s| Some(s.acked)),
    );
    row(
        &mut out,
        "crash: the first moved object started on its new owner",
        "",
        &pick(c, |s| Some(s.first_start)),
    );
    row(
        &mut out,
        "**crash: every moved object reconciled by its new owner**",
        &moved(c),
        &all_done(c),
    );
    row(
        &mut out,
        "join: the ring settled, the newcomer reconciled its objects",
        "",
        &f.joins,
    );
    out.push_str(&format!(
        "\nReconciles during these events: {}; on one object by two replicas at once: {}. \
         Objects written to place them (`--shards={}`): {} of {}.\n",
        f.handover_reconciles, f.handover_double, f.mode, f.placement_writes, f.objects
    ));
    out
}

/// The placement table.
pub fn placement(f: &Figures) -> String {
    let p = &f.placement;
    let (low, high) = f.placement_ratios();
    let mut out = format!(
        "{} unlabelled ConfigMaps. The ceiling: a bare client sends the sharder's label PATCH (a merge patch of one label and the uid) \
         to every object, {IN_FLIGHT} in flight as the sharder allows, with no replica running, before and after the placement. \
         The placement: {} `--shards=label` replica processes start at once and the sharder labels every object for its owner. \
         Each time runs from the first label a watch of the objects saw to the last.\n\n",
        p.objects, f.replicas
    );
    out.push_str("| run | label changes | seconds | objects/s |\n| --- | ---: | ---: | ---: |\n");
    out.push_str(&format!(
        "| PATCH ceiling, before | {} | {} | {} |\n",
        p.objects,
        secs(Some(p.ceiling_before)),
        rate(p.objects, p.ceiling_before)
    ));
    out.push_str(&format!(
        "| **placement by the sharder** | {} | {} | {} |\n",
        p.label_writes,
        secs(Some(p.placed)),
        rate(p.objects, p.placed)
    ));
    out.push_str(&format!(
        "| PATCH ceiling, after | {} | {} | {} |\n",
        p.objects,
        secs(Some(p.ceiling_after)),
        rate(p.objects, p.ceiling_after)
    ));
    let owned: Vec<String> = p.owned.iter().map(ToString::to_string).collect();
    out.push_str(&format!(
        "\nPlacement rate / ceiling rate: {low:.2} against the faster ceiling run, {high:.2} against the slower. \
         From the replicas' start to the last label: {} s. Objects each replica owns and caches: {}.\n",
        secs(Some(p.from_start)),
        owned.join(", ")
    ));
    out
}

/// Writes `summary.md`, `handover.md` and `placement.md` into `dir`.
///
/// # Errors
///
/// The directory cannot be created or a file written.
pub fn write(f: &Figures, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    for (name, text) in [
        ("summary.md", summary(f)),
        ("handover.md", handover(f)),
        ("placement.md", placement(f)),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

fn ms(d: Duration) -> Value {
    json!(d.as_secs_f64() * 1000.0)
}

fn samples(samples: &[Sample]) -> Value {
    samples
        .iter()
        .map(|s| {
            json!({
                "moved": s.moved,
                "renewal_age_ms": s.renewal_age.map(ms),
                "gone_ms": s.gone.map(ms),
                "dropped_ms": ms(s.dropped),
                "acked_ms": ms(s.acked),
                "first_start_ms": ms(s.first_start),
                "all_done_ms": ms(s.all_done),
            })
        })
        .collect()
}

/// Every figure, for programs (the tests read it).
pub fn json(f: &Figures) -> Value {
    let (low, high) = f.placement_ratios();
    let p = &f.placement;
    json!({
        "mode": f.mode,
        "placement_writes": f.placement_writes,
        "replicas": f.replicas,
        "objects": f.objects,
        "lease_duration_ms": ms(f.lease_duration),
        "renew_deadline_ms": ms(f.renew_deadline),
        "retry_period_ms": ms(f.retry_period),
        "clean_leaves": samples(&f.leaves),
        "crashes": samples(&f.crashes),
        "joins_ms": f.joins.iter().copied().map(ms).collect::<Vec<_>>(),
        "crash_target_ms": ms(f.crash_target()),
        "crash_p99_ms": f.crash_p99().map(ms),
        "crash_verdict": f.crash_verdict().as_str(),
        "placement": {
            "objects": p.objects,
            "ceiling_before_ms": ms(p.ceiling_before),
            "ceiling_after_ms": ms(p.ceiling_after),
            "placed_ms": ms(p.placed),
            "from_start_ms": ms(p.from_start),
            "label_writes": p.label_writes,
            "owned": p.owned,
            "ratio_low": low,
            "ratio_high": high,
            "verdict": f.placement_verdict().as_str(),
        },
        "handover_reconciles": f.handover_reconciles,
        "handover_double": f.handover_double,
        "reconciles": f.reconciles,
        "double_reconciles": f.double,
    })
}
