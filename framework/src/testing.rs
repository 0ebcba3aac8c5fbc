//! Running a whole [`Manager`] inside a test: start it in one call, wait
//! for a condition on an object with a message that says what was last
//! seen, stop it.
//!
//! ```no_run
//! # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use concord::testing::{self, wait_for};
//! use k8s_openapi::api::core::v1::ConfigMap;
//!
//! let mut manager = testing::manager("my-operator", client.clone()).await?;
//! // manager.controller(..).add()?; as the operator's main does
//! let running = testing::start(manager);
//! let maps = kube::Api::<ConfigMap>::namespaced(client, "default");
//! wait_for(&maps, "settings", Duration::from_secs(30), "has a value", |map| {
//!     map.data.as_ref().is_some_and(|d| d.contains_key("value"))
//! })
//! .await?;
//! running.stop().await?;
//! # Ok(()) }
//! ```
//!
//! The client comes from the embedded control plane of the
//! `concord-testenv` crate (`TestEnv::shared()?.client()?`) or any cluster.

use std::fmt::Debug;
use std::time::Duration;

use kube::api::Api;
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use crate::{Error, Manager, manager::ShutdownHandle};

/// A manager for a test on `client`: no signal handling, no flags read
/// from the process's command line, metrics and probes off unless the
/// builder is told otherwise. Add controllers, then [`start`] it.
///
/// # Errors
///
/// As [`ManagerBuilder::build`](crate::manager::ManagerBuilder::build).
pub async fn manager(name: &str, client: Client) -> Result<Manager, Error> {
    Manager::builder(name)
        .with_client(client)
        .with_signal_handling(false)
        .build()
        .await
}

/// A manager running on its own task, until [`stop`](Self::stop).
#[derive(Debug)]
pub struct RunningManager {
    stop: ShutdownHandle,
    task: JoinHandle<Result<(), Error>>,
}

/// Runs `manager` on a task of the current Tokio runtime.
///
/// # Panics
///
/// Outside a Tokio runtime.
pub fn start(manager: Manager) -> RunningManager {
    RunningManager {
        stop: manager.shutdown_handle(),
        task: tokio::spawn(manager.run()),
    }
}

impl RunningManager {
    /// Shuts the manager down gracefully and waits until it stopped.
    ///
    /// # Errors
    ///
    /// What [`Manager::run`] returned.
    ///
    /// # Panics
    ///
    /// When the manager's task panicked: the panic goes on in the test.
    pub async fn stop(self) -> Result<(), Error> {
        self.stop.shutdown();
        match self.task.await {
            Ok(result) => result,
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            Err(_) => Ok(()),
        }
    }

    /// Whether the manager stopped by itself (an error, a lost lease).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

/// [`wait_for`] gave up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WaitError {
    /// The condition did not hold within the time given.
    #[error("{object} did not {what} within {waited:?}; last seen: {last}")]
    TimedOut {
        /// The object, as `plural namespace/name`.
        object: String,
        /// What was waited for.
        what: String,
        /// How long.
        waited: Duration,
        /// The last copy read (its JSON, cut at 2,000 characters), or why
        /// there was none.
        last: String,
    },
}

/// Reads `name` through `api` every 100 ms until `condition` holds for
/// it, and returns that copy. `what` says what is waited for, in the
/// error's words (`become Ready`).
///
/// # Errors
///
/// [`WaitError::TimedOut`] after `timeout`, with the last copy read (or
/// that the object was absent, or the read's error).
pub async fn wait_for<K>(
    api: &Api<K>,
    name: &str,
    timeout: Duration,
    what: &str,
    condition: impl Fn(&K) -> bool,
) -> Result<K, WaitError>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let last = match api.get_opt(name).await {
            Ok(Some(object)) if condition(&object) => return Ok(object),
            Ok(Some(object)) => excerpt(&object),
            Ok(None) => "absent".to_owned(),
            Err(error) => format!("reading it failed: {error}"),
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(WaitError::TimedOut {
                object: format!("{} {}", api.resource_url(), name),
                what: what.to_owned(),
                waited: timeout,
                last,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `name` is gone from `api` (its finalizers removed).
///
/// # Errors
///
/// As [`wait_for`].
pub async fn wait_until_gone<K>(
    api: &Api<K>,
    name: &str,
    timeout: Duration,
) -> Result<(), WaitError>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let last = match api.get_opt(name).await {
            Ok(None) => return Ok(()),
            Ok(Some(object)) => excerpt(&object),
            Err(error) => format!("reading it failed: {error}"),
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(WaitError::TimedOut {
                object: format!("{} {}", api.resource_url(), name),
                what: "go away".into(),
                waited: timeout,
                last,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `object` as JSON without `managedFields`, cut at 2,000 characters.
fn excerpt<K: Resource + Serialize + Clone>(object: &K) -> String {
    let mut object = object.clone();
    object.managed_fields_mut().clear();
    let text = serde_json::to_string(&object).unwrap_or_else(|e| format!("(not JSON: {e})"));
    match text.char_indices().nth(2000) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}
