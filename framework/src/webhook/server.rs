//! The HTTPS server the API server calls.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio_rustls::TlsAcceptor;

use super::handler::{Answer, Handler, Outcome};
use super::tls::{ReloadingCert, server_config};
use super::{WebhookError, WebhookMetrics, Webhooks};

/// The largest request body read: conversion reviews carry many objects.
const MAX_BODY: usize = 64 << 20;
/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long open connections get to finish their request at shutdown.
const DRAIN: Duration = Duration::from_secs(5);
/// Default for [`WebhookServer::with_header_read_timeout`].
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default for [`WebhookServer::with_body_read_timeout`].
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Default for [`WebhookServer::with_max_connections`].
const MAX_CONNECTIONS: usize = 256;

/// What bounds a client's use of the server.
#[derive(Clone, Copy, Debug)]
struct Limits {
    header_read: Duration,
    body_read: Duration,
    connections: usize,
}

struct Route {
    name: String,
    handler: Arc<dyn Handler>,
}

/// Serves the registered [`Webhooks`] over HTTPS (rustls), at the paths
/// [`Webhooks::paths`] lists, plus `GET /healthz` and `GET /metrics`
/// ([`WebhookMetrics`]).
///
/// Certificates are `tls.crt` and `tls.key` in the cert directory
/// (`--webhook-cert-dir`), re-read when either file changes: the next TLS
/// handshake gets the new pair, connections already open finish with the
/// old one, so rotating certificates drops no request.
///
/// # Guarantees
///
/// - No input panics the server: a body that is not a review gets a 400
///   naming the problem; a review of another kind is denied with a 400 in
///   the review; a panicking validator or defaulter is answered with a 500
///   denial.
/// - A validator that runs past 90% of the webhook's `timeoutSeconds` is
///   abandoned and the request denied with a message saying so, before the
///   API server gives up and applies the failure policy.
/// - No client holds the server: the TLS handshake must finish within
///   10 s, the request headers within the header read timeout (10 s) and
///   the body within the body read timeout (30 s), or the connection is
///   closed (a late body gets a 408 first). At most
///   [`with_max_connections`](Self::with_max_connections) connections
///   (256) are open at once; further clients wait in the listen backlog
///   until one closes.
pub struct WebhookServer {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    cert: Arc<ReloadingCert>,
    routes: Arc<HashMap<String, Route>>,
    metrics: Arc<WebhookMetrics>,
    reload_every: Duration,
    limits: Limits,
}

impl std::fmt::Debug for WebhookServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookServer")
            .field("address", &self.listener.local_addr().ok())
            .field("paths", &self.routes.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl WebhookServer {
    /// Loads the certificates from `cert_dir` and binds `address`.
    ///
    /// # Errors
    ///
    /// [`WebhookError::Registration`] listing every registration problem,
    /// [`WebhookError::Certificate`] naming the file at fault, or
    /// [`WebhookError::Bind`].
    pub async fn bind(
        address: SocketAddr,
        cert_dir: &Path,
        webhooks: Webhooks,
    ) -> Result<Self, WebhookError> {
        if !webhooks.problems.is_empty() {
            return Err(WebhookError::Registration(webhooks.problems));
        }
        let cert = Arc::new(ReloadingCert::load(cert_dir)?);
        let acceptor = TlsAcceptor::from(Arc::new(server_config(cert.clone())?));
        let listener = TcpListener::bind(address)
            .await
            .map_err(|source| WebhookError::Bind {
                address: address.to_string(),
                source,
            })?;
        let routes = webhooks
            .entries
            .into_iter()
            .map(|e| {
                let route = Route {
                    name: e.name,
                    handler: e.handler,
                };
                (e.path, route)
            })
            .collect();
        Ok(WebhookServer {
            listener,
            acceptor,
            cert,
            routes: Arc::new(routes),
            metrics: Arc::new(WebhookMetrics::default()),
            reload_every: Duration::from_secs(1),
            limits: Limits {
                header_read: HEADER_READ_TIMEOUT,
                body_read: BODY_READ_TIMEOUT,
                connections: MAX_CONNECTIONS,
            },
        })
    }

    /// How often the cert directory is checked for new files (default 1 s).
    #[must_use]
    pub fn with_reload_interval(mut self, every: Duration) -> Self {
        self.reload_every = every.max(Duration::from_millis(10));
        self
    }

    /// How long a client may take to send a request's headers, from the
    /// moment the connection is ready for one (default 10 s, at least
    /// 10 ms); a connection that takes longer is closed.
    #[must_use]
    pub fn with_header_read_timeout(mut self, limit: Duration) -> Self {
        self.limits.header_read = limit.max(Duration::from_millis(10));
        self
    }

    /// How long a client may take to send a request's body once its
    /// headers are in (default 30 s, at least 10 ms); a late body is
    /// answered with a 408 and the connection closed.
    #[must_use]
    pub fn with_body_read_timeout(mut self, limit: Duration) -> Self {
        self.limits.body_read = limit.max(Duration::from_millis(10));
        self
    }

    /// How many connections may be open at once (default 256, at least 1);
    /// the server accepts no more until one closes.
    #[must_use]
    pub fn with_max_connections(mut self, limit: usize) -> Self {
        self.limits.connections = limit.max(1);
        self
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// The server's counters and latencies.
    pub fn metrics(&self) -> Arc<WebhookMetrics> {
        self.metrics.clone()
    }

    /// Serves until `stop` completes, then lets open connections finish
    /// their request (up to 5 s) and returns.
    pub async fn serve(self, stop: impl Future<Output = ()> + Send) {
        let (stopping, stopped) = watch::channel(false);
        let cert = self.cert.clone();
        let every = self.reload_every;
        let reload = tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                match cert.poll() {
                    Ok(true) => tracing::info!("webhook certificate reloaded"),
                    Ok(false) => {}
                    Err(error) => {
                        tracing::warn!(%error, "keeping the previous webhook certificate")
                    }
                }
            }
        });
        tokio::pin!(stop);
        let slots = Arc::new(Semaphore::new(self.limits.connections));
        loop {
            // A slot first, then a connection: when every slot is taken,
            // new clients wait in the kernel's backlog rather than in
            // memory here.
            let slot = tokio::select! {
                () = &mut stop => break,
                slot = slots.clone().acquire_owned() => match slot {
                    Ok(slot) => slot,
                    Err(_closed) => break,
                },
            };
            tokio::select! {
                () = &mut stop => break,
                accepted = self.listener.accept() => {
                    let Ok((tcp, _)) = accepted else {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    };
                    let _ = tcp.set_nodelay(true);
                    let served = connection(
                        tcp,
                        self.acceptor.clone(),
                        self.routes.clone(),
                        self.metrics.clone(),
                        stopped.clone(),
                        self.limits,
                    );
                    tokio::spawn(async move {
                        served.await;
                        drop(slot);
                    });
                }
            }
        }
        reload.abort();
        stopping.send_replace(true);
        drop(self.listener);
        // Give connections their drain time before the caller moves on.
        let deadline = Instant::now() + DRAIN;
        while stopping.receiver_count() > 1 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn connection(
    tcp: TcpStream,
    acceptor: TlsAcceptor,
    routes: Arc<HashMap<String, Route>>,
    metrics: Arc<WebhookMetrics>,
    mut stop: watch::Receiver<bool>,
    limits: Limits,
) {
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(error)) => {
            tracing::debug!(%error, "webhook TLS handshake failed");
            return;
        }
        Err(_) => return,
    };
    let service = service_fn(move |request| {
        let routes = routes.clone();
        let metrics = metrics.clone();
        async move { Ok::<_, Infallible>(answer(request, &routes, &metrics, limits.body_read).await) }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read)
        .keep_alive(true)
        .serve_connection(TokioIo::new(tls), service);
    tokio::pin!(conn);
    tokio::select! {
        result = conn.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(%error, "webhook connection ended");
            }
        }
        () = async { let _ = stop.wait_for(|s| *s).await; } => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(DRAIN, conn).await;
        }
    }
}

async fn answer(
    request: Request<Incoming>,
    routes: &HashMap<String, Route>,
    metrics: &WebhookMetrics,
    body_read: Duration,
) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_owned();
    match (request.method(), path.as_str(), routes.get(&path)) {
        (&Method::POST, _, Some(route)) => {
            let read = Limited::new(request.into_body(), MAX_BODY).collect();
            let body = match tokio::time::timeout(body_read, read).await {
                Ok(Ok(body)) => body.to_bytes(),
                Ok(Err(e)) => {
                    let answer = Answer::bad_request(format!("cannot read the request body: {e}"));
                    metrics.record(&route.name, Outcome::Invalid, Duration::ZERO);
                    return respond(answer.status, "application/json", answer.body);
                }
                Err(_elapsed) => {
                    let message = format!(
                        "the request body did not arrive within {} ms",
                        body_read.as_millis()
                    );
                    let answer = Answer::status(408, "Timeout", message, Outcome::Invalid);
                    metrics.record(&route.name, Outcome::Invalid, Duration::ZERO);
                    let mut response = respond(answer.status, "application/json", answer.body);
                    // The rest of the body may never come: do not wait
                    // for it to reuse the connection.
                    response.headers_mut().insert(
                        hyper::header::CONNECTION,
                        hyper::header::HeaderValue::from_static("close"),
                    );
                    return response;
                }
            };
            let started = Instant::now();
            let answer = route.handler.handle(&body).await;
            metrics.record(&route.name, answer.outcome, started.elapsed());
            respond(answer.status, "application/json", answer.body)
        }
        (_, _, Some(_)) => {
            let answer = Answer::status(
                405,
                "MethodNotAllowed",
                format!("{path} takes POST"),
                Outcome::Invalid,
            );
            respond(answer.status, "application/json", answer.body)
        }
        (&Method::GET, "/healthz" | "/readyz", None) => respond(200, "text/plain", b"ok".to_vec()),
        (&Method::GET, "/metrics", None) => respond(
            200,
            "text/plain; version=0.0.4",
            metrics.render().into_bytes(),
        ),
        _ => {
            let answer = Answer::status(
                404,
                "NotFound",
                format!("no webhook is served at {path}"),
                Outcome::Invalid,
            );
            respond(answer.status, "application/json", answer.body)
        }
    }
}

fn respond(status: u16, content_type: &'static str, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}
