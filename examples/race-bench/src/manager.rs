//! The framework's path: the same logical writes made by a
//! [`Reconciler`](concord::Reconciler) run by a real
//! [`concord::Manager`], the strategy chosen by a YAML strategy table —
//! what users run. Compared with the direct strategy call, the difference
//! is the framework's overhead (its controller, queue, context and
//! metrics).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use concord::{
    Action, Context, Manager, ManagerArgs, Reconciler, WriteError, async_trait,
    featuregates::StrategyName,
};
use indicatif::ProgressBar;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::Api;
use tokio::sync::{Notify, watch};

use crate::foreign::Inline;
use crate::results::RoundFigures;
use crate::scenarios::{Change, Item, Race, Workload, index};
use crate::send::mutation;
use crate::tally::Counts;

/// Failed attempts of one logical write before it counts as given up, as
/// the direct path's requeues.
const MAX_ATTEMPTS: u32 = 4;

/// The strategy table the manager loads: every operation the benchmark's
/// writes use (finalizer removal, labels) goes through `strategy` on pods.
/// The default, which must also serve arbitrary closures, stays `strict`.
pub(crate) fn strategy_table(strategy: StrategyName) -> String {
    let s = strategy.as_str();
    format!(
        "# written by race-bench: the benchmark's writes through one strategy\n\
         strategies:\n  default: strict\n  resources:\n    pods:\n      operations:\n\
         \x20       add-finalizer: {s}\n        remove-finalizer: {s}\n        metadata: {s}\n"
    )
}

/// What the reconciler still has to write, per object, and what it did.
struct State {
    pending: Vec<Mutex<Vec<Pending>>>,
    foreign: Arc<Inline>,
    total: u64,
    finished: AtomicU64,
    succeeded: AtomicU64,
    failed: AtomicU64,
    errors: AtomicU64,
    requeues: AtomicU64,
    first: Mutex<Option<Instant>>,
    last: Mutex<Option<Instant>>,
    latencies: Mutex<Vec<u32>>,
    done: Notify,
    bar: ProgressBar,
    /// Opened once the manager's cache holds every pod of the workload:
    /// no reconcile writes before, so the timed phase starts, as the
    /// direct writers' and the peer's do, from a full cache.
    go: watch::Sender<bool>,
}

/// A logical write not yet made, with its failed attempts so far.
struct Pending {
    item: Item,
    attempts: u32,
}

impl State {
    fn finish(&self, ok: bool, start: Instant) {
        if ok {
            self.succeeded.fetch_add(1, Relaxed);
        } else {
            self.failed.fetch_add(1, Relaxed);
        }
        if let Ok(mut l) = self.latencies.lock() {
            l.push(u32::try_from(start.elapsed().as_micros()).unwrap_or(u32::MAX));
        }
        if let Ok(mut last) = self.last.lock() {
            *last = Some(Instant::now());
        }
        self.bar.inc(1);
        if self.finished.fetch_add(1, Relaxed) + 1 >= self.total {
            self.done.notify_one();
        }
    }
}

// ANCHOR: reconciler
/// The benchmark's reconciler: on each pod it makes the pending writes of
/// the workload through the context, racing them as the workload says.
struct Writer(Arc<State>);

#[async_trait]
impl Reconciler<Pod> for Writer {
    type Error = WriteError;

    async fn reconcile(&self, pod: Arc<Pod>, ctx: &Context<Pod>) -> Result<Action, WriteError> {
        let state = &self.0;
        // Closed only before the timed phase: the sender lives in `state`.
        let _ = state.go.subscribe().wait_for(|go| *go).await;
        let Some(object) = pod.metadata.name.as_deref().and_then(index) else {
            return Ok(Action::await_change());
        };
        let Some(slot) = state.pending.get(object as usize) else {
            return Ok(Action::await_change());
        };
        let work: Vec<Pending> = match slot.lock() {
            Ok(mut p) => std::mem::take(&mut *p),
            Err(_) => Vec::new(),
        };
        if let Ok(mut first) = state.first.lock() {
            first.get_or_insert_with(Instant::now);
        }
        let mut retry = Vec::new();
        let mut error = None;
        for mut p in work {
            if p.attempts == 0
                && matches!(p.item.race, Race::Foreign)
                && !state.foreign.add(object).await
            {
                tracing::warn!(object, "the other controller failed its add");
            }
            let start = Instant::now();
            let results = match &p.item.race {
                Race::Twin(twin) => {
                    let (a, b) = futures::join!(
                        ctx.write(&pod, mutation(&p.item.change)),
                        ctx.write(&pod, mutation(twin)),
                    );
                    vec![(p.item.change.clone(), a), (twin.clone(), b)]
                }
                Race::None | Race::Foreign => {
                    vec![(
                        p.item.change.clone(),
                        ctx.write(&pod, mutation(&p.item.change)).await,
                    )]
                }
            };
            p.attempts += 1;
            for (change, result) in results {
                match result {
                    Ok(_) => state.finish(true, start),
                    Err(err) => {
                        state.errors.fetch_add(1, Relaxed);
                        if p.attempts >= MAX_ATTEMPTS {
                            state.finish(false, start);
                        } else {
                            retry.push(again(change, p.attempts));
                        }
                        error = Some(err);
                    }
                }
            }
        }
        match error {
            Some(err) if !retry.is_empty() => {
                state.requeues.fetch_add(retry.len() as u64, Relaxed);
                if let Ok(mut p) = slot.lock() {
                    p.extend(retry);
                }
                Err(err)
            }
            _ => Ok(Action::await_change()),
        }
    }
}

// ANCHOR_END: reconciler

/// A write to try again, no longer raced on purpose.
fn again(change: Change, attempts: u32) -> Pending {
    Pending {
        item: Item {
            object: 0,
            change,
            race: Race::None,
        },
        attempts,
    }
}

/// Where and how a manager runs a workload.
pub(crate) struct Job<'a> {
    pub(crate) client: Client,
    pub(crate) namespace: &'a str,
    pub(crate) strategy: StrategyName,
    pub(crate) writers: u32,
    pub(crate) foreign: Arc<Inline>,
    pub(crate) bar: ProgressBar,
    pub(crate) timeout: Duration,
    /// How the manager's cache holds the pods.
    pub(crate) layout: concord::cache::CacheLayout,
    /// The contender's name, for the decoding line.
    pub(crate) name: &'a str,
    /// Whether the controller waits for its cache to show the manager's
    /// own writes (`.with_read_your_writes`).
    pub(crate) read_your_writes: bool,
}

/// Run `workload` through a manager whose strategy table sends every write
/// through `job.strategy`. The timed phase is the direct writers': `start`
/// is called once the manager's cache holds every pod (its build and its
/// list are not timed, as the direct writers' cache and the peer's
/// informer are not), and `end` when the last write is made, before the
/// manager shuts down.
///
/// # Errors
///
/// When the manager cannot be built or run, its cache does not fill in
/// `job.timeout`, or the writes do not finish in `job.timeout`.
pub(crate) async fn run<P, E>(
    job: Job<'_>,
    workload: &Workload,
    start: impl FnOnce() -> P,
    end: impl FnOnce(P) -> E,
) -> anyhow::Result<(RoundFigures, Counts, E)> {
    let Job {
        client,
        namespace,
        strategy,
        writers,
        foreign,
        bar,
        timeout,
        layout,
        name,
        read_your_writes,
    } = job;
    let mut pending: Vec<Mutex<Vec<Pending>>> = (0..workload.specs.len())
        .map(|_| Mutex::default())
        .collect();
    for item in workload.lanes.items() {
        if let Some(Ok(slot)) = pending.get_mut(item.object as usize).map(Mutex::get_mut) {
            slot.push(Pending {
                item: item.clone(),
                attempts: 0,
            });
        }
    }
    let state = Arc::new(State {
        pending,
        foreign,
        total: workload.lanes.len() as u64,
        finished: AtomicU64::new(0),
        succeeded: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        requeues: AtomicU64::new(0),
        first: Mutex::new(None),
        last: Mutex::new(None),
        latencies: Mutex::new(Vec::with_capacity(workload.lanes.len())),
        done: Notify::new(),
        bar: bar.clone(),
        go: watch::Sender::new(false),
    });
    let dir = std::env::temp_dir().join(format!("race-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let config = dir.join(format!("{}.yaml", strategy.as_str()));
    std::fs::write(&config, strategy_table(strategy))
        .with_context(|| format!("writing {}", config.display()))?;
    let built = Manager::builder("race-bench")
        .with_builtin_type::<Pod>()
        .with_args(ManagerArgs::new().with_config(&config))
        .with_client(client.clone())
        .with_signal_handling(false)
        .with_cache_layout(layout)
        .build()
        .await;
    // Read by the build: nothing is left behind in the temporary directory.
    let _ = std::fs::remove_file(&config);
    let _ = std::fs::remove_dir(&dir);
    let mut manager =
        built.with_context(|| format!("building a manager from {}", config.display()))?;
    let pods: Api<Pod> = Api::namespaced(client, namespace);
    let concurrency = u16::try_from(writers).unwrap_or(u16::MAX);
    manager
        .controller("race-bench", pods, Writer(state.clone()))
        .with_concurrency(concurrency)
        .with_read_your_writes(read_your_writes)
        .add()
        .context("adding the benchmark's controller")?;
    let store = manager
        .context::<Pod>()
        .store()
        .context("the manager has no cache of the pods to wait for")?;
    let metrics = manager.metrics();
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    let objects = workload.specs.len();
    let full = tokio::time::timeout(timeout, async {
        while store.len() < objects {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    if full.is_err() {
        stop.shutdown();
        running.await??;
        anyhow::bail!("the manager's cache did not list the {objects} pods within {timeout:?}");
    }
    let phase = start();
    let done = state.done.notified();
    state.go.send_replace(true);
    let finished = tokio::time::timeout(timeout, done).await;
    let ended = end(phase);
    stop.shutdown();
    running.await??;
    finished.with_context(|| {
        format!(
            "the manager finished {} of {} writes within {timeout:?}",
            state.finished.load(Relaxed),
            state.total
        )
    })?;
    let first = state.first.lock().ok().and_then(|f| *f);
    let last = state.last.lock().ok().and_then(|l| *l);
    let wall = first
        .zip(last)
        .map(|(a, b)| b.saturating_duration_since(a))
        .unwrap_or_default();
    let latencies = state
        .latencies
        .lock()
        .map(|mut l| std::mem::take(&mut *l))
        .unwrap_or_default();
    if layout == concord::cache::CacheLayout::Compact {
        let (copies, decoding) = store.decoding();
        let writes = latencies.len().max(1) as f64;
        let latency_us: f64 = latencies.iter().map(|l| f64::from(*l)).sum::<f64>() / writes;
        let per_write = decoding.as_secs_f64() * 1e6 / writes;
        let line = format!(
            "{name}: the compact cache decoded {copies} copies in {:.1} ms: {per_write:.1} µs per write, {:.2}% of a write's mean latency ({latency_us:.0} µs)",
            decoding.as_secs_f64() * 1e3,
            100.0 * per_write / latency_us.max(f64::MIN_POSITIVE)
        );
        // Above the progress bars, or on stderr when they are hidden.
        if bar.is_hidden() {
            eprintln!("{line}");
        } else {
            bar.println(line);
        }
    }
    let text = metrics.render();
    let line = reconcile_line(name, &text, latencies.len());
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
    let figures = RoundFigures {
        wall,
        latencies_micros: latencies,
        writes: state.total,
        succeeded: state.succeeded.load(Relaxed),
        failed: state.failed.load(Relaxed),
        errors: state.errors.load(Relaxed),
        requeues: state.requeues.load(Relaxed),
        raced: workload.raced() as u64,
        ..RoundFigures::default()
    };
    Ok((figures, counts(&text), ended))
}

/// The sum of the samples of `family` in a manager's Prometheus text
/// whose labels contain `with` (every sample when it is empty).
fn sum_of(text: &str, family: &str, with: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(series, _)| series.split('{').next() == Some(family) && series.contains(with))
        .filter_map(|(_, value)| value.parse::<f64>().ok())
        .sum()
}

/// What the manager's controller did per write: reconciles, and those
/// held back until the cache showed the manager's own last write.
fn reconcile_line(name: &str, text: &str, writes: usize) -> String {
    let writes = writes.max(1) as f64;
    let reconciles = sum_of(text, "concord_reconcile_total", "");
    let waited = sum_of(
        text,
        "concord_reconcile_stale_cache_total",
        "outcome=\"ran\"",
    );
    let requeued = sum_of(
        text,
        "concord_reconcile_stale_cache_total",
        "outcome=\"requeued\"",
    );
    let wait_s = sum_of(text, "concord_reconcile_stale_cache_wait_seconds_total", "");
    format!(
        "{name}: {:.2} reconciles per write; {waited:.0} held back for a stale cache and ran, {requeued:.0} requeued, {:.1} ms waited in all",
        reconciles / writes,
        wait_s * 1e3
    )
}

/// The write counters of a manager's Prometheus text, summed over
/// resources and strategies.
fn counts(text: &str) -> Counts {
    let mut counts = Counts::default();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(n) = value.parse::<f64>() else {
            continue;
        };
        let n = n as u64;
        let name = series.split('{').next().unwrap_or_default();
        match name {
            "concord_write_requests_total" => {
                for verb in concord::strategies::Verb::ALL {
                    if series.contains(&format!("verb=\"{}\"", verb.as_str()))
                        && let Some(count) = counts.requests.get_mut(verb.index())
                    {
                        *count += n;
                    }
                }
            }
            "concord_write_conflicts_total" => counts.conflicts += n,
            "concord_write_retries_total" => counts.retries += n,
            "concord_write_fallbacks_total" => counts.fallbacks += n,
            "concord_write_rereads_total" => {
                let slot = if series.contains("source=\"cache\"") {
                    &mut counts.cache_rereads
                } else {
                    &mut counts.get_rereads
                };
                *slot.get_or_insert(0) += n;
            }
            _ => {}
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_read_from_the_prometheus_text() {
        let text = "# HELP x\n\
            concord_write_requests_total{resource=\"pods\",strategy=\"strict\",verb=\"get\"} 3\n\
            concord_write_requests_total{resource=\"pods\",strategy=\"strict\",verb=\"patch\"} 10\n\
            concord_write_conflicts_total{resource=\"pods\",strategy=\"strict\"} 3\n\
            concord_write_fallbacks_total{resource=\"pods\",strategy=\"apply\"} 2\n\
            concord_write_rereads_total{resource=\"pods\",strategy=\"strict\",source=\"cache\"} 4\n\
            concord_write_rereads_total{resource=\"pods\",strategy=\"strict\",source=\"get\"} 1\n";
        let c = counts(text);
        assert_eq!(c.requests[concord::strategies::Verb::Get.index()], 3);
        assert_eq!(c.requests[concord::strategies::Verb::Patch.index()], 10);
        assert_eq!((c.conflicts, c.fallbacks), (3, 2));
        assert_eq!((c.cache_rereads, c.get_rereads), (Some(4), Some(1)));
    }

    #[test]
    fn the_table_names_the_strategy() {
        let table = strategy_table(StrategyName::Apply);
        let yaml: serde_yaml::Value = serde_yaml::from_str(&table).unwrap();
        let ops = &yaml["strategies"]["resources"]["pods"]["operations"];
        assert_eq!(ops["remove-finalizer"].as_str(), Some("apply"));
        assert_eq!(ops["metadata"].as_str(), Some("apply"));
    }
}
