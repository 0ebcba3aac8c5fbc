use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use tokio::net::TcpListener;

use crate::health::{self, Health, Line};
use crate::secure::{Reviewer, Verdict};
use crate::serve::{BodyError, Handshake, Limits, Respond, read_body};
use crate::{Error, metrics::Metrics};

/// Parses a controller-runtime style bind address: `host:port`, `:port`
/// (every interface) or `0` (disabled).
pub(crate) fn parse_bind(flag: &'static str, value: &str) -> Result<Option<SocketAddr>, Error> {
    let bad = || Error::BadAddress {
        flag,
        value: value.to_owned(),
    };
    match value.trim() {
        "" | "0" => Ok(None),
        v if v.starts_with(':') => format!("0.0.0.0{v}").parse().map(Some).map_err(|_| bad()),
        v => v.parse().map(Some).map_err(|_| bad()),
    }
}

pub(crate) async fn bind(address: SocketAddr, what: &'static str) -> Result<TcpListener, Error> {
    TcpListener::bind(address)
        .await
        .map_err(|source| Error::Bind {
            address: address.to_string(),
            what,
            source,
        })
}

/// What an endpoint server answers: the metrics (`GET /metrics`) or the
/// probes (`GET /healthz`, `GET /readyz`).
#[derive(Clone)]
pub(crate) enum Endpoints {
    Metrics {
        metrics: Arc<Metrics>,
        /// With `--metrics-secure`: who reviews each request.
        reviewer: Option<Arc<Reviewer>>,
    },
    Health(Health),
}

/// The largest request body an endpoint reads (its GETs carry none).
const MAX_BODY: usize = 16 << 10;

/// Serves `endpoints` on `listener` until `stop` completes: the same hyper
/// server as the webhooks', within `limits`, over plain HTTP or TLS as
/// `handshake` says.
pub(crate) async fn serve<H: Handshake>(
    listener: TcpListener,
    handshake: H,
    endpoints: Endpoints,
    limits: Limits,
    stop: impl Future<Output = ()> + Send,
) {
    crate::serve::serve(
        listener,
        handshake,
        Arc::new((endpoints, limits)),
        limits,
        stop,
    )
    .await;
}

impl Respond for (Endpoints, Limits) {
    fn respond(
        &self,
        request: Request<Incoming>,
    ) -> impl Future<Output = Response<Full<Bytes>>> + Send {
        let (endpoints, limits) = self;
        answer(request, endpoints, limits.body_read)
    }
}

async fn answer(
    request: Request<Incoming>,
    endpoints: &Endpoints,
    body_read: Duration,
) -> Response<Full<Bytes>> {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let verbose = health::wants_verbose(request.uri().query());
    let openmetrics = request
        .headers()
        .get_all(hyper::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let authorization = request
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or_default().to_owned());
    // A body is unexpected, but read (or time out) before answering so
    // that a slow one cannot hold the connection.
    match read_body(request, MAX_BODY, body_read).await {
        Ok(_) => {}
        Err(BodyError::Late) => {
            let mut response = respond(
                StatusCode::REQUEST_TIMEOUT,
                "text/plain",
                "request body too slow\n".into(),
            );
            response.headers_mut().insert(
                hyper::header::CONNECTION,
                hyper::header::HeaderValue::from_static("close"),
            );
            return response;
        }
        Err(BodyError::Unreadable(e)) => {
            return respond(StatusCode::BAD_REQUEST, "text/plain", format!("{e}\n"));
        }
    }
    if method != Method::GET && method != Method::HEAD {
        return respond(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            format!("{path} takes GET\n"),
        );
    }
    // Secure metrics: every request is reviewed, whatever its path.
    if let Endpoints::Metrics {
        reviewer: Some(reviewer),
        ..
    } = endpoints
    {
        match reviewer.review(authorization.as_deref(), &path).await {
            Verdict::Allowed => {}
            Verdict::Unauthenticated(why) => {
                let mut response =
                    respond(StatusCode::UNAUTHORIZED, "text/plain", format!("{why}\n"));
                response.headers_mut().insert(
                    hyper::header::WWW_AUTHENTICATE,
                    hyper::header::HeaderValue::from_static("Bearer"),
                );
                return response;
            }
            Verdict::Forbidden(why) => {
                return respond(StatusCode::FORBIDDEN, "text/plain", format!("{why}\n"));
            }
            Verdict::Unreviewable(why) => {
                tracing::warn!(error = %why, "refusing a metrics request that could not be reviewed");
                return respond(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "text/plain",
                    "the request could not be reviewed\n".into(),
                );
            }
        }
    }
    match (endpoints, path.as_str()) {
        (Endpoints::Metrics { metrics, .. }, "/metrics") if openmetrics => respond(
            StatusCode::OK,
            crate::metrics::OPENMETRICS_CONTENT_TYPE,
            metrics.render_openmetrics(),
        ),
        (Endpoints::Metrics { metrics, .. }, "/metrics") => respond(
            StatusCode::OK,
            crate::metrics::TEXT_CONTENT_TYPE,
            metrics.render(),
        ),
        (Endpoints::Health(checks), "/healthz") => {
            let lines = [ping(), checks.watchdog.line(tokio::time::Instant::now())];
            probe(
                "healthz",
                &lines,
                verbose,
                StatusCode::INTERNAL_SERVER_ERROR,
            )
        }
        (Endpoints::Health(checks), "/readyz") => {
            let mut lines = vec![ping()];
            lines.extend(checks.readiness.lines());
            probe("readyz", &lines, verbose, StatusCode::SERVICE_UNAVAILABLE)
        }
        _ => respond(StatusCode::NOT_FOUND, "text/plain", "not found".into()),
    }
}

fn ping() -> Line {
    Line {
        name: "ping".into(),
        failure: None,
    }
}

/// A probe's response: 200 when every check passed, `failed` otherwise.
fn probe(name: &str, lines: &[Line], verbose: bool, failed: StatusCode) -> Response<Full<Bytes>> {
    let answer = health::answer(name, lines, verbose);
    let status = if answer.passed {
        StatusCode::OK
    } else {
        failed
    };
    respond(status, "text/plain; charset=utf-8", answer.body)
}

fn respond(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_bind_follows_controller_runtime() -> Result<(), Box<dyn std::error::Error>> {
        assert_eq!(parse_bind("f", "0")?, None);
        assert_eq!(parse_bind("f", ":8080")?, Some("0.0.0.0:8080".parse()?));
        assert_eq!(
            parse_bind("f", "127.0.0.1:9")?,
            Some("127.0.0.1:9".parse()?)
        );
        let err = parse_bind("--metrics-bind-address", "eight")
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "invalid --metrics-bind-address `eight`: expected host:port, :port or 0 to disable"
            )
        );
        Ok(())
    }
}
