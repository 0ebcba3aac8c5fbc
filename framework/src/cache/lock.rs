//! Taking a cache's mutex whatever a panicking holder left behind.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// `mutex` locked; a poisoned lock is taken as it is, since every holder
/// leaves the guarded value consistent between its statements.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
