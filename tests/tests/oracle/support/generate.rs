//! The generator: a seeded random case of the universe that
//! [`super::classes`] names.

use serde_json::{Value, json};

use super::builtins::{self, is_builtin};
use super::model::{
    Case, Copy, DATA_KEYS, Initial, Kind, LABEL_VALUES, Mut, NESTED_KEYS, PORTS, Race, Rng,
};

/// A random value for a nested map: strings from the alphabet, integers
/// past 2^53, floats of 17 digits, empty maps and lists.
fn nested_value(rng: &mut Rng) -> Value {
    match rng.below(9) {
        0 => json!(rng.hostile()),
        1 => json!(*rng.pick(&[9_007_199_254_740_993_i64, i64::MAX, i64::MIN])),
        2 => json!(*rng.pick(&[0.5, 0.1, 1e-7, 2.5e21, -3.25])),
        3 => json!({}),
        4 => json!([]),
        5 => json!({"deep": {"x": rng.hostile(), (*rng.pick(&NESTED_KEYS)): rng.hostile()}}),
        6 => json!(-42),
        7 => json!(rng.long_float()),
        _ => json!(*rng.pick(&[0.30000000000000004, 1.7976931348623157e308, 5e-324])),
    }
}

/// A weight: whole (stored `2`, `2.0` to an `f64`), short or 17 digits.
fn weight(rng: &mut Rng) -> f64 {
    match rng.below(3) {
        0 => rng.below(4) as f64,
        1 => *rng.pick(&[1.25, 2.5, 0.1]),
        _ => rng.long_float(),
    }
}

/// A value for one of the other `spec` fields.
fn field(rng: &mut Rng) -> (String, Value) {
    match rng.below(4) {
        0 => (
            "opt".into(),
            if rng.chance(50) {
                Value::Null
            } else {
                json!(rng.hostile())
            },
        ),
        1 => (
            "target".into(),
            if rng.chance(50) {
                json!(rng.below(65_536))
            } else {
                json!(*rng.pick(&["http", "metrics"]))
            },
        ),
        2 => (
            "cpu".into(),
            json!(*rng.pick(&["500m", "1", "2.5", "1Gi", "1e3"])),
        ),
        _ => {
            let mut set: Vec<Value> = Vec::new();
            for a in ["x", "é", "&"] {
                if rng.chance(50) {
                    set.push(json!(a));
                }
            }
            ("aliases".into(), Value::Array(set))
        }
    }
}

/// A random starting object of `kind`.
pub(crate) fn initial(rng: &mut Rng, kind: Kind) -> Initial {
    let mut init = Initial {
        labels: vec![("app".into(), "oracle".into())],
        ..Initial::default()
    };
    if rng.chance(50) {
        init.labels.push((
            "example.com/other".into(),
            (*rng.pick(&LABEL_VALUES)).into(),
        ));
    }
    for key in ["example.com/note", "other.example/url"] {
        if rng.chance(50) {
            init.annotations.push((key.into(), rng.hostile()));
        }
    }
    init.last_applied = rng.chance(60);
    if rng.chance(60) {
        init.finalizers.push("example.com/foreign".into());
    }
    if rng.chance(30) {
        init.finalizers.push("example.com/ours".into());
    }
    if is_builtin(kind) {
        init.entries = builtins::entries(rng, kind);
        return init;
    }
    if kind == Kind::ConfigMap {
        for key in DATA_KEYS {
            if rng.chance(40) {
                init.data.push((key.into(), rng.hostile()));
            }
        }
        return init;
    }
    init.size = rng.chance(80).then(|| rng.below(5) as i64);
    init.color = rng
        .chance(80)
        .then(|| (*rng.pick(&["red", "green"])).into());
    for name in ["a", "b", "c"] {
        if rng.chance(60) {
            let extra = rng.chance(60).then(|| rng.hostile());
            init.items.push((name.into(), rng.hostile(), extra));
            if rng.chance(60) {
                init.weights.push((name.into(), json!(weight(rng))));
            }
        }
    }
    if rng.chance(50) {
        init.rules
            .push(json!({"verbs": ["get"], "note": rng.hostile()}));
        init.rules.push(json!({"verbs": ["get"], "note": "same"}));
    }
    for tag in ["z", "a", "m", "a"] {
        if rng.chance(50) {
            init.tags.push(tag.into());
        }
    }
    for _ in 0..rng.below(3) {
        let key = (*rng.pick(&NESTED_KEYS)).to_owned();
        if !init.nested.iter().any(|(k, _)| *k == key) {
            init.nested.push((key, nested_value(rng)));
        }
    }
    for (port, protocol) in PORTS {
        if rng.chance(40) {
            let mut entry = json!({"port": port, "protocol": protocol, "name": rng.hostile()});
            if rng.chance(50) {
                entry["extra"] = json!(rng.hostile());
            }
            init.ports.push(entry);
        }
    }
    for _ in 0..rng.below(3) {
        let (k, v) = field(rng);
        if !init.fields.iter().any(|(x, _)| *x == k) {
            init.fields.push((k, v));
        }
    }
    init.phase = rng.chance(70).then(|| rng.hostile());
    init.fractions = rng.chance(50);
    for type_ in ["Ready", "Synced"] {
        if rng.chance(60) {
            let status = (*rng.pick(&["True", "False"])).to_owned();
            let severity = rng.chance(50).then(|| "Warning".to_owned());
            init.conditions
                .push((type_.into(), status, rng.hostile(), severity));
        }
    }
    init
}

/// A random mutation that `copy` of `kind` can express.
pub(crate) fn mutation(rng: &mut Rng, kind: Kind, copy: Copy) -> Mut {
    let label_key = (*rng.pick(&["app", "example.com/other", "new"])).to_owned();
    let annotation_key =
        (*rng.pick(&["example.com/note", "other.example/url", "x.example/new"])).to_owned();
    let finalizer = (*rng.pick(&["example.com/ours", "example.com/foreign"])).to_owned();
    let mut options = vec![
        Mut::SetLabel(label_key.clone(), (*rng.pick(&LABEL_VALUES)).into()),
        Mut::RemoveLabel(label_key),
        Mut::SetAnnotation(annotation_key.clone(), rng.hostile()),
        Mut::RemoveAnnotation(annotation_key),
        Mut::AddFinalizer(finalizer.clone()),
        Mut::RemoveFinalizer(finalizer),
    ];
    let item = (*rng.pick(&["a", "b", "c", "d"])).to_owned();
    let tag = (*rng.pick(&["a", "m", "q", "z"])).to_owned();
    if is_builtin(kind) {
        if copy != Copy::Meta {
            options.push(builtins::mutation(rng, kind));
            if rng.chance(50) {
                return options.last().cloned().unwrap_or(Mut::ReverseItems);
            }
        }
        return rng.pick(&options).clone();
    }
    if kind == Kind::ConfigMap {
        if copy != Copy::Meta {
            let key = (*rng.pick(&DATA_KEYS)).to_owned();
            options.push(Mut::SetData(key, rng.hostile()));
        }
        return rng.pick(&options).clone();
    }
    options.push(Mut::SetCondition {
        type_: (*rng.pick(&["Ready", "Synced", "New"])).into(),
        status: (*rng.pick(&["True", "False"])).into(),
        message: rng.hostile(),
    });
    options.push(Mut::SetPhase(rng.hostile()));
    let spec = [
        Mut::SetSize(rng.below(9) as i64),
        Mut::SetItemValue(item.clone(), rng.hostile()),
        Mut::InsertItem(item.clone(), rng.hostile()),
        Mut::RemoveItem(item.clone()),
        Mut::ReverseItems,
        Mut::PushTag(tag.clone()),
        Mut::RemoveTag(tag.clone()),
    ];
    let (port, protocol) = *rng.pick(&PORTS);
    match copy {
        Copy::Raw | Copy::Trimmed => {
            options.extend(spec);
            let key = (*rng.pick(&NESTED_KEYS)).to_owned();
            options.push(Mut::SetNested(key, nested_value(rng)));
            let verbs = (*rng.pick(&[&["get", "list"][..], &["watch"], &[]])).to_vec();
            options.push(Mut::SetRuleVerbs(
                verbs.into_iter().map(str::to_owned).collect(),
            ));
            // Painted is served by three of the six strategies (the
            // others redraw), so it is offered twice to keep pace.
            options.push(Mut::Painted);
            options.push(Mut::Painted);
            let (k, v) = field(rng);
            options.push(Mut::SetAt(k, v));
            options.push(Mut::UpsertPort(port, protocol.into(), rng.hostile()));
            options.push(Mut::RemovePort(port, protocol.into()));
            // Typed closures over types other than the copy's own.
            options.push(Mut::SetWeight(item.clone(), weight(rng)));
            options.push(Mut::TimedConditionMessage(rng.hostile()));
        }
        Copy::Lagging => {
            options.extend(spec);
            options.push(Mut::TypedConditionMessage(rng.hostile()));
        }
        Copy::Sorted => {
            options.push(Mut::PushTag(tag.clone()));
            options.push(Mut::RemoveTag(tag));
        }
        Copy::View => options.push(Mut::SetSize(rng.below(9) as i64)),
        Copy::Weighted => options.push(Mut::SetWeight(item, weight(rng))),
        Copy::Timed => options.push(Mut::TimedConditionMessage(rng.hostile())),
        Copy::Mapped => {
            let key = (*rng.pick(&NESTED_KEYS)).to_owned();
            options.push(Mut::SetNested(key, nested_value(rng)));
            options.push(Mut::SetColor((*rng.pick(&["red", "green", "blue"])).into()));
        }
        Copy::Meta | Copy::Typed => {}
    }
    // Spread the draws: the copy's own closures as often as the intents.
    if !matches!(copy, Copy::Raw | Copy::Trimmed | Copy::Meta) && rng.chance(50) {
        return options.last().cloned().unwrap_or(Mut::ReverseItems);
    }
    rng.pick(&options).clone()
}

/// Whether the mutation is a closure (refused by `apply`).
pub(crate) fn is_closure(mutation: &Mut) -> bool {
    !matches!(
        mutation,
        Mut::SetLabel(..)
            | Mut::RemoveLabel(_)
            | Mut::SetAnnotation(..)
            | Mut::RemoveAnnotation(_)
            | Mut::AddFinalizer(_)
            | Mut::RemoveFinalizer(_)
            | Mut::SetCondition { .. }
            | Mut::SetPhase(_)
    )
}

/// Whether `strategy` can take `mutation` at all (a combination the
/// configuration refuses at load time is no case).
pub(crate) fn serves(strategy: &str, mutation: &Mut) -> bool {
    match strategy {
        "apply" => !is_closure(mutation),
        "lax" | "locked" => *mutation != Mut::Painted,
        _ => true,
    }
}

/// A random race fitting `mutation` on `kind`.
pub(crate) fn race(rng: &mut Rng, kind: Kind, mutation: &Mut) -> Race {
    let mut options = vec![
        Race::None,
        Race::Label,
        Race::Annotation(rng.hostile()),
        Race::Finalizer,
        Race::Recreate,
    ];
    if matches!(
        mutation,
        Mut::SetLabel(..) | Mut::RemoveLabel(_) | Mut::SetAnnotation(..) | Mut::RemoveAnnotation(_)
    ) {
        options.push(Race::SameKey);
    }
    if is_builtin(kind) {
        options.push(Race::Entry);
    } else if kind != Kind::ConfigMap {
        options.extend([
            Race::Condition,
            Race::Item,
            Race::Tag,
            Race::Rule,
            Race::Size,
            Race::Color,
            Race::Phase,
            Race::Port,
        ]);
    }
    rng.pick(&options).clone()
}

/// The copy kinds a writer may hold of `kind`.
pub(crate) fn copies(kind: Kind) -> &'static [Copy] {
    match kind {
        Kind::Specimen => &[
            Copy::Raw,
            Copy::Trimmed,
            Copy::Lagging,
            Copy::Sorted,
            Copy::View,
            Copy::Meta,
            Copy::Weighted,
            Copy::Timed,
            Copy::Mapped,
        ],
        Kind::Bare => &[Copy::Raw, Copy::Trimmed],
        _ => &[Copy::Raw, Copy::Trimmed, Copy::Typed, Copy::Meta],
    }
}

/// Case number `index` of the run seeded `seed`, over `strategies`.
pub(crate) fn case(seed: u64, index: u64, strategies: &[&str]) -> Case {
    let mut rng = Rng::new(seed ^ index.wrapping_mul(0xA24B_AED4_963E_E407));
    let kind = match rng.below(20) {
        0..=7 => Kind::Specimen,
        8..=10 => Kind::Bare,
        11..=13 => Kind::ConfigMap,
        14 | 15 => Kind::Deployment,
        16 | 17 => Kind::Service,
        18 => Kind::Pod,
        _ => Kind::Node,
    };
    let copy = *rng.pick(copies(kind));
    let strategy = (*rng.pick(strategies)).to_owned();
    let mut mutation = mutation(&mut rng, kind, copy);
    while !serves(&strategy, &mutation) {
        mutation = self::mutation(&mut rng, kind, copy);
    }
    // Creates and deletes, by the strategies with a `create` and a
    // `delete` cell, from the copies a delete reads (a create sends the
    // case's object); a built-in kind's defaults are not modelled, so it
    // is deleted, not created.
    let lifecycle = matches!(copy, Copy::Raw | Copy::Trimmed | Copy::Meta)
        && !matches!(strategy.as_str(), "locked" | "apply");
    if lifecycle && rng.chance(12) {
        mutation = match rng.below(3) {
            0 if !is_builtin(kind) => Mut::Create,
            1 if !is_builtin(kind) => Mut::CreateGenerated,
            _ => Mut::Delete,
        };
    }
    let race = match mutation {
        Mut::Create | Mut::CreateGenerated => Race::None,
        _ => race(&mut rng, kind, &mutation),
    };
    let initial = initial(&mut rng, kind);
    // `requeue` is refused at load time for `lax`, `locked` and `apply`;
    // a requeued decision is taken afresh, so a dependency is no case.
    let requeue = matches!(strategy.as_str(), "strict" | "update" | "guarded")
        && mutation != Mut::Painted
        && rng.chance(30);
    Case {
        strategy,
        kind,
        copy,
        mutation,
        race,
        initial,
        requeue,
    }
}
