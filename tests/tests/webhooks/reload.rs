//! Certificate rotation under load: the webhook server's `tls.crt` and
//! `tls.key` are swapped the way kubelet updates a Secret volume (new
//! files in a fresh directory, then an atomic rename of the `..data`
//! symlink) while four clients keep admission requests going; no request
//! fails, and every connection opened after the server first presented
//! the new certificate presents it too. A pair written file by file (key
//! first) keeps the old pair in service until both fit. No API server is
//! needed: the clients speak HTTPS to the server directly.
//!
//! ```text
//! cargo test -p concord-tests --test webhooks admission::reload::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use concord::webhook::{Validator, WebhookOptions, WebhookServer, Webhooks};
use concord_testenv::{ServingCert, TestCa};
use k8s_openapi::api::core::v1::ConfigMap;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tokio_rustls::client::TlsStream;

/// Requests in all, spread over the clients.
const REQUESTS: usize = 300;
const CLIENTS: usize = 4;
/// Each client opens a new connection after this many requests on one,
/// so that both new handshakes and reused connections straddle the swap.
const PER_CONNECTION: usize = 5;
/// The swap happens once this many requests have been answered.
const SWAP_AFTER: usize = 100;
const PATH: &str = "/validate--v1-configmap";

/// Admits everything: the test is about the transport.
struct Admit;

#[concord::async_trait]
impl Validator<ConfigMap> for Admit {}

// ANCHOR: swap
/// Writes `cert` the way kubelet projects a Secret: the files in a fresh
/// `..<stamp>` directory, `..data` pointing at it (swapped by an atomic
/// rename), and `tls.crt`/`tls.key` pointing through `..data`.
fn project(dir: &Path, stamp: &str, cert: &ServingCert) -> Result<()> {
    let fresh = dir.join(format!("..{stamp}"));
    std::fs::create_dir(&fresh)?;
    std::fs::write(fresh.join("tls.crt"), &cert.cert_pem)?;
    std::fs::write(fresh.join("tls.key"), &cert.key_pem)?;
    let old = std::fs::read_link(dir.join("..data")).ok();
    std::os::unix::fs::symlink(format!("..{stamp}"), dir.join("..data_tmp"))?;
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data"))?;
    for name in ["tls.crt", "tls.key"] {
        if !dir.join(name).is_symlink() {
            std::os::unix::fs::symlink(format!("..data/{name}"), dir.join(name))?;
        }
    }
    if let Some(old) = old {
        std::fs::remove_dir_all(dir.join(old))?;
    }
    Ok(())
}
// ANCHOR_END: swap

fn der(pem: &str) -> Result<Vec<u8>> {
    Ok(CertificateDer::from_pem_slice(pem.as_bytes())?
        .as_ref()
        .to_vec())
}

/// One keep-alive HTTPS connection, when its handshake started and ended.
struct Connection {
    tls: BufReader<TlsStream<TcpStream>>,
    started: Instant,
    handshaken: Instant,
    peer: Vec<u8>,
}

impl Connection {
    async fn open(address: std::net::SocketAddr, ca: &str) -> Result<Self> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from_pem_slice(ca.as_bytes())?)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let started = Instant::now();
        let tcp = TcpStream::connect(address).await?;
        // As Go's clients (the API server's) do.
        tcp.set_nodelay(true)?;
        let tls = connector
            .connect(ServerName::try_from("127.0.0.1")?, tcp)
            .await
            .context("TLS handshake")?;
        let peer = tls
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| c.as_ref().to_vec())
            .unwrap_or_default();
        Ok(Connection {
            tls: BufReader::new(tls),
            started,
            handshaken: Instant::now(),
            peer,
        })
    }

    /// POSTs `body` and returns the answer's status and body.
    async fn post(&mut self, body: &[u8]) -> Result<(u16, Vec<u8>)> {
        let head = format!(
            "POST {PATH} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let stream = self.tls.get_mut();
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body).await?;
        stream.flush().await?;
        let mut status_line = String::new();
        self.tls.read_line(&mut status_line).await?;
        let status = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("no status line in {status_line:?}"))?;
        let mut length = 0;
        loop {
            let mut line = String::new();
            if self.tls.read_line(&mut line).await? == 0 {
                bail!("connection closed in the headers");
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse()?;
            }
        }
        let mut answer = vec![0; length];
        self.tls.read_exact(&mut answer).await?;
        Ok((status, answer))
    }
}

/// What one request saw.
struct Seen {
    connection_started: Instant,
    handshaken: Instant,
    peer: Vec<u8>,
    result: Result<(), String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_are_swapped_without_dropping_a_request() -> Result<()> {
    let ca = TestCa::new()?;
    let (first, second) = (
        ca.serving_cert(&["127.0.0.1"])?,
        ca.serving_cert(&["127.0.0.1"])?,
    );
    let (first_der, second_der) = (der(&first.cert_pem)?, der(&second.cert_pem)?);
    assert_ne!(first_der, second_der);
    let dir = tempfile::tempdir()?;
    project(dir.path(), "first", &first)?;

    let webhooks = Webhooks::new().with_validator::<ConfigMap, _>(Admit, WebhookOptions::new());
    let server = WebhookServer::bind("127.0.0.1:0".parse()?, dir.path(), webhooks)
        .await?
        .with_reload_interval(Duration::from_millis(20));
    let address = server.local_addr().unwrap();
    let metrics = server.metrics();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.serve(async move {
        let _ = stopped.await;
    }));

    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "operation": "CREATE", "userInfo": {},
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
        }
    })
    .to_string()
    .into_bytes();
    let issued = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::<Seen>::with_capacity(REQUESTS)));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (issued, answered, seen) = (issued.clone(), answered.clone(), seen.clone());
            let (ca, review) = (ca.pem().to_owned(), review.clone());
            tokio::spawn(async move {
                let mut connection: Option<(Connection, usize)> = None;
                while issued.fetch_add(1, Ordering::SeqCst) < REQUESTS {
                    if connection
                        .as_ref()
                        .is_none_or(|(_, n)| *n >= PER_CONNECTION)
                    {
                        connection = match Connection::open(address, &ca).await {
                            Ok(c) => Some((c, 0)),
                            Err(e) => {
                                seen.lock().await.push(Seen {
                                    connection_started: Instant::now(),
                                    handshaken: Instant::now(),
                                    peer: Vec::new(),
                                    result: Err(format!("{e:#}")),
                                });
                                answered.fetch_add(1, Ordering::SeqCst);
                                continue;
                            }
                        };
                    }
                    let (conn, used) = connection.as_mut().unwrap();
                    *used += 1;
                    let result = match conn.post(&review).await {
                        Ok((200, body)) => {
                            let answer: serde_json::Value =
                                serde_json::from_slice(&body).unwrap_or_default();
                            if answer["response"]["allowed"] == true {
                                Ok(())
                            } else {
                                Err(format!("not allowed: {answer}"))
                            }
                        }
                        Ok((status, body)) => {
                            Err(format!("{status}: {}", String::from_utf8_lossy(&body)))
                        }
                        Err(e) => Err(format!("{e:#}")),
                    };
                    if result.is_err() {
                        *used = PER_CONNECTION;
                    }
                    seen.lock().await.push(Seen {
                        connection_started: conn.started,
                        handshaken: conn.handshaken,
                        peer: conn.peer.clone(),
                        result,
                    });
                    answered.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();

    while answered.load(Ordering::SeqCst) < SWAP_AFTER {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    project(dir.path(), "second", &second)?;
    for client in clients {
        client.await?;
    }

    let seen = seen.lock().await;
    assert_eq!(seen.len(), REQUESTS);
    let failures: Vec<_> = seen
        .iter()
        .filter_map(|s| s.result.as_ref().err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} failed: {failures:?}",
        failures.len()
    );
    let on_first = seen.iter().filter(|s| s.peer == first_der).count();
    let on_second = seen.iter().filter(|s| s.peer == second_der).count();
    assert_eq!(on_first + on_second, REQUESTS, "only the two certificates");
    assert!(on_first >= SWAP_AFTER, "before the swap: {on_first}");
    assert!(on_second > 0, "the new certificate was never presented");
    // Once a handshake ended with the new certificate, every connection
    // opened after it got it too: no handshake falls back to the old pair.
    let switched = seen
        .iter()
        .filter(|s| s.peer == second_der)
        .map(|s| s.handshaken)
        .min()
        .unwrap();
    let stale: Vec<_> = seen
        .iter()
        .filter(|s| s.peer == first_der && s.connection_started > switched)
        .collect();
    assert!(
        stale.is_empty(),
        "{} requests on the old certificate after the switch",
        stale.len()
    );
    assert_eq!(
        Connection::open(address, ca.pem()).await?.peer,
        second_der,
        "a connection opened now"
    );
    assert_eq!(
        metrics.requests("validate.configmaps.core.k8s.io", "allowed"),
        REQUESTS as u64
    );

    let _ = stop.send(());
    serving.await?;
    Ok(())
}

/// A writer that is not atomic (a key copied in before its certificate)
/// leaves a pair that does not fit for a while: the server keeps serving
/// the old pair until both files fit, then switches.
#[tokio::test]
async fn a_half_written_pair_keeps_the_old_certificate_in_service() -> Result<()> {
    let ca = TestCa::new()?;
    let (first, second) = (
        ca.serving_cert(&["127.0.0.1"])?,
        ca.serving_cert(&["127.0.0.1"])?,
    );
    let (first_der, second_der) = (der(&first.cert_pem)?, der(&second.cert_pem)?);
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("tls.crt"), &first.cert_pem)?;
    std::fs::write(dir.path().join("tls.key"), &first.key_pem)?;
    let webhooks = Webhooks::new().with_validator::<ConfigMap, _>(Admit, WebhookOptions::new());
    let every = Duration::from_millis(20);
    let server = WebhookServer::bind("127.0.0.1:0".parse()?, dir.path(), webhooks)
        .await?
        .with_reload_interval(every);
    let address = server.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.serve(async move {
        let _ = stopped.await;
    }));

    std::fs::write(dir.path().join("tls.key"), &second.key_pem)?;
    // Many reload checks see the new key beside the old certificate.
    tokio::time::sleep(every * 10).await;
    let mut conn = Connection::open(address, ca.pem()).await?;
    assert_eq!(conn.peer, first_der, "the old pair stays in service");
    let (status, _) = conn.post(b"{}").await?;
    assert_eq!(status, 400, "and answers");

    std::fs::write(dir.path().join("tls.crt"), &second.cert_pem)?;
    let start = Instant::now();
    loop {
        if Connection::open(address, ca.pem()).await?.peer == second_der {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the new pair never served"
        );
        tokio::time::sleep(every).await;
    }
    let _ = stop.send(());
    serving.await?;
    Ok(())
}
