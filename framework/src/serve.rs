//! The one HTTP/1.1 server on hyper behind every port a manager opens (the
//! metrics and health endpoints, the webhook server): a bounded number of
//! connections, header and body read timeouts, and a graceful stop.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};

/// How long open connections get to finish their request at shutdown.
pub(crate) const DRAIN: Duration = Duration::from_secs(5);

/// What bounds a client's use of a server.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// How long a client may take to send a request's headers.
    pub(crate) header_read: Duration,
    /// How long a client may take to send a request's body.
    pub(crate) body_read: Duration,
    /// How many connections may be open at once.
    pub(crate) connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_read: Duration::from_secs(10),
            body_read: Duration::from_secs(30),
            connections: 256,
        }
    }
}

/// What happens to a connection before HTTP: nothing, or a TLS handshake.
pub(crate) trait Handshake: Clone + Send + Sync + 'static {
    /// The stream HTTP runs over.
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// The stream, or `None` when the client failed the handshake (it is
    /// then closed).
    fn handshake(&self, tcp: TcpStream) -> impl Future<Output = Option<Self::Io>> + Send;
}

/// Plain HTTP.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plain;

impl Handshake for Plain {
    type Io = TcpStream;
    fn handshake(&self, tcp: TcpStream) -> impl Future<Output = Option<TcpStream>> + Send {
        std::future::ready(Some(tcp))
    }
}

/// How long a client may take to finish a TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A TLS handshake, bounded in time; `what` names the server in logs.
#[derive(Clone)]
pub(crate) struct Tls {
    acceptor: tokio_rustls::TlsAcceptor,
    what: &'static str,
}

impl Tls {
    pub(crate) fn new(acceptor: tokio_rustls::TlsAcceptor, what: &'static str) -> Self {
        Tls { acceptor, what }
    }
}

impl Handshake for Tls {
    type Io = tokio_rustls::server::TlsStream<TcpStream>;
    fn handshake(&self, tcp: TcpStream) -> impl Future<Output = Option<Self::Io>> + Send {
        let accept = self.acceptor.accept(tcp);
        let what = self.what;
        async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, accept).await {
                Ok(Ok(tls)) => Some(tls),
                Ok(Err(error)) => {
                    tracing::debug!(%error, server = what, "TLS handshake failed");
                    None
                }
                Err(_) => None,
            }
        }
    }
}

/// What a server answers.
pub(crate) trait Respond: Send + Sync + 'static {
    /// The answer to one request.
    fn respond(
        &self,
        request: Request<Incoming>,
    ) -> impl Future<Output = Response<Full<Bytes>>> + Send;
}

/// Why a request's body could not be read.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// Not all of it arrived within the body read timeout.
    Late,
    /// The stream failed or the body was larger than allowed.
    Unreadable(String),
}

/// Reads a request's body, at most `max` bytes, within `limits.body_read`.
pub(crate) async fn read_body(
    request: Request<Incoming>,
    max: usize,
    limit: Duration,
) -> Result<Bytes, BodyError> {
    let read = Limited::new(request.into_body(), max).collect();
    match tokio::time::timeout(limit, read).await {
        Ok(Ok(body)) => Ok(body.to_bytes()),
        Ok(Err(e)) => Err(BodyError::Unreadable(e.to_string())),
        Err(_elapsed) => Err(BodyError::Late),
    }
}

/// Serves `listener` until `stop` completes, then lets open connections
/// finish their request (up to [`DRAIN`]) and returns.
pub(crate) async fn serve<H: Handshake, R: Respond>(
    listener: TcpListener,
    handshake: H,
    respond: Arc<R>,
    limits: Limits,
    stop: impl Future<Output = ()> + Send,
) {
    let (stopping, stopped) = watch::channel(false);
    tokio::pin!(stop);
    let slots = Arc::new(Semaphore::new(limits.connections.max(1)));
    loop {
        // A slot first, then a connection: when every slot is taken, new
        // clients wait in the kernel's backlog rather than in memory here.
        let slot = tokio::select! {
            () = &mut stop => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_closed) => break,
            },
        };
        tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => {
                let Ok((tcp, _)) = accepted else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let _ = tcp.set_nodelay(true);
                let served = connection(tcp, handshake.clone(), respond.clone(), stopped.clone(), limits);
                tokio::spawn(async move {
                    served.await;
                    drop(slot);
                });
            }
        }
    }
    stopping.send_replace(true);
    drop(listener);
    // Give connections their drain time before the caller moves on.
    let deadline = Instant::now() + DRAIN;
    while stopping.receiver_count() > 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn connection<H: Handshake, R: Respond>(
    tcp: TcpStream,
    handshake: H,
    respond: Arc<R>,
    mut stop: watch::Receiver<bool>,
    limits: Limits,
) {
    let Some(io) = handshake.handshake(tcp).await else {
        return;
    };
    let service = service_fn(move |request| {
        let respond = respond.clone();
        async move { Ok::<_, Infallible>(respond.respond(request).await) }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read)
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    tokio::select! {
        result = conn.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(%error, "connection ended");
            }
        }
        () = async { let _ = stop.wait_for(|s| *s).await; } => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(DRAIN, conn).await;
        }
    }
}
