//! Sending one logical write the way a contender does.

use std::sync::Arc;

use concord::strategies::{
    ConflictPolicy, FreshCopies, Intent, Mutation, Target, WriteMetrics, WriteStrategy,
    strategy_for,
};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, PatchParams};
use kube::core::{ApiResource, DynamicObject};

use crate::failure::Failure;
use crate::scenarios::Change;
use crate::tally::{Counts, Tally};
use crate::{Contender, ceiling, json_index, raw};

/// The field manager of the benchmark's controller.
pub(crate) const FIELD_MANAGER: &str = "race-bench";

/// How one contender sends writes, with what it counts.
pub(crate) struct Sender {
    how: How,
    tally: Tally,
}

enum How {
    Concord {
        strategy: Arc<dyn WriteStrategy>,
        target: Target,
        metrics: Arc<WriteMetrics>,
    },
    Raw {
        api: Api<Pod>,
        params: PatchParams,
    },
    JsonIndex {
        api: Api<Pod>,
        params: PatchParams,
    },
    Ceiling {
        api: Api<Pod>,
        params: PatchParams,
    },
}

impl Sender {
    /// A sender for `contender` writing pods of `namespace` through `client`.
    /// Its concord strategies re-read from `cache` after a conflict.
    pub(crate) fn new(
        contender: Contender,
        client: &Client,
        namespace: &str,
        cache: Arc<dyn FreshCopies>,
    ) -> Self {
        let api = Api::namespaced(client.clone(), namespace);
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        let how = match contender.strategy() {
            Some(name) => {
                let metrics = Arc::new(WriteMetrics::default());
                let target = Target::new(client.clone(), ApiResource::erase::<Pod>(&()))
                    .with_field_manager(FIELD_MANAGER)
                    .with_metrics(metrics.clone())
                    .with_fresh_copies(cache);
                How::Concord {
                    strategy: strategy_for(name, ConflictPolicy::default()),
                    target,
                    metrics,
                }
            }
            None if contender == Contender::JsonIndex => How::JsonIndex { api, params },
            None if contender == Contender::Ceiling => How::Ceiling { api, params },
            None => How::Raw { api, params },
        };
        Sender {
            how,
            tally: Tally::default(),
        }
    }

    /// Make `change` on the object last observed as `observed`.
    pub(crate) async fn send(
        &self,
        observed: &DynamicObject,
        change: &Change,
    ) -> Result<(), Failure> {
        match &self.how {
            How::Concord {
                strategy, target, ..
            } => strategy
                .write(target, observed, &mutation(change))
                .await
                .map(drop)
                .map_err(|e| {
                    tracing::debug!(error = %e, "write failed");
                    Failure::from_concord(&e)
                }),
            How::Raw { api, params } => {
                raw::write(api, params, observed, change, &self.tally).await
            }
            How::JsonIndex { api, params } => {
                json_index::write(api, params, observed, change, &self.tally).await
            }
            How::Ceiling { api, params } => {
                let name = observed.metadata.name.as_deref().unwrap_or_default();
                ceiling::write(api, params, name, change, &self.tally).await
            }
        }
    }

    /// Whether this contender writes from the cached object (all but
    /// `ceiling`, which reads nothing).
    pub(crate) fn reads_cache(&self) -> bool {
        !matches!(self.how, How::Ceiling { .. })
    }

    /// Requests, conflicts and retries so far.
    pub(crate) fn counts(&self) -> Counts {
        match &self.how {
            How::Concord { metrics, .. } => Counts::from(&metrics.snapshot()),
            _ => self.tally.counts(),
        }
    }
}

// ANCHOR: mutation
/// `change` as concord intents.
pub(crate) fn mutation(change: &Change) -> Mutation {
    let mut m = Mutation::new();
    if let Some(finalizer) = change.remove_finalizer {
        m = m.with(Intent::remove_finalizer(finalizer));
    }
    if let Some((key, value)) = &change.set_label {
        m = m.with(Intent::set_label(key.clone(), value.clone()));
    }
    m
}
// ANCHOR_END: mutation
