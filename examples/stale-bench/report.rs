//! The figures as the book shows them: `stale.md` (Markdown tables) and
//! `stale.json`, written into `--out`.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result};
use serde_json::{Value, json};

use crate::args::Args;
use crate::contender::Contender;
use crate::outcome::{Outcome, Turn};
use crate::stats::Interval;

/// The target of the ratios of the gate to the ungated run.
const WITHIN: f64 = 1.10;
/// Parents the zero-excess target asks for.
const TARGET_PARENTS: usize = 1_000;

/// The sums of some turns.
#[derive(Default)]
struct Sums {
    parents: usize,
    created: usize,
    needed_creates: usize,
    deleted: usize,
    needed_deletes: usize,
    wrong_deletes: usize,
    right: usize,
    reconciles: u64,
    wall: Duration,
    unsettled: usize,
    held: Option<(u64, u64, f64)>,
}

impl Sums {
    fn of<'a>(turns: impl IntoIterator<Item = &'a Turn>) -> Sums {
        let mut s = Sums::default();
        for t in turns {
            s.parents += t.parents;
            for p in &t.phases {
                s.created += p.counts.created;
                s.needed_creates += p.needed_creates;
                s.deleted += p.counts.deleted;
                s.needed_deletes += p.needed_deletes;
                s.wrong_deletes += p.counts.wrong_deletes;
                s.wall += p.wall.unwrap_or_default();
            }
            s.unsettled += usize::from(!settled(t));
            s.right += t.right;
            s.reconciles += t.reconciles;
            if let Some((ran, requeued, secs)) = t.held {
                let h = s.held.get_or_insert((0, 0, 0.0));
                *h = (h.0 + ran, h.1 + requeued, h.2 + secs);
            }
        }
        s
    }

    /// Creates beyond what the spec changes needed.
    fn excess(&self) -> usize {
        self.created.saturating_sub(self.needed_creates)
    }

    fn per_parent(&self) -> f64 {
        self.reconciles as f64 / self.parents.max(1) as f64
    }
}

/// Whether every phase of the turn ran and settled.
fn settled(turn: &Turn) -> bool {
    turn.phases.iter().all(|p| p.wall.is_some())
}

fn turn_wall(turn: &Turn) -> f64 {
    turn.phases
        .iter()
        .map(|p| p.wall.unwrap_or_default().as_secs_f64())
        .sum()
}

/// The progress line of one turn.
pub(crate) fn line(contender: Contender, turn: &Turn) -> String {
    let s = Sums::of([turn]);
    format!(
        "round {} (hold {:.1} s): {}: {} parents, {} created ({} needed), {} deleted ({} needed, {} wrongly), {}/{} right, {:.2} reconciles per parent, {:.1} s{}",
        turn.round + 1,
        turn.hold.as_secs_f64(),
        contender.as_str(),
        s.parents,
        s.created,
        s.needed_creates,
        s.deleted,
        s.needed_deletes,
        s.wrong_deletes,
        s.right,
        s.parents,
        s.per_parent(),
        s.wall.as_secs_f64(),
        if s.unsettled > 0 {
            ", DID NOT SETTLE"
        } else {
            ""
        }
    )
}

fn find(outcome: &Outcome, c: Contender) -> Option<&[Turn]> {
    outcome
        .turns
        .iter()
        .find(|(x, _)| *x == c)
        .map(|(_, t)| t.as_slice())
}

/// The gate's ratio to the ungated run, paired by round, of `figure`.
fn ratio(outcome: &Outcome, figure: fn(&Turn) -> f64) -> Option<Interval> {
    let gated = find(outcome, Contender::Concord)?;
    let ungated = find(outcome, Contender::ConcordUngated)?;
    let a: Vec<f64> = gated.iter().map(figure).collect();
    let b: Vec<f64> = ungated.iter().map(figure).collect();
    Interval::paired(&a, &b)
}

fn per_parent(t: &Turn) -> f64 {
    t.reconciles as f64 / t.parents.max(1) as f64
}

/// The tables of `outcome`.
pub(crate) fn markdown(args: &Args, outcome: &Outcome) -> String {
    let holds: Vec<String> = args.holds.iter().map(|h| secs(*h)).collect();
    let scale: Vec<String> = args.scale.iter().map(usize::to_string).collect();
    let mut out = format!(
        "stale-bench: {} rounds of {} parents per contender, children per parent {}, the children's watch held back {} s (by round, in turn), {} reconciles at once\n\n",
        args.rounds,
        outcome.per_round,
        scale.join(" → "),
        holds.join(", "),
        args.concurrency
    );
    out.push_str(
        "| contender | parents | children created (needed) | excess created | deleted (needed) | deleted wrongly | parents right at the end | reconciles per parent | wall s | held at the gate: ran / requeued, s waited |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n",
    );
    for (c, turns) in &outcome.turns {
        let s = Sums::of(turns);
        let _ = writeln!(
            out,
            "| {} | {} | {} ({}) | {} | {} ({}) | {} | {} / {}{} | {:.2} | {:.1} | {} |",
            c.as_str(),
            s.parents,
            s.created,
            s.needed_creates,
            s.excess(),
            s.deleted,
            s.needed_deletes,
            s.wrong_deletes,
            s.right,
            s.parents,
            if s.unsettled > 0 {
                format!(" ({} turns did not settle)", s.unsettled)
            } else {
                String::new()
            },
            s.per_parent(),
            s.wall.as_secs_f64(),
            s.held.map_or("-".into(), |(ran, requeued, secs)| format!(
                "{ran} / {requeued}, {secs:.1}"
            )),
        );
    }
    out.push_str(&targets(outcome));
    out.push_str(
        "\nper hold: excess created / deleted wrongly, reconciles per parent, wall s of each phase\n\n",
    );
    let names: Vec<&str> = outcome.turns.iter().map(|(c, _)| c.as_str()).collect();
    let _ = writeln!(out, "| hold s | {} |", names.join(" | "));
    let _ = writeln!(out, "| ---: |{}", " --- |".repeat(names.len()));
    for hold in &args.holds {
        let mut row = format!("| {} |", secs(*hold));
        for (_, turns) in &outcome.turns {
            let these: Vec<&Turn> = turns.iter().filter(|t| t.hold == *hold).collect();
            let s = Sums::of(these.iter().copied());
            let phases: Vec<String> = (0..args.scale.len())
                .map(|i| {
                    let walls: Option<Vec<f64>> = these
                        .iter()
                        .map(|t| t.phases.get(i)?.wall.map(|w| w.as_secs_f64()))
                        .collect();
                    walls.map_or("-".into(), |w| format!("{:.1}", w.iter().sum::<f64>()))
                })
                .collect();
            let _ = write!(
                row,
                " {} / {}, {:.2}, {} |",
                s.excess(),
                s.wrong_deletes,
                s.per_parent(),
                phases.join(" + ")
            );
        }
        let _ = writeln!(out, "{row}");
    }
    out.push_str(
        "\nCounted on the API server by a watch of each namespace, whoever wrote: excess created = children created beyond the spec's increases; deleted wrongly = deletes that left a parent with fewer children than its spec asked for. A phase lasts from its first parent write to the last child created or deleted, once every parent is right and nothing changed for twice the hold plus 2 s.\n",
    );
    out
}

/// The targets: no excess with the gate over at least 1,000
/// parents, and reconciles per parent and wall time within 10% of the
/// ungated run.
fn targets(outcome: &Outcome) -> String {
    let mut out = String::new();
    if let Some(gated) = find(outcome, Contender::Concord) {
        let s = Sums::of(gated);
        let clean = s.excess() == 0 && s.wrong_deletes == 0 && s.right == s.parents;
        let verdict = match (clean, s.parents >= TARGET_PARENTS) {
            (false, _) => "missed",
            (true, true) => "met",
            (true, false) => "not judged (fewer than 1,000 parents)",
        };
        let _ = writeln!(
            out,
            "\n- 0 excess children with the gate over ≥ 1,000 parents: {} excess, {} deleted wrongly, {} of {} parents right: **{verdict}**",
            s.excess(),
            s.wrong_deletes,
            s.right,
            s.parents
        );
    }
    for (what, figure) in [
        ("reconciles per parent", per_parent as fn(&Turn) -> f64),
        ("wall time", turn_wall),
    ] {
        if let Some(i) = ratio(outcome, figure) {
            let _ = writeln!(
                out,
                "- {what}, concord / concord-ungated paired by round: {:.3}x [{:.3}, {}] (95% CI, {} rounds) vs at most {WITHIN:.2}: **{}**",
                i.ratio,
                i.lo,
                if i.hi.is_finite() {
                    format!("{:.3}", i.hi)
                } else {
                    "∞".into()
                },
                i.rounds,
                i.at_most(WITHIN)
            );
        }
    }
    out
}

fn secs(d: Duration) -> String {
    format!("{}", d.as_secs_f64())
}

/// Every figure of `outcome`, per contender and turn.
pub(crate) fn json(args: &Args, outcome: &Outcome) -> Value {
    let interval = |i: Option<Interval>| {
        i.map(|i| {
            json!({"ratio": i.ratio, "lo": i.lo, "hi": i.hi.is_finite().then_some(i.hi),
                   "rounds": i.rounds, "verdict": i.at_most(WITHIN)})
        })
    };
    let contenders: Vec<Value> = outcome
        .turns
        .iter()
        .map(|(c, turns)| {
            let s = Sums::of(turns);
            json!({
                "contender": c.as_str(),
                "parents": s.parents,
                "created": s.created,
                "needed_creates": s.needed_creates,
                "excess": s.excess(),
                "deleted": s.deleted,
                "needed_deletes": s.needed_deletes,
                "wrong_deletes": s.wrong_deletes,
                "right": s.right,
                "unsettled_turns": s.unsettled,
                "reconciles": s.reconciles,
                "reconciles_per_parent": s.per_parent(),
                "wall_s": s.wall.as_secs_f64(),
                "held": s.held.map(|(ran, requeued, secs)| json!({"ran": ran, "requeued": requeued, "seconds": secs})),
                "turns": turns.iter().map(|t| json!({
                    "round": t.round + 1,
                    "hold_s": t.hold.as_secs_f64(),
                    "parents": t.parents,
                    "right": t.right,
                    "reconciles": t.reconciles,
                    "phases": t.phases.iter().map(|p| json!({
                        "replicas": p.replicas,
                        "created": p.counts.created,
                        "needed_creates": p.needed_creates,
                        "deleted": p.counts.deleted,
                        "needed_deletes": p.needed_deletes,
                        "wrong_deletes": p.counts.wrong_deletes,
                        "wall_s": p.wall.map(|w| w.as_secs_f64()),
                    })).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "rounds": args.rounds,
        "parents_per_round": outcome.per_round,
        "holds_s": args.holds.iter().map(Duration::as_secs_f64).collect::<Vec<_>>(),
        "scale": args.scale,
        "concurrency": args.concurrency,
        "contenders": contenders,
        "gated_vs_ungated": {
            "reconciles_per_parent": interval(ratio(outcome, per_parent)),
            "wall": interval(ratio(outcome, turn_wall)),
        },
    })
}

/// Writes `stale.md` and `stale.json` into `dir`.
///
/// # Errors
///
/// When the directory or a file cannot be written.
pub(crate) fn write(dir: &Path, args: &Args, outcome: &Outcome) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let md = dir.join("stale.md");
    std::fs::write(&md, markdown(args, outcome))
        .with_context(|| format!("writing {}", md.display()))?;
    let path = dir.join("stale.json");
    let text = serde_json::to_string_pretty(&json(args, outcome))?;
    std::fs::write(&path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
