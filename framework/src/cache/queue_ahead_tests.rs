//! The queue's unit tests of handing out ahead: batches, and a listed
//! object giving way to a changed one when it starts.

use super::*;

fn start(slots: &Slots<ConfigMap>, name: &str) -> bool {
    slots.start(&config_map(name, "1"))
}

/// A queue of one slot and one ahead in which listed `l2`, handed out
/// ahead, gave way to `changed` when it came to start (`l1` done).
fn l2_gave_way_to(changed: &str) -> (Announcer<ConfigMap>, Announced<ConfigMap>, Slots<ConfigMap>) {
    let (announcer, mut announced) = queue(None, Fairness::with_slots(1).with_ahead(1));
    let slots = announced.slots();
    for name in ["l1", "l2"] {
        announcer.announce(None, config_map(name, "1"), Listed);
    }
    assert_eq!(drain(&mut announced), ["l1"]);
    assert!(start(&slots, "l1"));
    assert_eq!(drain(&mut announced), ["l2"]);
    announcer.announce(None, config_map(changed, "1"), Changed);
    slots.done(Some("default"), "l1");
    assert!(
        !start(&slots, "l2"),
        "{changed} is first in line: l2 gives way"
    );
    (announcer, announced, slots)
}

#[test]
fn a_batch_is_handed_out_ahead_and_the_next_once_all_of_it_started() {
    let (announcer, mut announced) = queue(None, Fairness::with_slots(2).with_ahead(2));
    let slots = announced.slots();
    for name in ["a", "b", "c", "d", "e", "f", "g"] {
        announcer.announce(None, config_map(name, "1"), Listed);
    }
    assert_eq!(drain(&mut announced), ["a", "b"], "two slots");
    for name in ["a", "b"] {
        assert!(start(&slots, name));
    }
    assert_eq!(drain(&mut announced), ["c", "d"], "both started: two ahead");
    slots.done(Some("default"), "a");
    assert_eq!(
        drain(&mut announced),
        Vec::<String>::new(),
        "c and d are ready for the freed slot"
    );
    assert!(start(&slots, "c"));
    slots.done(Some("default"), "b");
    assert_eq!(
        drain(&mut announced),
        Vec::<String>::new(),
        "d has not started: the scheduler would reorder it with a second batch"
    );
    assert!(start(&slots, "d"));
    assert_eq!(
        drain(&mut announced),
        ["e", "f"],
        "all started: the next batch, before a slot frees"
    );
}

#[test]
fn a_listed_object_handed_out_ahead_gives_way_to_a_changed_one() {
    let (announcer, mut announced) = queue(None, Fairness::with_slots(1).with_ahead(1));
    let slots = announced.slots();
    for name in ["l1", "l2", "l3"] {
        announcer.announce(None, config_map(name, "1"), Listed);
    }
    assert_eq!(drain(&mut announced), ["l1"]);
    assert!(start(&slots, "l1"));
    assert_eq!(drain(&mut announced), ["l2"], "one ahead");
    announcer.announce(None, config_map("new", "1"), Changed);
    assert_eq!(drain(&mut announced), Vec::<String>::new(), "no slot free");
    slots.done(Some("default"), "l1");
    assert!(
        !start(&slots, "l2"),
        "the new object is first in line: l2 is not reconciled now"
    );
    slots.done(Some("default"), "l2");
    assert_eq!(drain(&mut announced), ["new"]);
    assert!(start(&slots, "new"));
    assert_eq!(
        drain(&mut announced),
        ["l2"],
        "l2 first again in its lane, handed out ahead"
    );
    assert!(start(&slots, "l2"), "nothing changed waits: it runs");
}

#[test]
fn a_listed_object_gives_way_once_and_runs_on_its_next_turn() {
    let (announcer, mut announced, slots) = l2_gave_way_to("c1");
    slots.done(Some("default"), "l2");
    assert_eq!(drain(&mut announced), ["c1"]);
    assert!(start(&slots, "c1"));
    assert_eq!(drain(&mut announced), ["l2"], "handed out ahead again");
    // Changes keep coming, as each write's own watch event does.
    announcer.announce(None, config_map("c2", "1"), Changed);
    slots.done(Some("default"), "c1");
    assert!(
        start(&slots, "l2"),
        "l2 gave way once: it runs now, though c2 is first in line"
    );
    slots.done(Some("default"), "l2");
    assert_eq!(drain(&mut announced), ["c2"], "c2 next, l2 is gone");
    assert!(start(&slots, "c2"));
    slots.done(Some("default"), "c2");
    assert_eq!(drain(&mut announced), Vec::<String>::new());
}

#[test]
fn a_changed_object_handed_out_and_not_started_still_goes_first() {
    let (announcer, mut announced) = queue(None, Fairness::with_slots(3));
    let slots = announced.slots();
    for name in ["l1", "l2", "l3", "l4", "l5"] {
        announcer.announce(None, config_map(name, "1"), Listed);
    }
    assert_eq!(drain(&mut announced), ["l1", "l2", "l3"]);
    for name in ["l1", "l2", "l3"] {
        assert!(start(&slots, name));
    }
    announcer.announce(None, config_map("new", "1"), Changed);
    slots.done(Some("default"), "l2");
    slots.done(Some("default"), "l3");
    assert_eq!(drain(&mut announced), ["new", "l4"]);
    assert!(
        !start(&slots, "l4"),
        "the scheduler started l4 first: it gives way to new"
    );
    assert!(start(&slots, "new"));
    slots.done(Some("default"), "l4");
    assert_eq!(drain(&mut announced), ["l4"], "first again in its lane");
    assert!(start(&slots, "l4"));
}

#[test]
fn a_listed_object_whose_lane_aged_does_not_give_way() {
    let fairness = Fairness {
        slots: 1,
        ahead: 1,
        max_passes: 1,
        max_wait: Duration::from_secs(3600),
    };
    let (announcer, mut announced) = queue(None, fairness);
    let slots = announced.slots();
    for name in ["l1", "l2"] {
        announcer.announce(None, config_map(name, "1"), Listed);
    }
    for name in ["c1", "c2"] {
        announcer.announce(None, config_map(name, "1"), Changed);
    }
    assert_eq!(drain(&mut announced), ["c1"]);
    assert!(start(&slots, "c1"));
    assert_eq!(drain(&mut announced), ["l1"], "aged after one pass");
    assert!(
        start(&slots, "l1"),
        "the listed lane's turn: it does not give way to c2"
    );
}

#[test]
fn a_change_to_an_object_that_gave_way_moves_it_to_the_changed_lane() {
    let (announcer, mut announced, slots) = l2_gave_way_to("new");
    announcer.announce(None, config_map("l2", "2"), Changed);
    slots.done(Some("default"), "l2");
    assert_eq!(drain(&mut announced), ["new"], "first in line");
    assert!(start(&slots, "new"));
    assert_eq!(
        next(&mut announced).as_deref(),
        Some("l2@2"),
        "the newest copy"
    );
    assert_eq!(announcer.waiting(), 0, "held once");
}

/// The cache (name → version) and the log of a lazy queue.
type Shared = Arc<Mutex<HashMap<String, String>>>;
type Log = Arc<Mutex<Vec<String>>>;

/// A lazy queue of one slot and one ahead over `listed` and a changed `c`
/// (all at version 1) in which `l2`, handed out ahead, gave way to `c` and
/// is done; `c` is next.
fn lazy_l2_gave_way(
    listed: &[&str],
) -> (
    Shared,
    Log,
    Announcer<ConfigMap>,
    Announced<ConfigMap>,
    Slots<ConfigMap>,
) {
    let names = listed.iter().chain(&["c"]);
    let cache: Shared = Arc::new(Mutex::new(
        names.map(|n| ((*n).to_owned(), "1".to_owned())).collect(),
    ));
    let evicted = Arc::new(Mutex::new(Vec::new()));
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let fairness = Fairness::with_slots(1).with_ahead(1);
    let (announcer, mut announced) = super::lazy_queue_logged(&cache, &evicted, &log, fairness);
    let slots = announced.slots();
    for name in listed {
        announcer.announce(None, config_map(name, "1"), Listed);
    }
    assert_eq!(drain(&mut announced), ["l1"]);
    assert!(start(&slots, "l1"));
    assert_eq!(drain(&mut announced), ["l2"]);
    announcer.announce(None, config_map("c", "1"), Changed);
    slots.done(Some("default"), "l1");
    assert!(!start(&slots, "l2"), "c is first in line: l2 gives way");
    slots.done(Some("default"), "l2");
    (cache, log, announcer, announced, slots)
}

#[test]
fn a_lazy_queue_hands_out_a_listed_object_that_gave_way_without_decoding_it_again() {
    let (cache, log, announcer, mut announced, slots) = lazy_l2_gave_way(&["l1", "l2", "l3"]);
    assert_eq!(drain(&mut announced), ["c"]);
    assert!(start(&slots, "c"));
    slots.done(Some("default"), "c");
    assert_eq!(drain(&mut announced), ["l2"], "first in its lane again");
    assert!(start(&slots, "l2"), "it gave way once: it runs");
    slots.done(Some("default"), "l2");
    assert_eq!(
        *log.lock().unwrap(),
        ["load l1", "load l2", "load c", "hold l2@1"],
        "the copy l2 gave way with went back into the store, not a second decode"
    );
    // One that gives way and changes before its next turn is the cache's
    // newer copy then, not the one it gave way with.
    assert_eq!(drain(&mut announced), ["l3"]);
    log.lock().unwrap().clear();
    announcer.announce(None, config_map("c", "2"), Changed);
    assert!(!start(&slots, "l3"), "c is first in line: l3 gives way");
    slots.done(Some("default"), "l3");
    cache.lock().unwrap().insert("l3".into(), "2".into());
    announcer.announce(None, config_map("l3", "2"), Listed);
    assert_eq!(drain(&mut announced), ["c"]);
    assert!(start(&slots, "c"));
    slots.done(Some("default"), "c");
    assert_eq!(next(&mut announced).as_deref(), Some("l3@2"));
    assert_eq!(*log.lock().unwrap(), ["load c", "load l3"]);
}

#[test]
fn a_kept_copy_is_not_handed_out_once_its_object_is_deleted_or_changed_unannounced() {
    // The watch announces no deletion, and a change may reach the cache a
    // moment before its announcement: the copy l2 gave way with is handed
    // out only while the cache holds that version.
    for (then, expected) in [(None, None), (Some("2"), Some("l2@2"))] {
        let (cache, log, _announcer, mut announced, slots) = lazy_l2_gave_way(&["l1", "l2"]);
        match then {
            Some(version) => cache.lock().unwrap().insert("l2".into(), version.into()),
            None => cache.lock().unwrap().remove("l2"),
        };
        assert_eq!(drain(&mut announced), ["c"]);
        assert!(start(&slots, "c"));
        slots.done(Some("default"), "c");
        assert_eq!(next(&mut announced).as_deref(), expected, "{then:?}");
        let loads = log.lock().unwrap().clone();
        let second = then.map(|_| "load l2");
        assert_eq!(
            loads,
            ["load l1", "load l2", "load c"]
                .into_iter()
                .chain(second)
                .collect::<Vec<_>>(),
            "never `hold l2@1`"
        );
    }
}
