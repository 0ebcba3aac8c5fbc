use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

use crate::ObjectKey;

/// Per-object async mutexes for the `locked` strategy, bounded by the
/// number of objects being written right now.
///
/// An entry exists only while some task holds or waits for its lock; the
/// last one out removes it, also when a waiting task is cancelled.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use concord_strategies::{LockTable, ObjectKey};
/// let table = LockTable::default();
/// let guard = table.lock(ObjectKey::new("pods", Some("ns"), "p")).await;
/// assert_eq!(table.len(), 1);
/// drop(guard);
/// assert_eq!(table.len(), 0);
/// # }
/// ```
#[derive(Debug, Default)]
pub struct LockTable {
    table: Table<()>,
}

/// Holds one object's lock; dropping it releases the lock and, if nobody
/// else wants it, the table entry.
#[derive(Debug)]
pub struct LockGuard {
    _held: Held<()>,
}

impl LockTable {
    /// Wait for the lock of `key`.
    pub async fn lock(&self, key: ObjectKey) -> LockGuard {
        LockGuard {
            _held: self.table.lock(key).await,
        }
    }

    /// Objects with a held or awaited lock.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether no lock is held or awaited.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

type Entries<T> = Arc<Mutex<HashMap<ObjectKey, Arc<AsyncMutex<T>>>>>;

/// Per-object async mutexes guarding a `T` each, an entry existing only
/// while some task holds or waits for it: the core of [`LockTable`] and of
/// the turns `strict` and `update` take (`turns.rs`).
#[derive(Debug)]
pub(crate) struct Table<T> {
    entries: Entries<T>,
}

impl<T> Default for Table<T> {
    fn default() -> Self {
        Table {
            entries: Arc::default(),
        }
    }
}

/// One object's entry, held; derefs to its `T`.
#[derive(Debug)]
pub(crate) struct Held<T> {
    // Fields drop in order: the lock is released before the entry is
    // looked at for removal.
    guard: OwnedMutexGuard<T>,
    _leave: Leave<T>,
}

/// Removes an entry nobody holds or awaits any more; built before the wait
/// for the lock, so that a cancelled wait cleans up too.
#[derive(Debug)]
struct Leave<T> {
    entries: Entries<T>,
    key: ObjectKey,
    entry: Option<Arc<AsyncMutex<T>>>,
}

impl<T: Default> Table<T> {
    /// Wait for the entry of `key`, created with `T::default()` if absent.
    pub(crate) async fn lock(&self, key: ObjectKey) -> Held<T> {
        let entry = {
            let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
            entries.entry(key.clone()).or_default().clone()
        };
        let leave = Leave {
            entries: self.entries.clone(),
            key,
            entry: Some(entry.clone()),
        };
        Held {
            guard: entry.lock_owned().await,
            _leave: leave,
        }
    }
}

impl<T> Table<T> {
    /// Objects with a held or awaited entry.
    pub(crate) fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl<T> std::ops::Deref for Held<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> std::ops::DerefMut for Held<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

impl<T> Drop for Leave<T> {
    fn drop(&mut self) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        // Drop our handle under the table lock: handles are only cloned
        // under it, so a count of one means nobody holds or awaits the entry.
        drop(self.entry.take());
        if entries
            .get(&self.key)
            .is_some_and(|e| Arc::strong_count(e) == 1)
        {
            entries.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn key(i: usize) -> ObjectKey {
        ObjectKey::new("pods", Some("ns"), format!("pod-{i}"))
    }

    #[tokio::test]
    async fn table_returns_to_empty_after_ten_thousand_objects() {
        let table = Arc::new(LockTable::default());
        let tasks: Vec<_> = (0..10_000)
            .map(|i| {
                let table = table.clone();
                tokio::spawn(async move {
                    let _held = table.lock(key(i % 2_500)).await;
                    tokio::task::yield_now().await;
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(table.len(), 0);
        let guards: Vec<_> =
            futures::future::join_all((0..10_000).map(|i| table.lock(key(i)))).await;
        assert_eq!(table.len(), 10_000);
        drop(guards);
        assert!(table.is_empty());
    }

    #[tokio::test]
    async fn lock_excludes_a_second_holder_of_the_same_object() {
        let table = Arc::new(LockTable::default());
        let first = table.lock(key(1)).await;
        let t2 = table.clone();
        let second = tokio::spawn(async move { t2.lock(key(1)).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!second.is_finished());
        assert_eq!(table.len(), 1);
        drop(first);
        let second = second.await.unwrap();
        assert_eq!(table.len(), 1);
        drop(second);
        assert!(table.is_empty());
    }

    #[tokio::test]
    async fn cancelled_waiter_leaves_no_entry() {
        let table = LockTable::default();
        let held = table.lock(key(7)).await;
        let waited = tokio::time::timeout(Duration::from_millis(10), table.lock(key(7))).await;
        assert!(waited.is_err());
        drop(held);
        assert!(table.is_empty());
    }
}
