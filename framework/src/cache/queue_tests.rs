//! The queue's unit tests: lane order, aging, coalescing, slots and
//! objects asked for again.

use super::*;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;

use Lane::{Changed, Listed};

fn config_map(name: &str, version: &str) -> Arc<ConfigMap> {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.namespace = Some("default".into());
    cm.metadata.resource_version = Some(version.into());
    Arc::new(cm)
}

fn unlimited() -> Fairness {
    Fairness::with_slots(0)
}

fn next(stream: &mut Announced<ConfigMap>) -> Option<String> {
    let object = stream.next().now_or_never()??;
    Some(format!(
        "{}@{}",
        object.name_any(),
        object.resource_version()?
    ))
}

/// Every name the queue hands out until it has nothing ready.
fn drain(stream: &mut Announced<ConfigMap>) -> Vec<String> {
    std::iter::from_fn(|| stream.next().now_or_never().flatten())
        .map(|o| o.name_any())
        .collect()
}

#[test]
fn keeps_one_newest_copy_per_object_in_first_announced_order() {
    let (announcer, mut announced) = queue(None, unlimited());
    for version in 1..=1000 {
        assert!(announcer.announce(None, config_map("a", &version.to_string()), Changed));
        assert!(announcer.announce(None, config_map("b", &version.to_string()), Changed));
    }
    assert_eq!(announcer.waiting(), 2);
    assert_eq!(next(&mut announced).as_deref(), Some("a@1000"));
    announced.slots().done(Some("default"), "a");
    announcer.announce(None, config_map("a", "1001"), Changed);
    assert_eq!(next(&mut announced).as_deref(), Some("b@1000"));
    assert_eq!(next(&mut announced).as_deref(), Some("a@1001"));
    assert_eq!(next(&mut announced), None, "empty: pending");
}

#[test]
fn changed_objects_are_taken_before_listed_ones() {
    let (announcer, mut announced) = queue(None, unlimited());
    for name in ["l1", "l2", "l3"] {
        announcer.announce(None, config_map(name, "1"), Listed);
    }
    announcer.announce(None, config_map("new", "1"), Changed);
    assert_eq!(drain(&mut announced), ["new", "l1", "l2", "l3"]);
}

#[test]
fn the_listed_lane_is_taken_after_max_passes_changed_objects() {
    let fairness = Fairness {
        slots: 0,
        max_passes: 2,
        max_wait: Duration::from_secs(3600),
    };
    let (announcer, mut announced) = queue(None, fairness);
    for name in ["l1", "l2"] {
        announcer.announce(None, config_map(name, "1"), Listed);
    }
    for name in ["c1", "c2", "c3", "c4", "c5"] {
        announcer.announce(None, config_map(name, "1"), Changed);
    }
    assert_eq!(
        drain(&mut announced),
        ["c1", "c2", "l1", "c3", "c4", "l2", "c5"]
    );
}

#[test]
fn the_listed_lane_is_taken_once_it_waited_max_wait() {
    let fairness = Fairness {
        slots: 0,
        max_passes: u32::MAX,
        max_wait: Duration::from_millis(20),
    };
    let (announcer, mut announced) = queue(None, fairness);
    announcer.announce(None, config_map("listed", "1"), Listed);
    for name in ["c1", "c2"] {
        announcer.announce(None, config_map(name, "1"), Changed);
    }
    assert_eq!(next(&mut announced).as_deref(), Some("c1@1"));
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(
        drain(&mut announced),
        ["listed", "c2"],
        "the listed object waited past the bound"
    );
}

#[test]
fn a_listed_object_changed_while_it_waits_moves_to_the_changed_lane() {
    let (announcer, mut announced) = queue(None, unlimited());
    for name in ["l1", "l2", "l3"] {
        announcer.announce(None, config_map(name, "1"), Listed);
    }
    announcer.announce(None, config_map("l3", "2"), Changed);
    // A relist of a changed object keeps it in the changed lane.
    announcer.announce(None, config_map("l3", "3"), Listed);
    assert_eq!(announcer.waiting(), 3, "still one copy each");
    assert_eq!(next(&mut announced).as_deref(), Some("l3@3"));
    assert_eq!(drain(&mut announced), ["l1", "l2"]);
}

#[test]
fn no_more_objects_are_out_than_slots() {
    let (announcer, mut announced) = queue(None, Fairness::with_slots(2));
    let slots = announced.slots();
    for name in ["a", "b", "c"] {
        announcer.announce(None, config_map(name, "1"), Listed);
    }
    assert_eq!(drain(&mut announced), ["a", "b"], "two slots");
    slots.done(Some("default"), "elsewhere");
    assert_eq!(
        drain(&mut announced),
        Vec::<String>::new(),
        "not taken here"
    );
    slots.done(Some("default"), "a");
    assert_eq!(drain(&mut announced), ["c"]);
}

#[test]
fn changes_during_a_reconcile_run_it_once_more_after() {
    let (announcer, mut announced) = queue(None, Fairness::with_slots(4));
    let slots = announced.slots();
    announcer.announce(None, config_map("a", "1"), Listed);
    assert_eq!(next(&mut announced).as_deref(), Some("a@1"));
    for version in 2..=5 {
        announcer.announce(None, config_map("a", &version.to_string()), Changed);
    }
    assert_eq!(next(&mut announced), None, "never twice at once");
    assert_eq!(announcer.waiting(), 1, "held once");
    slots.done(Some("default"), "a");
    assert_eq!(next(&mut announced).as_deref(), Some("a@5"), "the newest");
    slots.done(Some("default"), "a");
    assert_eq!(next(&mut announced), None, "once, not four times");
}

#[test]
fn a_stopped_controller_refuses_announcements() {
    let (announcer, announced) = queue(None, unlimited());
    drop(announced);
    assert!(!announcer.announce(None, config_map("a", "1"), Changed));
}

#[test]
fn a_predicate_refuses_before_the_queue() {
    let predicate = Predicate::new(|_: Option<&ConfigMap>, new: &ConfigMap| {
        new.resource_version().as_deref() != Some("2")
    });
    let (announcer, mut announced) = queue(Some(predicate), unlimited());
    assert!(announcer.announce(None, config_map("a", "2"), Changed));
    assert_eq!(next(&mut announced), None, "refused");
    announcer.announce(None, config_map("a", "1"), Changed);
    announcer.announce(None, config_map("a", "2"), Changed);
    assert_eq!(
        next(&mut announced).as_deref(),
        Some("a@2"),
        "a waiting copy is refreshed"
    );
}

#[test]
fn an_announcement_and_a_freed_slot_wake_a_waiting_controller() {
    let (announcer, mut announced) = queue::<ConfigMap>(None, Fairness::with_slots(1));
    let slots = announced.slots();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let waiting = tokio::spawn(async move {
            let first = announced.next().await.map(|o| o.name_any());
            let second = announced.next().await.map(|o| o.name_any());
            (first, second)
        });
        tokio::task::yield_now().await;
        announcer.announce(None, config_map("late", "7"), Listed);
        announcer.announce(None, config_map("later", "8"), Listed);
        tokio::task::yield_now().await;
        slots.done(Some("default"), "late");
        let (first, second) = waiting.await.unwrap();
        assert_eq!(first.as_deref(), Some("late"));
        assert_eq!(second.as_deref(), Some("later"));
    });
}

#[test]
fn waiting_for_a_free_slot_does_not_age_the_listed_lane() {
    let fairness = Fairness {
        slots: 1,
        max_passes: u32::MAX,
        max_wait: Duration::from_millis(20),
    };
    let (announcer, mut announced) = queue(None, fairness);
    let slots = announced.slots();
    for name in ["l1", "l2"] {
        announcer.announce(None, config_map(name, "1"), Listed);
    }
    assert_eq!(next(&mut announced).as_deref(), Some("l1@1"));
    std::thread::sleep(Duration::from_millis(30));
    announcer.announce(None, config_map("new", "1"), Changed);
    slots.done(Some("default"), "l1");
    assert_eq!(
        next(&mut announced).as_deref(),
        Some("new@1"),
        "nothing was passed over while the slot was busy"
    );
}

#[test]
fn a_first_list_is_handed_out_as_the_stores_copies_once_it_is_in() {
    let (announcer, mut announced) = queue(
        Some(crate::Predicate::new(|_, cm: &ConfigMap| {
            cm.name_any() != "refused"
        })),
        unlimited(),
    );
    for name in ["a", "refused", "b", "deleted"] {
        assert!(announcer.announce_first_listed(&config_map(name, "1")));
    }
    assert_eq!(next(&mut announced), None, "nothing before the list is in");
    let stored: std::collections::HashMap<&str, Arc<ConfigMap>> =
        [("a", config_map("a", "1")), ("b", config_map("b", "1"))].into();
    announcer.fill(|namespace, name| {
        assert_eq!(namespace, Some("default"));
        stored.get(name).cloned()
    });
    let taken: Vec<Arc<ConfigMap>> =
        std::iter::from_fn(|| announced.next().now_or_never().flatten()).collect();
    assert_eq!(
        taken.len(),
        2,
        "the refused one never queued, the deleted one left"
    );
    for object in taken {
        assert!(
            Arc::ptr_eq(&object, &stored[object.name_any().as_str()]),
            "the store's own copy, not a second one"
        );
    }
    assert_eq!(announcer.waiting(), 0);
    announced.slots().done(Some("default"), "a");
    announcer.announce(None, config_map("a", "2"), Changed);
    assert_eq!(
        next(&mut announced).as_deref(),
        Some("a@2"),
        "and after it as before"
    );
}

/// A lazy queue over `cache` (name → version).
fn lazy_queue(
    cache: &Arc<Mutex<HashMap<String, String>>>,
    slots: usize,
) -> (Announcer<ConfigMap>, Announced<ConfigMap>) {
    keeping_queue(cache, slots, 0)
}

/// A lazy queue over `cache` that keeps up to `keep` copies of changes.
fn keeping_queue(
    cache: &Arc<Mutex<HashMap<String, String>>>,
    slots: usize,
    keep: usize,
) -> (Announcer<ConfigMap>, Announced<ConfigMap>) {
    let (loaded, held) = (cache.clone(), cache.clone());
    let lazy = Lazy {
        load: Box::new(move |_, name| {
            let version = loaded.lock().unwrap().get(name).cloned()?;
            Some(config_map(name, &version))
        }),
        holds: Box::new(move |_, name| held.lock().unwrap().contains_key(name)),
        keep,
    };
    queue_with(None, Fairness::with_slots(slots), Some(lazy))
}

#[test]
fn a_lazy_queue_hands_out_the_cache_copy_at_its_turn_and_skips_the_deleted() {
    let cache = Arc::new(Mutex::new(HashMap::new()));
    let (announcer, mut announced) = lazy_queue(&cache, 0);
    for (name, version) in [("a", "1"), ("b", "1"), ("c", "1")] {
        cache
            .lock()
            .unwrap()
            .insert(name.to_owned(), version.to_owned());
        announcer.announce(None, config_map(name, version), Changed);
    }
    // Changed after it was announced, and one deleted before its turn.
    cache.lock().unwrap().insert("a".into(), "7".into());
    cache.lock().unwrap().remove("b");
    assert_eq!(
        next(&mut announced).as_deref(),
        Some("a@7"),
        "the cache's copy, not the event's"
    );
    assert_eq!(
        next(&mut announced).as_deref(),
        Some("c@1"),
        "b was deleted: skipped"
    );
    assert_eq!(next(&mut announced), None);
}

#[test]
fn an_object_asked_for_again_is_queued_once_and_never_while_it_runs() {
    let cache = Arc::new(Mutex::new(HashMap::from([(
        "a".to_owned(),
        "1".to_owned(),
    )])));
    let (announcer, mut announced) = lazy_queue(&cache, 2);
    let slots = announced.slots();
    announcer.announce(None, config_map("a", "1"), Changed);
    assert_eq!(next(&mut announced).as_deref(), Some("a@1"));
    // Asked for again (a requeue, a trigger) while it runs: held aside,
    // once, and decoded from the cache when its turn comes.
    cache.lock().unwrap().insert("a".into(), "2".into());
    slots.again(Some("default"), "a");
    slots.again(Some("default"), "a");
    assert_eq!(next(&mut announced), None, "never twice at once");
    slots.done(Some("default"), "a");
    assert_eq!(next(&mut announced).as_deref(), Some("a@2"));
    slots.done(Some("default"), "a");
    assert_eq!(next(&mut announced), None, "once, not twice");
    // Asked for again once deleted from the cache: nothing to reconcile.
    cache.lock().unwrap().remove("a");
    slots.again(Some("default"), "a");
    assert_eq!(next(&mut announced), None);
    // A waiting copy is coalesced with a trigger, and a listed object
    // named by one moves to the changed lane.
    cache.lock().unwrap().insert("b".into(), "1".into());
    cache.lock().unwrap().insert("c".into(), "1".into());
    announcer.announce(None, config_map("b", "1"), Listed);
    announcer.announce(None, config_map("c", "1"), Listed);
    slots.again(Some("default"), "c");
    assert_eq!(drain(&mut announced), ["c", "b"]);
}

#[test]
fn a_lazy_queue_holds_no_copy() {
    let cache = Arc::new(Mutex::new(HashMap::from([(
        "a".to_owned(),
        "1".to_owned(),
    )])));
    let (announcer, announced) = lazy_queue(&cache, 1);
    let object = config_map("a", "1");
    announcer.announce(None, object.clone(), Changed);
    assert_eq!(
        Arc::strong_count(&object),
        1,
        "the queue keeps the key only"
    );
    drop(announced);
}

#[test]
fn an_object_held_back_frees_its_slot_and_runs_once_on_the_change_or_the_release() {
    let cache = Arc::new(Mutex::new(HashMap::from([
        ("a".to_owned(), "1".to_owned()),
        ("b".to_owned(), "1".to_owned()),
    ])));
    let (announcer, mut announced) = lazy_queue(&cache, 1);
    let slots = announced.slots();
    announcer.announce(None, config_map("a", "1"), Changed);
    announcer.announce(None, config_map("b", "1"), Changed);
    assert_eq!(next(&mut announced).as_deref(), Some("a@1"));
    assert_eq!(next(&mut announced), None, "one slot");
    // Held back: its slot goes to the next object.
    slots.hold(Some("default"), "a");
    assert_eq!(next(&mut announced).as_deref(), Some("b@1"));
    slots.done(Some("default"), "b");
    assert_eq!(next(&mut announced), None, "a waits, not queued");
    // The change that ends the wait queues it; the release then adds
    // nothing, while it waits or once it ran.
    cache.lock().unwrap().insert("a".into(), "2".into());
    announcer.announce(None, config_map("a", "2"), Changed);
    slots.release(Some("default"), "a");
    assert_eq!(next(&mut announced).as_deref(), Some("a@2"));
    slots.release(Some("default"), "a");
    slots.done(Some("default"), "a");
    assert_eq!(next(&mut announced), None, "once, not twice");
    // Held back with no change to come (a child's write): the release
    // queues it.
    announcer.announce(None, config_map("b", "1"), Changed);
    assert_eq!(next(&mut announced).as_deref(), Some("b@1"));
    slots.hold(Some("default"), "b");
    assert_eq!(next(&mut announced), None);
    slots.release(Some("default"), "b");
    assert_eq!(next(&mut announced).as_deref(), Some("b@1"));
    // Announced between its hand-out and its hold: queued at once.
    cache.lock().unwrap().insert("b".into(), "2".into());
    announcer.announce(None, config_map("b", "2"), Changed);
    slots.hold(Some("default"), "b");
    assert_eq!(next(&mut announced).as_deref(), Some("b@2"));
}

#[test]
fn a_queue_that_keeps_changes_hands_out_their_copies_up_to_its_bound_and_none_deleted() {
    // The cache's own copies carry another version than the announced
    // ones, to tell which the queue handed out.
    let cache = Arc::new(Mutex::new(HashMap::new()));
    for name in ["a", "b", "c", "d", "e"] {
        cache
            .lock()
            .unwrap()
            .insert(name.to_owned(), "cache".to_owned());
    }
    let (announcer, mut announced) = keeping_queue(&cache, 0, 2);
    // Listed objects are decoded at their turn, and the keys they queue
    // do not count against the copies kept.
    announcer.announce(None, config_map("d", "event"), Listed);
    announcer.announce(None, config_map("e", "event"), Listed);
    for name in ["a", "b", "c"] {
        announcer.announce(None, config_map(name, "event"), Changed);
    }
    cache.lock().unwrap().remove("b");
    assert_eq!(
        std::iter::from_fn(|| next(&mut announced)).collect::<Vec<_>>(),
        ["a@event", "c@cache", "d@cache", "e@cache"],
        "a's copy kept; b's kept, but b deleted since; c past the bound of 2"
    );
    let slots = announced.slots();
    for name in ["a", "c", "d", "e"] {
        slots.done(Some("default"), name);
    }
    // Asked for again: the kept copy is dropped, and the cache's decoded.
    announcer.announce(None, config_map("a", "event"), Changed);
    slots.again(Some("default"), "a");
    assert_eq!(next(&mut announced).as_deref(), Some("a@cache"));
}
