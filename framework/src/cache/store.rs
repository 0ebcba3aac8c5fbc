//! The shared cache as a reconciler reads it: kube-runtime's store, with a
//! readiness that wakes every waiter.
//!
//! kube-runtime's `Store::wait_until_ready` keeps one waker: when several
//! tasks wait (each controller of the type waits too), only the last to
//! register is woken when the first list is in, and the others wait until
//! something else polls them — forever, for a task that only waits. This
//! store's [`wait_until_ready`](Store::wait_until_ready) waits on a channel
//! that wakes them all.

use std::fmt;
use std::ops::Deref;

use kube::runtime::reflector;
use tokio::sync::watch;

use crate::AnyObject;

/// Where a shared cache is in its first list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Synced {
    /// The first list is not complete yet.
    Listing,
    /// The store held the complete list once (and stays synced through
    /// later re-lists, as an informer's `HasSynced` does).
    Yes,
    /// The watch stopped before its first list was complete.
    Stopped,
}

/// The shared watch cache of `K` that [`Context::store`](crate::Context::store)
/// hands out: every controller of the same type, scope and selection reads
/// it, and so do the re-reads of writes after a conflict.
///
/// It dereferences to kube-runtime's
/// [`Store`](kube::runtime::reflector::Store) (`get`, `state`, `len`,
/// `find`), which is also what [`into_inner`](Self::into_inner) returns, for
/// code written against kube-runtime; [`wait_until_ready`](Self::wait_until_ready)
/// is this type's own.
pub struct Store<K: AnyObject> {
    inner: reflector::Store<K>,
    sync: watch::Receiver<Synced>,
    name: String,
}

impl<K: AnyObject> Clone for Store<K> {
    fn clone(&self) -> Self {
        Store {
            inner: self.inner.clone(),
            sync: self.sync.clone(),
            name: self.name.clone(),
        }
    }
}

impl<K: AnyObject> fmt::Debug for Store<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("cache", &self.name)
            .field("objects", &self.inner.len())
            .field("ready", &self.is_ready())
            .finish()
    }
}

impl<K: AnyObject> Store<K> {
    pub(crate) fn new(
        inner: reflector::Store<K>,
        sync: watch::Receiver<Synced>,
        name: String,
    ) -> Self {
        Store { inner, sync, name }
    }

    /// Returns once the cache holds the watch's first complete list (the
    /// moment the manager's `/readyz` check of this cache passes); at once
    /// when it already did. Every waiter is woken.
    ///
    /// # Errors
    ///
    /// [`StoreStopped`] when the manager stopped (or was dropped) before
    /// the first list was complete.
    pub async fn wait_until_ready(&self) -> Result<(), StoreStopped> {
        let mut sync = self.sync.clone();
        match sync.wait_for(|s| *s != Synced::Listing).await.map(|s| *s) {
            Ok(Synced::Yes) => Ok(()),
            Ok(_) | Err(_) => Err(StoreStopped {
                cache: self.name.clone(),
            }),
        }
    }

    /// Whether the cache has held a complete list.
    pub fn is_ready(&self) -> bool {
        *self.sync.borrow() == Synced::Yes
    }

    /// kube-runtime's store underneath, for APIs that take one.
    pub fn into_inner(self) -> reflector::Store<K> {
        self.inner
    }
}

impl<K: AnyObject> Deref for Store<K> {
    type Target = reflector::Store<K>;

    fn deref(&self) -> &Self::Target {
        &self.inner
    }
}

/// [`Store::wait_until_ready`] gave up: the manager stopped before the
/// cache's first list was complete.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the manager stopped before the cache {cache} synced")]
pub struct StoreStopped {
    /// The cache, as its readiness check names it (`cache:pods/default`).
    pub cache: String,
}
