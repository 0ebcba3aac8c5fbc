//! One contender's turn in a round: its parents created, scaled through
//! the phases, each phase timed from its first write until the API server
//! saw the last child created or deleted, once every parent has the
//! children its spec asks for and nothing has changed for a while.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt as _;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::tally::{Counts, PARENT_LABEL, Tally};

/// Parent writes in flight at once.
const WRITERS: usize = 16;
/// How often the count is looked at.
const POLL: Duration = Duration::from_millis(100);

/// What one phase did.
#[derive(Clone, Debug)]
pub(crate) struct Phase {
    /// Children per parent the phase asks for.
    pub(crate) replicas: usize,
    /// Creates and deletes the change of spec needs, over all parents.
    pub(crate) needed_creates: usize,
    pub(crate) needed_deletes: usize,
    /// What the API server saw.
    pub(crate) counts: Counts,
    /// From the phase's first write to the last child created or deleted;
    /// `None` when the children did not settle within the timeout.
    pub(crate) wall: Option<Duration>,
}

/// The name of parent `i`.
fn parent_name(i: usize) -> String {
    format!("p{i}")
}

fn parent(i: usize, replicas: usize) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(parent_name(i)),
            labels: Some(BTreeMap::from([("role".to_owned(), "parent".to_owned())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "replicas".to_owned(),
            replicas.to_string(),
        )])),
        ..ConfigMap::default()
    }
}

/// How a turn is run.
pub(crate) struct Plan<'a> {
    /// Parents of the turn.
    pub(crate) parents: usize,
    /// Children per parent, phase by phase.
    pub(crate) scale: &'a [usize],
    /// Nothing created or deleted for this long after every parent is
    /// right: the phase is over.
    pub(crate) quiet: Duration,
    /// The longest a phase may take to settle.
    pub(crate) timeout: Duration,
}

/// Runs the phases of `plan` on the namespace of `direct` (a client of the
/// API server itself), with the contender already running; stops after a
/// phase that did not settle.
///
/// # Errors
///
/// When a parent cannot be written or the count failed.
pub(crate) async fn run(
    direct: &Api<ConfigMap>,
    tally: &Tally,
    plan: &Plan<'_>,
) -> Result<Vec<Phase>> {
    let mut phases = Vec::with_capacity(plan.scale.len());
    let mut before = 0;
    for (index, &replicas) in plan.scale.iter().enumerate() {
        for i in 0..plan.parents {
            tally.want(&parent_name(i), replicas);
        }
        let counts = tally.counts();
        let started = Instant::now();
        let writes = futures::stream::iter(0..plan.parents).map(|i| async move {
            if index == 0 {
                direct
                    .create(&PostParams::default(), &parent(i, replicas))
                    .await?;
            } else {
                let scale = Patch::Merge(json!({"data": {"replicas": replicas.to_string()}}));
                direct
                    .patch(&parent_name(i), &PatchParams::default(), &scale)
                    .await?;
            }
            anyhow::Ok(())
        });
        writes
            .buffer_unordered(WRITERS)
            .try_collect::<Vec<()>>()
            .await
            .with_context(|| format!("writing the parents of phase {}", index + 1))?;
        let wall = settle(tally, started, plan).await?;
        phases.push(Phase {
            replicas,
            needed_creates: replicas.saturating_sub(before) * plan.parents,
            needed_deletes: before.saturating_sub(replicas) * plan.parents,
            counts: tally.counts().since(counts),
            wall,
        });
        if wall.is_none() {
            break;
        }
        before = replicas;
    }
    Ok(phases)
}

/// Waits until every parent is right and nothing has changed for
/// `plan.quiet`; returns the time from `started` to the last change, or
/// `None` after `plan.timeout`.
async fn settle(tally: &Tally, started: Instant, plan: &Plan<'_>) -> Result<Option<Duration>> {
    loop {
        if let Some(why) = tally.failed() {
            bail!("{why}");
        }
        let last = tally.last_change().filter(|at| *at > started);
        if let Some(last) = last
            && tally.parents_off() == 0
            && last.elapsed() >= plan.quiet
        {
            return Ok(Some(last - started));
        }
        if started.elapsed() > plan.timeout {
            return Ok(None);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// How many of the `parents` have exactly `replicas` children on the
/// server.
///
/// # Errors
///
/// When the list fails.
pub(crate) async fn parents_right(
    direct: &Api<ConfigMap>,
    parents: usize,
    replicas: usize,
) -> Result<usize> {
    let children = direct
        .list_metadata(&ListParams::default().labels(PARENT_LABEL))
        .await
        .context("listing the children at the end")?;
    let mut per_parent: BTreeMap<String, usize> = BTreeMap::new();
    for child in &children.items {
        if let Some(p) = child.labels().get(PARENT_LABEL) {
            *per_parent.entry(p.clone()).or_default() += 1;
        }
    }
    Ok((0..parents)
        .filter(|i| per_parent.get(&parent_name(*i)).copied().unwrap_or(0) == replicas)
        .count())
}
