use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::{Error, Metrics};

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

/// What an endpoint server answers.
#[derive(Clone)]
pub(crate) enum Endpoints {
    Metrics(Arc<Metrics>),
    Health(Arc<AtomicBool>),
}

/// Serves plain HTTP/1.1 GETs, one response per connection; enough for
/// Prometheus scrapes and kubelet probes without a web framework.
pub(crate) async fn serve(listener: TcpListener, endpoints: Endpoints) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let endpoints = endpoints.clone();
        tokio::spawn(async move {
            if let Err(error) = answer(stream, &endpoints).await {
                tracing::debug!(%error, "endpoint request failed");
            }
        });
    }
}

async fn answer(mut stream: TcpStream, endpoints: &Endpoints) -> std::io::Result<()> {
    let mut buf = vec![0u8; 2048];
    let mut len = 0;
    // Requests are tiny; read until the end of the headers or the buffer is full.
    while len < buf.len() {
        let n = stream.read(&mut buf[len..]).await?;
        if n == 0 {
            break;
        }
        len += n;
        if buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    let request = String::from_utf8_lossy(&buf[..len]);
    let path = request.split_whitespace().nth(1).unwrap_or("/");
    let (status, content_type, body) = match (endpoints, path) {
        (Endpoints::Metrics(metrics), "/metrics") => {
            ("200 OK", "text/plain; version=0.0.4", metrics.render())
        }
        (Endpoints::Health(_), "/healthz") => ("200 OK", "text/plain", "ok".to_owned()),
        (Endpoints::Health(ready), "/readyz") if ready.load(Ordering::Relaxed) => {
            ("200 OK", "text/plain", "ok".to_owned())
        }
        (Endpoints::Health(_), "/readyz") => (
            "503 Service Unavailable",
            "text/plain",
            "not ready".to_owned(),
        ),
        _ => ("404 Not Found", "text/plain", "not found".to_owned()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
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
