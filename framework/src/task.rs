//! What the manager starts when it runs: each controller, and the watch of
//! each shared cache, is a [`Task`] until then.

use futures::future::BoxFuture;
use tokio::sync::watch;

/// A task waiting for the manager to start it; it runs until the shutdown
/// signal it is given turns `true` (or its work ends).
pub(crate) type Task = Box<dyn FnOnce(watch::Receiver<bool>) -> BoxFuture<'static, ()> + Send>;

/// Aborts its task when dropped.
pub(crate) struct AbortOnDrop<T>(pub(crate) tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
