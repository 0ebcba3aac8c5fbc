//! The question a sharded manager asks once at start: does the API server
//! serve shard selectors (KEP-5866) on what the controllers watch? A list
//! with `limit=1` and a `shardSelector` of the whole hash space answers:
//! a server that applied it says so in `metadata.shardInfo`; a server
//! without the `ShardedListAndWatch` gate ignores the parameter (probed on
//! v1.37.2, `tests/tests/sharding/server_selectors.rs`).

use kube::Client;

use super::ShardingMode;
use super::ranges::{self, ShardKey};
use crate::Error;

/// The mode a manager runs in, and why.
#[derive(Debug)]
pub(crate) struct Chosen {
    pub(crate) mode: ShardingMode,
    pub(crate) reason: String,
}

/// Settles `mode` for the collections at `paths`: `auto` becomes
/// `selector` when every one serves shard selectors, else `label`;
/// `selector` is kept only when they all do.
///
/// # Errors
///
/// [`Error::ShardingConfig`] naming `--shards=selector` on a server that
/// does not serve them, `--shard-by=namespace` in a mode without server
/// ranges, or a probe the server refused.
pub(crate) async fn choose(
    client: &Client,
    mode: ShardingMode,
    key: ShardKey,
    paths: &[String],
) -> Result<Chosen, Error> {
    if !mode.may_select() {
        if key != ShardKey::Uid {
            return Err(Error::ShardingConfig(format!(
                "--shard-by={key} with --shards={mode}: only the API server's shard selectors place by namespace; use --shards=selector or --shards=auto"
            )));
        }
        return Ok(Chosen {
            mode,
            reason: format!("--shards={mode}"),
        });
    }
    let mut missing = Vec::new();
    for path in paths {
        if !serves(client, path, key).await? {
            missing.push(path.clone());
        }
    }
    if missing.is_empty() {
        return Ok(Chosen {
            mode: ShardingMode::Selector,
            reason: format!(
                "--shards={mode}: the API server serves shard selectors on {}",
                paths.join(", ")
            ),
        });
    }
    let why = format!(
        "the API server ignores shardSelector on {} (is its feature gate ShardedListAndWatch on?)",
        missing.join(", ")
    );
    if mode == ShardingMode::Selector {
        return Err(Error::ShardingConfig(format!(
            "--shards=selector: {why}; use --shards=label, or --shards=auto to choose by what the server serves"
        )));
    }
    if key != ShardKey::Uid {
        return Err(Error::ShardingConfig(format!(
            "--shard-by={key} with --shards=auto: {why}, and labels place by name, not by namespace; use --shard-by=uid or a server with shard selectors"
        )));
    }
    Ok(Chosen {
        mode: ShardingMode::Label,
        reason: format!("--shards=auto: {why}; placing by labels"),
    })
}

/// Attempts of the probe of one path before a transient failure (no
/// answer, 429, 5xx) stops the start.
const ATTEMPTS: u32 = 5;

/// Whether a list of `path` with a `shardSelector` comes back filtered,
/// asked again after a transient failure.
async fn serves(client: &Client, path: &str, key: ShardKey) -> Result<bool, Error> {
    let mut delay = std::time::Duration::from_millis(200);
    for _ in 1..ATTEMPTS {
        match ask(client, path, key).await {
            Err(Asked::Transient(message)) => {
                tracing::debug!(%message, path, "asking for shard selectors failed; asking again");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            outcome => return outcome.map_err(|e| refused(path, e)),
        }
    }
    ask(client, path, key).await.map_err(|e| refused(path, e))
}

/// Why the probe had no answer.
enum Asked {
    /// Worth asking again: no answer, 429 or a 5xx.
    Transient(String),
    /// Not: any other answer.
    Permanent(String),
}

fn refused(path: &str, asked: Asked) -> Error {
    let (Asked::Transient(message) | Asked::Permanent(message)) = asked;
    Error::ShardingConfig(format!(
        "--shards: asking the API server whether it serves shard selectors on {path} failed: {message}"
    ))
}

/// One list of `path` with a `shardSelector` of the whole space.
async fn ask(client: &Client, path: &str, key: ShardKey) -> Result<bool, Asked> {
    let Some(selector) = ranges::selector(key, &[(0, 1 << 64)]) else {
        return Ok(false);
    };
    let uri = format!(
        "{path}?limit=1&shardSelector={}",
        super::selectors::encode(&selector)
    );
    let request = http::Request::get(uri)
        .body(Vec::new())
        .map_err(|e| Asked::Permanent(e.to_string()))?;
    let text = client.request_text(request).await.map_err(|e| match &e {
        kube::Error::Api(status) if status.code == 429 || status.code >= 500 => {
            Asked::Transient(e.to_string())
        }
        kube::Error::Api(_) => Asked::Permanent(e.to_string()),
        _ => Asked::Transient(e.to_string()),
    })?;
    let list: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| Asked::Permanent(e.to_string()))?;
    Ok(list
        .pointer("/metadata/shardInfo/selector")
        .is_some_and(serde_json::Value::is_string))
}
