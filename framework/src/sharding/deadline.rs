//! A deadline on every write a sharded replica sends, so that a write in
//! flight when the fence passes cannot land after the replica's Lease may
//! have expired and its objects moved.
//!
//! The fence stops a reconcile at the renew deadline after the last
//! renewal was sent; the others find the Lease expired no earlier than the
//! lease duration after it. A write sent before the fence therefore lands
//! in time if the API server gives up on it within `lease duration −
//! renew deadline`. The API server takes a deadline for any request that
//! is not long-running from its `timeout` query parameter, counted from
//! when it received the request (a `504` after it); dropping the future
//! on the client alone would not stop a request already sent.

use std::time::Duration;

use http::{Method, Request, Uri};
use kube::Client;
use kube::client::Body;

use crate::leader::LeaderElectionConfig;

/// How long a write may take: the margin between the fence and the
/// earliest expiry others can observe.
pub(crate) fn write_deadline(config: &LeaderElectionConfig) -> Duration {
    config.lease_duration.saturating_sub(config.renew_deadline)
}

/// `client`, with every `POST`, `PUT`, `PATCH` and `DELETE` given the API
/// server deadline `deadline` (in place of any `timeout` it named) and
/// abandoned by the client a second after it.
pub(crate) fn with_write_deadline(client: Client, deadline: Duration) -> Client {
    let namespace = client.default_namespace().to_owned();
    let service = tower::service_fn(move |request: Request<Body>| {
        let client = client.clone();
        async move {
            let writes = is_write(request.method());
            let request = if writes {
                with_timeout(request, deadline)
            } else {
                request
            };
            let sent = client.send(request);
            if !writes {
                return sent.await;
            }
            match tokio::time::timeout(deadline + Duration::from_secs(1), sent).await {
                Ok(answer) => answer,
                Err(_) => Err(kube::Error::Service(
                    format!("no answer within the write deadline of {deadline:?}").into(),
                )),
            }
        }
    });
    Client::new(service, namespace)
}

fn is_write(method: &Method) -> bool {
    [Method::POST, Method::PUT, Method::PATCH, Method::DELETE].contains(method)
}

/// `request` with `timeout=<deadline>` in its query, in place of any other.
fn with_timeout(mut request: Request<Body>, deadline: Duration) -> Request<Body> {
    if let Some(uri) = timeout_uri(request.uri(), deadline) {
        *request.uri_mut() = uri;
    }
    request
}

fn timeout_uri(uri: &Uri, deadline: Duration) -> Option<Uri> {
    let query: Vec<&str> = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty() && !pair.starts_with("timeout="))
        .collect();
    let query = query.join("&");
    let millis = deadline.as_millis().max(1);
    let path = uri.path();
    let path_and_query = if query.is_empty() {
        format!("{path}?timeout={millis}ms")
    } else {
        format!("{path}?{query}&timeout={millis}ms")
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = path_and_query.parse().ok();
    Uri::from_parts(parts).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_get_the_margin_as_their_server_deadline() {
        let uri: Uri = "/api/v1/namespaces/a/configmaps/b?fieldManager=x"
            .parse()
            .unwrap();
        let bounded = timeout_uri(&uri, Duration::from_secs(5)).unwrap();
        assert_eq!(
            bounded.to_string(),
            "/api/v1/namespaces/a/configmaps/b?fieldManager=x&timeout=5000ms"
        );
        let bare: Uri = "/api/v1/namespaces/a/configmaps".parse().unwrap();
        assert_eq!(
            timeout_uri(&bare, Duration::from_millis(1500))
                .unwrap()
                .to_string(),
            "/api/v1/namespaces/a/configmaps?timeout=1500ms"
        );
        let own: Uri = "/api/v1/x?timeout=60s&dryRun=All".parse().unwrap();
        assert_eq!(
            timeout_uri(&own, Duration::from_secs(5))
                .unwrap()
                .to_string(),
            "/api/v1/x?dryRun=All&timeout=5000ms"
        );
    }

    #[test]
    fn the_margin_is_lease_duration_minus_renew_deadline() {
        let config = LeaderElectionConfig::default();
        assert_eq!(
            write_deadline(&config),
            config.lease_duration - config.renew_deadline
        );
        assert!(is_write(&Method::PATCH) && !is_write(&Method::GET));
    }
}
