use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::{Request, Response, StatusCode};
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ClientBuilder};
use kube::{Client, Config};
use tower::buffer::BufferLayer;
use tower::retry::RetryLayer;
use tower::{Layer, Service};

/// Counts of the answers kube's client retries by itself: `429 Too Many
/// Requests`, `503 Service Unavailable` and `504 Gateway Timeout`.
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

/// Builds a client whose throttling is visible: kube's own retry of
/// 429/503/504 (which honours `Retry-After`) stays in place, and every such
/// answer is counted in `counters` on its way to it.
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
        .with_layer(&RetryLayer::new(RetryPolicy::server_retry()))
        .build())
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
        let response = self.inner.call(request);
        let counters = self.counters.clone();
        Box::pin(async move {
            let response = response.await?;
            counters.observe(response.status());
            Ok(response)
        })
    }
}
