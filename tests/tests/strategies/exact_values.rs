//! Exact values through a Rust type whose encoding differs from the stored
//! one, against a real kube-apiserver and etcd: a field the mutation did
//! not change is never sent and never rewritten, whatever the type makes
//! of it — a whole number under `f64`, a fractional-second time under
//! k8s-openapi's `Time`, a float of 17 significant digits, an integer past
//! 2^53 — and a `null` the mutation sets on a `nullable` field is stored.
//! Every safe strategy that runs closures, from a typed copy, a complete
//! copy, and stale copies another writer's change forces a re-read of.
//!
//! ```text
//! cargo test -p concord-tests --test strategies exact_values::
//! ```
use concord_strategies::{Condition, Intent, Mutation, StrategyName, Writer, strategy_for};
use kube::core::DynamicObject;
use serde_json::{Value, json};

use crate::support::policy;

mod ledger;

use ledger::{Ledger, Ledgers};

/// The safe strategies that run closures.
const SAFE: [StrategyName; 4] = [
    StrategyName::Strict,
    StrategyName::Guarded,
    StrategyName::Update,
    StrategyName::Locked,
];

/// The copy a write starts from.
#[derive(Clone, Copy, Debug)]
enum Copy {
    /// Read through the Rust type, current.
    Typed,
    /// Read raw (complete), current.
    Dynamic,
    /// Read through the Rust type before another writer's change.
    StaleTyped,
    /// Read raw before another writer's change.
    StaleDynamic,
}

const COPIES: [Copy; 4] = [
    Copy::Typed,
    Copy::Dynamic,
    Copy::StaleTyped,
    Copy::StaleDynamic,
];

/// What the other writer does between the stale read and the write.
enum Race {
    /// Inserts this entry at the head of the list at this path, so every
    /// index read before names another entry.
    Insert(&'static str, Value),
    /// Sets a label, so only the object's version moves.
    Touch,
}

/// Write `mutation` of `object` with `strategy`, starting from `copy`.
async fn write(
    ledgers: &Ledgers,
    object: &str,
    strategy: StrategyName,
    copy: Copy,
    mutation: &Mutation,
    race: &Race,
) -> anyhow::Result<()> {
    let strategy = strategy_for(strategy, policy());
    let client = ledgers.env.client()?;
    let dynamic = ledgers.raw.get(object).await?;
    let typed = ledgers.typed.get(object).await?;
    if matches!(copy, Copy::StaleTyped | Copy::StaleDynamic) {
        match race {
            Race::Insert(path, entry) => ledgers.insert_first(object, path, entry.clone()).await?,
            Race::Touch => ledgers.touch(object).await?,
        }
    }
    match copy {
        Copy::Typed | Copy::StaleTyped => {
            Writer::<Ledger>::new(client, strategy)
                .write(&typed, mutation)
                .await?;
        }
        Copy::Dynamic | Copy::StaleDynamic => {
            Writer::<DynamicObject>::new_with(client, strategy, &ledgers.resource)
                .write(&dynamic, mutation)
                .await?;
        }
    }
    Ok(())
}

/// Each case's failures, reported together so that one run shows every
/// strategy and copy that loses.
#[derive(Default)]
struct Failures(Vec<String>);

impl Failures {
    fn check(&mut self, case: &str, what: &str, holds: bool) {
        if !holds {
            self.0.push(format!("{case}: {what}"));
        }
    }

    /// Whether `written` is `Ok`, recording its error otherwise.
    fn wrote(&mut self, case: &str, written: anyhow::Result<()>) -> bool {
        let error = written.err().map(|e| format!("the write failed: {e:#}"));
        self.check(case, error.as_deref().unwrap_or(""), error.is_none());
        error.is_none()
    }

    fn assert_none(self) {
        assert!(
            self.0.is_empty(),
            "{} lost:\n{}",
            self.0.len(),
            self.0.join("\n")
        );
    }
}

/// The entry named `name` of the stored list at `list`.
fn entry<'a>(stored: &'a Value, list: &str, key: &str, name: &str) -> &'a Value {
    stored
        .pointer(list)
        .and_then(Value::as_array)
        .and_then(|l| l.iter().find(|e| e[key] == name))
        .unwrap_or(&Value::Null)
}

/// A typed closure setting entry `b`'s weight.
fn weigh_b(weight: f64) -> Mutation {
    Mutation::typed(move |l: &mut Ledger| {
        if let Some(b) = l.spec.entries.iter_mut().find(|e| e.name == "b") {
            b.weight = weight;
        }
    })
}

/// Finding 1: stored whole numbers (`1`, and 2^53 + 1) where the type has
/// `f64` (`1.0`). A typed closure changing another entry's weight keeps
/// every entry's `owner`, which the type lacks, and every whole number as
/// stored.
#[tokio::test]
async fn whole_numbers_under_f64_keep_every_entry_field() -> anyhow::Result<()> {
    let ledgers = Ledgers::new().await?;
    let spec = r#"{"entries":[
        {"name":"a","weight":1,"owner":"ö&<>"},
        {"name":"b","weight":2,"owner":"théo"},
        {"name":"c","weight":9007199254740993,"owner":"past 2^53"}]}"#;
    let race = Race::Insert(
        "/spec/entries",
        json!({"name": "z", "weight": 3, "owner": "them"}),
    );
    let mut failures = Failures::default();
    for strategy in SAFE {
        for copy in COPIES {
            let object = format!("whole-{strategy}-{copy:?}").to_lowercase();
            ledgers.create(&object, spec, "null").await?;
            let case = format!("{strategy} from {copy:?}");
            let written = write(
                &ledgers,
                &object,
                strategy,
                copy,
                &weigh_b(0.30000000000000004),
                &race,
            )
            .await;
            if !failures.wrote(&case, written) {
                continue;
            }
            let text = ledgers.text(&object).await?;
            let stored: Value = serde_json::from_str(&text)?;
            let mut owners = vec![("a", "ö&<>"), ("b", "théo"), ("c", "past 2^53")];
            if matches!(copy, Copy::StaleTyped | Copy::StaleDynamic) {
                owners.push(("z", "them"));
            }
            for (name, owner) in owners {
                let kept = entry(&stored, "/spec/entries", "name", name)["owner"] == owner;
                failures.check(&case, &format!("entry {name}'s owner"), kept);
            }
            for number in ["0.30000000000000004", "9007199254740993", "1}"] {
                let exact = text.contains(&format!("\"weight\":{number}"));
                failures.check(&case, &format!("weight {number}"), exact);
            }
        }
    }
    failures.assert_none();
    Ok(())
}

/// Finding 2: another controller's condition with a fractional-second
/// `lastTransitionTime` and a `severity` the type lacks. A `typed_status`
/// closure changing only our condition's message keeps the other
/// conditions byte for byte, and our own time as stored.
#[tokio::test]
async fn conditions_keep_fractional_times_and_fields_the_type_lacks() -> anyhow::Result<()> {
    let ledgers = Ledgers::new().await?;
    let ours = json!({"type": "Ready", "status": "False", "reason": "Starting",
        "message": "not yet", "lastTransitionTime": "2026-01-01T00:00:00.5Z"});
    let theirs = json!({"type": "Synced", "status": "True", "reason": "Fine",
        "message": "théirs & <ok>", "lastTransitionTime": "2026-01-02T03:04:05.678901Z",
        "observedGeneration": 1, "severity": "Warning"});
    let foreign = json!({"type": "Foreign", "status": "True", "reason": "Raced",
        "message": "ü", "lastTransitionTime": "2026-01-03T00:00:00.123Z", "severity": "Info"});
    let status = json!({"conditions": [ours, theirs]}).to_string();
    let race = Race::Insert("/status/conditions", foreign.clone());
    let message = "ours: ünï & <done>";
    let mutation = Mutation::typed_status(move |l: &mut Ledger| {
        let conditions = l.status.get_or_insert_default().conditions.iter_mut();
        if let Some(ready) = conditions.into_iter().find(|c| c.type_ == "Ready") {
            ready.message = message.into();
        }
    });
    let mut failures = Failures::default();
    for strategy in SAFE {
        for copy in COPIES {
            let object = format!("conditions-{strategy}-{copy:?}").to_lowercase();
            ledgers.create(&object, "{}", &status).await?;
            let case = format!("{strategy} from {copy:?}");
            let written = write(&ledgers, &object, strategy, copy, &mutation, &race).await;
            if !failures.wrote(&case, written) {
                continue;
            }
            let stored = ledgers.json(&object).await?;
            let list = "/status/conditions";
            let mut expected = ours.clone();
            expected["message"] = json!(message);
            let ready = entry(&stored, list, "type", "Ready");
            failures.check(&case, &format!("ours as {ready}"), *ready == expected);
            let synced = entry(&stored, list, "type", "Synced");
            failures.check(&case, &format!("theirs as {synced}"), *synced == theirs);
            if matches!(copy, Copy::StaleTyped | Copy::StaleDynamic) {
                let raced = entry(&stored, list, "type", "Foreign");
                failures.check(&case, &format!("the raced as {raced}"), *raced == foreign);
            }
        }
    }
    failures.assert_none();
    Ok(())
}

/// The same conditions changed by the `SetCondition` intent instead of a
/// closure, so that `apply` serves it too: the other conditions stay byte
/// for byte under every safe strategy.
#[tokio::test]
async fn set_condition_keeps_other_conditions_as_stored() -> anyhow::Result<()> {
    let ledgers = Ledgers::new().await?;
    let ours = json!({"type": "Ready", "status": "False", "reason": "Starting",
        "message": "not yet", "lastTransitionTime": "2026-01-01T00:00:00.5Z"});
    let theirs = json!({"type": "Synced", "status": "True", "reason": "Fine",
        "message": "théirs & <ok>", "lastTransitionTime": "2026-01-02T03:04:05.678901Z",
        "observedGeneration": 1, "severity": "Warning"});
    let foreign = json!({"type": "Foreign", "status": "True", "reason": "Raced",
        "message": "ü", "lastTransitionTime": "2026-01-03T00:00:00.123Z", "severity": "Info"});
    let status = json!({"conditions": [ours, theirs]}).to_string();
    let race = Race::Insert("/status/conditions", foreign.clone());
    let mutation = Mutation::from(Intent::SetCondition(Condition {
        type_: "Ready".into(),
        status: "False".into(),
        reason: "Waiting".into(),
        message: "ours: ünï & <done>".into(),
    }));
    let mut failures = Failures::default();
    for strategy in StrategyName::ALL {
        if strategy == StrategyName::Lax {
            continue;
        }
        for copy in COPIES {
            let object = format!("setcondition-{strategy}-{copy:?}").to_lowercase();
            ledgers.create(&object, "{}", &status).await?;
            let case = format!("{strategy} from {copy:?}");
            let written = write(&ledgers, &object, strategy, copy, &mutation, &race).await;
            if !failures.wrote(&case, written) {
                continue;
            }
            let stored = ledgers.json(&object).await?;
            let list = "/status/conditions";
            let ready = entry(&stored, list, "type", "Ready");
            let time = &ready["lastTransitionTime"];
            failures.check(
                &case,
                &format!("our time as {time}"),
                *time == ours["lastTransitionTime"],
            );
            failures.check(
                &case,
                "our message",
                ready["message"] == "ours: ünï & <done>",
            );
            let synced = entry(&stored, list, "type", "Synced");
            failures.check(&case, &format!("theirs as {synced}"), *synced == theirs);
            if matches!(copy, Copy::StaleTyped | Copy::StaleDynamic) {
                let raced = entry(&stored, list, "type", "Foreign");
                failures.check(&case, &format!("the raced as {raced}"), *raced == foreign);
            }
        }
    }
    failures.assert_none();
    Ok(())
}

/// Finding 3: floats of 17 significant digits (some of which a parser
/// without exact float reading misreads by one ulp) and an integer past
/// 2^53 the type lacks. Changing one entry's weight stores every other
/// number exactly as it was.
#[tokio::test]
async fn floats_of_seventeen_digits_are_stored_as_they_were() -> anyhow::Result<()> {
    let ledgers = Ledgers::new().await?;
    let spec = r#"{"ratio":9.204938554384977,"big":9007199254740993,"entries":[
        {"name":"a","weight":0.9999999999999999,"owner":"x"},
        {"name":"b","weight":1.2909075938396821,"owner":"y"},
        {"name":"c","weight":9.151793567870765,"owner":"z"}]}"#;
    let race = Race::Insert(
        "/spec/entries",
        json!({"name": "r", "weight": 10.043889270128407, "owner": "raced"}),
    );
    let mut failures = Failures::default();
    for strategy in SAFE {
        for copy in COPIES {
            let object = format!("floats-{strategy}-{copy:?}").to_lowercase();
            ledgers.create(&object, spec, "null").await?;
            let case = format!("{strategy} from {copy:?}");
            let written = write(
                &ledgers,
                &object,
                strategy,
                copy,
                &weigh_b(1.8945023480892758),
                &race,
            )
            .await;
            if !failures.wrote(&case, written) {
                continue;
            }
            let text = ledgers.text(&object).await?;
            let mut exact = vec![
                "\"ratio\":9.204938554384977",
                "\"big\":9007199254740993",
                "\"weight\":0.9999999999999999",
                "\"weight\":9.151793567870765",
                "\"weight\":1.8945023480892758",
            ];
            if matches!(copy, Copy::StaleTyped | Copy::StaleDynamic) {
                exact.push("\"weight\":10.043889270128407");
            }
            for number in exact {
                failures.check(&case, number, text.contains(number));
            }
        }
    }
    failures.assert_none();
    Ok(())
}

/// Finding 4: a `null` a mutation sets on a `nullable: true` field is
/// stored as `null` (a merge patch's `null` would delete the key), from a
/// raw closure (a value replaced by `null`, an absent key set to `null`)
/// and a typed one (`Option` to `None`, written as `null`).
#[tokio::test]
async fn a_null_the_mutation_sets_on_a_nullable_field_is_stored() -> anyhow::Result<()> {
    let ledgers = Ledgers::new().await?;
    let spec = r#"{"note":"written & <é>","entries":[]}"#;
    let raw = Mutation::custom(|v| {
        v["spec"]["note"] = Value::Null;
        v["spec"]["hint"] = Value::Null;
    });
    let typed = Mutation::typed(|l: &mut Ledger| l.spec.note = None);
    let mut failures = Failures::default();
    for strategy in SAFE {
        for copy in COPIES {
            for (kind, mutation, nulls) in [
                ("raw", &raw, &["note", "hint"][..]),
                ("typed", &typed, &["note"][..]),
            ] {
                let object = format!("null-{kind}-{strategy}-{copy:?}").to_lowercase();
                ledgers.create(&object, spec, "null").await?;
                let case = format!("{strategy} from {copy:?}, {kind} closure");
                let written =
                    write(&ledgers, &object, strategy, copy, mutation, &Race::Touch).await;
                if !failures.wrote(&case, written) {
                    continue;
                }
                let stored = ledgers.json(&object).await?;
                for field in nulls {
                    let null = stored["spec"].get(*field) == Some(&Value::Null);
                    failures.check(&case, &format!("spec.{field} as {}", stored["spec"]), null);
                }
            }
        }
    }
    failures.assert_none();
    Ok(())
}

/// The server's rule a JSON patch's `null` relies on, kept as a probe: on a
/// field that is not `nullable` the API server prunes a `null`, so a
/// mutation's `null` there removes the field under every strategy that
/// runs closures, as a merge patch's would.
#[tokio::test]
async fn a_null_on_a_field_that_is_not_nullable_removes_it() -> anyhow::Result<()> {
    let ledgers = Ledgers::new().await?;
    let spec = r#"{"note":"n","ratio":2.5,"big":7,"entries":[]}"#;
    let raw = Mutation::custom(|v| {
        v["spec"]["ratio"] = Value::Null;
        v["spec"]["big"] = Value::Null;
    });
    let mut failures = Failures::default();
    for strategy in [StrategyName::Lax].into_iter().chain(SAFE) {
        let object = format!("pruned-{strategy}");
        ledgers.create(&object, spec, "null").await?;
        let case = strategy.to_string();
        let written = write(
            &ledgers,
            &object,
            strategy,
            Copy::Dynamic,
            &raw,
            &Race::Touch,
        )
        .await;
        if !failures.wrote(&case, written) {
            continue;
        }
        let stored = ledgers.json(&object).await?;
        let expected = json!({"note": "n", "entries": []});
        failures.check(
            &case,
            &format!("spec as {}", stored["spec"]),
            stored["spec"] == expected,
        );
    }
    failures.assert_none();
    Ok(())
}
