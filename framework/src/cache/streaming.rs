//! Whether a cache's first list can come as a streaming list: a watch
//! that starts with the current objects (`sendInitialEvents`, the API
//! server's WatchList) instead of paged `LIST` requests, so the server
//! never assembles a page and the client never holds one.
//!
//! A server that does not serve it either refuses the parameters or
//! ignores them, and a watch that ignores them would never say its initial
//! events ended: the cache would never sync. So each cache asks once, when
//! its watch starts, with a watch that matches no object, and streams only
//! when the answer is the bookmark that ends the initial events; anything
//! else (an error, no answer in time, another event) keeps the paged list.

use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, WatchEvent, WatchParams};

use crate::object::AnyObject;

/// The annotation of the bookmark that ends a streaming list's initial
/// events.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// The probe's selector. Should an object of that name exist, its event
/// comes first and the probe says no: the paged list is the safe answer.
const NO_OBJECT: &str = "metadata.name=concord-streaming-list-probe";

/// How long the probe waits for its answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether the API server streams the first list of `api`'s objects.
pub(super) async fn serves_streaming_lists<K: AnyObject>(api: &Api<K>) -> bool {
    let params = WatchParams::streaming_lists()
        .fields(NO_OBJECT)
        .timeout(PROBE_TIMEOUT.as_secs() as u32);
    let probe = async {
        let mut events = api.watch(&params, "0").await.ok()?.boxed();
        match events.next().await? {
            Ok(WatchEvent::Bookmark(bookmark)) => Some(ends_initial_events(
                bookmark.metadata.annotations.get(INITIAL_EVENTS_END),
            )),
            _ => Some(false),
        }
    };
    let streams = matches!(
        tokio::time::timeout(PROBE_TIMEOUT + Duration::from_secs(5), probe).await,
        Ok(Some(true))
    );
    if !streams {
        tracing::info!(
            resource = %api.resource_url(),
            "the API server does not stream lists (sendInitialEvents): the cache lists in pages"
        );
    }
    streams
}

fn ends_initial_events(annotation: Option<&String>) -> bool {
    annotation.is_some_and(|value| value == "true")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_end_of_initial_events_says_yes() {
        assert!(ends_initial_events(Some(&"true".to_owned())));
        assert!(!ends_initial_events(Some(&"false".to_owned())));
        assert!(!ends_initial_events(None));
    }
}
