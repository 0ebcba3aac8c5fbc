use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::{Resource, ResourceExt};
use tokio::sync::watch;

use crate::cache::SharedCache;
use crate::metrics::ReconcileCounters;
use crate::sharding::hooks::{self as shard, Admission};
use crate::{Context, Object, Reconciler};

/// Per-object exponential requeue backoff after failures, as
/// controller-runtime's default rate limiter: 5 ms doubling to 1,000 s.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    const BASE: Duration = Duration::from_millis(5);
    const MAX: Duration = Duration::from_secs(1000);

    pub(crate) fn failed(&self, key: String) -> Duration {
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = failures.entry(key).or_insert(0);
        let delay = Self::BASE
            .saturating_mul(1u32 << (*n).min(20))
            .min(Self::MAX);
        *n += 1;
        delay
    }

    pub(crate) fn succeeded(&self, key: &str) {
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        failures.remove(key);
    }
}

pub(crate) struct Shared<K, R> {
    pub(crate) reconciler: R,
    pub(crate) context: Context<K>,
    pub(crate) counters: Arc<ReconcileCounters>,
    pub(crate) backoff: Backoff,
    pub(crate) name: String,
    /// The sharding gate, when the manager is sharded.
    pub(crate) shard: Option<Arc<crate::sharding::hooks::Gate>>,
}

fn key_of<K: Resource>(object: &K) -> String {
    format!(
        "{}/{}",
        object.namespace().unwrap_or_default(),
        object.name_any()
    )
}

async fn reconcile<K, R>(object: Arc<K>, shared: Arc<Shared<K, R>>) -> Result<Action, R::Error>
where
    K: Object,
    R: Reconciler<K>,
{
    let key = key_of(object.as_ref());
    let admission = shard::admit(shared.shard.as_ref(), &key);
    if let Admission::Refused = admission {
        return Ok(Action::await_change());
    }
    let start = Instant::now();
    shared.counters.in_flight.fetch_add(1, Relaxed);
    let work = shared.reconciler.reconcile(object, &shared.context);
    let Some(result) = shard::fenced(shared.shard.as_ref(), work).await else {
        shared.counters.in_flight.fetch_sub(1, Relaxed);
        tracing::warn!(controller = %shared.name, object = %key, "reconcile cancelled: the shard membership lease was not renewed in time");
        return Ok(Action::await_change());
    };
    drop(admission);
    shared.counters.in_flight.fetch_sub(1, Relaxed);
    let micros = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
    shared.counters.seconds_micros.fetch_add(micros, Relaxed);
    match &result {
        Ok(_) => {
            shared.counters.ok.fetch_add(1, Relaxed);
            shared.backoff.succeeded(&key);
        }
        Err(error) => {
            shared.counters.errors.fetch_add(1, Relaxed);
            let cause = crate::error::chain(error);
            if crate::error::is_conflict_requeue(error) {
                // The `requeue` conflict policy at work: reconciled again
                // on the fresh object, as configured.
                tracing::debug!(controller = %shared.name, object = %key, error = %cause, "reconcile requeued: the object changed while it was written");
            } else {
                tracing::warn!(controller = %shared.name, object = %key, error = %cause, "reconcile failed");
            }
        }
    }
    result
}

fn error_policy<K, R>(object: Arc<K>, _error: &R::Error, shared: Arc<Shared<K, R>>) -> Action
where
    K: Resource,
    R: Reconciler<K>,
{
    Action::requeue(shared.backoff.failed(key_of(object.as_ref())))
}

/// A controller waiting for the manager to start it.
pub(crate) type Pending = Box<dyn FnOnce(watch::Receiver<bool>) -> BoxFuture<'static, ()> + Send>;

/// Where a controller's objects come from.
pub(crate) enum Source<K: Object> {
    /// The manager's shared watch cache of `K`.
    Shared(Arc<SharedCache<K>>),
    /// A watch of its own through this `Api` (sharded managers; see
    /// `Manager::add_controller`).
    Own(Box<Api<K>>),
}

pub(crate) fn pending<K, R, F>(
    source: Source<K>,
    shared: Arc<Shared<K, R>>,
    customize: F,
) -> Pending
where
    K: Object,
    R: Reconciler<K>,
    F: FnOnce(Controller<K>) -> Controller<K> + Send + 'static,
{
    // Subscribed now, before the manager starts the shared watch, so the
    // controller sees every object from the first list on.
    let source = match source {
        Source::Shared(cache) => Ok((cache.subscribe(), cache)),
        Source::Own(api) => Err(*api),
    };
    Box::new(move |mut shutdown: watch::Receiver<bool>| {
        let (controller, api) = match source {
            Ok((objects, cache)) => (
                Controller::for_shared_stream(objects, cache.reader()),
                cache.api().clone(),
            ),
            Err(api) => {
                let config = shard::watcher_config(shared.shard.as_ref());
                (Controller::new(api.clone(), config), api)
            }
        };
        let controller = customize(controller);
        let controller = shard::attach(shared.shard.as_ref(), &api, controller);
        let name = shared.name.clone();
        Box::pin(async move {
            let stop = async move {
                let _ = shutdown.wait_for(|stop| *stop).await;
            };
            controller
                .graceful_shutdown_on(stop)
                .run(reconcile::<K, R>, error_policy::<K, R>, shared)
                .for_each(|result| {
                    if let Err(error) = result {
                        let error = crate::error::chain(&error);
                        tracing::debug!(controller = %name, %error, "controller event");
                    }
                    futures::future::ready(())
                })
                .await;
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_per_object_and_resets_on_success() {
        let backoff = Backoff::default();
        assert_eq!(backoff.failed("a".into()), Duration::from_millis(5));
        assert_eq!(backoff.failed("a".into()), Duration::from_millis(10));
        assert_eq!(backoff.failed("b".into()), Duration::from_millis(5));
        backoff.succeeded("a");
        assert_eq!(backoff.failed("a".into()), Duration::from_millis(5));
        for _ in 0..40 {
            backoff.failed("c".into());
        }
        assert_eq!(backoff.failed("c".into()), Duration::from_secs(1000));
    }
}
