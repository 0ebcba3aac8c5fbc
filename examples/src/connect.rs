use std::path::PathBuf;

use concord_testenv::{ControlPlane, ControlPlaneOptions};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// A client and, when the examples started one, the control plane behind it.
pub struct Connection {
    /// A client for the cluster.
    pub client: Client,
    /// Where the client points, for messages.
    pub server: String,
    /// The embedded control plane, stopped when this is dropped.
    pub control_plane: Option<ControlPlane>,
}

/// Connects to the cluster of `kubeconfig`, else of `$KUBECONFIG`, else
/// starts the embedded control plane (building it on first use).
///
/// # Errors
///
/// When the kubeconfig is unusable or the control plane cannot start.
pub async fn connect(kubeconfig: Option<PathBuf>) -> anyhow::Result<Connection> {
    let path = kubeconfig.or_else(|| std::env::var_os("KUBECONFIG").map(PathBuf::from));
    let (path, control_plane) = match path {
        Some(path) => (path, None),
        None => {
            tracing::info!("no kubeconfig configured: starting the embedded control plane");
            let cp =
                tokio::task::spawn_blocking(|| ControlPlane::start(ControlPlaneOptions::default()))
                    .await??;
            (cp.kubeconfig_path().to_path_buf(), Some(cp))
        }
    };
    let kubeconfig = Kubeconfig::read_from(&path)
        .map_err(|e| anyhow::anyhow!("kubeconfig {}: {e}", path.display()))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| anyhow::anyhow!("kubeconfig {}: {e}", path.display()))?;
    let server = config.cluster_url.to_string();
    let client = Client::try_from(config)?;
    Ok(Connection {
        client,
        server,
        control_plane,
    })
}
