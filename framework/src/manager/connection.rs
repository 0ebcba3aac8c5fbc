use std::sync::Arc;
use std::sync::atomic::Ordering;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::{Error, client::ClientCounters, client::throttle_aware_client};

pub(super) async fn connect(
    kubeconfig: Option<&std::path::Path>,
    counters: Arc<ClientCounters>,
) -> Result<(Client, kube::Config), Error> {
    let fail = |name: String, e: Box<dyn std::error::Error + Send + Sync>| Error::Client {
        source_name: name,
        source: e,
    };
    let (name, config) = match kubeconfig {
        Some(path) => {
            let name = path.display().to_string();
            let kubeconfig =
                Kubeconfig::read_from(path).map_err(|e| fail(name.clone(), Box::new(e)))?;
            let config =
                kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                    .await
                    .map_err(|e| fail(name.clone(), Box::new(e)))?;
            (name, config)
        }
        None => {
            let name = "the environment".to_owned();
            let config = kube::Config::infer()
                .await
                .map_err(|e| fail(name.clone(), Box::new(e)))?;
            (name, config)
        }
    };
    let client =
        throttle_aware_client(config.clone(), counters).map_err(|e| fail(name, Box::new(e)))?;
    Ok((client, config))
}

/// `hostname_<unique suffix>`, as controller-runtime does, so that several
/// managers in one process (tests) or one pod are distinct candidates.
pub(super) fn candidate_identity() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{}_{}-{nanos:x}-{}",
        hostname(),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

pub(super) fn pod_namespace() -> String {
    std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        .map(|ns| ns.trim().to_owned())
        .unwrap_or_else(|_| "default".into())
}

fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .unwrap_or_else(|| "concord".into())
}
