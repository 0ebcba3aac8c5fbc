//! What the manager says at start-up about its strategy table, against a
//! real kube-apiserver and etcd: a configured row that names no resource
//! the API server serves, and every `lax` cell, are named in warnings; a
//! row for a served resource no controller watches is not.
//!
//! ```text
//! cargo test -p concord-tests --test framework manager::table_warnings::
//! ```
#![allow(clippy::expect_used)]

use std::io::Write;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use concord::{Manager, ManagerArgs, featuregates::FeatureRegistry};
use concord_tests::Idle;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use tracing_subscriber::util::SubscriberInitExt;

/// Collects what the subscriber writes.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_misspelt_row_and_lax_cells_are_named_at_start_up() -> Result<()> {
    let lines = Lines::default();
    let sink = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .finish();
    // The test's runtime is one thread: every task logs to this sink.
    let _default = subscriber.set_default();

    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let config = std::env::temp_dir().join(format!("concord-table-{}.yaml", std::process::id()));
    std::fs::write(
        &config,
        "strategies:\n  resources:\n    configmap:\n      default: update\n    \
         configmaps:\n      operations:\n        metadata: lax\n    \
         secrets:\n      default: update\n",
    )?;
    let mut manager = Manager::builder("table-warnings")
        .with_client(env.client()?)
        .with_args(ManagerArgs::new().with_config(&config))
        .with_registry(FeatureRegistry::new())
        .with_signal_handling(false)
        .build()
        .await?;
    manager
        .controller(
            "configmaps",
            Api::<ConfigMap>::namespaced(ns.client(), ns.name()),
            Idle,
        )
        .add()?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    stop.shutdown();
    running.await??;
    std::fs::remove_file(&config)?;

    let text = String::from_utf8(lines.0.lock().expect("log buffer").clone())?;
    let warned = |needle: &str| {
        text.lines()
            .any(|l| l.contains("WARN") && l.contains(needle))
    };
    assert!(
        warned("row=configmap ") && warned("names a resource the API server does not serve"),
        "the misspelt row is named:\n{text}"
    );
    // Secrets are served, though no controller watches them: a reconciler
    // writes them through `writer_for` or `create`.
    assert!(
        !text.lines().any(|l| l.contains("row=secrets")),
        "a row for a served resource no controller watches is not a misspelling:\n{text}"
    );
    assert!(
        warned("resource=configmaps") && warned("operations=metadata") && warned("use `lax`"),
        "the lax cell is named:\n{text}"
    );
    Ok(())
}
