//! What the webhook test binaries share: a test CA, a served webhook
//! registered with the real API server, a raw HTTPS client.
#![allow(dead_code, unreachable_pub)]

pub mod gizmo;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use concord::webhook::{WebhookClient, Webhooks};
use concord_testenv::{TestCa, TestEnv};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Only objects in namespace `ns` go to the webhook, so that tests sharing
/// one API server do not see each other's webhooks.
pub fn only_namespace(ns: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some([("kubernetes.io/metadata.name".to_owned(), ns.to_owned())].into()),
        ..LabelSelector::default()
    }
}

/// A fresh CA and `tls.crt`/`tls.key` for 127.0.0.1 in a temporary directory.
pub fn certs() -> Result<(TestCa, tempfile::TempDir)> {
    let ca = TestCa::new()?;
    let dir = tempfile::tempdir()?;
    ca.serving_cert(&["127.0.0.1"])?.write_to(dir.path())?;
    Ok((ca, dir))
}

/// Creates the generated webhook configurations (named `name`) pointing at
/// `address`, trusted through `ca`.
pub async fn register(
    client: &Client,
    webhooks: &Webhooks,
    name: &str,
    address: SocketAddr,
    ca: &TestCa,
) -> Result<()> {
    let target = WebhookClient::url(format!("https://{address}"))
        .with_ca_bundle(ca.pem().as_bytes().to_vec())
        .with_configuration_name(name);
    if let Some(config) = webhooks.validating_configuration(&target) {
        Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .create(&PostParams::default(), &config)
            .await?;
    }
    if let Some(config) = webhooks.mutating_configuration(&target) {
        Api::<MutatingWebhookConfiguration>::all(client.clone())
            .create(&PostParams::default(), &config)
            .await?;
    }
    Ok(())
}

/// Deletes the configurations `register` made (best effort).
pub async fn unregister(client: &Client, name: &str) {
    let _ = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await;
    let _ = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await;
}

/// Polls `check` every 100 ms until it holds or `limit` passes.
pub async fn eventually<F, Fut>(limit: Duration, what: &str, mut check: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while start.elapsed() < limit {
        if check().await {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("timed out after {limit:?} waiting for {what}")
}

/// The shared control plane's admin client.
pub fn admin() -> Result<Client> {
    Ok(TestEnv::shared()?.client()?)
}

/// A raw HTTPS POST (or GET with an empty body) to the webhook server,
/// trusting `ca`: the status code, the body and the server's certificate.
pub async fn https(
    address: SocketAddr,
    ca: &str,
    method: &str,
    path: &str,
    body: &[u8],
) -> Result<(u16, String, Vec<u8>)> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots.add(cert?)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(address).await?;
    let name = ServerName::try_from("127.0.0.1")?;
    let mut tls = connector
        .connect(name, tcp)
        .await
        .context("TLS handshake")?;
    let peer = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.as_ref().to_vec())
        .unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await?;
    tls.write_all(body).await?;
    let mut response = Vec::new();
    let _ = tls.read_to_end(&mut response).await;
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("no status line")?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body, peer))
}
