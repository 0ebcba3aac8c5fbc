//! Running the operator under test so that the proxy can crash it between
//! two writes and start it again, as a restarted Pod would.

use std::fmt::Display;
use std::future::Future;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use tokio::sync::watch;

use crate::faults::{FaultError, FaultProxy};

/// An operator run by a [`FaultProxy`], crashed and restarted by its
/// `crash_before`/`crash_after` rules.
///
/// Each incarnation runs on a tokio runtime of its own on a thread of its
/// own; a crash drops that runtime with every task the operator spawned
/// (its in-memory state, caches and queues die with it), and the next
/// incarnation starts from scratch, as a restarted Pod does.
#[derive(Debug)]
pub struct Supervised {
    stop: watch::Sender<bool>,
    exited: Arc<Mutex<Option<String>>>,
    thread: Option<JoinHandle<SupervisedReport>>,
}

/// How a supervised operator's life went.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SupervisedReport {
    /// Incarnations started (1 + crashes).
    pub starts: u32,
    /// Why the operator stopped by itself, if it did before [`Supervised::stop`].
    pub exited: Option<String>,
}

impl FaultProxy {
    /// Runs the operator `start` builds from a client configuration that
    /// points at this proxy, restarting it after every crash fault.
    ///
    /// `start` runs once per incarnation, on that incarnation's runtime.
    pub fn supervise<F, Fut, E>(&self, start: F) -> Supervised
    where
        F: Fn(kube::Config) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), E>> + 'static,
        E: Display,
    {
        let shared = self.shared.clone();
        shared.crashes.supervised.store(true, SeqCst);
        let config = self.config();
        let (stop, stopped) = watch::channel(false);
        let exited = Arc::new(Mutex::new(None));
        let exit_note = exited.clone();
        let thread = std::thread::spawn(move || {
            let mut report = SupervisedReport::default();
            loop {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(error) => {
                        report.exited = Some(format!("no runtime: {error}"));
                        break;
                    }
                };
                report.starts += 1;
                let mut crashed = shared.crashes.signal.subscribe();
                crashed.borrow_and_update();
                let mut stopped = stopped.clone();
                let outcome = runtime.block_on(async {
                    if *stopped.borrow() {
                        return Outcome::Stopped;
                    }
                    tokio::select! {
                        result = start(config.clone()) => Outcome::Exited(match result {
                            Ok(()) => "returned".to_owned(),
                            Err(error) => format!("failed: {error}"),
                        }),
                        _ = crashed.changed() => Outcome::Crashed,
                        _ = stopped.wait_for(|s| *s) => Outcome::Stopped,
                    }
                });
                // Every task of this incarnation dies here, mid-flight.
                runtime.shutdown_background();
                match outcome {
                    Outcome::Crashed => shared.crashes.restarted(),
                    Outcome::Stopped => break,
                    Outcome::Exited(why) => {
                        *exit_note
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(why.clone());
                        report.exited = Some(why);
                        break;
                    }
                }
            }
            shared.crashes.supervised.store(false, SeqCst);
            report
        });
        Supervised {
            stop,
            exited,
            thread: Some(thread),
        }
    }
}

enum Outcome {
    Crashed,
    Stopped,
    Exited(String),
}

impl Supervised {
    /// Why the operator stopped by itself (it returned or failed), if it has.
    pub fn exited(&self) -> Option<String> {
        self.exited
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Stops the operator (dropping its runtime) and reports its life.
    ///
    /// # Errors
    ///
    /// [`FaultError::OperatorPanicked`] when its thread panicked.
    pub async fn stop(mut self) -> Result<SupervisedReport, FaultError> {
        self.stop.send_replace(true);
        let Some(thread) = self.thread.take() else {
            return Ok(SupervisedReport::default());
        };
        tokio::task::spawn_blocking(move || thread.join())
            .await
            .map_err(|e| FaultError::OperatorPanicked(e.to_string()))?
            .map_err(|panic| {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                FaultError::OperatorPanicked(message)
            })
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        // Stop the operator even when the test bails out early; not joined.
        self.stop.send_replace(true);
    }
}
