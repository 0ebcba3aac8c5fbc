//! Starting and stopping each contender: a concord manager in this
//! process, or the controller-runtime peer (`peer/`) as its own process.
//! Each reports when it first reconciled each object.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use concord::{Action, Context, Manager, Reconciler, manager::ShutdownHandle};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::{Client, ResourceExt};
use tokio::io::AsyncBufReadExt as _;
use tokio::sync::mpsc;

use crate::args::ContenderName;

/// The Go module of the peer.
const PEER_SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/peer");

/// The peer's executable, built from `peer/` on first use and cached like
/// the control plane.
pub(crate) fn peer() -> anyhow::Result<PathBuf> {
    concord_testenv::GoProgram::new(
        "queue-bench-peer",
        PEER_SOURCE,
        "the controller-runtime peer",
    )
    .ensure()
    .context("building the controller-runtime peer")
}

/// A first reconcile: the object's name and when it started.
pub(crate) type First = (String, SystemTime);

/// What a run needs to start a contender.
pub(crate) struct Setup<'a> {
    pub(crate) client: &'a Client,
    pub(crate) kubeconfig: &'a Path,
    pub(crate) peer: &'a Path,
    pub(crate) namespace: &'a str,
    pub(crate) work: Duration,
    pub(crate) concurrency: u16,
}

/// A running contender.
pub(crate) struct Running {
    /// Each object's first reconcile, in the order they happen.
    pub(crate) first: mpsc::UnboundedReceiver<First>,
    stop: Stop,
}

enum Stop {
    Concord(
        ShutdownHandle,
        tokio::task::JoinHandle<Result<(), concord::Error>>,
    ),
    Peer(tokio::process::Child),
}

/// Starts `who` over the ConfigMaps of `setup.namespace`.
pub(crate) async fn start(who: ContenderName, setup: &Setup<'_>) -> anyhow::Result<Running> {
    let (sender, first) = mpsc::unbounded_channel();
    let stop = match who {
        ContenderName::Concord => concord(setup, sender).await?,
        ContenderName::CrPriority => peer_process(setup, true, sender)?,
        ContenderName::CrWorkqueue => peer_process(setup, false, sender)?,
    };
    Ok(Running { first, stop })
}

impl Running {
    /// Stops the contender and waits for it to exit.
    pub(crate) async fn stop(self) -> anyhow::Result<()> {
        match self.stop {
            Stop::Concord(handle, task) => {
                handle.shutdown();
                task.await?.context("the concord manager")?;
            }
            Stop::Peer(mut child) => {
                child.kill().await.context("stopping the peer")?;
            }
        }
        Ok(())
    }
}

/// Records each object's first reconcile, then works for `work`: a
/// thread's sleep, as precise as the peer's.
struct Recorder {
    seen: Mutex<std::collections::HashSet<String>>,
    sender: mpsc::UnboundedSender<First>,
    work: Duration,
}

#[concord::async_trait]
impl Reconciler<ConfigMap> for Recorder {
    type Error = concord::WriteError;

    async fn reconcile(
        &self,
        object: Arc<ConfigMap>,
        _: &Context<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        let now = SystemTime::now();
        let name = object.name_any();
        let new = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(name.clone());
        if new {
            let _ = self.sender.send((name, now));
        }
        // The same work as the peer's `time.Sleep`: tokio's timer rounds a
        // wait up to its next whole millisecond (10 ms lasts 11.2 ms at the
        // median, Go's 10.2 ms), which would charge concord's queue for the
        // timer's grain. A thread's sleep on the blocking pool lasts 10.3 ms.
        let work = self.work;
        tokio::task::spawn_blocking(move || std::thread::sleep(work))
            .await
            .unwrap_or_default();
        Ok(Action::await_change())
    }
}

async fn concord(setup: &Setup<'_>, sender: mpsc::UnboundedSender<First>) -> anyhow::Result<Stop> {
    let mut manager = Manager::builder("queue-bench")
        .with_builtin_type::<ConfigMap>()
        .with_client(setup.client.clone())
        .with_signal_handling(false)
        .build()
        .await?;
    let maps: Api<ConfigMap> = Api::namespaced(setup.client.clone(), setup.namespace);
    let recorder = Recorder {
        seen: Mutex::default(),
        sender,
        work: setup.work,
    };
    manager
        .controller("queue-bench", maps, recorder)
        .with_concurrency(setup.concurrency)
        .add()?;
    let handle = manager.shutdown_handle();
    Ok(Stop::Concord(handle, tokio::spawn(manager.run())))
}

fn peer_process(
    setup: &Setup<'_>,
    priority_queue: bool,
    sender: mpsc::UnboundedSender<First>,
) -> anyhow::Result<Stop> {
    let mut child = tokio::process::Command::new(setup.peer)
        .arg(format!(
            "-cluster-kubeconfig={}",
            setup.kubeconfig.display()
        ))
        .arg(format!("-namespace={}", setup.namespace))
        .arg(format!("-work={}ms", setup.work.as_millis()))
        .arg(format!("-concurrency={}", setup.concurrency))
        .arg(format!("-priority-queue={priority_queue}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", setup.peer.display()))?;
    let stdout = child.stdout.take().context("the peer's stdout")?;
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(first) = parse_line(&line) {
                let _ = sender.send(first);
            }
        }
    });
    Ok(Stop::Peer(child))
}

/// `reconciled NAME UNIX_NANOS`.
fn parse_line(line: &str) -> Option<First> {
    let mut words = line.split_whitespace();
    if words.next()? != "reconciled" {
        return None;
    }
    let name = words.next()?.to_owned();
    let nanos: u64 = words.next()?.parse().ok()?;
    Some((name, SystemTime::UNIX_EPOCH + Duration::from_nanos(nanos)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_peers_lines() {
        let (name, at) = parse_line("reconciled new-3 1500000000000000001").unwrap();
        assert_eq!(name, "new-3");
        assert_eq!(
            at.duration_since(SystemTime::UNIX_EPOCH).unwrap(),
            Duration::from_nanos(1_500_000_000_000_000_001)
        );
        assert!(parse_line("something else").is_none());
    }
}
