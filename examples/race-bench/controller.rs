//! Our controller: writer tasks taking logical writes off a work queue and
//! sending each from the object the cache holds.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use indicatif::ProgressBar;

use crate::race::cache::Cache;
use crate::race::scenarios::{Item, Lanes};
use crate::race::send::Sender;

/// Times a failed write is requeued before the controller gives up on it.
const MAX_REQUEUES: u32 = 3;
/// The wait before requeue number `n` is `n` times this.
const REQUEUE_BACKOFF: Duration = Duration::from_millis(20);

/// What the controller's writes cost, from its side.
#[derive(Debug, Default)]
pub(crate) struct Run {
    /// Time from the first write's start to the last one's end.
    pub(crate) wall: Duration,
    /// Latency of every logical write in microseconds, requeues included.
    pub(crate) latencies_micros: Vec<u32>,
    /// Failed attempts, each counted.
    pub(crate) errors: u64,
    /// Requeues made.
    pub(crate) requeues: u64,
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

/// Run every write of `lanes` with `writers` tasks.
pub(crate) async fn run(
    lanes: &Lanes,
    writers: u32,
    cache: Arc<Cache>,
    sender: Arc<Sender>,
    bar: ProgressBar,
) -> Run {
    let queue = Arc::new(Queue::new(lanes));
    let writers = match lanes {
        Lanes::PerWriter(l) => l.len(),
        Lanes::Shared(_) => writers as usize,
    };
    let start = Instant::now();
    let handles: Vec<_> = (0..writers)
        .map(|task| {
            let (queue, cache, sender, bar) =
                (queue.clone(), cache.clone(), sender.clone(), bar.clone());
            tokio::spawn(async move { work(task, &queue, &cache, &sender, &bar).await })
        })
        .collect();
    let mut run = Run {
        latencies_micros: Vec::with_capacity(lanes.len()),
        ..Run::default()
    };
    for handle in handles {
        match handle.await {
            Ok(part) => {
                run.latencies_micros.extend(part.latencies_micros);
                run.errors += part.errors;
                run.requeues += part.requeues;
            }
            Err(err) => {
                tracing::error!(error = %err, "a writer task failed");
                run.errors += 1;
            }
        }
    }
    run.wall = start.elapsed();
    run
}

async fn work(
    task: usize,
    queue: &Queue,
    cache: &Cache,
    sender: &Sender,
    bar: &ProgressBar,
) -> Run {
    let mut run = Run::default();
    while let Some(item) = queue.next(task) {
        let start = Instant::now();
        for requeue in 0..=MAX_REQUEUES {
            if requeue > 0 {
                run.requeues += 1;
                tokio::time::sleep(REQUEUE_BACKOFF * requeue).await;
            }
            let Some(observed) = cache.get(item.object) else {
                run.errors += 1;
                break;
            };
            match sender.send(&observed, &item.change).await {
                Ok(()) => break,
                Err(failure) => {
                    run.errors += 1;
                    if !failure.retryable {
                        break;
                    }
                }
            }
        }
        let micros = u32::try_from(start.elapsed().as_micros()).unwrap_or(u32::MAX);
        run.latencies_micros.push(micros);
        bar.inc(1);
    }
    run
}
