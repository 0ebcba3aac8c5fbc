//! The `report` benchmark's replicas, each its own process
//! (`shard-bench member`): starting them, SIGTERM and SIGKILL, and what
//! they print — every reconcile's start and end, and their place in the
//! ring — gathered into one log.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use concord::cache::CacheLayout;

use crate::member::wall_ns;

/// One reconcile of one object on one replica, in wall-clock nanoseconds;
/// `end` is `None` while it runs.
#[derive(Clone, Copy, Debug)]
pub struct Span {
    pub replica: usize,
    pub start: u64,
    pub end: Option<u64>,
}

/// Every reconcile of every object, indexed by the object's index.
pub type Log = Arc<Mutex<Vec<Vec<Span>>>>;

/// A replica's place in the ring, as its last `v` line said.
#[derive(Clone, Debug, Default)]
pub struct View {
    pub at: u64,
    pub version: u64,
    pub settled: bool,
    pub members: usize,
    pub owned: Vec<u32>,
}

/// What a replica has printed so far.
#[derive(Debug, Default)]
pub struct State {
    pub member: Option<String>,
    pub view: View,
    /// `(at, version, members)` of every view line.
    pub history: Vec<(u64, u64, usize)>,
    pub cached: usize,
}

/// How the replicas are started.
pub struct Fleet {
    pub kubeconfig: PathBuf,
    pub namespace: String,
    /// The manager's name, and so the ring's.
    pub name: String,
    /// `hash` or `label`.
    pub shards: &'static str,
    pub objects: usize,
    pub hold_ms: u64,
    pub lease_duration: u64,
    pub renew_deadline_ms: u64,
    pub retry_period_ms: u64,
    /// How each replica's cache holds the objects.
    pub cache_layout: CacheLayout,
    pub log: Log,
}

/// One replica process.
pub struct Proc {
    pub index: usize,
    pub child: Child,
    pub state: Arc<Mutex<State>>,
    reader: JoinHandle<()>,
}

fn parse_view(fields: &[&str]) -> Option<View> {
    let [at, version, settled, members, owned] = fields else {
        return None;
    };
    let owned = if *owned == "-" {
        Vec::new()
    } else {
        owned
            .split(',')
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?
    };
    Some(View {
        at: at.parse().ok()?,
        version: version.parse().ok()?,
        settled: *settled == "1",
        members: members.parse().ok()?,
        owned,
    })
}

/// Applies one line a replica printed.
fn record(line: &str, replica: usize, state: &Mutex<State>, log: &Log) {
    let fields: Vec<&str> = line.split_whitespace().collect();
    match fields.as_slice() {
        ["member", id] => state.lock().unwrap().member = Some((*id).to_owned()),
        ["c", cached] => {
            if let Ok(cached) = cached.parse() {
                state.lock().unwrap().cached = cached;
            }
        }
        ["v", rest @ ..] => {
            if let Some(view) = parse_view(rest) {
                let mut state = state.lock().unwrap();
                state.history.push((view.at, view.version, view.members));
                state.view = view;
            }
        }
        [kind @ ("s" | "e"), index, at] => {
            let (Ok(index), Ok(at)) = (index.parse::<usize>(), at.parse::<u64>()) else {
                return;
            };
            let mut log = log.lock().unwrap();
            let Some(spans) = log.get_mut(index) else {
                return;
            };
            if *kind == "s" {
                spans.push(Span {
                    replica,
                    start: at,
                    end: None,
                });
            } else if let Some(open) = spans
                .iter_mut()
                .rev()
                .find(|s| s.replica == replica && s.end.is_none())
            {
                open.end = Some(at);
            }
        }
        _ => {}
    }
}

impl Fleet {
    /// Starts replica `index` and waits until it has printed its member id.
    pub async fn spawn(&self, index: usize) -> Result<Proc> {
        let mut child = Command::new(std::env::current_exe()?)
            .arg("member")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--namespace", &self.namespace])
            .args(["--leader-election-namespace", &self.namespace])
            .args(["--shards", self.shards])
            .args(["--name", &self.name])
            .args(["--objects", &self.objects.to_string()])
            .args(["--hold-ms", &self.hold_ms.to_string()])
            .args(["--lease-duration", &self.lease_duration.to_string()])
            .args(["--renew-deadline-ms", &self.renew_deadline_ms.to_string()])
            .args(["--retry-period-ms", &self.retry_period_ms.to_string()])
            .args(["--cache-layout", self.cache_layout.as_str()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting a `shard-bench member` process")?;
        let stdout = child.stdout.take().context("piped stdout")?;
        let state = Arc::new(Mutex::new(State::default()));
        let (shared, log) = (state.clone(), self.log.clone());
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                record(&line, index, &shared, &log);
            }
        });
        let mut proc = Proc {
            index,
            child,
            state,
            reader,
        };
        let started = Instant::now();
        while proc.member().is_none() {
            proc.alive()?;
            ensure!(
                started.elapsed() < Duration::from_secs(60),
                "replica {index} printed no member id within 60 s"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(proc)
    }

    /// The owner of every object once every replica of `live` has settled
    /// on one view that divides all of them, and the latest reconcile of
    /// each object ran on its owner and ended.
    pub fn owners(&self, live: &[Proc]) -> Option<Vec<usize>> {
        let mut owner = vec![usize::MAX; self.objects];
        for proc in live {
            let state = proc.state.lock().unwrap();
            let view = &state.view;
            if !view.settled || view.members != live.len() {
                return None;
            }
            for &i in &view.owned {
                let slot = owner.get_mut(i as usize)?;
                if *slot != usize::MAX {
                    return None;
                }
                *slot = proc.index;
            }
        }
        let log = self.log.lock().unwrap();
        let all = owner.iter().zip(log.iter()).all(|(owner, spans)| {
            spans
                .iter()
                .max_by_key(|s| s.start)
                .is_some_and(|s| s.replica == *owner && s.end.is_some())
        });
        all.then_some(owner)
    }

    /// Waits (at most `limit`) for [`Fleet::owners`].
    pub async fn wait_settled(&self, live: &mut [Proc], limit: Duration) -> Result<Vec<usize>> {
        let started = Instant::now();
        loop {
            if let Some(owners) = self.owners(live) {
                return Ok(owners);
            }
            for proc in live.iter_mut() {
                proc.alive()?;
            }
            if started.elapsed() > limit {
                let status: Vec<String> = live
                    .iter()
                    .map(|p| {
                        let s = p.state.lock().unwrap();
                        format!(
                            "replica {}: members {}, settled {}, owns {}, caches {}",
                            p.index,
                            s.view.members,
                            s.view.settled,
                            s.view.owned.len(),
                            s.cached
                        )
                    })
                    .collect();
                bail!(
                    "the ring of {} replicas did not settle within {limit:?}, or not every object was reconciled by its owner:\n{}",
                    live.len(),
                    status.join("\n")
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Proc {
    pub fn member(&self) -> Option<String> {
        self.state.lock().unwrap().member.clone()
    }

    /// Fails if the process exited on its own (a replica stops when it
    /// cannot renew its membership Lease within the renew deadline).
    pub fn alive(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "replica {} exited on its own ({status}): it could not renew its membership Lease within the renew deadline, or failed (its stderr is above; longer timings help on a loaded machine)",
                self.index
            );
        }
        Ok(())
    }

    /// Sends SIGTERM: the replica drains, deletes its Lease and exits.
    pub fn terminate(&self) -> Result<()> {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()?;
        ensure!(status.success(), "kill -TERM {} failed", self.child.id());
        Ok(())
    }

    /// Waits for the process to exit after [`Proc::terminate`], at most
    /// `limit`, and checks it exited cleanly.
    pub async fn exited(mut self, limit: Duration) -> Result<()> {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait()? {
                ensure!(
                    status.success(),
                    "replica {} exited with {status} after SIGTERM",
                    self.index
                );
                return self.drained().await;
            }
            ensure!(
                started.elapsed() < limit,
                "replica {} did not exit within {limit:?} of SIGTERM",
                self.index
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Sends SIGKILL and waits for the process to be gone; a reconcile it
    /// was running ends when it died.
    pub async fn kill(mut self, log: &Log) -> Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        let dead = wall_ns();
        let index = self.index;
        self.drained().await?;
        for spans in log.lock().unwrap().iter_mut() {
            for span in spans.iter_mut() {
                if span.replica == index && span.end.is_none() {
                    span.end = Some(dead);
                }
            }
        }
        Ok(())
    }

    /// Waits until everything the exited process printed has been read.
    async fn drained(self) -> Result<()> {
        let started = Instant::now();
        while !self.reader.is_finished() {
            ensure!(
                started.elapsed() < Duration::from_secs(10),
                "the output of replica {} was not closed 10 s after it exited",
                self.index
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(())
    }
}

/// A run that fails midway leaves no replica behind (on a cluster of
/// `$CONCORD_TEST_KUBECONFIG` nothing else would stop it).
impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Pairs of reconciles of one object on two replicas that overlapped in
/// time (a reconcile still open counts as running to the end), and the
/// reconciles recorded.
pub fn overlaps(log: &Log) -> (usize, usize) {
    let log = log.lock().unwrap();
    let (mut found, mut total) = (0, 0);
    for spans in log.iter() {
        total += spans.len();
        let mut spans = spans.clone();
        spans.sort_by_key(|s| s.start);
        let mut latest: Option<(usize, u64)> = None;
        for span in spans {
            let end = span.end.unwrap_or(u64::MAX);
            if let Some((replica, until)) = latest {
                if span.start < until && span.replica != replica {
                    found += 1;
                }
                if end > until {
                    latest = Some((span.replica, end));
                }
            } else {
                latest = Some((span.replica, end));
            }
        }
    }
    (found, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_of(spans: Vec<Span>) -> Log {
        Arc::new(Mutex::new(vec![spans]))
    }

    #[test]
    fn overlapping_reconciles_on_two_replicas_are_counted() {
        let span = |replica, start, end| Span {
            replica,
            start,
            end: Some(end),
        };
        assert_eq!(
            overlaps(&log_of(vec![span(0, 0, 10), span(1, 10, 20)])),
            (0, 2)
        );
        assert_eq!(
            overlaps(&log_of(vec![span(0, 0, 10), span(1, 5, 20)])),
            (1, 2)
        );
        assert_eq!(
            overlaps(&log_of(vec![span(0, 0, 10), span(0, 5, 20)])),
            (0, 2)
        );
        let open = Span {
            replica: 0,
            start: 0,
            end: None,
        };
        assert_eq!(overlaps(&log_of(vec![open, span(1, 100, 200)])), (1, 2));
    }

    #[test]
    fn view_lines_parse() {
        let view = parse_view(&["5", "2", "1", "3", "0,7"]).unwrap();
        assert_eq!((view.version, view.settled, view.members), (2, true, 3));
        assert_eq!(view.owned, [0, 7]);
        assert!(
            parse_view(&["5", "2", "1", "3", "-"])
                .unwrap()
                .owned
                .is_empty()
        );
        assert!(parse_view(&["5", "2", "1"]).is_none());
    }
}
