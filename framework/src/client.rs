//! A client for the manager: counts the requests it sends and waits out
//! the API server's throttling (`429` with `Retry-After`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll};

use concord_strategies::retried_by_strategy;
use futures::future::BoxFuture;
use http::{Request, Response, StatusCode};
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ClientBuilder};
use kube::{Client, Config};
use tower::buffer::BufferLayer;
use tower::retry::{Policy, RetryLayer};
use tower::{BoxError, Layer, Service};

/// Counts of the answers kube's client retries by itself: `429 Too Many
/// Requests`, `503 Service Unavailable` and `504 Gateway Timeout`, to every
/// request but a write strategy's (which its write metrics count).
#[derive(Debug, Default)]
pub struct ClientCounters {
    too_many_requests: AtomicU64,
    unavailable: AtomicU64,
    gateway_timeout: AtomicU64,
}

impl ClientCounters {
    /// How many `429` answers the client has met (and retried).
    pub fn throttled(&self) -> u64 {
        self.too_many_requests.load(Relaxed)
    }

    pub(crate) fn by_code(&self) -> [(u16, u64); 3] {
        [
            (429, self.too_many_requests.load(Relaxed)),
            (503, self.unavailable.load(Relaxed)),
            (504, self.gateway_timeout.load(Relaxed)),
        ]
    }

    fn observe(&self, status: StatusCode) {
        let counter = match status {
            StatusCode::TOO_MANY_REQUESTS => &self.too_many_requests,
            StatusCode::SERVICE_UNAVAILABLE => &self.unavailable,
            StatusCode::GATEWAY_TIMEOUT => &self.gateway_timeout,
            _ => return,
        };
        counter.fetch_add(1, Relaxed);
    }
}

impl prometheus_client::collector::Collector for ClientCounters {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder<'_>,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric as _;
        let mut family = encoder.encode_descriptor(
            "concord_client_retried_responses",
            "Answers the client retried by itself, honouring Retry-After (429 throttling, 503, 504).",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for (code, n) in self.by_code() {
            let code = code.to_string();
            let labels = [("code", code.as_str())];
            prometheus_client::metrics::counter::ConstCounter::new(n)
                .encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// Builds a client whose throttling is visible and retried in one place.
///
/// Requests a write strategy sends carry
/// [`RetriedByStrategy`](concord_strategies::RetriedByStrategy): the
/// strategy retries their transient failures within its policy and counts
/// them in the write metrics, so this client neither retries nor counts
/// them. Every other request (the runtime's lists and watches, reads)
/// keeps kube's own retry of 429/503/504 (which honours `Retry-After`), and
/// every such answer is counted in `counters` on its way to it. The whole
/// layering is described in the strategies crate's `wire/retry.rs`.
///
/// kube puts its retry beneath every layer a caller can add, so a default
/// client retries a 429 before anything outside it sees one; here the retry
/// is added on top of a counting layer instead.
///
/// # Errors
///
/// When the configuration cannot produce a client (TLS, auth).
pub fn throttle_aware_client(
    mut config: Config,
    counters: Arc<ClientCounters>,
) -> Result<Client, kube::Error> {
    let retry = config.default_retry;
    config.default_retry = false;
    let builder = ClientBuilder::try_from(config)?.with_layer(&CountLayer(counters));
    if !retry {
        return Ok(builder.build());
    }
    // Retrying needs a cloneable service beneath it; a buffer makes one (kube's
    // own `Client` sits on a buffer for the same reason).
    Ok(builder
        .with_layer(&BufferLayer::new(1024))
        .with_layer(&RetryLayer::new(
            UnlessStrategy(RetryPolicy::server_retry()),
        ))
        .build())
}

/// kube's retry policy for every request but those a write strategy
/// retries itself.
#[derive(Clone)]
struct UnlessStrategy(RetryPolicy);

impl<Res> Policy<Request<Body>, Response<Res>, BoxError> for UnlessStrategy
where
    RetryPolicy: Policy<Request<Body>, Response<Res>, BoxError>,
{
    type Future = <RetryPolicy as Policy<Request<Body>, Response<Res>, BoxError>>::Future;

    fn retry(
        &mut self,
        request: &mut Request<Body>,
        result: &mut Result<Response<Res>, BoxError>,
    ) -> Option<Self::Future> {
        if retried_by_strategy(request) {
            return None;
        }
        self.0.retry(request, result)
    }

    fn clone_request(&mut self, request: &Request<Body>) -> Option<Request<Body>> {
        if retried_by_strategy(request) {
            return None;
        }
        <RetryPolicy as Policy<Request<Body>, Response<Res>, BoxError>>::clone_request(
            &mut self.0,
            request,
        )
    }
}

#[derive(Clone)]
struct CountLayer(Arc<ClientCounters>);

impl<S> Layer<S> for CountLayer {
    type Service = Counting<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Counting {
            inner,
            counters: self.0.clone(),
        }
    }
}

#[derive(Clone)]
struct Counting<S> {
    inner: S,
    counters: Arc<ClientCounters>,
}

impl<S, B> Service<Request<Body>> for Counting<S>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    B: 'static,
{
    type Response = Response<B>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response<B>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        // A strategy counts its own requests' answers (write metrics).
        let counted = !retried_by_strategy(&request);
        let response = self.inner.call(request);
        let counters = self.counters.clone();
        Box::pin(async move {
            let response = response.await?;
            if counted {
                counters.observe(response.status());
            }
            Ok(response)
        })
    }
}
