//! An operator process the harness started: its status lines, its memory
//! from `/proc/<pid>/status`, and stopping it.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use concord_examples::procfs::{self, Memory};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::watch;

use crate::status::Status;

/// How long an operator may take to stop after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// A running operator.
pub(crate) struct Process {
    /// `concord` or `controller-runtime`, for messages.
    pub(crate) who: &'static str,
    child: Child,
    pid: u32,
    status: watch::Receiver<Option<Status>>,
}

impl Process {
    /// Starts `program` with `args`; its stderr is this process's.
    pub(crate) fn spawn(
        who: &'static str,
        program: &Path,
        args: &[String],
    ) -> anyhow::Result<Self> {
        Self::spawn_with(who, program, args, &[])
    }

    /// Starts `program` with `args` and the variables `env` added to this
    /// process's environment.
    pub(crate) fn spawn_with(
        who: &'static str,
        program: &Path,
        args: &[String],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let mut child = Command::new(program)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting the {who} operator {}", program.display()))?;
        let pid = child.id().context("the operator's pid")?;
        let stdout = child.stdout.take().context("the operator's stdout")?;
        let (tx, status) = watch::channel(None);
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(s) = Status::parse(&line) {
                    tx.send_replace(Some(s));
                }
            }
        });
        Ok(Process {
            who,
            child,
            pid,
            status,
        })
    }

    /// The last status line.
    pub(crate) fn status(&self) -> Option<Status> {
        *self.status.borrow()
    }

    /// Waits until the status satisfies `done`, at most `limit`.
    ///
    /// # Errors
    ///
    /// When the operator exits first, or `limit` passes; the message says
    /// `what` it waited for and the last status.
    pub(crate) async fn wait_for(
        &mut self,
        what: &str,
        limit: Duration,
        done: impl Fn(&Status) -> bool,
    ) -> anyhow::Result<Status> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.status().filter(|s| done(s)) {
                return Ok(s);
            }
            if let Some(exit) = self.child.try_wait()? {
                bail!("the {} operator exited ({exit}) before {what}", self.who);
            }
            if Instant::now() > deadline {
                bail!(
                    "the {} operator did not reach {what} within {limit:?}; last status: {:?}",
                    self.who,
                    self.status()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Fails when the operator has exited.
    ///
    /// # Errors
    ///
    /// When it exited (with its exit status), or cannot be waited on.
    pub(crate) fn running(&mut self) -> anyhow::Result<()> {
        if let Some(exit) = self.child.try_wait()? {
            bail!("the {} operator exited ({exit})", self.who);
        }
        Ok(())
    }

    /// Its VmRSS and VmHWM now.
    ///
    /// # Errors
    ///
    /// When its `/proc/<pid>/status` cannot be read.
    pub(crate) fn memory(&self) -> anyhow::Result<Memory> {
        procfs::memory(Some(self.pid))
    }

    /// The CPU time it has used, user and system, in milliseconds.
    pub(crate) fn cpu_ms(&self) -> Option<f64> {
        procfs::cpu_ms(Some(self.pid))
    }

    /// Starts a new VmHWM peak; whether that worked.
    pub(crate) fn reset_peak(&self) -> bool {
        procfs::reset_peak(Some(self.pid))
    }

    /// Sends SIGTERM and waits for a clean exit.
    ///
    /// # Errors
    ///
    /// When it cannot be signalled, does not stop in time or exits with
    /// an error.
    pub(crate) async fn stop(mut self) -> anyhow::Result<()> {
        let sent = Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status()
            .await?;
        anyhow::ensure!(sent.success(), "kill -TERM {} failed: {sent}", self.pid);
        let exit = tokio::time::timeout(STOP_TIMEOUT, self.child.wait())
            .await
            .with_context(|| {
                format!(
                    "the {} operator ignored SIGTERM for {STOP_TIMEOUT:?}",
                    self.who
                )
            })??;
        anyhow::ensure!(
            exit.success(),
            "the {} operator exited with {exit}",
            self.who
        );
        Ok(())
    }
}
