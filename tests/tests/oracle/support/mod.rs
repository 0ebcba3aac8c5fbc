//! The write oracle: seeded cases of (stored object, copy the writer
//! holds, mutation, strategy, concurrent change), each run on the real API
//! server and judged against a model of what should be stored; a failing
//! case shrinks to a minimal one printed as a ready-to-paste test.
#![allow(dead_code)]

pub(crate) mod builtins;
pub(crate) mod classes;
pub(crate) mod expected;
pub(crate) mod generate;
pub(crate) mod lifecycle;
pub(crate) mod model;
pub(crate) mod mutations;
pub(crate) mod objects;
pub(crate) mod oracle;
pub(crate) mod race;
pub(crate) mod run;
pub(crate) mod types;
pub(crate) mod verdict;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;

pub(crate) use model::{Case, Race};
pub(crate) use oracle::Oracle;
pub(crate) use verdict::Verdict;

/// A unique object name for each run of a case.
fn name(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{prefix}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// What a batch of cases found, per strategy.
#[derive(Debug, Default)]
pub(crate) struct Report {
    /// strategy → (cases, exact, refused, violations)
    pub(crate) counts: BTreeMap<String, [u64; 4]>,
    /// The violations, shrunk, with their messages.
    pub(crate) violations: Vec<(Case, String)>,
    /// How many refusals each (strategy, reason) had: a refusal is a
    /// verdict too, and a wrong one would hide a lost write.
    pub(crate) refusals: BTreeMap<(String, String), u64>,
}

impl Report {
    /// Violations of `strategy`.
    pub(crate) fn violations_of(&self, strategy: &str) -> u64 {
        self.counts.get(strategy).map_or(0, |c| c[3])
    }

    /// The refusals, one row a strategy and reason.
    pub(crate) fn refusal_table(&self) -> String {
        let mut out = String::from("strategy  refusals  reason\n");
        for ((s, why), n) in &self.refusals {
            out += &format!("{s:<9} {n:>8}  {why}\n");
        }
        out
    }

    /// The table, one row a strategy.
    pub(crate) fn table(&self) -> String {
        let mut out = String::from("strategy   cases  exact  refused  violations\n");
        for (s, [n, e, r, v]) in &self.counts {
            out += &format!("{s:<9} {n:>6} {e:>6} {r:>8} {v:>11}\n");
        }
        out
    }
}

/// A refusal's reason without the object's name: its first clause, the
/// object's path and name left out.
fn reason(why: &str) -> String {
    let unchanged = why.strip_prefix("unchanged: ");
    let first = unchanged
        .unwrap_or(why)
        .split(": ")
        .next()
        .unwrap_or_default();
    let name = |w: &str| {
        w.contains('/')
            || w.starts_with("concord-test-")
            || w.split_once('-').is_some_and(|(p, n)| {
                p.len() == 1 && !n.is_empty() && n.chars().all(|c| c.is_ascii_digit())
            })
    };
    let prefix = if unchanged.is_some() {
        "unchanged: "
    } else {
        ""
    };
    let words: Vec<_> = first.split_whitespace().filter(|w| !name(w)).collect();
    format!("{prefix}{}", words.join(" "))
}

/// Run `cases` on `oracle`, `parallel` at a time, shrinking at most
/// `shrink` of the violations found.
pub(crate) async fn run_all(
    oracle: &Oracle,
    cases: Vec<Case>,
    parallel: usize,
    shrink: usize,
) -> anyhow::Result<Report> {
    let results: Vec<(Case, anyhow::Result<Verdict>)> = futures::stream::iter(cases)
        .map(|case| async move {
            let verdict = oracle.run(&name("c"), &case).await;
            (case, verdict)
        })
        .buffer_unordered(parallel)
        .collect()
        .await;
    let mut report = Report::default();
    let mut failing = Vec::new();
    for (case, verdict) in results {
        let counts = report.counts.entry(case.strategy.clone()).or_default();
        counts[0] += 1;
        match verdict? {
            Verdict::Exact => counts[1] += 1,
            Verdict::Refused(why) => {
                counts[2] += 1;
                *report
                    .refusals
                    .entry((case.strategy.clone(), reason(&why)))
                    .or_default() += 1;
            }
            Verdict::Violation(why) => {
                counts[3] += 1;
                failing.push((case, why));
            }
        }
    }
    // Shrink the first violations of each strategy and mutation kind,
    // the safe strategies' first: `lax`'s must not use up the budget.
    failing.sort_by_key(|(case, _)| case.strategy == "lax");
    let mut seen = std::collections::BTreeSet::new();
    for (case, why) in failing {
        let class = format!(
            "{}/{:?}",
            case.strategy,
            std::mem::discriminant(&case.mutation)
        );
        if seen.len() < shrink && seen.insert(class) {
            let (small, why) = shrunk(oracle, case, why).await?;
            report.violations.push((small, why));
        } else {
            report.violations.push((case, why));
        }
    }
    Ok(report)
}

/// Smaller forms of `case`: the race gone, one element of the starting
/// object less, the hostile values plain.
fn smaller(case: &Case) -> Vec<Case> {
    let mut out = Vec::new();
    let with = |f: &dyn Fn(&mut Case)| {
        let mut c = case.clone();
        f(&mut c);
        c
    };
    if case.race != Race::None {
        out.push(with(&|c| c.race = Race::None));
    }
    let i = &case.initial;
    macro_rules! drop_each {
        ($field:ident) => {
            for n in 0..i.$field.len() {
                out.push(with(&|c| {
                    c.initial.$field.remove(n);
                }));
            }
        };
    }
    drop_each!(labels);
    drop_each!(annotations);
    drop_each!(finalizers);
    drop_each!(items);
    drop_each!(rules);
    drop_each!(tags);
    drop_each!(nested);
    drop_each!(data);
    drop_each!(conditions);
    drop_each!(weights);
    drop_each!(ports);
    drop_each!(fields);
    drop_each!(entries);
    if i.fractions {
        out.push(with(&|c| c.initial.fractions = false));
    }
    if i.last_applied {
        out.push(with(&|c| c.initial.last_applied = false));
    }
    if i.phase.is_some() {
        out.push(with(&|c| c.initial.phase = None));
    }
    if i.size.is_some() {
        out.push(with(&|c| c.initial.size = None));
    }
    if i.color.is_some() {
        out.push(with(&|c| c.initial.color = None));
    }
    out.retain(|c| c != case);
    out
}

/// The smallest form of `case` that still violates, found greedily.
async fn shrunk(
    oracle: &Oracle,
    mut case: Case,
    mut why: String,
) -> anyhow::Result<(Case, String)> {
    let mut budget = 60;
    'outer: while budget > 0 {
        for candidate in smaller(&case) {
            budget -= 1;
            // A smaller form the server refuses to create (a Service
            // without ports) is no candidate.
            if let Ok(Verdict::Violation(again)) = oracle.run(&name("s"), &candidate).await {
                case = candidate;
                why = again;
                continue 'outer;
            }
            if budget == 0 {
                break 'outer;
            }
        }
        break;
    }
    Ok((case, why))
}

/// `case` as a regression test to paste into `tests/oracle/regressions.rs`.
pub(crate) fn as_test(case: &Case, why: &str) -> String {
    let json = serde_json::to_string(case).unwrap_or_default();
    format!(
        "/// {}\n#[tokio::test]\nasync fn regression_{}_{}() -> anyhow::Result<()> {{\n    \
         exact(r#\"{json}\"#).await\n}}\n",
        why.lines().next().unwrap_or_default(),
        case.strategy,
        format!("{:?}", case.mutation)
            .split(['(', ' ', '{'])
            .next()
            .unwrap_or_default()
            .to_lowercase(),
    )
}

/// Run one case from its JSON form and require it exact or rightly refused.
pub(crate) async fn exact_case(oracle: &Oracle, json: &str) -> anyhow::Result<Verdict> {
    let case: Case = serde_json::from_str(json)?;
    oracle.run(&name("r"), &case).await
}
