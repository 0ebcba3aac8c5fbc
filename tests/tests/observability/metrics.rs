//! What a manager exposes to the people who run it: the series on
//! `/metrics`, pinned by name and label names, from a live manager with
//! controllers, writes through several strategies, sharding and a webhook
//! server.
//!
//! ```text
//! cargo test -p concord-tests --test observability metrics::
//! CONCORD_BLESS_SERIES=1 cargo test -p concord-tests --test observability metrics::   # re-pin
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::webhooks_support;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use concord::metrics::prometheus_client::metrics::counter::Counter;
use concord::webhook::WebhookOptions;
use concord::{
    Action, Context, Manager, ManagerArgs, Reconciler, WriteError, finalizer, finalizer::Lifecycle,
    sharding::ShardingMode,
};
use concord_testenv::TestEnv;
use concord_tests::eventually;
use concord_tests::http_get as get;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const FINALIZER: &str = "observability.concord.dev/cleanup";
const LABEL: &str = "observability.concord.dev/seen";

/// Several strategies at once: each operation of the labeller below goes
/// through its own.
const CONFIG: &str = "
strategies:
  default: strict
  resources:
    configmaps:
      operations:
        add-finalizer: guarded
        metadata: update
        remove-finalizer: apply
";

struct Labeller;

#[concord::async_trait]
impl Reconciler<ConfigMap> for Labeller {
    type Error = concord::finalizer::FinalizerError<WriteError>;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        finalizer(ctx, FINALIZER, cm, |event| async move {
            if let Lifecycle::Apply(cm) = event {
                ctx.set_label(&cm, LABEL, "true").await?;
            }
            Ok(Action::await_change())
        })
        .await
    }
}

/// The pinned series: one `name{label,label}` a line, sorted.
fn pinned_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/observability/support/series.txt")
}

fn reference_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/observability/support/reference.md")
}

/// The metrics reference the book includes, from a scrape's `# TYPE` and
/// `# HELP` lines and its `series`: one row per series, with its family's
/// type and help text.
fn reference(exposition: &str, series: &BTreeSet<String>) -> String {
    let mut families: Vec<(String, String, String)> = Vec::new();
    for line in exposition.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            families.push((name.to_owned(), kind.to_owned(), String::new()));
        }
    }
    for line in exposition.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            if let Some(family) = families.iter_mut().find(|f| f.0 == name) {
                family.2 = help.replace('|', "\\|");
            }
        }
    }
    let mut text = String::from(
        "| series (name and label names) | type | what it counts |\n| --- | --- | --- |\n",
    );
    for line in series {
        let name = line.split('{').next().unwrap_or_default();
        // The family a sample belongs to: the longest family name it
        // starts with (`_total`, `_bucket`, `_sum`, `_count` follow).
        let family = families
            .iter()
            .filter(|f| name.starts_with(f.0.as_str()))
            .max_by_key(|f| f.0.len());
        let (kind, help) = family.map_or(("", ""), |f| (f.1.as_str(), f.2.as_str()));
        text.push_str(&format!("| `{line}` | {kind} | {help} |\n"));
    }
    text
}

/// The (metric name, label names) of every sample in a text exposition,
/// as `name{a,b}` (label names sorted; `name{}` without labels).
fn series(exposition: &str) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for line in exposition.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let name = &line[..name_end];
        let mut labels = BTreeSet::new();
        if line[name_end..].starts_with('{') {
            let mut rest = &line[name_end + 1..];
            loop {
                rest = rest.trim_start_matches([',', ' ']);
                if let Some(after) = rest.strip_prefix('}') {
                    rest = after;
                    break;
                }
                let Some((label, value)) = rest.split_once("=\"") else {
                    bail!("a label without a quoted value in `{line}`");
                };
                labels.insert(label.to_owned());
                // Skip the value, honouring `\"` and `\\` escapes.
                let mut chars = value.char_indices();
                let mut end = None;
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => {
                            end = Some(i);
                            break;
                        }
                        _ => {}
                    }
                }
                let Some(end) = end else {
                    bail!("an unterminated label value in `{line}`");
                };
                rest = &value[end + 1..];
            }
            if !rest.starts_with(' ') {
                bail!("no value after the labels in `{line}`");
            }
        }
        let labels: Vec<_> = labels.into_iter().collect();
        out.insert(format!("{name}{{{}}}", labels.join(",")));
    }
    Ok(out)
}

#[test]
fn series_reads_names_and_label_names() -> Result<()> {
    let text = "# HELP a_total A.\n# TYPE a_total counter\n\
                a_total{z=\"1\",a=\"x\\\"},y\"} 3\nb 1\nc_bucket{le=\"+Inf\"} 2\n# EOF\n";
    let found: Vec<_> = series(text)?.into_iter().collect();
    assert_eq!(found, ["a_total{a,z}", "b{}", "c_bucket{le}"]);
    assert!(series("a{b=\"1} 2").is_err());
    Ok(())
}

// ANCHOR: series
#[tokio::test]
async fn a_live_manager_exposes_the_pinned_series() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let (ca, certs) = webhooks_support::certs()?;
    let config = concord_tests::yaml_file("concord-observability-", CONFIG)?;
    let args = ManagerArgs::new()
        .with_config(&*config)
        .with_metrics_bind_address("127.0.0.1:0")
        .with_health_probe_bind_address("127.0.0.1:0")
        .with_webhook_server("127.0.0.1:0", certs.path())
        .with_shards(ShardingMode::Hash, ns.name());
    let webhooks = webhooks_support::gizmo::webhooks(ns.name(), WebhookOptions::default());
    let (_, _, webhook_path) = webhooks.paths().into_iter().next().context("a webhook")?;
    let mut manager = Manager::builder("observability-test")
        .with_client(env.client()?)
        .with_args(args)
        .with_signal_handling(false)
        .with_webhooks(webhooks)
        .build()
        .await?;
    let metrics_at = manager.metrics_address().context("metrics are served")?;
    let webhook_at = manager.webhook_address().context("webhooks are served")?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    manager
        .controller("configmaps", maps.clone(), Labeller)
        .add()?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    for i in 0..3 {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}")}}))?;
        maps.create(&PostParams::default(), &cm).await?;
    }
    let labelled = eventually(Duration::from_secs(60), || async {
        let list = maps.list(&ListParams::default()).await.unwrap().items;
        list.iter()
            .filter(|c| {
                c.labels().contains_key(LABEL) && c.finalizers().iter().any(|f| f == FINALIZER)
            })
            .count()
            == 3
    })
    .await;
    assert!(labelled, "the sharded replica reconciles every ConfigMap");
    for i in 0..3 {
        maps.delete(&format!("cm-{i}"), &Default::default()).await?;
    }
    let gone = eventually(Duration::from_secs(60), || async {
        maps.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    })
    .await;
    assert!(gone, "the finalizer is removed and the ConfigMaps go");
    // A request that is not a review: the webhook's series appear.
    let (status, _, _) =
        webhooks_support::https(webhook_at, ca.pem(), "POST", &webhook_path, b"not a review")
            .await?;
    assert_eq!(status, 400);

    let (status, body) = get(metrics_at, "/metrics").await?;
    assert_eq!(status, 200, "{body}");
    let found = series(&body)?;
    stop.shutdown();
    running.await??;

    let path = pinned_path();
    if std::env::var_os("CONCORD_BLESS_SERIES").is_some() {
        let mut text = String::from(
            "# The series a manager exposes on /metrics, by name and label names\n\
             # (tests/tests/observability/metrics.rs; CONCORD_BLESS_SERIES=1 re-pins).\n",
        );
        for line in &found {
            text.push_str(line);
            text.push('\n');
        }
        std::fs::write(&path, text)?;
        std::fs::write(reference_path(), reference(&body, &found))?;
        return Ok(());
    }
    let pinned: BTreeSet<String> = std::fs::read_to_string(&path)
        .with_context(|| format!("reading {}", path.display()))?
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    let missing: Vec<_> = pinned.difference(&found).collect();
    let extra: Vec<_> = found.difference(&pinned).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "the exposed series differ from {}:\nmissing: {missing:#?}\nnew: {extra:#?}\n\
         (CONCORD_BLESS_SERIES=1 re-pins if the change is intended)\n{body}",
        path.display()
    );
    let written = std::fs::read_to_string(reference_path()).unwrap_or_default();
    assert_eq!(
        written,
        reference(&body, &found),
        "{} is stale (CONCORD_BLESS_SERIES=1 rewrites it)",
        reference_path().display()
    );
    Ok(())
}
// ANCHOR_END: series

/// Reads until the server closes the connection (bounded by 20 s): what
/// it sent, and how long it took.
async fn until_closed(tcp: &mut TcpStream) -> (String, Duration) {
    let start = std::time::Instant::now();
    let mut seen = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), tcp.read_to_end(&mut seen)).await;
    (String::from_utf8_lossy(&seen).into_owned(), start.elapsed())
}

// ANCHOR: stalled
#[tokio::test]
async fn a_stalled_scraper_is_cut_off_while_others_are_served() -> Result<()> {
    const LIMIT: Duration = Duration::from_secs(1);
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let args = ManagerArgs::new()
        .with_metrics_bind_address("127.0.0.1:0")
        .with_health_probe_bind_address("127.0.0.1:0");
    let mut manager = Manager::builder("observability-stalled")
        .with_client(env.client()?)
        .with_args(args)
        .with_signal_handling(false)
        .with_endpoint_header_read_timeout(LIMIT)
        .with_endpoint_body_read_timeout(LIMIT)
        .build()
        .await?;
    let metrics_at = manager.metrics_address().context("metrics are served")?;
    let health_at = manager.health_address().context("probes are served")?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    manager
        .controller("configmaps", maps, concord_tests::Idle)
        .add()?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    // Half a request line, then nothing.
    let mut stalled = TcpStream::connect(metrics_at).await?;
    stalled.write_all(b"GET /metr").await?;
    // A body promised and never sent.
    let mut slow_body = TcpStream::connect(health_at).await?;
    slow_body
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\nab")
        .await?;
    // Meanwhile every other client is answered.
    for _ in 0..3 {
        let (status, body) = get(metrics_at, "/metrics").await?;
        assert_eq!(status, 200);
        assert!(body.contains("concord_leader"), "{body}");
        assert_eq!(get(health_at, "/healthz").await?.0, 200);
    }
    let (sent, took) = until_closed(&mut stalled).await;
    assert!(
        took < Duration::from_secs(10),
        "a stalled header is cut off near the 1 s timeout, not held ({took:?}, sent {sent:?})"
    );
    let (sent, took) = until_closed(&mut slow_body).await;
    assert!(
        took < Duration::from_secs(10),
        "a stalled body is cut off near the 1 s timeout ({took:?})"
    );
    assert!(
        sent.starts_with("HTTP/1.1 408"),
        "a late body gets a 408: {sent:?}"
    );
    stop.shutdown();
    running.await??;
    Ok(())
}
// ANCHOR_END: stalled

#[tokio::test]
async fn openmetrics_scrapers_get_the_same_series() -> Result<()> {
    let env = TestEnv::shared()?;
    let args = ManagerArgs::new().with_metrics_bind_address("127.0.0.1:0");
    let ns = env.namespace().await?;
    let mut manager = Manager::builder("observability-openmetrics")
        .with_client(env.client()?)
        .with_args(args)
        .with_signal_handling(false)
        .build()
        .await?;
    let metrics_at = manager.metrics_address().context("metrics are served")?;
    // A manager runs (and serves) while it has a controller.
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    manager
        .controller("configmaps", maps, concord_tests::Idle)
        .add()?;
    // ANCHOR: own
    let jobs: Counter = Counter::default();
    manager.metrics().register(|registry| {
        registry.register("myop_jobs", "Jobs my operator started.", jobs.clone());
    });
    jobs.inc();
    // ANCHOR_END: own
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    let mut tcp = TcpStream::connect(metrics_at).await?;
    tcp.write_all(
        b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\
          accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5\r\n\r\n",
    )
    .await?;
    let (answer, _) = until_closed(&mut tcp).await;
    let (head, body) = answer.split_once("\r\n\r\n").context("an HTTP answer")?;
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text; version=1.0.0"),
        "{head}"
    );
    assert!(body.ends_with("# EOF\n"), "{body}");
    let (_, text) = get(metrics_at, "/metrics").await?;
    assert!(!text.contains("# EOF"));
    assert!(text.lines().any(|l| l == "myop_jobs_total 1"), "{text}");
    assert_eq!(series(body)?, series(&text)?);
    stop.shutdown();
    running.await??;
    Ok(())
}

/// The value of the sample of `name` whose labels include every one of
/// `labels` (`key="value"` strings), if the exposition has one.
fn sample(exposition: &str, name: &str, labels: &[String]) -> Option<f64> {
    exposition.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix('{')?;
        let (set, value) = rest.rsplit_once("} ")?;
        labels
            .iter()
            .all(|l| set.split(',').any(|p| p == l))
            .then(|| value.trim().parse().ok())?
    })
}

#[tokio::test]
async fn the_cache_gauge_counts_the_objects_each_cache_holds() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    for i in 0..5 {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("counted-{i}")}}))?;
        maps.create(&PostParams::default(), &cm).await?;
    }
    let args = ManagerArgs::new()
        .with_metrics_bind_address("127.0.0.1:0")
        .with_health_probe_bind_address("127.0.0.1:0");
    let mut manager = Manager::builder("cache-gauge-test")
        .with_client(env.client()?)
        .with_args(args)
        .with_signal_handling(false)
        .build()
        .await?;
    let metrics_at = manager.metrics_address().context("metrics are served")?;
    manager
        .controller("configmaps", maps.clone(), concord_tests::Idle)
        .add()?;
    let metadata: Api<kube::core::PartialObjectMeta<ConfigMap>> =
        Api::namespaced(ns.client(), ns.name());
    manager
        .controller("configmap-metadata", metadata, concord_tests::Idle)
        .add()?;
    let store = manager.context::<ConfigMap>().store().context("a store")?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    let whole = [
        "resource=\"configmaps\"".to_owned(),
        format!("namespace=\"{}\"", ns.name()),
        "type=\"ConfigMap\"".to_owned(),
        "selector=\"\"".to_owned(),
    ];
    let partial = [
        "resource=\"configmaps\"".to_owned(),
        format!("namespace=\"{}\"", ns.name()),
        "type=\"PartialObjectMeta<ConfigMap>\"".to_owned(),
    ];
    let counts = |n: f64| {
        let (whole, partial) = (whole.clone(), partial.clone());
        move || {
            let (whole, partial) = (whole.clone(), partial.clone());
            async move {
                let Ok((200, body)) = get(metrics_at, "/metrics").await else {
                    return false;
                };
                sample(&body, "concord_cache_objects", &whole) == Some(n)
                    && sample(&body, "concord_cache_objects", &partial) == Some(n)
            }
        }
    };
    assert!(
        eventually(Duration::from_secs(60), counts(5.0)).await,
        "both caches count the five ConfigMaps"
    );
    maps.delete("counted-0", &Default::default()).await?;
    maps.delete("counted-1", &Default::default()).await?;
    assert!(
        eventually(Duration::from_secs(60), counts(3.0)).await,
        "and drop to three after two deletes"
    );
    // The JSON size of what the whole cache holds, as the store's own
    // objects encode.
    let (_, body) = get(metrics_at, "/metrics").await?;
    let encoded: usize = store
        .state()
        .iter()
        .map(|cm| serde_json::to_vec(cm.as_ref()).unwrap().len())
        .sum();
    assert_eq!(store.state().len(), 3);
    assert_eq!(
        sample(&body, "concord_cache_json_bytes", &whole),
        Some(encoded as f64),
        "{body}"
    );
    assert!(sample(&body, "concord_cache_json_bytes", &partial).is_some_and(|b| b > 0.0));
    stop.shutdown();
    running.await??;
    Ok(())
}
