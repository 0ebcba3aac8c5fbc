//! The proxy: accepts the operator's HTTP/1.1 connections on loopback and
//! forwards each request to the real API server, unless the schedule says
//! otherwise.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::faults::body::{BoxError, ProxyBody};
use crate::faults::crashes::Crashes;
use crate::faults::matcher::Matcher;
use crate::faults::request::{RequestInfo, parse};
use crate::faults::shared::Shared;
use crate::faults::{Fault, FaultError, FaultReport, Faults, watch};

/// A fault-injecting proxy in front of the real API server.
///
/// Give the operator under test [`config`](Self::config) (or run it with
/// [`supervise`](Self::supervise)); the proxy forwards its requests over
/// TLS as the identity of the upstream configuration, and injects the
/// faults of its [`Faults`] schedule. Clients the test itself uses should
/// talk to the API server directly.
///
/// # Caveats
///
/// The proxy serves plain HTTP/1.1 on 127.0.0.1 (kube's client speaks
/// HTTP/1.1 only); the operator's own credentials are not used.
///
/// If the test panics while the proxy is alive, dropping it prints the
/// schedule (with its seed) and the faults injected, so the run can be
/// replayed.
pub struct FaultProxy {
    address: SocketAddr,
    url: http::Uri,
    upstream_config: kube::Config,
    pub(crate) shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultProxy")
            .field("address", &self.address)
            .field("schedule", &self.shared.matcher.faults.to_string())
            .finish_non_exhaustive()
    }
}

/// Marks a request in flight while it lives.
struct InFlight<'a>(&'a Shared);

impl<'a> InFlight<'a> {
    fn new(shared: &'a Shared) -> Self {
        shared.in_flight.fetch_add(1, Relaxed);
        shared.touch();
        InFlight(shared)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Relaxed);
    }
}

/// Why the proxy closed a connection without answering.
#[derive(Debug, thiserror::Error)]
enum Dropped {
    #[error("the operator crashed")]
    Crashed,
    #[error("reading the request failed")]
    Request(#[source] hyper::Error),
}

impl FaultProxy {
    /// Starts a proxy on 127.0.0.1 in front of the cluster of `upstream`,
    /// injecting the faults of `faults`.
    ///
    /// # Errors
    ///
    /// [`FaultError::InvalidSchedule`] listing every mistake in `faults`,
    /// [`FaultError::Upstream`] or [`FaultError::Bind`].
    pub async fn start(upstream: &kube::Config, faults: Faults) -> Result<FaultProxy, FaultError> {
        let problems = faults.problems();
        if !problems.is_empty() {
            return Err(FaultError::InvalidSchedule {
                schedule: faults.to_string(),
                problems,
            });
        }
        let mut forwarding = upstream.clone();
        // The operator's own client retries 429/503/504 as it would anyway;
        // the proxy must pass the API server's answers on as they are.
        forwarding.default_retry = false;
        let client = kube::Client::try_from(forwarding).map_err(FaultError::Upstream)?;
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(FaultError::Bind)?;
        let address = listener.local_addr().map_err(FaultError::Bind)?;
        let url = http::Uri::from_maybe_shared(format!("http://{address}/"))
            .map_err(|e| FaultError::Bind(std::io::Error::other(e)))?;
        let shared = Arc::new(Shared {
            matcher: Matcher::new(faults),
            upstream: client,
            started: Instant::now(),
            report: Mutex::new(FaultReport::default()),
            crashes: Crashes::default(),
            last_activity_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            held_events: AtomicUsize::new(0),
        });
        let server = tokio::spawn(accept(listener, shared.clone()));
        Ok(FaultProxy {
            address,
            url,
            upstream_config: upstream.clone(),
            shared,
            server,
        })
    }

    /// Where the proxy listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The schedule in use.
    pub fn faults(&self) -> &Faults {
        &self.shared.matcher.faults
    }

    /// A client configuration for the operator under test: the upstream
    /// configuration with the proxy as its cluster and no credentials.
    pub fn config(&self) -> kube::Config {
        let mut config = self.upstream_config.clone();
        config.cluster_url = self.url.clone();
        config.root_cert = None;
        config.root_cert_file = None;
        config.tls_server_name = None;
        config.auth_info = kube::config::AuthInfo::default();
        config
    }

    /// What the proxy has injected so far.
    pub fn report(&self) -> FaultReport {
        self.shared
            .report
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Waits until the operator has gone quiet: no request in flight, no
    /// watch event held back, nothing forwarded for `quiet`.
    ///
    /// # Errors
    ///
    /// [`FaultError::NotQuiet`] when that does not happen within `limit`.
    pub async fn settle(&self, quiet: Duration, limit: Duration) -> Result<(), FaultError> {
        let start = Instant::now();
        let shared = &self.shared;
        loop {
            let idle_ms = (shared.started.elapsed().as_millis() as u64)
                .saturating_sub(shared.last_activity_ms.load(Relaxed));
            if shared.in_flight.load(Relaxed) == 0
                && shared.held_events.load(Relaxed) == 0
                && !shared.crashes.crashing()
                && u128::from(idle_ms) >= quiet.as_millis()
            {
                return Ok(());
            }
            if start.elapsed() > limit {
                return Err(FaultError::NotQuiet {
                    quiet_ms: quiet.as_millis(),
                    limit_s: limit.as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.server.abort();
        if std::thread::panicking() {
            eprintln!(
                "fault schedule (replay it exactly): {}\nfaults injected: {}\n{}",
                self.faults(),
                self.report(),
                self.report().log.join("\n")
            );
        }
    }
}

async fn accept(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let epoch = shared.crashes.epoch();
        tokio::spawn(async move {
            let service = service_fn(move |request| handle(shared.clone(), epoch, request));
            // An error here is a connection the client or a fault closed.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn handle(
    shared: Arc<Shared>,
    epoch: u64,
    request: Request<Incoming>,
) -> Result<Response<ProxyBody>, Dropped> {
    if shared.crashes.dead(epoch) {
        return Err(Dropped::Crashed);
    }
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map_err(Dropped::Request)?.to_bytes();
    let mut info = parse(&parts.method, parts.uri.path(), parts.uri.query());
    if let Some(info) = info.as_mut().filter(|i| i.name.is_none()) {
        // A create names its object in the body, not the path.
        info.name = created_name(&body);
    }
    let fault = info.as_ref().and_then(|i| shared.matcher.request(i));
    let watching = info.as_ref().and_then(|i| shared.matcher.watch(i));
    let _in_flight = (info.as_ref().map(|i| i.verb) != Some(crate::faults::Verb::Watch))
        .then(|| InFlight::new(&shared));
    if let Some(fault) = &fault {
        shared.record(fault, &format!("{} {}", parts.method, parts.uri));
    }
    let upstream = || forward(&shared, &parts, body.clone());
    match fault {
        None => match upstream().await {
            Ok(response) => {
                shared.report_passed();
                match watching {
                    Some(scope) => Ok(watch::filter(shared.clone(), scope, response, false)),
                    None => Ok(pass(response)),
                }
            }
            Err(error) => Ok(unreachable_upstream(&error)),
        },
        Some(Fault::Respond { code, retry_after }) => Ok(status(code, retry_after, &info)),
        Some(Fault::Delay(delay)) => {
            tokio::time::sleep(delay).await;
            Ok(upstream()
                .await
                .map_or_else(|e| unreachable_upstream(&e), pass))
        }
        Some(Fault::TimeOut) => {
            if let Ok(response) = upstream().await {
                let _ = response.into_body().collect().await;
            }
            Ok(status(504, 0, &info))
        }
        Some(Fault::Reset) => match upstream().await {
            Ok(response) if watching_verb(&info) => Ok(watch::cut(shared.clone(), response)),
            Ok(response) => Ok(cut_halfway(response).await),
            Err(error) => Ok(unreachable_upstream(&error)),
        },
        Some(Fault::CrashBefore) => crash(&shared, &info),
        Some(Fault::CrashAfter) => {
            if let Ok(response) = upstream().await {
                let _ = response.into_body().collect().await;
            }
            crash(&shared, &info)
        }
        // Event faults never fire on a request.
        Some(Fault::HoldEvents(_) | Fault::DropIntermediate(_)) => Ok(status(500, 0, &info)),
    }
}

fn created_name(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Object {
        metadata: Meta,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        name: Option<String>,
    }
    serde_json::from_slice::<Object>(body).ok()?.metadata.name
}

fn watching_verb(info: &Option<RequestInfo>) -> bool {
    info.as_ref().map(|i| i.verb) == Some(crate::faults::Verb::Watch)
}

fn crash(shared: &Shared, info: &Option<RequestInfo>) -> Result<Response<ProxyBody>, Dropped> {
    if shared.crashes.fire() {
        Err(Dropped::Crashed)
    } else {
        tracing::error!("a crash fault fired but the proxy supervises no operator");
        Ok(status(500, 0, info))
    }
}

async fn forward(
    shared: &Shared,
    parts: &http::request::Parts,
    body: Bytes,
) -> Result<Response<kube::client::Body>, kube::Error> {
    let uri = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let mut request = Request::builder()
        .method(parts.method.clone())
        .uri(uri)
        .body(kube::client::Body::from(body))
        .map_err(kube::Error::HttpError)?;
    copy_headers(&parts.headers, request.headers_mut(), true);
    shared.upstream.send(request).await
}

/// Copies end-to-end headers; connection-level ones and (for requests) the
/// client's credentials stay behind.
fn copy_headers(from: &HeaderMap, to: &mut HeaderMap, request: bool) {
    for (name, value) in from {
        let hop = matches!(
            name.as_str(),
            "connection" | "keep-alive" | "transfer-encoding" | "upgrade" | "host" | "te"
        );
        let private = request && (name == http::header::AUTHORIZATION || name == CONTENT_LENGTH);
        if !hop && !private {
            to.append(name.clone(), value.clone());
        }
    }
}

fn pass(response: Response<kube::client::Body>) -> Response<ProxyBody> {
    let (parts, body) = response.into_parts();
    let mut out = Response::new(body.map_err(BoxError::from).boxed_unsync());
    *out.status_mut() = parts.status;
    copy_headers(&parts.headers, out.headers_mut(), false);
    out
}

async fn cut_halfway(response: Response<kube::client::Body>) -> Response<ProxyBody> {
    let (parts, body) = response.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let half = bytes.slice(..bytes.len() / 2);
    let frames: Vec<Result<Frame<Bytes>, BoxError>> = vec![
        Ok(Frame::data(half)),
        Err("connection reset by the fault proxy".into()),
    ];
    let mut out = Response::new(StreamBody::new(futures::stream::iter(frames)).boxed_unsync());
    *out.status_mut() = parts.status;
    copy_headers(&parts.headers, out.headers_mut(), false);
    out.headers_mut()
        .insert(CONTENT_LENGTH, HeaderValue::from(bytes.len()));
    out
}

fn unreachable_upstream(error: &kube::Error) -> Response<ProxyBody> {
    tracing::warn!(%error, "the fault proxy could not reach the API server");
    let mut response = status(502, 0, &None);
    *response.status_mut() = StatusCode::BAD_GATEWAY;
    response
}

/// A `metav1.Status` answer, as the API server writes one.
fn status(code: u16, retry_after: u32, info: &Option<RequestInfo>) -> Response<ProxyBody> {
    let reason = match code {
        400 => "BadRequest",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        410 => "Expired",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    };
    let what = info.as_ref().map_or_else(String::new, |i| {
        format!(" on {} {} {}", i.verb, i.resource, i.key())
    });
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!("{reason} injected by the fault proxy{what}"),
        "reason": reason,
        "code": code,
    });
    let mut response = Response::new(
        Full::new(Bytes::from(body.to_string()))
            .map_err(BoxError::from)
            .boxed_unsync(),
    );
    *response.status_mut() =
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if code == 429 {
        headers.insert(RETRY_AFTER, HeaderValue::from(retry_after));
    }
    response
}
