//! How a manager's objects are divided among its replicas.

use std::fmt;

/// How a manager's objects are divided among its replicas (`--shards`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, clap::ValueEnum)]
#[non_exhaustive]
pub enum ShardingMode {
    /// No sharding: every replica that runs reconciles every object (with
    /// `--leader-elect`, only the leader runs). The default.
    #[default]
    Off,
    /// Every replica watches every object and reconciles only the keys the
    /// ring assigns it. No writes to objects; each cache holds everything.
    Hash,
    /// As `hash`, and the sharder (one replica, elected on a Lease of its
    /// own) labels every object with its owner's
    /// member id, so each replica watches (and caches) only its own shard.
    Label,
    /// Each replica's caches watch only its shard through the API
    /// server's own shard selectors (KEP-5866, gate `ShardedListAndWatch`):
    /// no object is written to place it. Starting fails, naming this flag,
    /// when the server does not serve them.
    Selector,
    /// `selector` where the API server serves shard selectors, else
    /// `label`: asked once at start, said in the log, the
    /// `concord_shard_mode` metric and `/readyz?verbose`.
    Auto,
}

impl ShardingMode {
    /// Whether objects are sharded at all.
    pub fn is_on(self) -> bool {
        self != ShardingMode::Off
    }

    /// Whether the mode may watch through server-side shard selectors.
    pub fn may_select(self) -> bool {
        matches!(self, ShardingMode::Selector | ShardingMode::Auto)
    }

    /// The flag value: `off`, `hash`, `label`, `selector` or `auto`.
    pub fn as_str(self) -> &'static str {
        match self {
            ShardingMode::Off => "off",
            ShardingMode::Hash => "hash",
            ShardingMode::Label => "label",
            ShardingMode::Selector => "selector",
            ShardingMode::Auto => "auto",
        }
    }
}

impl fmt::Display for ShardingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
