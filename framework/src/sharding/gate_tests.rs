//! The gate's unit tests.

use std::time::Duration;

use super::*;
use crate::sharding::ranges;

fn gate(me: &str) -> Arc<ShardGate> {
    let gate = Arc::new(ShardGate::new(me.into()));
    gate.set_fence(Instant::now() + Duration::from_secs(60));
    gate
}

fn key_owned_by(view: &View, member: &str) -> String {
    (0..)
        .map(|i| format!("ns/k{i}"))
        .find(|k| view.owns(member, k))
        .unwrap_or_default()
}

/// The one other member, `id`, having acknowledged `acked`.
fn peer(id: &str, acked: &View) -> Vec<Peer> {
    vec![Peer {
        id: id.into(),
        acked: acked.clone(),
    }]
}

/// Member `a` alone in its ring, its claim made and observed.
fn claimed_alone() -> (View, Arc<ShardGate>) {
    let alone = View::new(["a".to_owned()]);
    let a = gate("a");
    a.observed(alone.clone(), vec![], vec![], vec![]);
    let claim = a.next_claim();
    a.claimed(&claim);
    (alone, a)
}

#[test]
fn a_new_owner_waits_for_the_old_owner_to_acknowledge() {
    let alone = View::new(["a".to_owned()]);
    let both = View::new(["a".to_owned(), "b".to_owned()]);
    let key = key_owned_by(&both, "b");
    let b = gate("b");
    b.observed(both.clone(), peer("a", &alone), vec![], vec![]);
    let claim = b.next_claim();
    b.claimed(&claim);
    // Our write must be followed by a fresh read of the peers.
    assert!(b.try_start(0, &key).is_none());
    b.observed(both.clone(), peer("a", &alone), vec![], vec![]);
    assert!(b.try_start(0, &key).is_none(), "a still claims the key");
    b.observed(both.clone(), peer("a", &both), vec![], vec![]);
    assert!(b.try_start(0, &key).is_some());
}

#[test]
fn the_old_owner_acknowledges_only_after_draining() {
    let alone = View::new(["a".to_owned()]);
    let both = View::new(["a".to_owned(), "b".to_owned()]);
    let moving = key_owned_by(&both, "b");
    let a = gate("a");
    a.observed(alone.clone(), vec![], vec![], vec![]);
    let first = a.next_claim();
    a.claimed(&first);
    a.observed(alone.clone(), vec![], vec![], vec![]);
    let running = a.try_start(0, &moving).expect("a owns every key alone");
    a.observed(both.clone(), peer("b", &View::default()), vec![], vec![]);
    assert!(
        a.try_start(0, &moving).is_none(),
        "no new start of a lost key"
    );
    assert_eq!(a.next_claim(), alone, "cannot acknowledge while draining");
    drop(running);
    assert_eq!(a.next_claim(), both);
}

#[test]
fn restoring_a_lapsed_fence_offers_the_keys_again() {
    let a = Arc::new(ShardGate::new("a".into()));
    let before = *a.wake.borrow();
    a.set_fence(Instant::now() + Duration::from_secs(60));
    let after = *a.wake.borrow();
    assert!(after > before, "a restored fence wakes the controllers");
    a.set_fence(Instant::now() + Duration::from_secs(61));
    assert_eq!(
        *a.wake.borrow(),
        after,
        "a fence that never lapsed does not"
    );
}

#[test]
fn a_live_member_of_another_configuration_stops_every_start() {
    let (alone, a) = claimed_alone();
    a.observed(
        alone.clone(),
        vec![],
        vec!["ring-0badc0de-b".into()],
        vec![],
    );
    assert!(a.try_start(0, "ns/x").is_none(), "it may own any key");
    a.observed(alone, vec![], vec![], vec![]);
    assert!(
        a.try_start(0, "ns/x").is_some(),
        "gone: the ring is ours again"
    );
}

#[test]
fn nothing_starts_past_the_fence() {
    let (alone, a) = claimed_alone();
    a.observed(alone, vec![], vec![], vec![]);
    assert!(a.try_start(0, "ns/x").is_some());
    a.set_fence(Instant::now());
    assert!(a.try_start(0, "ns/x").is_none());
}

#[test]
fn a_wake_offers_the_keys_that_moved_here_or_were_refused_not_those_that_stayed() {
    let alone = View::new(["a".to_owned()]);
    let both = View::new(["a".to_owned(), "b".to_owned()]);
    let kept = key_owned_by(&both, "a");
    let moving = key_owned_by(&both, "b");
    let a = gate("a");
    let seat = a.seat();
    let other = a.seat();
    a.observed(alone.clone(), vec![], vec![], vec![]);
    let claim = a.next_claim();
    a.claimed(&claim);
    a.observed(alone.clone(), vec![], vec![], vec![]);
    let keys = || vec![kept.clone(), moving.clone()];
    // Both reconciled while a owns every key: nothing to offer again.
    drop(a.try_start(seat, &kept));
    drop(a.try_start(seat, &moving));
    assert!(a.offer(seat, keys()).is_empty());
    assert!(
        a.offer(other, keys()).is_empty(),
        "a seat that tried no key leaves them to its queue"
    );
    // b joins: `moving` leaves, `kept` stays and is not offered.
    a.observed(both.clone(), peer("b", &both), vec![], vec![]);
    let claim = a.next_claim();
    a.claimed(&claim);
    // Peers unread after our claim: nothing may start, nothing resets.
    assert!(a.try_start(other, &kept).is_none());
    assert!(a.offer(seat, keys()).is_empty());
    a.observed(both.clone(), peer("b", &both), vec![], vec![]);
    assert!(a.offer(seat, keys()).is_empty(), "kept stayed handled");
    // b is gone: `moving` comes back without any event of its own.
    a.observed(alone.clone(), vec![], vec![], vec![]);
    let claim = a.next_claim();
    a.claimed(&claim);
    a.observed(alone, vec![], vec![], vec![]);
    assert_eq!(a.offer(seat, keys()), vec![moving.clone()]);
    assert!(a.offer(seat, keys()).is_empty(), "offered once");
    // A cancelled reconcile is offered again on the next wake, or
    // requeued by its caller when it may start already.
    assert!(a.cancelled(seat, &kept), "it may start: requeue it");
    assert_eq!(a.offer(seat, keys()), vec![kept.clone()]);
    a.set_fence(Instant::now());
    assert!(a.try_start(seat, &moving).is_none());
    a.set_fence(Instant::now() + Duration::from_secs(60));
    assert_eq!(
        a.offer(seat, keys()),
        vec![moving.clone()],
        "refused while fenced"
    );
}

#[test]
fn a_suspected_member_widens_the_selector_without_moving_a_key() {
    let both = View::new(["a".to_owned(), "b".to_owned()]);
    let alone = View::new(["a".to_owned()]);
    let a = gate("a");
    let selectors = Arc::new(Selectors::default());
    a.set_ranges(ShardKey::Uid, selectors.clone(), Duration::ZERO);
    a.observed(both.clone(), peer("b", &both), vec![], vec![]);
    let claim = a.next_claim();
    a.claimed(&claim);
    a.observed(both.clone(), peer("b", &both), vec![], vec![]);
    let own = selectors.current().unwrap_or_default();
    // A key whose uid's hash falls in one of b's buckets.
    let theirs = (0..)
        .map(|i| a.key_of("ns", &format!("k{i}"), &format!("u{i}")))
        .find(|k| both.owns("b", k))
        .unwrap_or_default();
    a.observed(both.clone(), peer("b", &both), vec![], vec!["b".into()]);
    let wide = selectors.current().unwrap_or_default();
    assert_ne!(wide, own, "the suspect's buckets are watched ahead");
    assert_eq!(
        Some(wide.as_str()),
        ranges::selector(
            ShardKey::Uid,
            &crate::sharding::ring::ranges_of("a", &[&alone])
        )
        .as_deref(),
        "a watches what it would own without b"
    );
    assert!(
        a.try_start(0, &theirs).is_none(),
        "a suspect's keys stay its own until its Lease expires"
    );
    // b renews: the ring stood still and every peer acknowledged it, so
    // the buckets fetched ahead are dropped (the keep is zero here).
    a.observed(both.clone(), peer("b", &both), vec![], vec![]);
    assert_eq!(
        selectors.current().unwrap_or_default(),
        own,
        "b renewed again"
    );
}

#[test]
fn a_suspect_expiring_restarts_no_watch_until_the_ring_stands_still() {
    use futures::{FutureExt, StreamExt};
    // Members a, b, c where a, surviving b, trades a bucket to c to stay
    // within one of even: the case where a narrower selector is due.
    let (three, two, [a_id, b_id, c_id]) = (0..)
        .map(|i| ["a", "b", "c"].map(|m| format!("{m}{i}")))
        .map(|ids| {
            (
                View::new(ids.clone()),
                View::new([ids[0].clone(), ids[2].clone()]),
                ids,
            )
        })
        .find(|(three, two, ids)| {
            crate::sharding::ring::buckets_of(&ids[0], &[three])
                & !crate::sharding::ring::buckets_of(&ids[0], &[two])
                != 0
        })
        .unwrap_or_default();
    let a = gate(&a_id);
    let selectors = Arc::new(Selectors::default());
    let keep = Duration::from_millis(300);
    a.set_ranges(ShardKey::Uid, selectors.clone(), keep);
    let peer = |id: &str, acked: &View| Peer {
        id: id.into(),
        acked: acked.clone(),
    };
    let both = vec![peer(&b_id, &three), peer(&c_id, &three)];
    a.observed(three.clone(), both.clone(), vec![], vec![]);
    let claim = a.next_claim();
    a.claimed(&claim);
    a.observed(three.clone(), both.clone(), vec![], vec![b_id.clone()]);
    let wide = selectors.current().unwrap_or_default();
    let mut changes = Box::pin(selectors.changes());
    // b's Lease expires: the read that drops it from the view no longer
    // lists it live, so it is no longer a suspect either.
    a.observed(two.clone(), vec![peer(&c_id, &three)], vec![], vec![]);
    let claim = a.next_claim();
    assert_eq!(claim, two, "nothing to drain");
    a.claimed(&claim);
    a.observed(two.clone(), vec![peer(&c_id, &two)], vec![], vec![]);
    assert!(
        changes.next().now_or_never().is_none(),
        "the handover restarted the sharded watches (now {:?})",
        selectors.current()
    );
    assert_eq!(selectors.current().unwrap_or_default(), wide);
    // Once the ring stood still for the keep, the caches watch exactly
    // the buckets a owns, without the one it gave c.
    std::thread::sleep(keep);
    a.observed(two.clone(), vec![peer(&c_id, &two)], vec![], vec![]);
    let owns = ranges::selector(
        ShardKey::Uid,
        &crate::sharding::ring::ranges_of(&a_id, &[&two]),
    );
    assert_ne!(owns.as_deref(), Some(wide.as_str()));
    assert_eq!(selectors.current(), owns);
}

#[test]
fn many_unneeded_buckets_are_dropped_at_once() {
    let alone = View::new(["a".to_owned()]);
    let three = View::new(["a".to_owned(), "b".to_owned(), "c".to_owned()]);
    let a = gate("a");
    let selectors = Arc::new(Selectors::default());
    a.set_ranges(ShardKey::Uid, selectors.clone(), Duration::from_secs(3600));
    a.observed(alone.clone(), vec![], vec![], vec![]);
    let claim = a.next_claim();
    a.claimed(&claim);
    let everything = ranges::selector(
        ShardKey::Uid,
        &crate::sharding::ring::ranges_of("a", &[&alone]),
    );
    assert_eq!(selectors.current(), everything);
    // b and c join: a keeps a third, and while the handover runs it still
    // may hold what it claimed alone; once it claimed the new view, the
    // two thirds it no longer needs are not kept for the hour.
    let peers = ["b", "c"]
        .map(|id| Peer {
            id: id.into(),
            acked: View::default(),
        })
        .to_vec();
    a.observed(three.clone(), peers, vec![], vec![]);
    let claim = a.next_claim();
    assert_eq!(claim, three);
    a.claimed(&claim);
    let third = ranges::selector(
        ShardKey::Uid,
        &crate::sharding::ring::ranges_of("a", &[&three]),
    );
    assert_eq!(selectors.current(), third);
}
