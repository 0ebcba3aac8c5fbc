//! Watch streams: line-delimited JSON events, held back, coalesced or cut
//! on their way to the operator.
//!
//! Per object, events always keep their order; bookmarks and errors wait
//! for every event held before them, so the resourceVersion a watcher
//! resumes from never skips an event it has not seen.
//!
//! A streaming list's initial events (a watch with `sendInitialEvents`, up
//! to the bookmark annotated `k8s.io/initial-events-end`) are the list, as
//! a `LIST` answer would be: they pass untouched and count for no rule, so
//! a schedule means the same whether the watcher lists or streams.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use bytes::Bytes;
use futures::SinkExt;
use futures::channel::mpsc;
use http::Response;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde::Deserialize;
use tokio::time::Instant;

use crate::faults::Fault;
use crate::faults::body::{BoxError, ProxyBody};
use crate::faults::matcher::EventScope;
use crate::faults::shared::Shared;

type Sender = mpsc::Sender<Result<Frame<Bytes>, BoxError>>;

#[derive(Deserialize)]
struct EventHead {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    object: ObjectHead,
}

#[derive(Deserialize, Default)]
struct ObjectHead {
    #[serde(default)]
    metadata: MetaHead,
}

#[derive(Deserialize, Default)]
struct MetaHead {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    annotations: HashMap<String, String>,
}

/// The annotation of the bookmark that ends a streaming list's initial
/// events.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// One event waiting for its release.
struct Held {
    key: Option<String>,
    line: Bytes,
    coalescing: bool,
}

/// Events held back, in release order (time, then arrival).
#[derive(Default)]
struct Queue {
    held: BTreeMap<(Instant, u64), Held>,
    /// When the last held event of each object is released.
    last: HashMap<String, (Instant, u64)>,
    seq: u64,
    /// Still in a streaming list's initial events.
    listing: bool,
}

impl Queue {
    fn push(&mut self, at: Instant, held: Held) -> (Instant, u64) {
        self.seq += 1;
        let slot = (at, self.seq);
        if let Some(key) = &held.key {
            self.last.insert(key.clone(), slot);
        }
        self.held.insert(slot, held);
        slot
    }

    /// The release time of the object's last held event, if still held.
    fn pending(&self, key: &str) -> Option<(Instant, u64)> {
        self.last
            .get(key)
            .copied()
            .filter(|slot| self.held.contains_key(slot))
    }

    fn latest(&self) -> Option<Instant> {
        self.held.keys().next_back().map(|(at, _)| *at)
    }

    fn due(&mut self, now: Instant) -> Vec<Bytes> {
        let mut out = Vec::new();
        while let Some(entry) = self.held.first_entry() {
            if entry.key().0 > now {
                break;
            }
            out.push(entry.remove().line);
        }
        out
    }
}

/// Streams a watch answer to the client through the event faults of `scope`.
pub(crate) fn filter(
    shared: Arc<Shared>,
    scope: EventScope,
    response: Response<kube::client::Body>,
    cut_after_first: bool,
) -> Response<ProxyBody> {
    let (parts, body) = response.into_parts();
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(pump(shared, Some(scope), body, tx, cut_after_first));
    let mut out = Response::new(StreamBody::new(rx).boxed_unsync());
    *out.status_mut() = parts.status;
    if let Some(kind) = parts.headers.get(http::header::CONTENT_TYPE) {
        out.headers_mut()
            .insert(http::header::CONTENT_TYPE, kind.clone());
    }
    out
}

/// Streams a watch answer and cuts the connection after its first event.
pub(crate) fn cut(
    shared: Arc<Shared>,
    response: Response<kube::client::Body>,
) -> Response<ProxyBody> {
    let (parts, body) = response.into_parts();
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(pump(shared, None, body, tx, true));
    let mut out = Response::new(StreamBody::new(rx).boxed_unsync());
    *out.status_mut() = parts.status;
    out
}

async fn pump(
    shared: Arc<Shared>,
    scope: Option<EventScope>,
    mut body: kube::client::Body,
    mut tx: Sender,
    cut_after_first: bool,
) {
    let mut buffer: Vec<u8> = Vec::new();
    let mut queue = Queue {
        listing: scope.as_ref().is_some_and(|s| s.initial_events),
        ..Queue::default()
    };
    let far = Instant::now() + Duration::from_secs(86_400);
    loop {
        let next = queue.held.keys().next().map_or(far, |(at, _)| *at);
        let ready: Vec<Bytes> = tokio::select! {
            frame = body.frame() => match frame {
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else { continue };
                    buffer.extend_from_slice(&data);
                    let mut ready = Vec::new();
                    while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                        let line = Bytes::from(buffer.drain(..=end).collect::<Vec<u8>>());
                        if let Some(line) = admit(&shared, scope.as_ref(), &mut queue, line) {
                            ready.push(line);
                        }
                    }
                    ready
                }
                // The stream ended or broke: deliver what is held, then end.
                _ => {
                    let rest: Vec<Bytes> = std::mem::take(&mut queue.held).into_values().map(|h| h.line).collect();
                    shared.held_events.fetch_sub(rest.len(), Relaxed);
                    let _ = send_all(&shared, &mut tx, rest).await;
                    return;
                }
            },
            () = tokio::time::sleep_until(next) => {
                let due = queue.due(Instant::now());
                shared.held_events.fetch_sub(due.len(), Relaxed);
                due
            }
        };
        let mut ready = ready;
        if cut_after_first {
            ready.truncate(1);
        }
        let sent_any = !ready.is_empty();
        if send_all(&shared, &mut tx, ready).await.is_err() {
            // The client went away (or crashed): forget what is held.
            shared.held_events.fetch_sub(queue.held.len(), Relaxed);
            return;
        }
        if cut_after_first && sent_any {
            // Let the event leave hyper's buffer before the cut.
            tokio::time::sleep(Duration::from_millis(100)).await;
            let _ = tx.send(Err("watch cut by the fault proxy".into())).await;
            shared.held_events.fetch_sub(queue.held.len(), Relaxed);
            return;
        }
    }
}

async fn send_all(
    shared: &Shared,
    tx: &mut Sender,
    lines: Vec<Bytes>,
) -> Result<(), mpsc::SendError> {
    for line in lines {
        shared.touch();
        tx.send(Ok(Frame::data(line))).await?;
    }
    Ok(())
}

/// Decides what happens to one event line: returned to send now, or queued.
fn admit(
    shared: &Shared,
    scope: Option<&EventScope>,
    queue: &mut Queue,
    line: Bytes,
) -> Option<Bytes> {
    let Some(scope) = scope else {
        return Some(line);
    };
    let now = Instant::now();
    let head: Option<EventHead> = serde_json::from_slice(&line).ok();
    if queue.listing {
        let ends = head.as_ref().is_some_and(|h| {
            h.kind == "BOOKMARK"
                && h.object
                    .metadata
                    .annotations
                    .get(INITIAL_EVENTS_END)
                    .map(String::as_str)
                    == Some("true")
        });
        if ends {
            queue.listing = false;
        }
        // Nothing is held while the list streams: in order, untouched.
        return Some(line);
    }
    let object = head
        .as_ref()
        .filter(|h| matches!(h.kind.as_str(), "ADDED" | "MODIFIED" | "DELETED"));
    let Some(head) = object else {
        // Bookmarks, errors, anything unknown: after everything held.
        return match queue.latest() {
            None => Some(line),
            Some(at) => {
                hold(
                    shared,
                    queue,
                    at,
                    Held {
                        key: None,
                        line,
                        coalescing: false,
                    },
                );
                None
            }
        };
    };
    let meta = &head.object.metadata;
    let key = format!("{}/{}", meta.namespace, meta.name);
    let after_own = queue.pending(&key);
    let not_before = after_own.map_or(now, |(at, _)| at);
    let target = format!("{} {} {}", head.kind, scope.resource, key);
    match shared.matcher.event(scope, &meta.namespace, &meta.name) {
        Some(fault @ Fault::HoldEvents(delay)) => {
            shared.record(&fault, &target);
            let held = Held {
                key: Some(key),
                line,
                coalescing: false,
            };
            hold(shared, queue, (now + delay).max(not_before), held);
            None
        }
        Some(fault @ Fault::DropIntermediate(window)) => {
            if let Some(slot) =
                after_own.filter(|s| queue.held.get(s).is_some_and(|h| h.coalescing))
            {
                // Keep the last state, drop the one before it.
                shared.record(&fault, &target);
                if let Some(held) = queue.held.get_mut(&slot) {
                    held.line = line;
                }
            } else {
                let held = Held {
                    key: Some(key),
                    line,
                    coalescing: true,
                };
                hold(shared, queue, (now + window).max(not_before), held);
            }
            None
        }
        _ if after_own.is_some() => {
            hold(
                shared,
                queue,
                not_before,
                Held {
                    key: Some(key),
                    line,
                    coalescing: false,
                },
            );
            None
        }
        _ => Some(line),
    }
}

fn hold(shared: &Shared, queue: &mut Queue, at: Instant, held: Held) {
    shared.held_events.fetch_add(1, Relaxed);
    queue.push(at, held);
}
