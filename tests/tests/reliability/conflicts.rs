//! Conflict storm: 16 writers on one object, 50 writes each, for `strict`
//! and `update` under both conflict policies.
//!
//! Every call either lands or fails with a typed conflict error that says
//! how many attempts it made; no call loops without bound (its requests are
//! capped by the policy); and a controller's bounded requeue loop around the
//! calls lands every one of the 800 writes. A write that failed never shows
//! up on the object and a write that succeeded is never lost.
//!
//! Run with `cargo test -p concord-tests --test reliability conflicts:: -- --nocapture`
//! to see the figures.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use concord_strategies::{
    ConflictPolicy, Error, Intent, RetryPolicy, StrategyName, Verb, WriteMetrics, Writer,
    strategy_for,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

const WRITERS: usize = 16;
const WRITES: usize = 50;
/// How often the controller around a call may requeue one write.
const MAX_REQUEUES: u32 = 100;
/// The retry policy under test: client-go's `DefaultRetry` (5 steps).
const STEPS: u32 = 5;

/// What one writer saw.
#[derive(Debug, Default)]
struct Tally {
    /// Calls that returned `Ok`.
    landed_calls: u64,
    /// Calls that failed with the conflict error the policy promises.
    conflict_errors: u64,
    /// Any other error, as text: must stay empty.
    unexpected: Vec<String>,
    /// Writes given up after `MAX_REQUEUES`: must stay empty.
    given_up: Vec<String>,
    /// Labels of the writes that landed.
    landed: BTreeSet<String>,
}

/// The error the policy promises for a lost race, with the attempts stated.
fn expected_conflict(policy: &ConflictPolicy, err: &Error) -> bool {
    match (policy, err) {
        (ConflictPolicy::Retry(retry), Error::ConflictRetriesExhausted { attempts, .. }) => {
            *attempts == retry.steps
                && err
                    .to_string()
                    .contains(&format!("after {attempts} attempts"))
        }
        (ConflictPolicy::Requeue, Error::Conflict { .. }) => true,
        _ => false,
    }
}

async fn storm(name: StrategyName, policy: ConflictPolicy) -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let object = format!("storm-{}", name.as_str());
    let created: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": object},
    }))?;
    let observed = cms.create(&PostParams::default(), &created).await?;
    let metrics = Arc::new(WriteMetrics::default());
    // Each task stands for a writer of its own (another controller, another
    // replica): it takes turns only with itself, so the 16 meet each other's
    // conflicts as separate processes would.
    let writer = Writer::<ConfigMap>::new(env.client()?, strategy_for(name, policy))
        .with_builtin_type()
        .with_target(|t| t.with_metrics(metrics.clone()));

    let start = Instant::now();
    let tasks: Vec<_> = (0..WRITERS)
        .map(|task| {
            let (writer, cms, object, mut seen) = (
                writer
                    .clone()
                    .with_target(|t| t.with_turns(concord_strategies::WriteTurns::default())),
                cms.clone(),
                object.clone(),
                observed.clone(),
            );
            tokio::spawn(async move {
                let mut tally = Tally::default();
                for i in 0..WRITES {
                    let label = format!("w{task}-{i}");
                    let mutation = Intent::set_label(label.clone(), "x").into();
                    let mut requeues = 0;
                    loop {
                        match writer.write(&seen, &mutation).await {
                            Ok(written) => {
                                tally.landed_calls += 1;
                                tally.landed.insert(label);
                                seen = written.object.unwrap_or(seen);
                                break;
                            }
                            Err(err) if expected_conflict(&policy, &err) => {
                                tally.conflict_errors += 1;
                            }
                            Err(err) => {
                                tally.unexpected.push(err.to_string());
                                break;
                            }
                        }
                        requeues += 1;
                        if requeues > MAX_REQUEUES {
                            tally.given_up.push(label);
                            break;
                        }
                        // The controller's requeue: back off, then work
                        // from a fresh read, as its cache would catch up.
                        let backoff = 5u64 << requeues.min(6);
                        tokio::time::sleep(Duration::from_millis(backoff)).await;
                        seen = cms.get(&object).await?;
                    }
                }
                anyhow::Ok(tally)
            })
        })
        .collect();
    let mut all = Tally::default();
    for task in tasks {
        let tally = task.await??;
        all.landed_calls += tally.landed_calls;
        all.conflict_errors += tally.conflict_errors;
        all.unexpected.extend(tally.unexpected);
        all.given_up.extend(tally.given_up);
        all.landed.extend(tally.landed);
    }
    let elapsed = start.elapsed();
    let stored: BTreeSet<String> = cms
        .get(&object)
        .await?
        .metadata
        .labels
        .unwrap_or_default()
        .into_keys()
        .collect();
    let m = metrics.snapshot();
    println!(
        "{} {policy:?}: {} writers x {} writes, {} calls ({} landed, {} conflict errors), \
         {} requests ({} get), {} conflicts, {} retries, {} labels, {elapsed:.2?}",
        name.as_str(),
        WRITERS,
        WRITES,
        m.writes,
        all.landed_calls,
        all.conflict_errors,
        m.total_requests(),
        m.requests(Verb::Get),
        m.conflicts,
        m.retries,
        stored.len(),
    );

    ensure!(
        all.unexpected.is_empty(),
        "unexpected errors: {:?}",
        all.unexpected
    );
    ensure!(
        all.given_up.is_empty(),
        "writes never landed: {:?}",
        all.given_up
    );
    // Every call is accounted for: it landed or failed with the promised error.
    assert_eq!(m.writes, all.landed_calls + all.conflict_errors);
    assert_eq!(m.errors, all.conflict_errors);
    // Nothing lost, nothing phantom: the object holds exactly the writes that
    // were reported as landed, and that is all 800 of them.
    assert_eq!(
        stored, all.landed,
        "stored labels differ from the landed writes"
    );
    assert_eq!(
        stored.len(),
        WRITERS * WRITES,
        "every write landed in the end"
    );
    // Bounded: a call sends at most `steps` writes and `steps - 1` re-reads
    // (retry) or exactly one write and no read (requeue).
    let per_call = match policy {
        ConflictPolicy::Retry(retry) => u64::from(2 * retry.steps - 1),
        _ => 1,
    };
    ensure!(
        m.total_requests() <= m.writes * per_call,
        "{} requests for {} calls exceed {per_call} per call",
        m.total_requests(),
        m.writes
    );
    if matches!(policy, ConflictPolicy::Requeue) {
        assert_eq!(
            m.requests(Verb::Get),
            0,
            "requeue never re-reads inside a call"
        );
        assert_eq!(m.retries, 0, "requeue never retries inside a call");
        assert_eq!(
            m.conflicts, all.conflict_errors,
            "each conflict came back to the caller"
        );
    }
    ensure!(
        m.conflicts > 0,
        "16 writers on one object were expected to conflict"
    );
    Ok(())
}

fn bounded_retry() -> ConflictPolicy {
    ConflictPolicy::Retry(RetryPolicy::default().with_steps(STEPS))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflict_storm_strict_retry_lands_every_write_or_states_its_attempts() -> anyhow::Result<()>
{
    storm(StrategyName::Strict, bounded_retry())
        .await
        .context("strict, retry")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflict_storm_strict_requeue_hands_back_every_conflict_and_requeues_land()
-> anyhow::Result<()> {
    storm(StrategyName::Strict, ConflictPolicy::Requeue)
        .await
        .context("strict, requeue")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflict_storm_update_retry_lands_every_write_or_states_its_attempts() -> anyhow::Result<()>
{
    storm(StrategyName::Update, bounded_retry())
        .await
        .context("update, retry")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflict_storm_update_requeue_hands_back_every_conflict_and_requeues_land()
-> anyhow::Result<()> {
    storm(StrategyName::Update, ConflictPolicy::Requeue)
        .await
        .context("update, requeue")
}
