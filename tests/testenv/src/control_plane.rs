use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::{ControlPlaneBinary, Error};

/// How to start a [`ControlPlane`].
///
/// ```no_run
/// use concord_testenv::{ControlPlane, ControlPlaneOptions};
/// // An API server that really answers 429 under load.
/// let options = ControlPlaneOptions::default()
///     .with_apiserver_arg("--enable-priority-and-fairness=false")
///     .with_apiserver_arg("--max-mutating-requests-inflight=1");
/// let control_plane = ControlPlane::start(options)?;
/// # Ok::<(), concord_testenv::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ControlPlaneOptions {
    data_dir: Option<PathBuf>,
    apiserver_port: u16,
    etcd_port: u16,
    etcd_peer_port: u16,
    controller_manager: bool,
    apiserver_args: Vec<String>,
    ready_timeout: Duration,
}

impl Default for ControlPlaneOptions {
    fn default() -> Self {
        ControlPlaneOptions {
            data_dir: None,
            apiserver_port: 0,
            etcd_port: 0,
            etcd_peer_port: 0,
            controller_manager: true,
            apiserver_args: Vec::new(),
            ready_timeout: Duration::from_secs(120),
        }
    }
}

impl ControlPlaneOptions {
    /// Keeps etcd's data, the credentials and the logs in `dir`, which
    /// outlives the control plane; needed for [`ControlPlane::restart`].
    /// Without it the control plane uses a temporary directory it removes
    /// when it exits.
    #[must_use]
    pub fn with_data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }

    /// Adds a kube-apiserver flag, such as `--max-requests-inflight=1`.
    #[must_use]
    pub fn with_apiserver_arg(mut self, arg: impl Into<String>) -> Self {
        self.apiserver_args.push(arg.into());
        self
    }

    /// Runs without kube-controller-manager (no garbage collection, no
    /// namespace cleanup, no default ServiceAccounts); saves ~85 MB.
    #[must_use]
    pub fn without_controller_manager(mut self) -> Self {
        self.controller_manager = false;
        self
    }

    /// How long to wait for `/readyz` (default 120 s).
    #[must_use]
    pub fn with_ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }
}

/// What the control plane reported once it was ready.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    event: String,
    #[serde(default)]
    server: String,
    #[serde(default)]
    kubeconfig: PathBuf,
    #[serde(default)]
    data_dir: PathBuf,
    #[serde(default)]
    apiserver_port: u16,
    #[serde(default)]
    etcd_port: u16,
    #[serde(default)]
    error: String,
    #[serde(default)]
    log_tail: String,
}

/// How many times [`ControlPlane::start`] tries when a port it chose was taken.
pub const START_ATTEMPTS: u32 = 3;

/// A running kube-apiserver + etcd (+ kube-controller-manager) process.
///
/// # Guarantees
///
/// Dropping it stops the process. If the owning process dies first, the
/// control plane notices its closed standard input and exits by itself,
/// removing its temporary directory.
#[derive(Debug)]
pub struct ControlPlane {
    child: Child,
    stdin: Option<ChildStdin>,
    options: ControlPlaneOptions,
    ready: Event,
}

impl ControlPlane {
    /// Builds the binary if needed, starts it and waits until `/readyz` answers.
    ///
    /// # Errors
    ///
    /// [`Error::BuildFailed`] or [`Error::StartFailed`] (with the tail of the
    /// control plane's log).
    ///
    /// When the control plane chooses its own ports, another process can take
    /// one between the choice and the bind; such a start is tried again, at
    /// most [`START_ATTEMPTS`] times in all, each retry reported on standard
    /// error. Ports you chose are never changed.
    pub fn start(options: ControlPlaneOptions) -> Result<Self, Error> {
        let chosen_by_us =
            options.apiserver_port == 0 && options.etcd_port == 0 && options.etcd_peer_port == 0;
        let mut attempt = 1;
        loop {
            match Self::start_once(options.clone()) {
                Err(Error::StartFailed { message })
                    if chosen_by_us
                        && attempt < START_ATTEMPTS
                        && message.contains("address already in use") =>
                {
                    eprintln!(
                        "concord-testenv: a port was taken before the control plane bound it; \
                         starting again (attempt {} of {START_ATTEMPTS})",
                        attempt + 1
                    );
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    fn start_once(options: ControlPlaneOptions) -> Result<Self, Error> {
        let binary = ControlPlaneBinary::ensure()?;
        let mut command = Command::new(binary.path());
        command.arg("--exit-on-stdin-eof");
        command.arg(format!(
            "--ready-timeout={}s",
            options.ready_timeout.as_secs()
        ));
        if let Some(dir) = &options.data_dir {
            command.arg(format!("--data-dir={}", dir.display()));
        }
        for (flag, port) in [
            ("apiserver-port", options.apiserver_port),
            ("etcd-port", options.etcd_port),
            ("etcd-peer-port", options.etcd_peer_port),
        ] {
            if port != 0 {
                command.arg(format!("--{flag}={port}"));
            }
        }
        command.arg(format!(
            "--controller-manager={}",
            options.controller_manager
        ));
        if !options.apiserver_args.is_empty() {
            command.arg("--").args(&options.apiserver_args);
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = command
            .spawn()
            .map_err(|e| Error::io(format!("starting {}", binary.path().display()), e))?;
        let stdin = child.stdin.take();
        let ready = match child.stdout.take() {
            Some(stdout) => wait_for_ready(stdout, options.ready_timeout + Duration::from_secs(10)),
            None => Err(Error::StartFailed {
                message: "no stdout pipe".into(),
            }),
        };
        match ready {
            Ok(ready) => Ok(ControlPlane {
                child,
                stdin,
                options,
                ready,
            }),
            Err(err) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(err)
            }
        }
    }

    /// The API server's URL, `https://127.0.0.1:<port>`.
    pub fn server(&self) -> &str {
        &self.ready.server
    }

    /// An admin kubeconfig for this control plane.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.ready.kubeconfig
    }

    /// The directory holding etcd's data, the credentials and the logs
    /// (`controlplane.log`, `controller-manager.log`).
    pub fn data_dir(&self) -> &Path {
        &self.ready.data_dir
    }

    /// Stops the control plane and starts it again on the same data
    /// directory and ports, as a real API server and etcd restart would.
    ///
    /// # Errors
    ///
    /// [`Error::StartFailed`] when no data directory was configured (there
    /// would be nothing to restart from) or the new process fails to start.
    pub fn restart(&mut self) -> Result<(), Error> {
        if self.options.data_dir.is_none() {
            return Err(Error::StartFailed {
                message: "restart needs ControlPlaneOptions::with_data_dir".into(),
            });
        }
        self.stop();
        let mut options = self.options.clone();
        options.apiserver_port = self.ready.apiserver_port;
        options.etcd_port = self.ready.etcd_port;
        let next = ControlPlane::start(options)?;
        *self = next;
        Ok(())
    }

    /// Stops the process and waits for it to exit.
    pub fn stop(&mut self) {
        // Closing stdin is the shutdown request; a kill is the fallback.
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The process id of the control plane.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

fn wait_for_ready(stdout: std::process::ChildStdout, timeout: Duration) -> Result<Event, Error> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Ok(event) = serde_json::from_str::<Event>(&line) {
                let _ = tx.send(event);
            }
        }
    });
    match rx.recv_timeout(timeout) {
        Ok(event) if event.event == "ready" => Ok(event),
        Ok(event) => Err(Error::StartFailed {
            message: format!(
                "{}\n--- control plane log (tail) ---\n{}",
                event.error, event.log_tail
            ),
        }),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(Error::Timeout {
            what: "the control plane to report ready".into(),
            seconds: timeout.as_secs(),
        }),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(Error::StartFailed {
            message: "the control plane exited without reporting".into(),
        }),
    }
}
