//! Tests of the ledger of the manager's own writes (`own_writes.rs`).

use super::*;

fn key(name: &str) -> WriteKey {
    ("configmaps".into(), Some("ns".into()), name.into())
}

fn held(version: &str) -> Seen {
    Seen::Held {
        version: version.into(),
        uid: Some("u1".into()),
    }
}

#[test]
fn versions_are_met_by_the_same_or_a_newer_one_and_never_guessed() {
    let want = Expect::Version("10".into());
    assert!(want.met_by(&held("10")));
    assert!(want.met_by(&held("11")));
    assert!(!want.met_by(&held("9")), "integers compare as integers");
    assert!(!want.met_by(&Seen::Absent));
    assert!(want.met_by(&Seen::Uncached));
    let opaque = Expect::Version("abc".into());
    assert!(opaque.met_by(&held("abc")));
    assert!(
        !opaque.met_by(&held("abd")),
        "opaque versions: equality only"
    );
    let gone = Expect::Gone {
        uid: Some("u1".into()),
    };
    assert!(gone.met_by(&Seen::Absent));
    assert!(
        !gone.met_by(&held("12")),
        "the deleted object is still cached"
    );
    let successor = Seen::Held {
        version: "13".into(),
        uid: Some("u2".into()),
    };
    assert!(gone.met_by(&successor), "a successor of the same name");
}

#[tokio::test]
async fn a_reconcile_waits_for_its_own_and_its_childrens_writes() {
    let ledger = OwnWrites::default();
    ledger.record(key("parent"), Expect::Version("5".into()), None, true);
    ledger.record(
        key("child"),
        Expect::Version("6".into()),
        Some(key("parent")),
        true,
    );
    // Asked by borrowed parts, as a controller asks of each object.
    assert!(ledger.has_pending(&("configmaps", Some("ns"), "parent")));
    assert!(!ledger.has_pending(&("configmaps", None, "parent")));
    assert!(!ledger.has_pending(&("secrets", Some("ns"), "parent")));
    let stale = |_: &WriteKey| held("4");
    assert!(
        ledger
            .wait_for(&key("parent"), Duration::from_millis(60), stale)
            .await
            .is_err()
    );
    // The parent's watch caught up, the child's not yet.
    ledger.observed(&key("parent"), &held("5"));
    let seen = |k: &WriteKey| {
        if k.2 == "child" {
            Seen::Absent
        } else {
            held("5")
        }
    };
    assert!(
        ledger
            .wait_for(&key("parent"), Duration::from_millis(60), seen)
            .await
            .is_err()
    );
    assert!(
        ledger.has_pending(&("configmaps", Some("ns"), "parent")),
        "its child's record"
    );
    ledger.observed(&key("child"), &held("6"));
    assert!(!ledger.has_pending(&("configmaps", Some("ns"), "parent")));
    assert!(
        ledger
            .wait_for(&key("parent"), Duration::from_millis(60), seen)
            .await
            .is_ok()
    );
    assert_eq!(ledger.held(), 0, "every record went once observed");
}

#[tokio::test(start_paused = true)]
async fn the_watch_wakes_a_wait_as_it_drops_each_record_the_reconcile_depends_on() {
    let ledger = std::sync::Arc::new(OwnWrites::default());
    ledger.record(key("parent"), Expect::Version("5".into()), None, true);
    let children: Vec<WriteKey> = (0..12).map(|i| key(&format!("child-{i}"))).collect();
    for child in &children {
        ledger.record(
            child.clone(),
            Expect::Version("6".into()),
            Some(key("parent")),
            true,
        );
    }
    // Another object's record, whatever channel it shares.
    ledger.record(key("other"), Expect::Version("7".into()), None, true);
    // The caches never show a record here: only the watch's drops end
    // the wait, which gives up after a minute of (paused) time.
    let wait = tokio::spawn({
        let ledger = ledger.clone();
        async move {
            ledger
                .wait_for(&key("parent"), Duration::from_secs(60), |_| held("1"))
                .await
        }
    });
    tokio::task::yield_now().await;
    ledger.observed(&key("other"), &held("7"));
    ledger.observed(&key("parent"), &held("5"));
    for child in &children {
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!wait.is_finished(), "{} still pending", child.2);
        ledger.observed(child, &held("6"));
    }
    // Ended by the last drop's wake, not by a look 50 ms later: the
    // paused clock does not move while this task keeps yielding.
    let at = tokio::time::Instant::now();
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(wait.is_finished(), "woken by the last record's drop");
    assert_eq!(tokio::time::Instant::now(), at);
    let waited = wait.await.expect("the wait ends");
    assert!(matches!(waited, Ok(Some(_))), "caught up: {waited:?}");
    assert_eq!(ledger.held(), 0);
}

#[test]
fn records_do_not_outlive_their_keep_time() {
    let ledger = OwnWrites::new(Duration::ZERO);
    for i in 0..10_000 {
        ledger.record(
            key(&format!("o{i}")),
            Expect::Version("1".into()),
            None,
            true,
        );
    }
    assert!(ledger.held() < 512, "{}", ledger.held());
}

#[test]
fn the_versions_of_own_writes_are_kept_only_when_a_controller_skips_their_events() {
    let ledger = OwnWrites::default();
    ledger.record(key("a"), Expect::Version("7".into()), None, true);
    ledger.record(key("b"), Expect::Version("8".into()), None, false);
    assert!(!ledger.caused(&key("a"), "7"));
    assert!(!ledger.caused(&key("b"), "8"));
    assert!(ledger.lock().caused.is_empty(), "nothing kept unasked");
    ledger.tell_own_events();
    ledger.record(key("a"), Expect::Version("9".into()), None, true);
    ledger.record(key("b"), Expect::Version("10".into()), None, false);
    assert!(ledger.caused(&key("a"), "9"));
    assert!(ledger.caused(&key("b"), "10"));
    assert!(
        !ledger.caused(&key("a"), "7"),
        "only the last write's version"
    );
}
