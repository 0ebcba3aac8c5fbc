//! How a sharded cache's watch carries its `shardSelector` in `selector`
//! mode. kube-runtime's watcher knows label and field selectors only, so
//! the cache asks for a marker label term naming the replica's current
//! selector (`!shard.concord.dev/selector-<fingerprint>`), and the
//! manager's client, for a `GET` whose label selector holds that term,
//! takes the term out and adds the selector it names as the
//! `shardSelector` query parameter. The term matches every object, so a
//! watch that bypassed the manager's client would cache everything, never
//! less: the gate alone decides what is reconciled.
//!
//! A watch keeps the selector it started with through its reconnections
//! (old markers stay known); a new selector restarts the watch.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use futures::Stream;
use http::{Method, Request, Uri};
use kube::Client;
use kube::client::Body;
use tokio::sync::watch;

use super::ring::fingerprint;

/// The label key prefix of a marker term.
pub(crate) const MARKER: &str = "shard.concord.dev/selector-";

/// Markers kept known after they stopped being current, for watches that
/// reconnect before their restart.
const KEPT: usize = 16;

/// The shard selectors this replica has watched with, newest last.
#[derive(Debug)]
pub(crate) struct Selectors {
    known: Mutex<VecDeque<(String, String)>>,
    current: watch::Sender<Option<String>>,
}

impl Default for Selectors {
    fn default() -> Self {
        Selectors {
            known: Mutex::new(VecDeque::new()),
            current: watch::channel(None).0,
        }
    }
}

impl Selectors {
    /// Makes `selector` the current one; whether it changed.
    pub(crate) fn publish(&self, selector: &str) -> bool {
        let marker = format!("{MARKER}{}", fingerprint(selector.as_bytes()));
        {
            let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
            if !known.iter().any(|(m, _)| *m == marker) {
                known.push_back((marker.clone(), selector.to_owned()));
                while known.len() > KEPT {
                    known.pop_front();
                }
            }
        }
        self.current.send_if_modified(|current| {
            let changed = current.as_deref() != Some(marker.as_str());
            *current = Some(marker.clone());
            changed
        })
    }

    /// The label term a watch of the current selector asks for.
    pub(crate) fn marker(&self) -> Option<String> {
        self.current.borrow().as_ref().map(|m| format!("!{m}"))
    }

    /// The current selector's text.
    pub(crate) fn current(&self) -> Option<String> {
        let marker = self.current.borrow().clone()?;
        self.lookup(&marker)
    }

    fn lookup(&self, marker: &str) -> Option<String> {
        let known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        known
            .iter()
            .find(|(m, _)| m == marker)
            .map(|(_, s)| s.clone())
    }

    /// Yields whenever the current selector changes.
    pub(crate) fn changes(&self) -> impl Stream<Item = ()> + Send + 'static {
        let mut rx = self.current.subscribe();
        rx.mark_unchanged();
        futures::stream::unfold(rx, |mut rx| async move {
            rx.changed().await.ok()?;
            Some(((), rx))
        })
    }

    /// `uri` with its marker term replaced by the `shardSelector` it
    /// names; `None` when it holds no marker.
    fn rewrite(&self, uri: &Uri) -> Option<Result<Uri, String>> {
        let query = uri.query()?;
        let mut pairs: Vec<String> = Vec::new();
        let mut found = None;
        for pair in query.split('&') {
            let Some(value) = pair.strip_prefix("labelSelector=") else {
                pairs.push(pair.to_owned());
                continue;
            };
            let decoded = decode(value);
            let (markers, others): (Vec<&str>, Vec<&str>) = decoded
                .split(',')
                .partition(|term| term.trim().starts_with(&format!("!{MARKER}")));
            let Some(marker) = markers.first() else {
                pairs.push(pair.to_owned());
                continue;
            };
            found = Some(marker.trim().trim_start_matches('!').to_owned());
            if !others.is_empty() {
                pairs.push(format!("labelSelector={}", encode(&others.join(","))));
            }
        }
        let marker = found?;
        let Some(selector) = self.lookup(&marker) else {
            return Some(Err(format!("unknown shard selector {marker}")));
        };
        pairs.push(format!("shardSelector={}", encode(&selector)));
        let mut parts = uri.clone().into_parts();
        let path_and_query = format!("{}?{}", uri.path(), pairs.join("&"));
        parts.path_and_query = match path_and_query.parse() {
            Ok(p) => Some(p),
            Err(e) => return Some(Err(e.to_string())),
        };
        Some(Uri::from_parts(parts).map_err(|e| e.to_string()))
    }
}

/// `client`, with the marker term of every `GET` replaced by the shard
/// selector it names (see the module's docs).
pub(crate) fn with_shard_selectors(client: Client, selectors: std::sync::Arc<Selectors>) -> Client {
    let namespace = client.default_namespace().to_owned();
    let service = tower::service_fn(move |mut request: Request<Body>| {
        let client = client.clone();
        let rewritten = if request.method() == Method::GET {
            selectors.rewrite(request.uri())
        } else {
            None
        };
        async move {
            match rewritten {
                Some(Ok(uri)) => *request.uri_mut() = uri,
                // A watch of a selector no longer known fails and is
                // restarted with the current one.
                Some(Err(message)) => return Err(kube::Error::Service(message.into())),
                None => {}
            }
            client.send(request).await
        }
    });
    Client::new(service, namespace)
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `text` percent-encoded for a query parameter's value.
pub(crate) fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_becomes_the_shard_selector_it_names() {
        let selectors = Selectors::default();
        assert!(selectors.publish("shardRange(object.metadata.uid, '0x0', '0x1')"));
        assert!(!selectors.publish("shardRange(object.metadata.uid, '0x0', '0x1')"));
        let marker = selectors.marker().unwrap_or_default();
        let uri: Uri = format!(
            "/api/v1/configmaps?watch=true&labelSelector={}%2Capp%3Dx&limit=5",
            encode(&marker)
        )
        .parse()
        .unwrap_or_default();
        let rewritten = selectors
            .rewrite(&uri)
            .and_then(Result::ok)
            .unwrap_or_default();
        let query = rewritten.query().unwrap_or_default();
        assert!(query.contains("labelSelector=app%3Dx"), "{query}");
        assert!(!query.contains("selector-"), "{query}");
        assert!(
            query.ends_with(
                "shardSelector=shardRange%28object.metadata.uid%2C%20%270x0%27%2C%20%270x1%27%29"
            ),
            "{query}"
        );
        let alone: Uri = format!("/api/v1/configmaps?labelSelector={}", encode(&marker))
            .parse()
            .unwrap_or_default();
        let query = selectors
            .rewrite(&alone)
            .and_then(Result::ok)
            .unwrap_or_default()
            .query()
            .unwrap_or_default()
            .to_owned();
        assert!(query.starts_with("shardSelector="), "{query}");
    }

    #[test]
    fn requests_without_a_marker_pass_untouched() {
        let selectors = Selectors::default();
        let uri: Uri = "/api/v1/configmaps?labelSelector=app%3Dx"
            .parse()
            .unwrap_or_default();
        assert!(selectors.rewrite(&uri).is_none());
        let unknown: Uri =
            "/api/v1/configmaps?labelSelector=%21shard.concord.dev%2Fselector-00000000"
                .parse()
                .unwrap_or_default();
        assert!(matches!(selectors.rewrite(&unknown), Some(Err(_))));
    }
}
