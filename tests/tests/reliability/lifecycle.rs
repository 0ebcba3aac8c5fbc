//! Object lifecycle races in the middle of a write: the object is deleted,
//! deleted and recreated under the same name, or marked for deletion after
//! the strategy computed its write and before it sent it.
//!
//! `tests/strategies/incidents.rs` covers the same events *before* the write starts
//! (a stale cache: `remove_finalizer_from_a_missing_object_counts_as_done`,
//! `recreated_object_is_not_written`,
//! `object_being_deleted_accepts_finalizer_removal`). Here the event is
//! placed exactly between the strategy's read and its request with the
//! [`BeforeWrite`] hook, and for `strict` and `update` also between a
//! conflict's re-read and the retry.
//!
//! Run with `cargo test -p concord-tests --test reliability lifecycle::`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use async_trait::async_trait;
use concord_strategies::{
    BeforeWrite, ConflictPolicy, Error, Intent, MetricsSnapshot, Mutation, ObjectKey, StrategyName,
    Verb, WriteMetrics, Writer, strategy_for,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

const OURS: &str = "kueue.x-k8s.io/managed";
const FOREIGN: &str = "example.com/foreign";

/// What happens to the object right before a write attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    /// Finalizers stripped, object deleted and gone.
    Deleted,
    /// Deleted and created again under the same name (a new uid), with the
    /// same finalizers and labels as the original.
    Recreated,
    /// `DELETE` while finalizers hold it: deletionTimestamp set.
    MarkedForDeletion,
    /// Another writer changes an unrelated label (forces a conflict).
    Touched,
}

/// Runs `events[attempt]` before write attempt `attempt`.
#[derive(Debug)]
struct Race {
    cms: Api<ConfigMap>,
    name: String,
    events: Vec<Option<Event>>,
    failed: AtomicBool,
}

#[async_trait]
impl BeforeWrite for Race {
    async fn before_write(&self, _object: &ObjectKey, attempt: u32) {
        let event = self.events.get(attempt as usize).copied().flatten();
        if let Some(event) = event
            && let Err(err) = self.fire(event).await
        {
            eprintln!("{event:?} on {} failed: {err:#}", self.name);
            self.failed.store(true, Ordering::SeqCst);
        }
    }
}

impl Race {
    async fn fire(&self, event: Event) -> anyhow::Result<()> {
        let pp = PatchParams::default();
        match event {
            Event::Deleted | Event::Recreated => {
                let strip = Patch::Merge(json!({"metadata": {"finalizers": null}}));
                self.cms.patch(&self.name, &pp, &strip).await?;
                self.cms
                    .delete(&self.name, &DeleteParams::default())
                    .await?;
                for _ in 0..200 {
                    if self.cms.get_opt(&self.name).await?.is_none() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                if event == Event::Recreated {
                    self.cms
                        .create(&PostParams::default(), &config_map(&self.name)?)
                        .await?;
                }
            }
            Event::MarkedForDeletion => {
                self.cms
                    .delete(&self.name, &DeleteParams::default())
                    .await?;
            }
            Event::Touched => {
                let touch = Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}}));
                self.cms.patch(&self.name, &pp, &touch).await?;
            }
        }
        Ok(())
    }
}

fn config_map(name: &str) -> anyhow::Result<ConfigMap> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "finalizers": [OURS, FOREIGN], "labels": {"generation": "first"}},
    }))?)
}

/// The result of one raced write and the object afterwards.
struct Raced {
    result: Result<concord_strategies::Written<ConfigMap>, Error>,
    original_uid: String,
    after: Option<ConfigMap>,
    metrics: MetricsSnapshot,
}

impl Raced {
    fn finalizers(&self) -> Vec<String> {
        self.after
            .as_ref()
            .and_then(|cm| cm.metadata.finalizers.clone())
            .unwrap_or_default()
    }

    fn labels(&self) -> std::collections::BTreeMap<String, String> {
        self.after
            .as_ref()
            .and_then(|cm| cm.metadata.labels.clone())
            .unwrap_or_default()
    }

    fn uid(&self) -> Option<String> {
        self.after.as_ref().and_then(|cm| cm.metadata.uid.clone())
    }
}

/// Creates an object, writes `mutation` with `strategy` while `events`
/// happen before the attempts, and reads the object back. Leaves the
/// namespace deletable.
async fn race(
    strategy: StrategyName,
    events: Vec<Option<Event>>,
    mutation: Mutation,
) -> anyhow::Result<Raced> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let name = format!("raced-{}", strategy.as_str());
    let observed = cms
        .create(&PostParams::default(), &config_map(&name)?)
        .await?;
    let hook = Arc::new(Race {
        cms: cms.clone(),
        name: name.clone(),
        events,
        failed: AtomicBool::new(false),
    });
    let metrics = Arc::new(WriteMetrics::default());
    let writer = Writer::<ConfigMap>::new(
        env.client()?,
        strategy_for(strategy, ConflictPolicy::default()),
    )
    .with_target(|t| {
        t.with_before_write(hook.clone())
            .with_metrics(metrics.clone())
    });
    let result = writer.write(&observed, &mutation).await;
    ensure!(
        !hook.failed.load(Ordering::SeqCst),
        "the racing event failed"
    );
    let after = cms.get_opt(&name).await?;
    if after.is_some() {
        let strip = Patch::Merge(json!({"metadata": {"finalizers": null}}));
        cms.patch(&name, &PatchParams::default(), &strip).await?;
    }
    println!(
        "{} {:?}: {:?}",
        strategy.as_str(),
        mutation,
        result.as_ref().map(|w| &w.outcome)
    );
    Ok(Raced {
        result,
        original_uid: observed.metadata.uid.context("created object has a uid")?,
        after,
        metrics: metrics.snapshot(),
    })
}

/// The strategies that guard against other writers, plus `locked`.
const GUARDED: [StrategyName; 4] = [
    StrategyName::Strict,
    StrategyName::Update,
    StrategyName::Locked,
    StrategyName::Apply,
];

/// Deleted between read and write: removing our finalizer is done (the
/// object is gone) and nothing resurrects it.
#[tokio::test]
async fn finalizer_removal_from_an_object_deleted_mid_write_is_done() -> anyhow::Result<()> {
    for strategy in StrategyName::ALL {
        let raced = race(
            strategy,
            vec![Some(Event::Deleted)],
            Intent::remove_finalizer(OURS).into(),
        )
        .await?;
        let written = raced.result.with_context(|| format!("{strategy}"))?;
        assert!(written.outcome.gone, "{strategy}: {:?}", written.outcome);
        assert!(raced.after.is_none(), "{strategy} brought the object back");
    }
    Ok(())
}

/// Deleted between read and write: any other change fails with a typed
/// `NotFound` and does not create the object again.
#[tokio::test]
async fn label_write_to_an_object_deleted_mid_write_is_not_found_and_not_resurrected()
-> anyhow::Result<()> {
    for strategy in StrategyName::ALL {
        let raced = race(
            strategy,
            vec![Some(Event::Deleted)],
            Intent::set_label("late", "write").into(),
        )
        .await?;
        assert!(
            raced.after.is_none(),
            "{strategy} resurrected the deleted object: {:?}",
            raced.after
        );
        match raced.result {
            Err(Error::NotFound { .. }) => {}
            other => bail!("{strategy}: expected NotFound, got {other:?}"),
        }
    }
    Ok(())
}

/// Deleted and recreated between read and write: the uid precondition stops
/// the write, and the new object keeps everything (our finalizer included:
/// a removal meant for the old object must not release the new one).
#[tokio::test]
async fn write_to_an_object_recreated_mid_write_never_reaches_the_new_object() -> anyhow::Result<()>
{
    let removal: Mutation = Intent::remove_finalizer(OURS).into();
    let label: Mutation = Intent::set_label("generation", "stale-write").into();
    for strategy in GUARDED {
        for mutation in [&removal, &label] {
            let raced = race(strategy, vec![Some(Event::Recreated)], mutation.clone()).await?;
            let new_uid = raced.uid().context("the recreated object exists")?;
            ensure!(
                new_uid != raced.original_uid,
                "{strategy}: the object was not recreated"
            );
            assert_eq!(
                raced.finalizers(),
                [OURS, FOREIGN],
                "{strategy} {mutation:?} changed the new object's finalizers"
            );
            assert_eq!(
                raced.labels()["generation"],
                "first",
                "{strategy} {mutation:?} wrote to the new object"
            );
            match &raced.result {
                Err(Error::ObjectRecreated {
                    observed, found, ..
                }) => {
                    assert_eq!(observed, &raced.original_uid);
                    assert_eq!(found, &new_uid);
                }
                other => bail!("{strategy} {mutation:?}: expected ObjectRecreated, got {other:?}"),
            }
        }
    }
    Ok(())
}

/// `lax` sends no precondition: the same race writes to the new object.
/// This is the failure mode the guarded strategies exist for.
#[tokio::test]
async fn lax_write_to_an_object_recreated_mid_write_lands_on_the_new_object() -> anyhow::Result<()>
{
    let raced = race(
        StrategyName::Lax,
        vec![Some(Event::Recreated)],
        Intent::set_label("generation", "stale-write").into(),
    )
    .await?;
    if let Err(err) = &raced.result {
        bail!("lax write failed: {err}");
    }
    ensure!(
        raced.uid() != Some(raced.original_uid.clone()),
        "the object was not recreated"
    );
    assert_eq!(raced.labels()["generation"], "stale-write");
    Ok(())
}

/// A conflict, then the object recreated between the re-read and the
/// retry: the retry is stopped by the uid as well.
#[tokio::test]
async fn retry_after_a_conflict_never_reaches_an_object_recreated_meanwhile() -> anyhow::Result<()>
{
    for strategy in [StrategyName::Strict, StrategyName::Update] {
        let raced = race(
            strategy,
            vec![Some(Event::Touched), Some(Event::Recreated)],
            Intent::remove_finalizer(OURS).into(),
        )
        .await?;
        assert_eq!(
            raced.finalizers(),
            [OURS, FOREIGN],
            "{strategy} released the new object"
        );
        match &raced.result {
            Err(Error::ObjectRecreated { observed, .. }) => {
                assert_eq!(observed, &raced.original_uid)
            }
            other => bail!("{strategy}: expected ObjectRecreated, got {other:?}"),
        }
    }
    Ok(())
}

/// Marked for deletion between read and write: our finalizer still comes
/// off, the foreign one stays, and the object waits for it.
#[tokio::test]
async fn finalizer_removal_from_an_object_marked_for_deletion_mid_write_keeps_the_foreign_one()
-> anyhow::Result<()> {
    for strategy in GUARDED {
        let raced = race(
            strategy,
            vec![Some(Event::MarkedForDeletion)],
            Intent::remove_finalizer(OURS).into(),
        )
        .await?;
        let written = match &raced.result {
            Ok(written) => written,
            Err(err) => bail!("{strategy}: {err}"),
        };
        let after = raced
            .after
            .as_ref()
            .context("the foreign finalizer holds the object")?;
        assert!(after.metadata.deletion_timestamp.is_some(), "{strategy}");
        assert_eq!(
            raced.finalizers(),
            [FOREIGN],
            "{strategy}: {:?}",
            written.outcome
        );
    }
    Ok(())
}

/// Marked for deletion between read and write: adding a finalizer is
/// refused by the API server, surfaced as a typed `Rejected`, not retried
/// in a loop, and the finalizer is not there.
#[tokio::test]
async fn finalizer_added_to_an_object_marked_for_deletion_mid_write_is_rejected()
-> anyhow::Result<()> {
    for strategy in GUARDED {
        let raced = race(
            strategy,
            vec![Some(Event::MarkedForDeletion)],
            Intent::add_finalizer("example.com/late").into(),
        )
        .await?;
        assert!(
            !raced.finalizers().contains(&"example.com/late".to_owned()),
            "{strategy} added a finalizer to an object being deleted"
        );
        match &raced.result {
            Err(Error::Rejected { .. }) => {}
            other => bail!("{strategy}: expected Rejected, got {other:?}"),
        }
        // At most the first attempt (which may conflict with the deletion)
        // and one retry; the refusal itself is never retried.
        let writes = raced.metrics.total_requests() - raced.metrics.requests(Verb::Get);
        assert!(
            writes <= 2,
            "{strategy} sent {writes} writes: {:?}",
            raced.metrics
        );
    }
    Ok(())
}

/// Sanity for the verbs above: the uid precondition costs nothing when
/// nothing races (one write request, no read for `strict`).
#[tokio::test]
async fn unraced_write_costs_one_request() -> anyhow::Result<()> {
    let raced = race(
        StrategyName::Strict,
        vec![],
        Intent::set_label("a", "b").into(),
    )
    .await?;
    let written = raced.result?;
    assert_eq!(
        (
            written.outcome.requests(Verb::Patch),
            written.outcome.requests(Verb::Get)
        ),
        (1, 0)
    );
    Ok(())
}
