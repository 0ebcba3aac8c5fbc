//! The oracle's cases and what each should store: a case is a stored
//! object, the copy a writer holds of it, a mutation, a strategy and an
//! optional concurrent change; [`expected`] is the model of the mutation's
//! effect on the raw object, independent of concord's code.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Values from a hostile alphabet: what Go's encoder escapes (`&`, `<`,
/// `>`, U+2028), non-ASCII, empty.
pub(crate) const HOSTILE: [&str; 8] = [
    "plain",
    "https://x/?a=1&b=2",
    "1 < 3 > 2",
    "line\u{2028}sep\u{2029}",
    "é-ü-日本",
    "",
    "tab\tquote\"back\\slash",
    "\u{1}ctl\u{7f}",
];

/// Label values must be valid label values.
pub(crate) const LABEL_VALUES: [&str; 4] = ["a", "b-2", "C_3.x", ""];

/// Keys for nested maps: `/` and `~` need escaping in JSON pointers.
pub(crate) const NESTED_KEYS: [&str; 5] = ["k", "a/b", "t~1", "~", "é"];

/// The resource a case writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Kind {
    /// The custom resource: JSON patches, status subresource.
    Specimen,
    /// The built-in ConfigMap: strategic merge patches.
    ConfigMap,
}

/// The copy a writer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Copy {
    /// The raw object, as a `DynamicObject`.
    Raw,
    /// The raw object as the trimmed cache holds it (no managedFields, no
    /// last-applied annotation), as a `DynamicObject` or a typed ConfigMap.
    Trimmed,
    /// A complete typed object (`ConfigMap`).
    Typed,
    /// The specimen's lagging Rust type.
    Lagging,
    /// A type that sorts and deduplicates the tags.
    Sorted,
    /// A `view!` of metadata and the size.
    View,
    /// A metadata-only object (`PartialObjectMeta`).
    Meta,
}

/// A mutation as the oracle states it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) enum Mut {
    SetLabel(String, String),
    RemoveLabel(String),
    SetAnnotation(String, String),
    RemoveAnnotation(String),
    AddFinalizer(String),
    RemoveFinalizer(String),
    /// `Intent::SetCondition`.
    SetCondition {
        type_: String,
        status: String,
        message: String,
    },
    /// `Intent::MergeStatus({"phase": …})`.
    SetPhase(String),
    /// A typed closure: `spec.size = n`.
    SetSize(i64),
    /// A typed closure: the item `name`'s value.
    SetItemValue(String, String),
    /// A typed closure: insert an item at index 0.
    InsertItem(String, String),
    /// A typed closure: remove the item `name`.
    RemoveItem(String),
    /// A typed closure: reverse the items.
    ReverseItems,
    /// A typed closure: append a tag if missing.
    PushTag(String),
    /// A typed closure: remove a tag.
    RemoveTag(String),
    /// A raw closure: the verbs of the rule noted `same` (an entry of a
    /// keyless list, whose old verbs another entry shares).
    SetRuleVerbs(Vec<String>),
    /// A raw closure: `spec.nested[key] = value`.
    SetNested(String, Value),
    /// A typed closure on the main resource changing a condition's message.
    TypedConditionMessage(String),
    /// A label whose value is decided from `spec.color`, declared with
    /// `depending_on("/spec/color")`.
    Painted,
    /// A typed closure setting a ConfigMap data key.
    SetData(String, String),
}

/// A change by another writer between the copy's read and the write.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) enum Race {
    None,
    /// Another label.
    Label,
    /// The same key as the mutation's label or annotation, another value.
    SameKey,
    /// Another annotation with a hostile value.
    Annotation(String),
    /// Another finalizer, inserted at index 0.
    Finalizer,
    /// Another condition at index 0.
    Condition,
    /// Another item at index 0.
    Item,
    /// Another tag at index 0.
    Tag,
    /// Another rule, with the same verbs, at index 0 of the keyless list.
    Rule,
    /// `spec.size` set.
    Size,
    /// `spec.color` set (a dependency).
    Color,
    /// `status.phase` set.
    Phase,
    /// The object deleted and created again under the same name.
    Recreate,
}

/// The object a case starts from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Initial {
    pub(crate) labels: Vec<(String, String)>,
    pub(crate) annotations: Vec<(String, String)>,
    pub(crate) last_applied: bool,
    pub(crate) finalizers: Vec<String>,
    pub(crate) size: Option<i64>,
    pub(crate) color: Option<String>,
    /// (name, value, extra)
    pub(crate) items: Vec<(String, String, Option<String>)>,
    pub(crate) rules: Vec<Value>,
    pub(crate) tags: Vec<String>,
    pub(crate) nested: Vec<(String, Value)>,
    pub(crate) data: Vec<(String, String)>,
    pub(crate) phase: Option<String>,
    /// (type, status, message, severity)
    pub(crate) conditions: Vec<(String, String, String, Option<String>)>,
}

/// One case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Case {
    pub(crate) strategy: String,
    pub(crate) kind: Kind,
    pub(crate) copy: Copy,
    pub(crate) mutation: Mut,
    pub(crate) race: Race,
    pub(crate) initial: Initial,
}

/// A small deterministic generator (SplitMix64).
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    pub(crate) fn pick<'a, T>(&mut self, from: &'a [T]) -> &'a T {
        &from[self.below(from.len())]
    }

    fn hostile(&mut self) -> String {
        (*self.pick(&HOSTILE)).to_owned()
    }
}

/// The strategies whose writes concord calls safe.
pub(crate) const SAFE: [&str; 5] = ["strict", "guarded", "update", "locked", "apply"];

/// A random value for a nested map: strings from the alphabet, integers
/// past 2^53, floats, empty maps and lists.
fn nested_value(rng: &mut Rng) -> Value {
    match rng.below(7) {
        0 => json!(rng.hostile()),
        1 => json!(9_007_199_254_740_993_i64),
        2 => json!(*rng.pick(&[0.5, 0.1, 1e-7, 2.5e21, -3.25])),
        3 => json!({}),
        4 => json!([]),
        5 => json!({"deep": {"x": rng.hostile()}}),
        _ => json!(-42),
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
    match kind {
        Kind::ConfigMap => {
            if rng.chance(70) {
                init.data.push(("k".into(), rng.hostile()));
            }
        }
        Kind::Specimen => {
            init.size = rng.chance(80).then(|| rng.below(5) as i64);
            init.color = rng
                .chance(80)
                .then(|| (*rng.pick(&["red", "green"])).into());
            for name in ["a", "b", "c"] {
                if rng.chance(60) {
                    let extra = rng.chance(60).then(|| rng.hostile());
                    init.items.push((name.into(), rng.hostile(), extra));
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
            init.phase = rng.chance(70).then(|| rng.hostile());
            for type_ in ["Ready", "Synced"] {
                if rng.chance(60) {
                    let status = (*rng.pick(&["True", "False"])).to_owned();
                    let severity = rng.chance(50).then(|| "Warning".to_owned());
                    init.conditions
                        .push((type_.into(), status, rng.hostile(), severity));
                }
            }
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
    let metadata = [
        Mut::SetLabel(label_key.clone(), (*rng.pick(&LABEL_VALUES)).into()),
        Mut::RemoveLabel(label_key),
        Mut::SetAnnotation(annotation_key.clone(), rng.hostile()),
        Mut::RemoveAnnotation(annotation_key),
        Mut::AddFinalizer(finalizer.clone()),
        Mut::RemoveFinalizer(finalizer),
    ];
    let mut options: Vec<Mut> = metadata.to_vec();
    let item = (*rng.pick(&["a", "b", "c", "d"])).to_owned();
    let tag = (*rng.pick(&["a", "m", "q", "z"])).to_owned();
    match (kind, copy) {
        (Kind::ConfigMap, Copy::Meta) => {}
        (Kind::ConfigMap, _) => options.push(Mut::SetData("k".into(), rng.hostile())),
        (Kind::Specimen, _) => {
            let condition = Mut::SetCondition {
                type_: (*rng.pick(&["Ready", "Synced", "New"])).into(),
                status: (*rng.pick(&["True", "False"])).into(),
                message: rng.hostile(),
            };
            options.push(condition);
            options.push(Mut::SetPhase(rng.hostile()));
            let spec = [
                Mut::SetSize(rng.below(9) as i64),
                Mut::SetItemValue(item.clone(), rng.hostile()),
                Mut::InsertItem(item.clone(), rng.hostile()),
                Mut::RemoveItem(item),
                Mut::ReverseItems,
                Mut::PushTag(tag.clone()),
                Mut::RemoveTag(tag.clone()),
            ];
            match copy {
                Copy::Raw | Copy::Trimmed => {
                    options.extend(spec);
                    let key = (*rng.pick(&NESTED_KEYS)).to_owned();
                    options.push(Mut::SetNested(key, nested_value(rng)));
                    let verbs = (*rng.pick(&[&["get", "list"][..], &["watch"], &[]])).to_vec();
                    options.push(Mut::SetRuleVerbs(
                        verbs.into_iter().map(str::to_owned).collect(),
                    ));
                    options.push(Mut::Painted);
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
                Copy::Meta | Copy::Typed => {}
            }
        }
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
    if kind == Kind::Specimen {
        options.extend([
            Race::Condition,
            Race::Item,
            Race::Tag,
            Race::Rule,
            Race::Size,
            Race::Color,
            Race::Phase,
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
        ],
        Kind::ConfigMap => &[Copy::Raw, Copy::Trimmed, Copy::Typed, Copy::Meta],
    }
}

/// Case number `index` of the run seeded `seed`, over `strategies`.
pub(crate) fn case(seed: u64, index: u64, strategies: &[&str]) -> Case {
    let mut rng = Rng::new(seed ^ index.wrapping_mul(0xA24B_AED4_963E_E407));
    let kind = if rng.chance(70) {
        Kind::Specimen
    } else {
        Kind::ConfigMap
    };
    let copy = *rng.pick(copies(kind));
    let strategy = (*rng.pick(strategies)).to_owned();
    let mut mutation = mutation(&mut rng, kind, copy);
    while !serves(&strategy, &mutation) {
        mutation = self::mutation(&mut rng, kind, copy);
    }
    let race = race(&mut rng, kind, &mutation);
    Case {
        strategy,
        kind,
        copy,
        mutation,
        race,
        initial: initial(&mut rng, kind),
    }
}
