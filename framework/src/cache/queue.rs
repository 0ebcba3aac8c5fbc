//! A subscriber's queue of announced objects, coalesced by object: however
//! many times an object changes before its controller takes it, the queue
//! holds it once, as its newest copy, in the place it was first announced.
//!
//! Its length is therefore bounded by the number of distinct objects, not
//! by the number of watch events (controller-runtime's work queue keeps the
//! same bound for keys). Nothing is lost: the controller is always handed
//! the newest copy the watch delivered, and reconciles from the store,
//! which holds the same or newer.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use futures::Stream;
use kube::{Resource, ResourceExt};

use crate::Predicate;

/// Namespace and name.
type Key = (Option<String>, String);

struct State<K> {
    order: VecDeque<Key>,
    newest: HashMap<Key, Arc<K>>,
    waker: Option<Waker>,
    /// The receiver was dropped: announcements go nowhere.
    closed: bool,
}

struct Shared<K> {
    state: Mutex<State<K>>,
}

impl<K> Shared<K> {
    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The watch's end of a queue, with the subscriber's predicate.
pub(crate) struct Announcer<K> {
    shared: Arc<Shared<K>>,
    predicate: Option<Predicate<K>>,
}

/// The controller's end: a stream of the newest copy of each announced
/// object.
pub(crate) struct Announced<K>(Arc<Shared<K>>);

/// A new, empty queue taking what `predicate` passes (everything when
/// `None`).
pub(crate) fn queue<K>(predicate: Option<Predicate<K>>) -> (Announcer<K>, Announced<K>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            order: VecDeque::new(),
            newest: HashMap::new(),
            waker: None,
            closed: false,
        }),
    });
    (
        Announcer {
            shared: shared.clone(),
            predicate,
        },
        Announced(shared),
    )
}

impl<K: Resource + 'static> Announcer<K> {
    /// Announces `object` (which replaced `old` in the cache), replacing a
    /// copy of it still waiting; an object the predicate refuses is not
    /// queued (but a copy already waiting is refreshed). `false` once the
    /// controller has stopped.
    pub(crate) fn announce(&self, old: Option<&K>, object: Arc<K>) -> bool {
        let passes = self
            .predicate
            .as_ref()
            .is_none_or(|p| p.passes(old, object.as_ref()));
        let mut state = self.shared.lock();
        if state.closed {
            return false;
        }
        let key = (object.namespace(), object.name_any());
        if let Some(waiting) = state.newest.get_mut(&key) {
            *waiting = object;
        } else if passes {
            state.order.push_back(key.clone());
            state.newest.insert(key, object);
        }
        if let Some(waker) = state.waker.take() {
            waker.wake();
        }
        true
    }

    /// How many objects wait to be taken.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.shared.lock().order.len()
    }
}

impl<K> Stream for Announced<K> {
    type Item = Arc<K>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Arc<K>>> {
        let mut state = self.0.lock();
        while let Some(key) = state.order.pop_front() {
            if let Some(object) = state.newest.remove(&key) {
                return Poll::Ready(Some(object));
            }
        }
        state.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl<K> Drop for Announced<K> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.closed = true;
        state.order.clear();
        state.newest.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::{FutureExt, StreamExt};
    use k8s_openapi::api::core::v1::ConfigMap;

    fn config_map(name: &str, version: &str) -> Arc<ConfigMap> {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.metadata.namespace = Some("default".into());
        cm.metadata.resource_version = Some(version.into());
        Arc::new(cm)
    }

    fn next(stream: &mut Announced<ConfigMap>) -> Option<String> {
        let object = stream.next().now_or_never()??;
        Some(format!(
            "{}@{}",
            object.name_any(),
            object.resource_version()?
        ))
    }

    #[test]
    fn keeps_one_newest_copy_per_object_in_first_announced_order() {
        let (announcer, mut announced) = queue(None);
        for version in 1..=1000 {
            assert!(announcer.announce(None, config_map("a", &version.to_string())));
            assert!(announcer.announce(None, config_map("b", &version.to_string())));
        }
        assert_eq!(announcer.waiting(), 2);
        assert_eq!(next(&mut announced).as_deref(), Some("a@1000"));
        announcer.announce(None, config_map("a", "1001"));
        assert_eq!(next(&mut announced).as_deref(), Some("b@1000"));
        assert_eq!(next(&mut announced).as_deref(), Some("a@1001"));
        assert_eq!(next(&mut announced), None, "empty: pending");
    }

    #[test]
    fn a_stopped_controller_refuses_announcements() {
        let (announcer, announced) = queue(None);
        drop(announced);
        assert!(!announcer.announce(None, config_map("a", "1")));
    }

    #[test]
    fn a_predicate_refuses_before_the_queue() {
        let predicate = Predicate::new(|_: Option<&ConfigMap>, new: &ConfigMap| {
            new.resource_version().as_deref() != Some("2")
        });
        let (announcer, mut announced) = queue(Some(predicate));
        assert!(announcer.announce(None, config_map("a", "2")));
        assert_eq!(next(&mut announced), None, "refused");
        announcer.announce(None, config_map("a", "1"));
        announcer.announce(None, config_map("a", "2"));
        assert_eq!(
            next(&mut announced).as_deref(),
            Some("a@2"),
            "a waiting copy is refreshed"
        );
    }

    #[test]
    fn an_announcement_wakes_a_waiting_controller() {
        let (announcer, mut announced) = queue::<ConfigMap>(None);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let waiting = tokio::spawn(async move { announced.next().await.map(|o| o.name_any()) });
            tokio::task::yield_now().await;
            announcer.announce(None, config_map("late", "7"));
            assert_eq!(waiting.await.unwrap().as_deref(), Some("late"));
        });
    }
}
