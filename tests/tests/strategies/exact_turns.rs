//! Turns, requeues and held writes, against a real kube-apiserver and
//! etcd: a turn hands on only the API server's own answers, so a `PUT`
//! never starts from a typed copy that lacks fields; a `requeue` write from
//! a stale copy always hands the conflict back; a write waiting out a
//! throttle does not hold up the other writes of its object.
//!
//! ```text
//! cargo test -p concord-tests --test strategies incidents::exact_turns::
//! ```
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use concord_strategies::{
    BeforeWrite, ConflictPolicy, Error, FreshCopies, Intent, ObjectKey, Observed, StrategyName,
    Target, Writer, strategy_for,
};
use concord_testenv::faults::{FaultProxy, Faults, Verb};
use futures::future::BoxFuture;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::core::DynamicObject;
use serde_json::json;
use tokio::sync::Notify;

use crate::exact_support;
use crate::support;

use exact_support::{Gadget, Gadgets, all_kept, create, unknown_fields};
use support::policy;

/// Holds the first request of a write until the test releases it, after
/// telling the test it is about to send.
#[derive(Debug, Default)]
struct Gate {
    sending: Notify,
    release: Notify,
    passed: AtomicBool,
}

#[async_trait]
impl BeforeWrite for Gate {
    async fn before_write(&self, _object: &ObjectKey, attempt: u32) {
        if attempt == 0 && !self.passed.swap(true, Ordering::SeqCst) {
            self.sending.notify_one();
            self.release.notified().await;
        }
    }
}

/// A typed watch cache: copies read through the Rust type `Gadget`, which
/// lacks fields the server stores — what the framework's shared cache of a
/// typed resource hands back after a conflict.
#[derive(Debug)]
struct TypedCache {
    api: Api<Gadget>,
}

impl FreshCopies for TypedCache {
    fn newer<'a>(
        &'a self,
        _namespace: Option<&'a str>,
        name: &'a str,
        _than: &'a str,
        _wait: Duration,
    ) -> BoxFuture<'a, Option<Observed>> {
        Box::pin(async move {
            let copy = self.api.get(name).await.ok()?;
            Some(Observed::typed(serde_json::to_value(copy).ok()?))
        })
    }
}

/// A `strict` write whose re-read from a typed cache finds nothing left to
/// change must not hand that typed copy to the `update` waiting for its
/// turn: the `PUT` would drop every field the type lacks, and its
/// `resourceVersion` would be current, so the server would accept it.
#[tokio::test]
async fn update_never_puts_a_copy_an_earlier_turn_did_not_store() -> anyhow::Result<()> {
    let Gadgets {
        env,
        ns: _ns,
        resource,
        raw,
        typed,
    } = Gadgets::new().await?;
    let observed = create(&raw, &resource, "turns").await?;
    let gate = Arc::new(Gate::default());
    let strict = Writer::<Gadget>::new(env.client()?, strategy_for(StrategyName::Strict, policy()))
        .with_target(|t| {
            t.with_fresh_copies(Arc::new(TypedCache { api: typed.clone() }))
                .with_before_write(gate.clone())
        });
    let update = Writer::<DynamicObject>::new_with(
        env.client()?,
        strategy_for(StrategyName::Update, policy()),
        &resource,
    )
    .with_target(|t| t.with_turns(strict.target().turns().clone()));
    let typed_copy = typed.get("turns").await?;
    let first = tokio::spawn(async move {
        strict
            .write(&typed_copy, &Intent::set_label("l", "1").into())
            .await
    });
    gate.sending.notified().await;
    let dynamic = observed.clone();
    let second = tokio::spawn(async move {
        update
            .write(&dynamic, &Intent::set_label("m", "1").into())
            .await
    });
    // The `update` is now waiting for the strict write's turn; another
    // writer sets the strict write's label, so its re-read changes nothing.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let label = json!({"metadata": {"labels": {"l": "1"}}});
    raw.patch("turns", &PatchParams::default(), &Patch::Merge(label))
        .await?;
    gate.release.notify_one();
    first.await??;
    second.await??;
    let stored = raw.get("turns").await?;
    assert_eq!(stored.labels().get("m").map(String::as_str), Some("1"));
    assert_eq!(unknown_fields(&raw, "turns").await?, all_kept());
    Ok(())
}

/// Under `requeue`, a write from a stale copy returns `Conflict` even when
/// a sibling task of this process stored a newer copy meanwhile.
#[tokio::test]
async fn requeue_is_not_rebased_on_a_sibling_answer() -> anyhow::Result<()> {
    let Gadgets {
        env,
        ns: _ns,
        resource,
        raw,
        ..
    } = Gadgets::new().await?;
    let observed = create(&raw, &resource, "requeue").await?;
    let gate = Arc::new(Gate::default());
    let requeue = strategy_for(StrategyName::Strict, ConflictPolicy::Requeue);
    let held = Writer::<DynamicObject>::new_with(env.client()?, requeue.clone(), &resource)
        .with_target(|t| t.with_before_write(gate.clone()));
    let sibling = Writer::<DynamicObject>::new_with(env.client()?, requeue, &resource)
        .with_target(|t| t.with_turns(held.target().turns().clone()));
    let copy = observed.clone();
    let first =
        tokio::spawn(async move { held.write(&copy, &Intent::set_label("a", "1").into()).await });
    gate.sending.notified().await;
    let copy = observed.clone();
    let second = tokio::spawn(async move {
        sibling
            .write(&copy, &Intent::set_label("b", "1").into())
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    gate.release.notify_one();
    first.await??;
    let err = second
        .await?
        .expect_err("a stale copy under requeue must conflict");
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    let stored = raw.get("requeue").await?;
    assert_eq!(
        stored.labels().get("b"),
        None,
        "nothing written from the stale copy"
    );
    Ok(())
}

/// Under `requeue`, `update` of a typed copy reads the object raw before
/// its `PUT`; a change between the observation and that read is a
/// conflict, not a `PUT` with the read's version.
#[tokio::test]
async fn requeue_update_of_a_stale_typed_copy_conflicts() -> anyhow::Result<()> {
    let Gadgets {
        env,
        ns: _ns,
        resource,
        raw,
        typed,
    } = Gadgets::new().await?;
    create(&raw, &resource, "requeue-update").await?;
    let stale = typed.get("requeue-update").await?;
    let label = json!({"metadata": {"labels": {"other": "1"}}});
    raw.patch(
        "requeue-update",
        &PatchParams::default(),
        &Patch::Merge(label),
    )
    .await?;
    let writer = Writer::<Gadget>::new(
        env.client()?,
        strategy_for(StrategyName::Update, ConflictPolicy::Requeue),
    );
    let err = writer
        .write(&stale, &Intent::set_label("mine", "1").into())
        .await
        .expect_err("a stale copy under requeue must conflict");
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    assert_eq!(raw.get("requeue-update").await?.labels().get("mine"), None);
    Ok(())
}

/// A write sleeping out a `429`'s Retry-After does not hold its object's
/// turn: a second write of the object from this process is stored first.
#[tokio::test]
async fn a_throttled_write_releases_its_turn_while_it_waits() -> anyhow::Result<()> {
    let Gadgets {
        env,
        ns: _ns,
        resource,
        raw,
        ..
    } = Gadgets::new().await?;
    let observed = create(&raw, &resource, "throttled").await?;
    let faults = Faults::seeded(1)
        .on(Verb::Patch)
        .resource("gadgets")
        .named("throttled")
        .throttle(2)
        .times(1);
    let proxy = FaultProxy::start(env.config(), faults).await?;
    let strict = strategy_for(StrategyName::Strict, policy());
    let mut config = proxy.config();
    config.default_retry = false; // the strategy alone retries the 429
    let throttled = Writer::<DynamicObject>::from_target(
        Target::new(kube::Client::try_from(config)?, resource.clone()),
        strict.clone(),
    );
    let direct = Writer::<DynamicObject>::new_with(env.client()?, strict, &resource)
        .with_target(|t| t.with_turns(throttled.target().turns().clone()));
    let copy = observed.clone();
    let first = tokio::spawn(async move {
        throttled
            .write(&copy, &Intent::set_label("slow", "1").into())
            .await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let second = direct
        .write(&observed, &Intent::set_label("quick", "1").into())
        .await?;
    let first = first.await??;
    let version = |o: &Option<DynamicObject>| {
        o.as_ref()
            .and_then(|o| o.metadata.resource_version.clone())
            .and_then(|rv| rv.parse::<u64>().ok())
    };
    assert!(
        version(&second.object) < version(&first.object),
        "the quick write was stored after the throttled one: it waited for its turn"
    );
    let stored = raw.get("throttled").await?;
    assert_eq!(stored.labels().get("slow").map(String::as_str), Some("1"));
    assert_eq!(stored.labels().get("quick").map(String::as_str), Some("1"));
    Ok(())
}
