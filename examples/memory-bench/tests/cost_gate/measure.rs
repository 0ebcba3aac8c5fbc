//! Counting without the machine's noise: the process's allocations and
//! live heap read only once nothing runs ([`quiet`]), and the requests the
//! API server itself counted ([`Served`]).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use concord_memory_bench::CountingAlloc;
use kube::Client;

/// The process's allocator: every allocation of every thread, counted.
#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

/// How long nothing may allocate or free before the process counts as quiet.
const QUIET: Duration = Duration::from_millis(150);

/// How long [`quiet`] waits for a quiet spell before it gives up.
const QUIET_WITHIN: Duration = Duration::from_secs(20);

/// The allocator's counts at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mark {
    /// Allocations (and reallocations) since the process started.
    pub(crate) allocations: u64,
    /// Bytes allocated and not yet freed.
    pub(crate) live: usize,
}

impl Mark {
    /// The allocations made since `earlier`.
    pub(crate) fn allocations_since(&self, earlier: Mark) -> u64 {
        self.allocations - earlier.allocations
    }
}

/// The allocator's counts now.
pub(crate) fn mark() -> Mark {
    Mark {
        allocations: ALLOC.allocations(),
        live: ALLOC.heap().live,
    }
}

/// The allocator's counts once a spell of [`QUIET`] passed in which no
/// task or thread allocated or freed anything: the work before it has
/// finished, echoes included (a write's watch event, a task winding down).
/// Waiting allocates nothing: a Tokio sleep awaited in place is not boxed.
///
/// # Errors
///
/// When the process never stays quiet that long within [`QUIET_WITHIN`].
pub(crate) async fn quiet() -> anyhow::Result<Mark> {
    let started = Instant::now();
    let mut last = mark();
    loop {
        tokio::time::sleep(QUIET).await;
        let now = mark();
        if now == last {
            return Ok(now);
        }
        ensure!(
            started.elapsed() < QUIET_WITHIN,
            "the process never stayed {QUIET:?} without allocating within {QUIET_WITHIN:?}"
        );
        last = now;
    }
}

/// The requests the API server counted on ConfigMaps (its own
/// `apiserver_request_total`), by verb, lists and watches left out: what
/// reached the server, whichever layer of the client sent it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Served(BTreeMap<String, u64>);

impl Served {
    /// Reads the counts from the API server's `/metrics`.
    ///
    /// # Errors
    ///
    /// When the server does not answer or its metrics lack the series.
    pub(crate) async fn read(client: &Client) -> anyhow::Result<Served> {
        let request = http::Request::get("/metrics").body(Vec::new())?;
        let text = client
            .request_text(request)
            .await
            .context("reading the API server's /metrics")?;
        let mut by_verb = BTreeMap::new();
        for line in text.lines() {
            let Some(labels) = line.strip_prefix("apiserver_request_total{") else {
                continue;
            };
            let Some((labels, value)) = labels.rsplit_once("} ") else {
                continue;
            };
            if label(labels, "resource") != Some("configmaps") || label(labels, "group") != Some("")
            {
                continue;
            }
            let verb = label(labels, "verb").context("a request count without a verb")?;
            if matches!(verb, "LIST" | "WATCH") {
                continue;
            }
            let value: f64 = value.trim().parse().context(line.to_owned())?;
            *by_verb.entry(verb.to_owned()).or_default() += value as u64;
        }
        ensure!(
            text.contains("apiserver_request_total{"),
            "the API server's /metrics has no apiserver_request_total"
        );
        Ok(Served(by_verb))
    }

    /// The requests counted since `earlier`, by verb (none left out).
    pub(crate) fn since(&self, earlier: &Served) -> Served {
        Served(
            self.0
                .iter()
                .map(|(verb, n)| (verb.clone(), n - earlier.0.get(verb).copied().unwrap_or(0)))
                .filter(|(_, n)| *n > 0)
                .collect(),
        )
    }

    /// Every request counted.
    pub(crate) fn total(&self) -> u64 {
        self.0.values().sum()
    }
}

impl std::fmt::Display for Served {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verbs: Vec<String> = self.0.iter().map(|(v, n)| format!("{n} {v}")).collect();
        f.write_str(&verbs.join(", "))
    }
}

/// The value of `name` in a Prometheus label set (`a="x",b="y"`).
fn label<'a>(labels: &'a str, name: &str) -> Option<&'a str> {
    labels.split("\",").find_map(|pair| {
        let (key, value) = pair.split_once("=\"")?;
        (key == name).then(|| value.trim_end_matches('"'))
    })
}
