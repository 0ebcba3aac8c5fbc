//! `label` mode's placement against the API server's PATCH ceiling, for
//! the `report` benchmark: a bare client sends the sharder's label PATCH
//! to every object (same body, same concurrency), then three `label`
//! replicas place the objects, then the bare client again; a watch opened
//! before all three times each run from the first label it saw to the last.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::member::{index_of, wall_ns};
use crate::procs::Fleet;

/// Label requests in flight at most: the sharder's own bound.
pub const IN_FLIGHT: usize = 64;

/// The label the bare client writes.
const CEILING_KEY: &str = "shard-bench/ceiling";

/// The prefix of the sharder's label key (`shard.concord.dev/<ring>`).
const SHARD_KEY_PREFIX: &str = "shard.concord.dev/";

/// Every change of the two labels the watch saw, per object:
/// `(wall-clock ns, value)`.
#[derive(Default)]
struct Labels {
    sharder: Vec<Vec<(u64, String)>>,
    ceiling: Vec<Vec<(u64, String)>>,
    listed: bool,
}

fn push(history: &mut [Vec<(u64, String)>], index: usize, value: &str, at: u64) {
    let Some(changes) = history.get_mut(index) else {
        return;
    };
    if changes.last().is_none_or(|(_, last)| last != value) {
        changes.push((at, value.to_owned()));
    }
}

impl Labels {
    fn record(&mut self, cm: &ConfigMap) {
        let at = wall_ns();
        let Some(index) = index_of(&cm.name_any()) else {
            return;
        };
        for (key, value) in cm.labels() {
            if key.starts_with(SHARD_KEY_PREFIX) {
                push(&mut self.sharder, index as usize, value, at);
            } else if key == CEILING_KEY {
                push(&mut self.ceiling, index as usize, value, at);
            }
        }
    }
}

/// From the first change since `since` of any object to the last one,
/// once every object's latest value is the one wanted.
fn span_to(
    history: &[Vec<(u64, String)>],
    since: u64,
    wanted: impl Fn(usize) -> String,
) -> Option<Duration> {
    let mut first = u64::MAX;
    let mut last = 0;
    for (index, changes) in history.iter().enumerate() {
        let (at, value) = changes.last()?;
        if *value != wanted(index) || *at < since {
            return None;
        }
        let reached = changes.iter().map(|(at, _)| *at).find(|at| *at >= since)?;
        first = first.min(reached);
        last = last.max(*at);
    }
    Some(Duration::from_nanos(last.saturating_sub(first)))
}

/// What the placement run measured.
pub struct Placement {
    pub objects: usize,
    pub ceiling_before: Duration,
    pub ceiling_after: Duration,
    /// From the first label the sharder placed to every object labelled
    /// for its final owner.
    pub placed: Duration,
    /// From the replicas' start to every object labelled for its owner.
    pub from_start: Duration,
    /// Label changes the watch saw during placement (the sharder's
    /// PATCHes that landed; more than `objects` when some moved).
    pub label_writes: usize,
    /// Objects each replica owned and cached at the end.
    pub owned: Vec<usize>,
}

async fn ceiling(
    api: &Api<ConfigMap>,
    uids: &[(String, String)],
    value: &str,
    labels: &Arc<Mutex<Labels>>,
) -> Result<Duration> {
    let since = wall_ns();
    let results: Vec<Result<()>> = futures::stream::iter(uids)
        .map(|(name, uid)| async move {
            let patch = json!({"metadata": {"uid": uid, "labels": {CEILING_KEY: value}}});
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .with_context(|| format!("the ceiling's label PATCH of {name}"))?;
            Ok(())
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    results.into_iter().collect::<Result<Vec<()>>>()?;
    let started = Instant::now();
    loop {
        if let Some(took) = span_to(&labels.lock().unwrap().ceiling, since, |_| value.to_owned()) {
            return Ok(took);
        }
        ensure!(
            started.elapsed() < Duration::from_secs(60),
            "the watch did not see every ceiling label within 60 s of the last answer"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs the ceiling, the placement by `replicas` replicas of `fleet`
/// (`--shards=label`, indices from `first`), and the ceiling again.
pub async fn run(
    config: kube::Config,
    fleet: &Fleet,
    replicas: usize,
    first: usize,
) -> Result<Placement> {
    let api: Api<ConfigMap> = Api::namespaced(Client::try_from(config.clone())?, &fleet.namespace);
    let uids: Vec<(String, String)> = api
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|cm| index_of(&cm.name_any()).is_some())
        .map(|cm| (cm.name_any(), cm.uid().unwrap_or_default()))
        .collect();
    ensure!(
        uids.len() == fleet.objects,
        "{} of the {} ConfigMaps listed",
        uids.len(),
        fleet.objects
    );
    let labels = Arc::new(Mutex::new(Labels {
        sharder: vec![Vec::new(); fleet.objects],
        ceiling: vec![Vec::new(); fleet.objects],
        listed: false,
    }));
    let recorder = labels.clone();
    let watch = tokio::spawn(async move {
        let events = watcher(api, watcher::Config::default()).default_backoff();
        let mut events = std::pin::pin!(events);
        loop {
            match events.try_next().await {
                Ok(Some(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm))) => {
                    recorder.lock().unwrap().record(&cm);
                }
                Ok(Some(watcher::Event::InitDone)) => recorder.lock().unwrap().listed = true,
                Ok(Some(_)) => {}
                Ok(None) => return,
                Err(error) => tracing::warn!(%error, "the placement watch failed"),
            }
        }
    });
    // The bare client: a connection pool of its own, as the sharder has.
    let bare: Api<ConfigMap> = Api::namespaced(Client::try_from(config)?, &fleet.namespace);
    let result = measure(&bare, fleet, replicas, first, &uids, &labels).await;
    watch.abort();
    result
}

async fn measure(
    api: &Api<ConfigMap>,
    fleet: &Fleet,
    replicas: usize,
    first: usize,
    uids: &[(String, String)],
    labels: &Arc<Mutex<Labels>>,
) -> Result<Placement> {
    let started = Instant::now();
    while !labels.lock().unwrap().listed {
        ensure!(
            started.elapsed() < Duration::from_secs(60),
            "the placement watch did not list within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ceiling_before = ceiling(api, uids, "c0ffee0000000001", labels).await?;
    println!(
        "ceiling: {} label PATCHes in {:.2} s",
        uids.len(),
        ceiling_before.as_secs_f64()
    );

    let spawned = wall_ns();
    let mut live = Vec::new();
    for index in first..first + replicas {
        live.push(fleet.spawn(index).await?);
    }
    let owners = fleet
        .wait_settled(&mut live, Duration::from_secs(600))
        .await?;
    let ids: Vec<String> = live
        .iter()
        .map(|p| p.member().context("a member id"))
        .collect::<Result<_>>()?;
    let id_of = |index: usize| {
        live.iter()
            .position(|p| p.index == owners[index])
            .map(|i| ids[i].clone())
            .unwrap_or_default()
    };
    let waited = Instant::now();
    let placed = loop {
        if let Some(placed) = span_to(&labels.lock().unwrap().sharder, spawned, id_of) {
            break placed;
        }
        ensure!(
            waited.elapsed() < Duration::from_secs(60),
            "not every object carried its owner's label within 60 s of the ring settling"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let (from_start, label_writes) = {
        let labels = labels.lock().unwrap();
        let last = labels
            .sharder
            .iter()
            .filter_map(|c| c.last().map(|(at, _)| *at))
            .max()
            .unwrap_or(spawned);
        let writes = labels.sharder.iter().map(Vec::len).sum();
        (Duration::from_nanos(last.saturating_sub(spawned)), writes)
    };
    // Each replica's cache holds exactly its shard.
    let owned: Vec<usize> = live
        .iter()
        .map(|p| owners.iter().filter(|o| **o == p.index).count())
        .collect();
    let waited = Instant::now();
    loop {
        let cached: Vec<usize> = live
            .iter()
            .map(|p| p.state.lock().unwrap().cached)
            .collect();
        if cached == owned {
            break;
        }
        ensure!(
            waited.elapsed() < Duration::from_secs(30),
            "the replicas cache {cached:?} objects, not exactly the {owned:?} they own"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "placement: {} objects labelled for their owners in {:.2} s ({label_writes} label changes), {:.2} s after the replicas started",
        fleet.objects,
        placed.as_secs_f64(),
        from_start.as_secs_f64()
    );
    for proc in &live {
        proc.terminate()?;
    }
    for proc in live {
        proc.exited(Duration::from_secs(60)).await?;
    }

    let ceiling_after = ceiling(api, uids, "c0ffee0000000002", labels).await?;
    println!(
        "ceiling again: {} label PATCHes in {:.2} s",
        uids.len(),
        ceiling_after.as_secs_f64()
    );
    Ok(Placement {
        objects: fleet.objects,
        ceiling_before,
        ceiling_after,
        placed,
        from_start,
        label_writes,
        owned,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_needs_every_object_at_its_wanted_value() {
        let history = vec![
            vec![(10, "a".to_owned()), (50, "b".to_owned())],
            vec![(20, "b".to_owned())],
        ];
        let b = |_| "b".to_owned();
        assert_eq!(span_to(&history, 0, b), Some(Duration::from_nanos(40)));
        // Only changes since `since` count: the second object's is older.
        assert_eq!(span_to(&history, 30, b), None);
        assert_eq!(span_to(&history, 0, |_| "a".to_owned()), None);
        assert_eq!(span_to(&[vec![], vec![(1, "b".to_owned())]], 0, b), None);
    }
}
