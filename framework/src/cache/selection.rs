//! Which objects a shared cache watches: part of its key.

use std::fmt;
use std::sync::Arc;

use futures::stream::BoxStream;
use kube::runtime::watcher;

/// A sharded replica's part of a selection, resolved when the watch
/// starts: it learns its selector only once it has joined its ring, after
/// its controllers were added. Shard parts of the same `name` are one.
type ShardSelection = (&'static str, Arc<dyn Fn() -> watcher::Config + Send + Sync>);

/// Yields whenever a shard's selection changes, so its watch restarts.
pub(crate) type ShardChanges = Arc<dyn Fn() -> BoxStream<'static, ()> + Send + Sync>;

/// Which objects a cache watches: the shard's selector, if any, and a
/// controller's label and field selectors (normalised, so that two
/// spellings of one selection share a watch).
#[derive(Clone, Default)]
pub(crate) struct Selection {
    shard: Option<ShardSelection>,
    changes: Option<ShardChanges>,
    /// The manager's client, through which a shard selector is sent.
    client: Option<kube::Client>,
    labels: Option<String>,
    fields: Option<String>,
}

impl Selection {
    /// Also what the shard `resolve` returns when the watch starts.
    pub(crate) fn with_shard(
        mut self,
        name: &'static str,
        resolve: Arc<dyn Fn() -> watcher::Config + Send + Sync>,
    ) -> Self {
        self.shard = Some((name, resolve));
        self
    }

    /// Also restarts the watch whenever `changes` yields (`selector`
    /// sharding: the replica's ranges moved).
    pub(crate) fn with_shard_changes(
        mut self,
        changes: ShardChanges,
        client: kube::Client,
    ) -> Self {
        self.changes = Some(changes);
        self.client = Some(client);
        self
    }

    /// The client a watch of `config` goes through, when it must be the
    /// manager's: `config` asks for a shard selector.
    pub(super) fn shard_client(&self, config: &watcher::Config) -> Option<kube::Client> {
        let marked = config
            .label_selector
            .as_deref()
            .is_some_and(|s| s.contains(crate::sharding::SELECTOR_MARKER));
        self.client.clone().filter(|_| marked)
    }

    /// The changes that restart the watch; never, for most selections.
    pub(super) fn changes(&self) -> BoxStream<'static, ()> {
        match &self.changes {
            Some(changes) => changes(),
            None => Box::pin(futures::stream::pending()),
        }
    }

    /// Only objects with these labels (a normalised selector).
    pub(crate) fn with_labels(mut self, labels: Option<String>) -> Self {
        self.labels = labels;
        self
    }

    /// Only objects with these fields (a normalised selector).
    pub(crate) fn with_fields(mut self, fields: Option<String>) -> Self {
        self.fields = fields;
        self
    }

    /// Whether it selects every object of its scope.
    pub(crate) fn is_everything(&self) -> bool {
        self.shard.is_none() && self.labels.is_none() && self.fields.is_none()
    }

    pub(super) fn resolve(&self) -> watcher::Config {
        let mut config = match &self.shard {
            Some((_, resolve)) => resolve(),
            None => watcher::Config::default(),
        };
        if let Some(labels) = &self.labels {
            config.label_selector = Some(match config.label_selector.take() {
                Some(shard) => format!("{shard},{labels}"),
                None => labels.clone(),
            });
        }
        if let Some(fields) = &self.fields {
            config = config.fields(fields);
        }
        config
    }
}

impl Selection {
    /// The selectors, as a label value: `labels` and `fields` joined by
    /// `;` (empty when there are none); a shard's selector shows as its
    /// name (`shard:<name>`), as it is known only once the replica joined.
    pub(super) fn describe(&self) -> String {
        let parts: Vec<String> = [
            self.shard.as_ref().map(|(name, _)| format!("shard:{name}")),
            self.labels.clone(),
            self.fields.clone(),
        ]
        .into_iter()
        .flatten()
        .collect();
        parts.join(";")
    }
}

impl PartialEq for Selection {
    fn eq(&self, other: &Self) -> bool {
        self.shard.as_ref().map(|s| s.0) == other.shard.as_ref().map(|s| s.0)
            && self.labels == other.labels
            && self.fields == other.fields
    }
}

impl fmt::Debug for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Selection")
            .field("shard", &self.shard.as_ref().map(|s| s.0))
            .field("labels", &self.labels)
            .field("fields", &self.fields)
            .finish()
    }
}
