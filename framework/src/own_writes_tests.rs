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
