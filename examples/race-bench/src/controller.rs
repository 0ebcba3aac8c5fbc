//! Our controller: writer tasks taking logical writes off a work queue and
//! sending each from the object the cache holds.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use k8s_openapi::api::core::v1::Pod;
use kube::core::{ApiResource, DynamicObject};

use crate::cache::Cache;
use crate::foreign::Inline;
use crate::scenarios::{Change, Item, Lanes, Race, name};
use crate::send::Sender;

/// Times a failed write is requeued before the controller gives up on it.
const MAX_REQUEUES: u32 = 3;
/// The wait before requeue number `n` is `n` times this.
const REQUEUE_BACKOFF: Duration = Duration::from_millis(20);

/// What the controller's writes cost, from its side.
#[derive(Debug, Default)]
pub(crate) struct Run {
    /// Time from the first write's start to the last one's end.
    pub(crate) wall: Duration,
    /// Latency of every logical write in microseconds, requeues included,
    /// the other controller's add in a raced window excluded.
    pub(crate) latencies_micros: Vec<u32>,
    /// Logical writes that succeeded.
    pub(crate) succeeded: u64,
    /// Logical writes that never succeeded, requeues exhausted or refused.
    pub(crate) failed: u64,
    /// Failed attempts, each counted.
    pub(crate) errors: u64,
    /// Requeues made.
    pub(crate) requeues: u64,
    /// Adds of the other controller inside our window that failed.
    pub(crate) foreign_failed: u64,
}

impl Run {
    fn absorb(&mut self, part: Run) {
        self.latencies_micros.extend(part.latencies_micros);
        self.succeeded += part.succeeded;
        self.failed += part.failed;
        self.errors += part.errors;
        self.requeues += part.requeues;
        self.foreign_failed += part.foreign_failed;
    }
}

/// The queue: items and cursors; with one cursor every task shares it, with
/// one per task each works through its own range.
struct Queue {
    items: Vec<Item>,
    cursors: Vec<(AtomicUsize, usize)>,
}

impl Queue {
    fn new(lanes: &Lanes) -> Self {
        match lanes {
            Lanes::Shared(items) => Queue {
                cursors: vec![(AtomicUsize::new(0), items.len())],
                items: items.clone(),
            },
            Lanes::PerWriter(lanes) => {
                let mut items = Vec::with_capacity(lanes.iter().map(Vec::len).sum());
                let mut cursors = Vec::with_capacity(lanes.len());
                for lane in lanes {
                    cursors.push((AtomicUsize::new(items.len()), items.len() + lane.len()));
                    items.extend(lane.iter().cloned());
                }
                Queue { items, cursors }
            }
        }
    }

    fn next(&self, task: usize) -> Option<&Item> {
        let (cursor, end) = self.cursors.get(task % self.cursors.len().max(1))?;
        let i = cursor.fetch_add(1, Relaxed);
        if i < *end { self.items.get(i) } else { None }
    }
}

/// Who the writer tasks work with.
#[derive(Clone)]
pub(crate) struct Crew {
    pub(crate) cache: Arc<Cache>,
    pub(crate) sender: Arc<Sender>,
    /// The other controller, for [`Race::Foreign`] items.
    pub(crate) foreign: Option<Arc<Inline>>,
    pub(crate) bar: ProgressBar,
}

/// Run every write of `lanes` with `writers` tasks.
pub(crate) async fn run(lanes: &Lanes, writers: u32, crew: Crew) -> Run {
    let queue = Arc::new(Queue::new(lanes));
    let writers = match lanes {
        Lanes::PerWriter(l) => l.len(),
        Lanes::Shared(_) => writers as usize,
    };
    let start = Instant::now();
    let handles: Vec<_> = (0..writers)
        .map(|task| {
            let (queue, crew) = (queue.clone(), crew.clone());
            tokio::spawn(async move { work(task, &queue, &crew).await })
        })
        .collect();
    let mut run = Run {
        latencies_micros: Vec::with_capacity(lanes.len()),
        ..Run::default()
    };
    for handle in handles {
        match handle.await {
            Ok(part) => run.absorb(part),
            Err(err) => {
                tracing::error!(error = %err, "a writer task failed");
                run.errors += 1;
            }
        }
    }
    run.wall = start.elapsed();
    run
}

// ANCHOR: window
async fn work(task: usize, queue: &Queue, crew: &Crew) -> Run {
    let mut run = Run::default();
    while let Some(item) = queue.next(task) {
        let observed = read(crew, item.object);
        if matches!(item.race, Race::Foreign)
            && let Some(foreign) = &crew.foreign
            && !foreign.add(item.object).await
        {
            run.foreign_failed += 1;
        }
        let start = Instant::now();
        let parts = match &item.race {
            Race::Twin(twin) => {
                let (a, b) = futures::join!(
                    logical(crew, item.object, &item.change, observed.clone(), start),
                    logical(crew, item.object, twin, observed, start),
                );
                vec![a, b]
            }
            Race::None | Race::Foreign => {
                vec![logical(crew, item.object, &item.change, observed, start).await]
            }
        };
        for part in parts {
            crew.bar.inc(1);
            run.absorb(part);
        }
    }
    run
}
// ANCHOR_END: window

/// Object number `object` as the controller sees it: from the cache, or a
/// bare name for contenders that read nothing.
fn read(crew: &Crew, object: u32) -> Option<DynamicObject> {
    if crew.sender.reads_cache() {
        crew.cache.get(object)
    } else {
        Some(DynamicObject::new(
            &name(object),
            &ApiResource::erase::<Pod>(&()),
        ))
    }
}

/// One logical write of `change`, first from `observed`, requeued from a
/// fresh cache read while it fails with a retryable error.
async fn logical(
    crew: &Crew,
    object: u32,
    change: &Change,
    mut observed: Option<DynamicObject>,
    start: Instant,
) -> Run {
    let mut run = Run::default();
    let mut ok = false;
    for requeue in 0..=MAX_REQUEUES {
        if requeue > 0 {
            run.requeues += 1;
            tokio::time::sleep(REQUEUE_BACKOFF * requeue).await;
            observed = read(crew, object);
        }
        let Some(current) = observed.take() else {
            run.errors += 1;
            break;
        };
        match crew.sender.send(&current, change).await {
            Ok(()) => {
                ok = true;
                break;
            }
            Err(failure) => {
                run.errors += 1;
                if !failure.retryable {
                    break;
                }
            }
        }
    }
    if ok {
        run.succeeded = 1;
    } else {
        run.failed = 1;
    }
    run.latencies_micros
        .push(u32::try_from(start.elapsed().as_micros()).unwrap_or(u32::MAX));
    run
}
