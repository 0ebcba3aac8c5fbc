//! concord's integration tests. The tests are in `tests/`, one binary per
//! concern, each starting one real control plane (see `kube-concord-testenv`);
//! this library holds what several of them share.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use concord::{Action, Context, Reconciler};

/// A reconciler that does nothing: a manager runs (and holds its Lease)
/// while it has a controller.
#[derive(Debug, Default)]
pub struct Idle;

#[concord::async_trait]
impl<K: concord::Object> Reconciler<K> for Idle {
    type Error = std::convert::Infallible;

    async fn reconcile(&self, _object: Arc<K>, _ctx: &Context<K>) -> Result<Action, Self::Error> {
        Ok(Action::await_change())
    }
}

/// Polls `check` every 100 ms until it holds, for at most `limit`; whether
/// it held.
pub async fn eventually<F, Fut>(limit: std::time::Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if check().await {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    false
}

/// The workspace's root: the folder above this crate's.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The workspace's build output: `$CARGO_TARGET_DIR`, else `target/`.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
}

/// Builds every binary and example of the workspace, once per test
/// process, and returns the path of the one named `name` (an example when
/// `example`). `--workspace` with `--examples` resolves the dependencies'
/// features as `cargo test --workspace` does, so inside that command
/// nothing is rebuilt; `cargo build -p <package>` would resolve them for
/// that package alone and rebuild half the dependency tree.
///
/// # Errors
///
/// `cargo build` could not run or failed.
pub fn workspace_program(name: &str, example: bool) -> anyhow::Result<PathBuf> {
    static BUILT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let status = std::process::Command::new(cargo)
                .args(["build", "--quiet", "--workspace", "--bins", "--examples"])
                .arg("--manifest-path")
                .arg(workspace().join("Cargo.toml"))
                .env("CARGO_TARGET_DIR", target_dir())
                .stdin(std::process::Stdio::null())
                .status()
                .map_err(|e| format!("running cargo build --workspace --bins --examples: {e}"))?;
            status.success().then_some(()).ok_or_else(|| {
                format!("cargo build --workspace --bins --examples failed: {status}")
            })
        })
        .clone()
        .map_err(anyhow::Error::msg)?;
    let debug = target_dir().join("debug");
    Ok(if example {
        debug.join("examples").join(name)
    } else {
        debug.join(name)
    })
}

/// A GET over plain HTTP/1.1 to `address`: the status code and the body
/// (an endpoint of the manager's: metrics, health, readiness).
///
/// # Errors
///
/// No answer within 10 s, or an answer that is not HTTP.
pub async fn http_get(address: std::net::SocketAddr, path: &str) -> anyhow::Result<(u16, String)> {
    use anyhow::Context as _;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(address).await?;
    let request = format!("GET {path} HTTP/1.1\r\nhost: {address}\r\nconnection: close\r\n\r\n");
    tcp.write_all(request.as_bytes()).await?;
    let mut raw = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        tcp.read_to_end(&mut raw),
    )
    .await
    .context("the endpoint did not answer within 10 s")??;
    let text = String::from_utf8(raw)?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .context("an HTTP answer has a blank line after its headers")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .context("an HTTP status line")?
        .parse()?;
    Ok((status, body.to_owned()))
}

/// The value of `concord_write_requests_total` for ConfigMap writes of
/// `strategy` with `verb` in a rendered exposition; 0 when absent.
pub fn config_map_write_requests(metrics: &str, strategy: &str, verb: &str) -> u64 {
    let needle = format!(
        "concord_write_requests_total{{resource=\"configmaps\",strategy=\"{strategy}\",verb=\"{verb}\"}} "
    );
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&needle))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}
