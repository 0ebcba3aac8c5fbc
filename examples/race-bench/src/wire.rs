//! The bytes a client sends and receives: a tower layer on kube's client
//! stack that counts the HTTP bodies of every request and response (watch
//! streams included, as their chunks arrive).

use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body as _, Frame, SizeHint};
use kube::Client;
use kube::client::{Body, ClientBuilder, DynBody};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tower::BoxError;

/// Body bytes sent and received by one client so far.
#[derive(Debug, Default)]
pub(crate) struct WireBytes {
    sent: AtomicU64,
    received: AtomicU64,
}

/// A reading of [`WireBytes`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Bytesum {
    pub(crate) sent: u64,
    pub(crate) received: u64,
}

impl WireBytes {
    /// The counts so far.
    pub(crate) fn now(&self) -> Bytesum {
        Bytesum {
            sent: self.sent.load(Relaxed),
            received: self.received.load(Relaxed),
        }
    }
}

impl Bytesum {
    /// What was counted between `earlier` and `self`.
    pub(crate) fn since(self, earlier: Bytesum) -> Bytesum {
        Bytesum {
            sent: self.sent.saturating_sub(earlier.sent),
            received: self.received.saturating_sub(earlier.received),
        }
    }
}

/// A response body that counts its data frames as they are read.
struct Counted {
    inner: Box<DynBody>,
    bytes: Arc<WireBytes>,
}

impl http_body::Body for Counted {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = Pin::new(&mut *self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            self.bytes.received.fetch_add(data.len() as u64, Relaxed);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A client for the kubeconfig at `path` whose request and response bodies
/// are counted in `bytes`.
///
/// # Errors
///
/// When the kubeconfig is unusable (the message names it).
pub(crate) async fn counted_client(path: &Path, bytes: Arc<WireBytes>) -> anyhow::Result<Client> {
    let kubeconfig = Kubeconfig::read_from(path)
        .map_err(|e| anyhow::anyhow!("kubeconfig {}: {e}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| anyhow::anyhow!("kubeconfig {}: {e}", path.display()))?;
    let sent = bytes.clone();
    let layer = tower::ServiceBuilder::new()
        .map_request(move |req: http::Request<Body>| {
            // kube sends every request body as one buffer of known size.
            let hint = req.body().size_hint();
            let n = hint.exact().unwrap_or(hint.lower());
            sent.sent.fetch_add(n, Relaxed);
            req
        })
        .map_response(move |resp: http::Response<Box<DynBody>>| {
            let bytes = bytes.clone();
            resp.map(|inner| Counted { inner, bytes })
        });
    Ok(ClientBuilder::try_from(config)?.with_layer(&layer).build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_since_an_earlier_one_is_the_difference() {
        let a = Bytesum {
            sent: 10,
            received: 100,
        };
        let b = Bytesum {
            sent: 25,
            received: 180,
        };
        assert_eq!(
            b.since(a),
            Bytesum {
                sent: 15,
                received: 80
            }
        );
    }
}
