//! The write loop's unit tests, against a mock API server.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::json;

use crate::mock::{config_map, object, status, target};
use crate::{ConflictPolicy, FreshCopies, Intent, Observed, Strict, Update, Verb, WriteStrategy};

/// A cache holding at most one copy, counting the questions asked.
#[derive(Debug, Default)]
struct OneCopy {
    copy: Mutex<Option<Observed>>,
    asked: AtomicU32,
}

impl OneCopy {
    fn holding(copy: Observed) -> Arc<Self> {
        Arc::new(OneCopy {
            copy: Mutex::new(Some(copy)),
            asked: AtomicU32::new(0),
        })
    }
}

impl FreshCopies for OneCopy {
    fn newer<'a>(
        &'a self,
        _namespace: Option<&'a str>,
        _name: &'a str,
        _than: &'a str,
        _wait: Duration,
    ) -> BoxFuture<'a, Option<Observed>> {
        self.asked.fetch_add(1, Relaxed);
        let copy = self.copy.lock().unwrap().clone();
        Box::pin(async move { copy })
    }
}

fn label() -> crate::Mutation {
    Intent::set_label("a", "1").into()
}

#[tokio::test]
async fn a_newer_cached_copy_replaces_the_get() {
    // The cached copy already carries the label: re-applying the intent
    // to it changes nothing, so the write ends without a second PATCH.
    let cached = config_map("2", json!({"a": "1", "b": "2"}));
    let copies = OneCopy::holding(Observed::typed(cached.clone()));
    let (target, seen) = target(vec![status(409, "Conflict", 0)]);
    let target = target.with_fresh_copies(copies.clone());
    let written = Strict::default()
        .write(&target, &object(config_map("1", json!({}))), &label())
        .await
        .unwrap();
    assert_eq!(written.outcome.rereads_from_cache, 1);
    assert_eq!(written.outcome.rereads_by_get, 0);
    assert_eq!(written.outcome.requests(Verb::Get), 0);
    assert_eq!(
        *seen.lock().unwrap(),
        ["PATCH /api/v1/namespaces/ns/configmaps/cm"]
    );
    assert_eq!(
        written.object.map(|o| o.metadata.resource_version),
        Some(Some("2".into()))
    );
}

#[tokio::test]
async fn a_copy_no_newer_than_the_conflict_falls_back_to_get() {
    for stale in ["1", "0", "not-a-number"] {
        let copies = OneCopy::holding(Observed::complete(config_map(stale, json!({}))));
        let (target, seen) = target(vec![
            status(409, "Conflict", 0),
            (200, config_map("2", json!({"b": "2"}))),
            (200, config_map("3", json!({"a": "1", "b": "2"}))),
        ]);
        let target = target.with_fresh_copies(copies.clone());
        let written = Strict::default()
            .write(&target, &object(config_map("1", json!({}))), &label())
            .await
            .unwrap();
        assert_eq!(copies.asked.load(Relaxed), 1, "{stale}");
        assert_eq!(
            (
                written.outcome.rereads_from_cache,
                written.outcome.rereads_by_get
            ),
            (0, 1),
            "{stale}"
        );
        assert_eq!(
            seen.lock().unwrap()[1],
            "GET /api/v1/namespaces/ns/configmaps/cm"
        );
        assert_eq!(
            written.object.map(|o| o.metadata.resource_version),
            Some(Some("3".into()))
        );
    }
}

#[tokio::test]
async fn update_never_puts_a_typed_cached_copy() {
    let copies = OneCopy::holding(Observed::typed(config_map("2", json!({"b": "2"}))));
    let (target, seen) = target(vec![
        status(409, "Conflict", 0),
        (200, config_map("2", json!({"b": "2"}))),
        (200, config_map("3", json!({"a": "1", "b": "2"}))),
    ]);
    let target = target.with_fresh_copies(copies.clone());
    let written = Update::default()
        .write_json(
            &target,
            Observed::complete(config_map("1", json!({}))),
            &label(),
        )
        .await
        .unwrap();
    assert_eq!(written.outcome.rereads_by_get, 1);
    assert_eq!(written.outcome.rereads_from_cache, 0);
    assert_eq!(
        seen.lock().unwrap()[1],
        "GET /api/v1/namespaces/ns/configmaps/cm"
    );
}

#[tokio::test]
async fn update_puts_a_complete_cached_copy_without_a_get() {
    let copies = OneCopy::holding(Observed::complete(config_map("2", json!({"b": "2"}))));
    let (target, seen) = target(vec![
        status(409, "Conflict", 0),
        (200, config_map("3", json!({"a": "1", "b": "2"}))),
    ]);
    let target = target.with_fresh_copies(copies);
    let written = Update::default()
        .write_json(
            &target,
            Observed::complete(config_map("1", json!({}))),
            &label(),
        )
        .await
        .unwrap();
    assert_eq!(written.outcome.rereads_from_cache, 1);
    assert_eq!(written.outcome.requests(Verb::Get), 0);
    assert_eq!(written.outcome.requests(Verb::Update), 2);
    assert!(seen.lock().unwrap().iter().all(|r| r.starts_with("PUT")));
}

#[tokio::test]
async fn requeue_policy_neither_reads_nor_asks_the_cache() {
    let copies = OneCopy::holding(Observed::complete(config_map("2", json!({}))));
    let (target, seen) = target(vec![status(409, "Conflict", 0)]);
    let target = target.with_fresh_copies(copies.clone());
    let err = Strict::new(ConflictPolicy::Requeue)
        .write(&target, &object(config_map("1", json!({}))), &label())
        .await
        .unwrap_err();
    assert!(matches!(err, crate::Error::Conflict { .. }), "{err:?}");
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert_eq!(copies.asked.load(Relaxed), 0);
}

#[tokio::test]
async fn a_cached_copy_of_a_recreated_object_is_reported_as_such() {
    let mut recreated = config_map("5", json!({}));
    recreated["metadata"]["uid"] = json!("u2");
    let copies = OneCopy::holding(Observed::complete(recreated));
    let (target, _) = target(vec![status(409, "Conflict", 0)]);
    let target = target.with_fresh_copies(copies);
    let err = Strict::default()
        .write(&target, &object(config_map("1", json!({}))), &label())
        .await
        .unwrap_err();
    assert!(
        matches!(err, crate::Error::ObjectRecreated { .. }),
        "{err:?}"
    );
}

/// The JSON patch a typed copy showing `data: {}` (which the server does
/// not store) builds trips on the missing map; the same version read raw
/// lands it, without a conflict, even under `requeue`.
#[tokio::test]
async fn a_guard_tripped_by_a_typed_copy_of_the_stored_version_is_rebuilt_from_it() {
    let stored = config_map("1", json!({}));
    let mut shown = stored.clone();
    shown["data"] = json!({});
    let mut landed = stored.clone();
    landed["data"] = json!({"k": "v"});
    let (target, seen) = target(vec![
        status(422, "Invalid", 0),
        (200, stored.clone()),
        (200, landed),
    ]);
    let add = crate::Mutation::custom(|cm| cm["data"]["k"] = json!("v"));
    let written = crate::Guarded::new(ConflictPolicy::Requeue)
        .write_json(&target, Observed::typed(shown), &add)
        .await
        .unwrap();
    assert_eq!(written.outcome.conflicts, 0, "{:?}", written.outcome);
    assert_eq!(written.outcome.rereads_by_get, 1);
    let path = "/api/v1/namespaces/ns/configmaps/cm";
    assert_eq!(
        *seen.lock().unwrap(),
        [
            format!("PATCH {path}"),
            format!("GET {path}"),
            format!("PATCH {path}")
        ]
    );
}

/// A guard tripped by a typed copy of an older version than the stored
/// one is a conflict: under `requeue` it goes back to the reconciler.
#[tokio::test]
async fn a_guard_tripped_by_a_typed_copy_of_an_older_version_conflicts_under_requeue() {
    let mut shown = config_map("1", json!({}));
    shown["data"] = json!({});
    let (target, _) = target(vec![
        status(422, "Invalid", 0),
        (200, config_map("2", json!({}))),
    ]);
    let add = crate::Mutation::custom(|cm| cm["data"]["k"] = json!("v"));
    let err = crate::Guarded::new(ConflictPolicy::Requeue)
        .write_json(&target, Observed::typed(shown), &add)
        .await
        .unwrap_err();
    assert!(matches!(err, crate::Error::Conflict { .. }), "{err:?}");
}

/// A guarded patch past the server's 10,000 operations goes as `strict`'s
/// merge patch with the observed `resourceVersion`, counted as a fallback.
#[tokio::test]
async fn a_guarded_patch_past_the_operation_limit_goes_as_the_versioned_patch() {
    let (target, seen) = target(vec![(200, config_map("2", json!({})))]);
    let many = crate::Mutation::custom(|cm| {
        for i in 0..5001 {
            cm["data"][format!("k{i}")] = json!("v");
        }
    });
    let mut observed = config_map("1", json!({}));
    observed["data"] = json!({"kept": "yes"});
    let written = crate::Guarded::default()
        .write(&target, &object(observed), &many)
        .await
        .unwrap();
    assert_eq!(
        written.outcome.fallback,
        Some(crate::Fallback::OperationLimit)
    );
    assert_eq!(written.outcome.requests(Verb::Patch), 1);
    assert_eq!(seen.lock().unwrap().len(), 1, "nothing sent before");
}

/// A guarded patch the server refuses for its size (`413`) is sent again
/// as the versioned merge patch.
#[tokio::test]
async fn a_guarded_patch_refused_for_its_size_goes_as_the_versioned_patch() {
    let (target, seen) = target(vec![
        status(413, "RequestEntityTooLarge", 0),
        (200, config_map("2", json!({"a": "1"}))),
    ]);
    let written = crate::Guarded::default()
        .write(&target, &object(config_map("1", json!({}))), &label())
        .await
        .unwrap();
    assert_eq!(
        written.outcome.fallback,
        Some(crate::Fallback::OperationLimit)
    );
    assert_eq!(seen.lock().unwrap().len(), 2);
}
