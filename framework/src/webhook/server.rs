//! The HTTPS server the API server calls.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::handler::{Answer, Handler, Outcome};
use super::limits::{MAX_CONNECTIONS_RANGE, READ_TIMEOUT_RANGE};
use super::tls::{ReloadingCert, server_config};
use super::{WebhookError, WebhookLimits, WebhookMetrics, Webhooks};
use crate::serve::{BodyError, Limits, Respond, Tls, read_body};

/// The largest request body read: conversion reviews carry many objects.
const MAX_BODY: usize = 64 << 20;

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
///   closed (a late body gets a 408 first). At most 256 connections are
///   open at once; further clients wait in the listen backlog until one
///   closes. [`try_with_limits`](Self::try_with_limits) sets all three
///   ([`WebhookLimits`]).
pub struct WebhookServer {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    /// Polled for new files; `None` when the manager makes the certificates.
    reload: Option<Arc<ReloadingCert>>,
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
        Self::bind_with(address, cert.clone(), Some(cert), webhooks).await
    }

    /// Binds `address`, with each handshake's certificate from `cert`
    /// (the manager's own, when it makes them).
    pub(crate) async fn bind_with(
        address: SocketAddr,
        cert: Arc<dyn rustls::server::ResolvesServerCert>,
        reload: Option<Arc<ReloadingCert>>,
        webhooks: Webhooks,
    ) -> Result<Self, WebhookError> {
        if !webhooks.problems.is_empty() {
            return Err(WebhookError::Registration(webhooks.problems));
        }
        let acceptor = TlsAcceptor::from(Arc::new(server_config(cert)?));
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
            reload,
            routes: Arc::new(routes),
            metrics: Arc::new(WebhookMetrics::default()),
            reload_every: Duration::from_secs(1),
            limits: WebhookLimits::new().to_limits()?,
        })
    }

    /// How often the cert directory is checked for new files (default 1 s).
    #[must_use]
    pub fn with_reload_interval(mut self, every: Duration) -> Self {
        self.reload_every = every.max(Duration::from_millis(10));
        self
    }

    /// Uses these limits (a [`WebhookLimits`], validated) instead of the
    /// defaults.
    ///
    /// ```no_run
    /// # async fn demo(webhooks: concord::webhook::Webhooks) -> Result<(), concord::webhook::WebhookError> {
    /// use std::time::Duration;
    /// use concord::webhook::{WebhookLimits, WebhookServer};
    /// let server = WebhookServer::bind("127.0.0.1:9443".parse().unwrap(), "certs".as_ref(), webhooks)
    ///     .await?
    ///     .try_with_limits(WebhookLimits::new().with_header_read_timeout(Duration::from_secs(2)))?;
    /// # let _ = server;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`WebhookError::Limits`] naming every limit out of its range.
    pub fn try_with_limits(mut self, limits: WebhookLimits) -> Result<Self, WebhookError> {
        self.limits = limits.to_limits()?;
        Ok(self)
    }

    /// How long a client may take to send a request's headers, from the
    /// moment the connection is ready for one (default 10 s); a connection
    /// that takes longer is closed. A value outside 10 ms to 300 s is
    /// clamped into that range; [`try_with_limits`](Self::try_with_limits)
    /// refuses it instead.
    #[must_use]
    pub fn with_header_read_timeout(mut self, limit: Duration) -> Self {
        self.limits.header_read =
            limit.clamp(*READ_TIMEOUT_RANGE.start(), *READ_TIMEOUT_RANGE.end());
        self
    }

    /// How long a client may take to send a request's body once its
    /// headers are in (default 30 s); a late body is answered with a 408
    /// and the connection closed. A value outside 10 ms to 300 s is
    /// clamped into that range; [`try_with_limits`](Self::try_with_limits)
    /// refuses it instead.
    #[must_use]
    pub fn with_body_read_timeout(mut self, limit: Duration) -> Self {
        self.limits.body_read = limit.clamp(*READ_TIMEOUT_RANGE.start(), *READ_TIMEOUT_RANGE.end());
        self
    }

    /// How many connections may be open at once (default 256); the server
    /// accepts no more until one closes. A value outside 1 to 65,536 is
    /// clamped into that range; [`try_with_limits`](Self::try_with_limits)
    /// refuses it instead.
    #[must_use]
    pub fn with_max_connections(mut self, limit: usize) -> Self {
        self.limits.connections =
            limit.clamp(*MAX_CONNECTIONS_RANGE.start(), *MAX_CONNECTIONS_RANGE.end());
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
        let cert = self.reload.clone();
        let every = self.reload_every;
        let reload = tokio::spawn(async move {
            let Some(cert) = cert else {
                return;
            };
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
        let routes = Routes {
            routes: self.routes,
            metrics: self.metrics,
            body_read: self.limits.body_read,
        };
        crate::serve::serve(
            self.listener,
            Tls::new(self.acceptor, "webhook"),
            Arc::new(routes),
            self.limits,
            stop,
        )
        .await;
        reload.abort();
    }
}

/// The webhook paths and the metrics they count into.
struct Routes {
    routes: Arc<HashMap<String, Route>>,
    metrics: Arc<WebhookMetrics>,
    body_read: Duration,
}

impl Respond for Routes {
    fn respond(
        &self,
        request: Request<Incoming>,
    ) -> impl Future<Output = Response<Full<Bytes>>> + Send {
        answer(request, &self.routes, &self.metrics, self.body_read)
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
            let body = match read_body(request, MAX_BODY, body_read).await {
                Ok(body) => body,
                Err(BodyError::Unreadable(e)) => {
                    let answer = Answer::bad_request(format!("cannot read the request body: {e}"));
                    metrics.record(&route.name, Outcome::Invalid, Duration::ZERO);
                    return respond(answer.status, "application/json", answer.body);
                }
                Err(BodyError::Late) => {
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
            crate::metrics::TEXT_CONTENT_TYPE,
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
