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
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
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
pub struct WebhookServer {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    cert: Arc<ReloadingCert>,
    routes: Arc<HashMap<String, Route>>,
    metrics: Arc<WebhookMetrics>,
    reload_every: Duration,
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
        })
    }

    /// How often the cert directory is checked for new files (default 1 s).
    #[must_use]
    pub fn with_reload_interval(mut self, every: Duration) -> Self {
        self.reload_every = every.max(Duration::from_millis(10));
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
        loop {
            tokio::select! {
                () = &mut stop => break,
                accepted = self.listener.accept() => {
                    let Ok((tcp, _)) = accepted else {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    };
                    let _ = tcp.set_nodelay(true);
                    tokio::spawn(connection(
                        tcp,
                        self.acceptor.clone(),
                        self.routes.clone(),
                        self.metrics.clone(),
                        stopped.clone(),
                    ));
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
        async move { Ok::<_, Infallible>(answer(request, &routes, &metrics).await) }
    });
    let conn = http1::Builder::new()
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
) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_owned();
    match (request.method(), path.as_str(), routes.get(&path)) {
        (&Method::POST, _, Some(route)) => {
            let body = match Limited::new(request.into_body(), MAX_BODY).collect().await {
                Ok(body) => body.to_bytes(),
                Err(e) => {
                    let answer = Answer::bad_request(format!("cannot read the request body: {e}"));
                    metrics.record(&route.name, Outcome::Invalid, Duration::ZERO);
                    return respond(answer.status, "application/json", answer.body);
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
