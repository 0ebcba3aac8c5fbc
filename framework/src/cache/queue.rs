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

/// The watch's end of a queue.
pub(crate) struct Announcer<K>(Arc<Shared<K>>);

/// The controller's end: a stream of the newest copy of each announced
/// object.
pub(crate) struct Announced<K>(Arc<Shared<K>>);

/// A new, empty queue.
pub(crate) fn queue<K>() -> (Announcer<K>, Announced<K>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            order: VecDeque::new(),
            newest: HashMap::new(),
            waker: None,
            closed: false,
        }),
    });
    (Announcer(shared.clone()), Announced(shared))
}

impl<K: Resource> Announcer<K> {
    /// Announces `object`, replacing a copy of it still waiting. `false`
    /// once the controller has stopped.
    pub(crate) fn announce(&self, object: Arc<K>) -> bool {
        let mut state = self.0.lock();
        if state.closed {
            return false;
        }
        let key = (object.namespace(), object.name_any());
        if let Some(waiting) = state.newest.get_mut(&key) {
            *waiting = object;
        } else {
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
        self.0.lock().order.len()
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
        let (announcer, mut announced) = queue();
        for version in 1..=1000 {
            assert!(announcer.announce(config_map("a", &version.to_string())));
            assert!(announcer.announce(config_map("b", &version.to_string())));
        }
        assert_eq!(announcer.waiting(), 2);
        assert_eq!(next(&mut announced).as_deref(), Some("a@1000"));
        announcer.announce(config_map("a", "1001"));
        assert_eq!(next(&mut announced).as_deref(), Some("b@1000"));
        assert_eq!(next(&mut announced).as_deref(), Some("a@1001"));
        assert_eq!(next(&mut announced), None, "empty: pending");
    }

    #[test]
    fn a_stopped_controller_refuses_announcements() {
        let (announcer, announced) = queue();
        drop(announced);
        assert!(!announcer.announce(config_map("a", "1")));
    }

    #[test]
    fn an_announcement_wakes_a_waiting_controller() {
        let (announcer, mut announced) = queue::<ConfigMap>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let waiting = tokio::spawn(async move { announced.next().await.map(|o| o.name_any()) });
            tokio::task::yield_now().await;
            announcer.announce(config_map("late", "7"));
            assert_eq!(waiting.await.unwrap().as_deref(), Some("late"));
        });
    }
}
