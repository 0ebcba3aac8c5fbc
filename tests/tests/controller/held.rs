//! Read your own writes, one object at a time: a reconcile whose own
//! write's watch event is held back by the fault proxy waits for it,
//! runs once when it comes, and ends with the manager's shutdown.
//!
//! ```text
//! cargo test -p concord-tests --test controller held:: -- --nocapture
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use anyhow::Result;
use concord::Manager;
use concord_testenv::TestEnv;
use concord_testenv::faults::{FaultProxy, Faults, Verb};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, PostParams};

use crate::fresh::Labelling;

const MINUTE: Duration = Duration::from_secs(60);

/// A labelling controller behind a fault proxy that delivers the
/// ConfigMap `held`'s creation at once and every later watch event of it
/// (the manager's own label write) `hold` late; its object created and
/// labelled once, so the cache lacks the manager's own last write for
/// `hold`.
struct HeldWrite {
    running: concord::testing::RunningManager,
    labelling: Labelling,
    trigger:
        futures::channel::mpsc::UnboundedSender<kube::runtime::reflector::ObjectRef<ConfigMap>>,
    metrics: Arc<concord::metrics::Metrics>,
    namespace: String,
    _ns: concord_testenv::TestNamespace,
    _proxy: FaultProxy,
}

impl HeldWrite {
    async fn start(name: &str, hold: Duration) -> Result<Self> {
        let env = TestEnv::shared()?;
        let ns = env.namespace().await?;
        let faults = Faults::seeded(0)
            .on(Verb::Watch)
            .resource("configmaps")
            .named("held")
            .after(1)
            .per_object()
            .hold_events(hold);
        let proxy = FaultProxy::start(env.config(), faults).await?;
        let mut manager = Manager::builder(name)
            .with_kube_config(proxy.config())
            .with_signal_handling(false)
            .build()
            .await?;
        let maps: Api<ConfigMap> = Api::namespaced(manager.client().clone(), ns.name());
        let labelling = Labelling::default();
        // ANCHOR: reconcile_on
        let (trigger, triggers) = futures::channel::mpsc::unbounded();
        manager
            .controller("labelling", maps.clone(), labelling.clone())
            .reconcile_on(triggers)
            .add()?;
        // ANCHOR_END: reconcile_on
        let store = manager
            .context::<ConfigMap>()
            .store()
            .expect("the controller's cache");
        let metrics = manager.metrics();
        let running = concord::testing::start(manager);
        // Created once the cache has listed, so its creation is a watch event.
        tokio::time::timeout(MINUTE, store.wait_until_ready()).await??;
        let direct: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
        let held = ConfigMap {
            metadata: ObjectMeta {
                name: Some("held".to_owned()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        direct.create(&PostParams::default(), &held).await?;
        concord::testing::wait_for(&direct, "held", MINUTE, "labelled", |map| {
            map.labels().contains_key("seen")
        })
        .await?;
        assert_eq!(
            labelling.0.load(Relaxed),
            1,
            "reconciled once, wrote its label"
        );
        Ok(HeldWrite {
            running,
            labelling,
            trigger,
            metrics,
            namespace: ns.name().to_owned(),
            _ns: ns,
            _proxy: proxy,
        })
    }

    /// Reconcile `held` again: the cache does not show the label yet.
    fn trigger(&self) {
        // ANCHOR: trigger
        self.trigger
            .unbounded_send(
                kube::runtime::reflector::ObjectRef::new("held").within(&self.namespace),
            )
            .expect("the controller runs");
        // ANCHOR_END: trigger
    }
}

/// `concord_reconcile_stale_cache_total` by outcome.
fn stale(metrics: &concord::metrics::Metrics, outcome: &str) -> Option<u64> {
    metrics
        .render()
        .lines()
        .filter(|l| l.starts_with("concord_reconcile_stale_cache_total"))
        .find(|l| l.contains(&format!("outcome=\"{outcome}\"")))
        .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
}

/// The manager shuts down while a reconcile waits for the cache to show
/// the manager's own last write of its object (the watch brings that
/// write's event a minute late): the wait ends with the shutdown, counted
/// `stopped`, and the reconcile does not run on the stale copy. Before,
/// the wait ran out its limit (the watches stop with the manager, so
/// nothing could end it) and held the shutdown up, then counted as
/// `requeued`.
#[tokio::test]
async fn a_reconcile_waiting_for_its_own_write_ends_with_the_shutdown() -> Result<()> {
    let held = HeldWrite::start("fresh-stop", MINUTE).await?;
    held.trigger();
    tokio::time::sleep(Duration::from_millis(500)).await;
    held.running.stop().await?;
    assert_eq!(stale(&held.metrics, "stopped"), Some(1));
    assert_eq!(stale(&held.metrics, "requeued"), Some(0));
    assert_eq!(stale(&held.metrics, "ran"), Some(0));
    assert_eq!(
        held.labelling.0.load(Relaxed),
        1,
        "the held reconcile did not run on the copy without its own label"
    );
    Ok(())
}

/// A reconcile held back for the manager's own write (its watch event
/// comes 1 s late) runs once when that event comes, on the copy it
/// brought: the event that ends the wait does not run it a second time.
/// Before, the held reconcile ran when the wait ended and the event, which
/// came while it counted as running, ran it once more after.
#[tokio::test]
async fn a_reconcile_held_for_its_own_write_runs_once_when_the_write_comes() -> Result<()> {
    let held = HeldWrite::start("fresh-once", Duration::from_secs(1)).await?;
    held.trigger();
    // The label's event comes within the hold (1 s, under the gate's 2 s
    // limit); then nothing else changes the object.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(stale(&held.metrics, "ran"), Some(1), "held back, then ran");
    assert_eq!(stale(&held.metrics, "requeued"), Some(0));
    assert_eq!(
        held.labelling.0.load(Relaxed),
        2,
        "the first reconcile and the held one, once"
    );
    held.running.stop().await?;
    Ok(())
}
