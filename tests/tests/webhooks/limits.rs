//! The webhook port as a public-facing TLS server: clients that stall in
//! their headers or body are cut off within the configured time, the
//! number of open connections is bounded, and the API server's calls are
//! answered meanwhile; the limits set on `ManagerBuilder` are the ones the
//! manager's server applies, and limits out of range are refused.
//!
//! ```text
//! cargo test -p concord-tests --test webhooks admission::limits::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use concord::webhook::{WebhookError, WebhookLimits, WebhookOptions, WebhookServer};
use concord::{Error, Manager, ManagerArgs};
use concord_testenv::TestEnv;
use kube::CustomResourceExt;
use kube::api::{Api, PostParams};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use support::gizmo::{Gizmo, gizmo, webhooks};
use support::{admin, certs, eventually, https, register, unregister};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

const LIMIT: Duration = Duration::from_secs(1);

/// A TLS connection to `address`, handshake done, nothing sent.
async fn connect(address: SocketAddr, ca: &str) -> Result<TlsStream<TcpStream>> {
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
    Ok(connector
        .connect(ServerName::try_from("127.0.0.1")?, tcp)
        .await?)
}

/// Reads until the server closes the connection (bounded by 20 s): what
/// it sent, and how long it took.
/// A connection that has sent a request's headers and the start of a
/// 1,000-byte body, and nothing more.
async fn stalled_in_body(address: SocketAddr, ca: &str) -> Result<TlsStream<TcpStream>> {
    let mut tls = connect(address, ca).await?;
    tls.write_all(
        b"POST /validate-webhooks-test-concord-dev-v1-gizmo HTTP/1.1\r\nhost: 127.0.0.1\r\n\
          content-type: application/json\r\ncontent-length: 1000\r\n\r\n{\"apiVersion\":",
    )
    .await?;
    Ok(tls)
}

/// Waits until the API server's admission call for a Gizmo out of bounds
/// is answered by the validator, with a denial.
async fn validator_denies(api: &Api<Gizmo>) -> Result<()> {
    eventually(Duration::from_secs(30), "the validator to deny", || async {
        matches!(api.create(&PostParams::default(), &gizmo("big", 500)).await,
                 Err(kube::Error::Api(s)) if s.message.contains("spec.size must be"))
    })
    .await
}

async fn until_closed(tls: &mut TlsStream<TcpStream>) -> (String, Duration) {
    let start = Instant::now();
    let mut seen = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), tls.read_to_end(&mut seen)).await;
    (String::from_utf8_lossy(&seen).into_owned(), start.elapsed())
}

#[tokio::test]
async fn stalled_clients_are_cut_off_while_the_api_server_is_served() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    env.install_crd(Gizmo::crd()).await?;
    let (ca, dir) = certs()?;
    let hooks = webhooks(ns.name(), WebhookOptions::new());
    let server = WebhookServer::bind("127.0.0.1:0".parse()?, dir.path(), hooks.clone())
        .await?
        .with_header_read_timeout(LIMIT)
        .with_body_read_timeout(LIMIT)
        .with_max_connections(8);
    let address = server.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.serve(async {
        let _ = stopped.await;
    }));
    let name = format!("limits-{}", ns.name());
    register(&admin()?, &hooks, &name, address, &ca).await?;
    let pem = ca.pem().to_owned();

    // One client stops halfway through its headers, one halfway through
    // its body.
    let mut in_headers = connect(address, &pem).await?;
    in_headers
        .write_all(b"POST /validate-webhooks-test-concord-dev-v1-gizmo HTTP/1.1\r\nhost: 127.0")
        .await?;
    let mut in_body = stalled_in_body(address, &pem).await?;
    let stalled_headers = tokio::spawn(async move { until_closed(&mut in_headers).await });
    let stalled_body = tokio::spawn(async move { until_closed(&mut in_body).await });

    // Meanwhile the API server's calls are answered: a Gizmo out of
    // bounds is denied by the validator, a good one defaulted.
    let api: Api<Gizmo> = Api::namespaced(ns.client(), ns.name());
    validator_denies(&api).await?;
    let created = api
        .create(&PostParams::default(), &gizmo("fine", 5))
        .await?;
    assert_eq!(created.spec.color.as_deref(), Some("blue"));

    let (seen, took) = stalled_headers.await?;
    assert!(
        took < LIMIT * 4,
        "a client stalled in its headers was closed after {took:?}"
    );
    assert!(!seen.contains("200 OK"), "{seen}");
    let (seen, took) = stalled_body.await?;
    assert!(
        took < LIMIT * 4,
        "a client stalled in its body was closed after {took:?}"
    );
    assert!(seen.starts_with("HTTP/1.1 408"), "{seen}");
    assert!(seen.contains("did not arrive within 1000 ms"), "{seen}");

    unregister(&admin()?, &name).await;
    let _ = stop.send(());
    serving.await?;
    Ok(())
}

#[tokio::test]
async fn open_connections_are_bounded() -> Result<()> {
    let (ca, dir) = certs()?;
    let server = WebhookServer::bind(
        "127.0.0.1:0".parse()?,
        dir.path(),
        webhooks("unused", WebhookOptions::new()),
    )
    .await?
    .with_header_read_timeout(LIMIT)
    .with_max_connections(2);
    let address = server.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.serve(async {
        let _ = stopped.await;
    }));
    let pem = ca.pem().to_owned();

    // Two idle clients take both slots...
    let first = connect(address, &pem).await?;
    let second = connect(address, &pem).await?;
    // ...so a third is only served once the header timeout frees one.
    let start = Instant::now();
    let (status, body, _) = tokio::time::timeout(
        Duration::from_secs(20),
        https(address, &pem, "GET", "/healthz", b""),
    )
    .await??;
    let took = start.elapsed();
    assert_eq!(status, 200, "{body}");
    assert!(
        took >= LIMIT / 2,
        "served after {took:?}: the two open connections did not hold the slots"
    );
    assert!(took < LIMIT * 10, "served after {took:?}");
    drop((first, second));

    // With slots free, a request is answered at once.
    let start = Instant::now();
    let (status, _, _) = https(address, &pem, "GET", "/healthz", b"").await?;
    assert_eq!(status, 200);
    assert!(start.elapsed() < LIMIT / 2, "{:?}", start.elapsed());

    let _ = stop.send(());
    serving.await?;
    Ok(())
}

/// Sends `lines` header lines, one every `every`, then (when `finish`)
/// the blank line ending the headers; reads until the server closes.
/// What the server sent, and how long after the first line it closed.
async fn trickle(
    address: SocketAddr,
    ca: &str,
    lines: usize,
    every: Duration,
    finish: bool,
) -> Result<(String, Duration)> {
    let tls = connect(address, ca).await?;
    let (mut read, mut write) = tokio::io::split(tls);
    let start = Instant::now();
    let writing = tokio::spawn(async move {
        let head = "GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n";
        if write.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        for i in 0..lines {
            tokio::time::sleep(every).await;
            let line = format!("x-slow-{i}: yes\r\n");
            if write.write_all(line.as_bytes()).await.is_err() {
                return;
            }
        }
        if finish {
            let _ = write.write_all(b"\r\n").await;
        }
        // Keep the write half open until the server answers or closes.
        tokio::time::sleep(Duration::from_secs(20)).await;
    });
    let mut seen = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), read.read_to_end(&mut seen)).await;
    let took = start.elapsed();
    writing.abort();
    Ok((String::from_utf8_lossy(&seen).into_owned(), took))
}

#[tokio::test]
async fn the_manager_serves_webhooks_within_the_limits_set_on_its_builder() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    env.install_crd(Gizmo::crd()).await?;
    let (ca, dir) = certs()?;
    let hooks = webhooks(ns.name(), WebhookOptions::new());
    // ANCHOR: builder_limits
    let manager = Manager::builder("webhook-limits")
        .with_client(env.client()?)
        .with_args(ManagerArgs::new().with_webhook_server("127.0.0.1:0", dir.path()))
        .with_signal_handling(false)
        .with_webhooks(hooks.clone())
        .with_webhook_limits(
            WebhookLimits::new()
                .with_header_read_timeout(Duration::from_secs(2))
                .with_body_read_timeout(Duration::from_millis(1500))
                .with_max_connections(16),
        )
        .build()
        .await?;
    // ANCHOR_END: builder_limits
    let address = manager.webhook_address().unwrap();
    let shutdown = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    let name = format!("builder-limits-{}", ns.name());
    register(&admin()?, &hooks, &name, address, &ca).await?;
    let pem = ca.pem().to_owned();

    // Header lines every 250 ms: eleven of them take longer than the
    // 2 s header read timeout, three do not.
    let slow = tokio::spawn({
        let pem = pem.clone();
        async move { trickle(address, &pem, 11, Duration::from_millis(250), true).await }
    });
    let fast = tokio::spawn({
        let pem = pem.clone();
        async move { trickle(address, &pem, 3, Duration::from_millis(250), true).await }
    });
    // A body that stops halfway.
    let mut in_body = stalled_in_body(address, &pem).await?;
    let stalled_body = tokio::spawn(async move { until_closed(&mut in_body).await });

    // The API server's calls are answered meanwhile.
    let api: Api<Gizmo> = Api::namespaced(ns.client(), ns.name());
    validator_denies(&api).await?;

    let (seen, took) = slow.await??;
    assert!(
        !seen.contains("200 OK"),
        "headers sent over {took:?} were served: {seen}"
    );
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_secs(6),
        "headers still arriving were cut off after {took:?}, not at the 2 s set"
    );
    let (seen, took) = fast.await??;
    assert!(
        seen.starts_with("HTTP/1.1 200"),
        "headers sent within {took:?} were not served: {seen}"
    );
    let (seen, took) = stalled_body.await?;
    assert!(seen.starts_with("HTTP/1.1 408"), "{seen}");
    assert!(seen.contains("did not arrive within 1500 ms"), "{seen}");
    assert!(
        took < Duration::from_secs(6),
        "a stalled body was cut off after {took:?}"
    );

    unregister(&admin()?, &name).await;
    shutdown.shutdown();
    running.await??;
    Ok(())
}

#[tokio::test]
async fn the_builder_refuses_webhook_limits_out_of_range() -> Result<()> {
    let (_ca, dir) = certs()?;
    // A client that reaches nothing: the limits are refused before any
    // request is sent.
    let unreachable = kube::Config::new("https://127.0.0.1:1".parse()?);
    let built = Manager::builder("webhook-limits")
        .with_kube_config(unreachable)
        .with_args(ManagerArgs::new().with_webhook_server("127.0.0.1:0", dir.path()))
        .with_signal_handling(false)
        .with_webhooks(webhooks("unused", WebhookOptions::new()))
        .with_webhook_limits(
            WebhookLimits::new()
                .with_header_read_timeout(Duration::ZERO)
                .with_max_connections(usize::MAX),
        )
        .build()
        .await;
    let Err(error) = built else {
        panic!("limits out of range were accepted");
    };
    assert!(
        matches!(&error, Error::Webhook(WebhookError::Limits(problems)) if problems.len() == 2),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!(
            "invalid webhook server limits: the header read timeout must be from 10ms to 300s, \
             found 0ns; the connection limit must be from 1 to 65536, found {}",
            usize::MAX
        )
    );

    // The server alone refuses them too, naming each.
    let server = WebhookServer::bind(
        "127.0.0.1:0".parse()?,
        dir.path(),
        webhooks("unused", WebhookOptions::new()),
    )
    .await?;
    let refused = server
        .try_with_limits(WebhookLimits::new().with_body_read_timeout(Duration::from_secs(3600)));
    let Err(WebhookError::Limits(problems)) = refused else {
        panic!("a body read timeout of an hour was accepted");
    };
    assert_eq!(
        problems,
        ["the body read timeout must be from 10ms to 300s, found 3600s"]
    );
    Ok(())
}
