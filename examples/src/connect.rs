use std::net::IpAddr;
use std::path::{Path, PathBuf};

use concord_testenv::{ControlPlane, ControlPlaneOptions};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// A client and, when the examples started one, the control plane behind it.
pub struct Connection {
    /// A client for the cluster.
    pub client: Client,
    /// Where the client points, for messages.
    pub server: String,
    /// The kubeconfig the client was built from (the embedded control
    /// plane's own when it runs), for programs that start more clients.
    pub kubeconfig: PathBuf,
    /// The embedded control plane, stopped when this is dropped.
    pub control_plane: Option<ControlPlane>,
}

/// The flag that lets the examples and benchmarks create objects on a
/// cluster that is not on this machine.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct RemoteConsent {
    /// Allow creating pods (and the other objects of this program) on a
    /// cluster whose server is not a loopback address; the value must be
    /// the kubeconfig's current context, exactly.
    #[arg(long = "yes-create-pods-in", value_name = "CONTEXT")]
    pub yes_create_pods_in: Option<String>,
}

/// Connects to the cluster of `kubeconfig` when one is given, else starts
/// the embedded control plane (building it on first use).
///
/// `$KUBECONFIG` is never read: a program that creates thousands of pods
/// must not land on whatever cluster a shell happens to export. When it is
/// set, one line on stderr says it is ignored and how to use it.
///
/// A kubeconfig whose server is not a loopback address is refused unless
/// `consent` names its current context; the refusal comes before any
/// request, so nothing is created.
///
/// # Errors
///
/// When the kubeconfig is unusable, names a remote server without the
/// matching consent, or the control plane cannot start.
pub async fn connect(
    kubeconfig: Option<PathBuf>,
    consent: &RemoteConsent,
) -> anyhow::Result<Connection> {
    let (path, control_plane) = match kubeconfig {
        Some(path) => (path, None),
        None => {
            if let Some(ignored) = std::env::var_os("KUBECONFIG") {
                eprintln!(
                    "ignoring $KUBECONFIG ({}): running on the embedded control plane; to run on that cluster, pass --kubeconfig \"$KUBECONFIG\"",
                    Path::new(&ignored).display()
                );
            }
            tracing::info!("no --kubeconfig given: starting the embedded control plane");
            let cp =
                tokio::task::spawn_blocking(|| ControlPlane::start(ControlPlaneOptions::default()))
                    .await??;
            (cp.kubeconfig_path().to_path_buf(), Some(cp))
        }
    };
    let kubeconfig = Kubeconfig::read_from(&path)
        .map_err(|e| anyhow::anyhow!("kubeconfig {}: {e}", path.display()))?;
    let context = kubeconfig.current_context.clone().unwrap_or_default();
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| anyhow::anyhow!("kubeconfig {}: {e}", path.display()))?;
    let server = config.cluster_url.to_string();
    if control_plane.is_none() {
        check_consent(&config, &server, &context, &path, consent)?;
    }
    let client = Client::try_from(config)?;
    Ok(Connection {
        client,
        server,
        kubeconfig: path,
        control_plane,
    })
}

/// Refuses a remote server unless `consent` names `context`.
fn check_consent(
    config: &Config,
    server: &str,
    context: &str,
    path: &Path,
    consent: &RemoteConsent,
) -> anyhow::Result<()> {
    let host = config.cluster_url.host().unwrap_or_default();
    if is_loopback(host) {
        return Ok(());
    }
    match consent.yes_create_pods_in.as_deref() {
        Some(allowed) if allowed == context => Ok(()),
        Some(allowed) => anyhow::bail!(
            "--yes-create-pods-in {allowed:?} does not name the current context {context:?} of kubeconfig {} (server {server}); nothing was created",
            path.display()
        ),
        None => anyhow::bail!(
            "refusing to create pods on {server} (context {context:?} of kubeconfig {}): it is not a loopback address; nothing was created. To run there, pass --yes-create-pods-in {context:?}",
            path.display()
        ),
    }
}

/// Whether `host` (of a URL: an IPv6 address in brackets) is this machine.
fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{RemoteConsent, check_consent, is_loopback};

    fn check(server: &str, consent: Option<&str>) -> Result<(), String> {
        let config = kube::Config::new(server.parse().map_err(|e| format!("{e}"))?);
        let consent = RemoteConsent {
            yes_create_pods_in: consent.map(str::to_owned),
        };
        check_consent(&config, server, "far", Path::new("kc.yaml"), &consent)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_loopback_server_needs_no_consent() {
        assert_eq!(check("https://127.0.0.1:6443", None), Ok(()));
        assert_eq!(check("https://[::1]:6443", None), Ok(()));
        assert_eq!(check("https://localhost:6443", None), Ok(()));
    }

    #[test]
    fn a_remote_server_is_refused_without_consent_naming_server_and_context() {
        let err = check("https://10.255.255.1:6443", None).unwrap_err();
        assert!(
            err.starts_with("refusing to create pods on https://10.255.255.1:6443"),
            "{err}"
        );
        assert!(
            err.contains("context \"far\" of kubeconfig kc.yaml"),
            "{err}"
        );
        assert!(err.contains("--yes-create-pods-in \"far\""), "{err}");
    }

    #[test]
    fn consent_must_name_the_current_context_exactly() {
        let err = check("https://10.255.255.1:6443", Some("near")).unwrap_err();
        assert!(
            err.contains("\"near\" does not name the current context \"far\""),
            "{err}"
        );
        assert_eq!(check("https://10.255.255.1:6443", Some("far")), Ok(()));
    }

    #[test]
    fn only_this_machine_is_loopback() {
        for host in ["127.0.0.1", "127.1.2.3", "localhost", "LOCALHOST", "[::1]"] {
            assert!(is_loopback(host), "{host}");
        }
        for host in [
            "10.255.255.1",
            "192.0.2.10",
            "[2001:db8::1]",
            "localhost.example.com",
            "kubernetes.default.svc",
            "",
        ] {
            assert!(!is_loopback(host), "{host}");
        }
    }
}
