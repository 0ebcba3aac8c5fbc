//! The oracle's cases and what each should store: a case is a stored
//! object, the copy a writer holds of it, a mutation, a strategy and an
//! optional concurrent change; [`expected`] is the model of the mutation's
//! effect on the raw object, independent of concord's code.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Values from a hostile alphabet: what Go's encoder escapes (`&`, `<`,
/// `>`, U+2028), non-ASCII, empty; [`Rng::hostile`] adds one C0 control
/// character or all of them.
pub(crate) const HOSTILE: [&str; 10] = [
    "plain",
    "https://x/?a=1&b=2",
    "1 < 3 > 2",
    "line\u{2028}sep\u{2029}",
    "é-ü-日本",
    "",
    "tab\tquote\"back\\slash",
    "\u{1}ctl\u{7f}",
    "back\u{8}space\u{c}feed",
    "&<>",
];

/// Label values must be valid label values.
pub(crate) const LABEL_VALUES: [&str; 4] = ["a", "b-2", "C_3.x", ""];

/// Keys for nested maps: `/` and `~` need escaping in JSON pointers.
/// `.` is a path separator to some tools; the empty key is legal JSON
/// (a preserve-unknown-fields map of a custom resource accepts it).
pub(crate) const NESTED_KEYS: [&str; 8] = ["k", "a/b", "t~1", "~", "é", "a.b", "", "/~."];

/// ConfigMap data keys: the server accepts `[-._a-zA-Z0-9]+` only (no
/// `/`, `~`, non-ASCII or empty key).
pub(crate) const DATA_KEYS: [&str; 4] = ["k", "a.b", ".dot", "-_.x"];

/// Ports of the two-key list (`port` + `protocol`).
pub(crate) const PORTS: [(i64, &str); 4] = [(80, "TCP"), (80, "UDP"), (443, "TCP"), (8080, "SCTP")];

/// The resource a case writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Kind {
    /// The custom resource: JSON patches, status subresource.
    Specimen,
    /// The built-in ConfigMap: strategic merge patches.
    ConfigMap,
    /// The same schema as [`Kind::Specimen`] without a status
    /// subresource: status is written through the main resource.
    Bare,
    /// A Deployment: the env of its first container.
    Deployment,
    /// A Service: its ports, keyed by `port` + `protocol`.
    Service,
    /// A Pod: its tolerations (append only).
    Pod,
    /// A Node (cluster-scoped): its taints, keyed by `key` + `effect`.
    Node,
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
    /// A type holding the items' weights as `f64` with a serde default
    /// (`1` stored is `1.0` to it, an absent weight `0.0`).
    Weighted,
    /// A type holding the conditions as k8s-openapi `Condition`s (whole
    /// seconds, no `severity`).
    Timed,
    /// A type holding the nested map as a `HashMap` and the colour as an
    /// enum.
    Mapped,
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
    /// A typed closure (`f64` weights): the item `name`'s weight.
    SetWeight(String, f64),
    /// A `typed_status` closure (k8s-openapi conditions): the message of
    /// the condition `Ready`.
    TimedConditionMessage(String),
    /// A typed closure (the enum): `spec.color`.
    SetColor(String),
    /// A raw closure setting the field at a JSON pointer of `spec` (the
    /// nullable, int-or-string, quantity and set-list fields).
    SetAt(String, Value),
    /// A raw closure: the entry (`port`, `protocol`) of the two-key list
    /// named `name`, appended if missing.
    UpsertPort(i64, String, String),
    /// A raw closure: the entry (`port`, `protocol`) removed.
    RemovePort(i64, String),
    /// `Writer::create` of the case's object under its name.
    Create,
    /// `Writer::create` of the case's object with `generateName`.
    CreateGenerated,
    /// `Writer::delete` from the copy.
    Delete,
    /// A typed closure over a built-in kind's k8s-openapi type: the entry
    /// appended to the kind's list if no entry has its key.
    AddEntry(Value),
    /// A typed closure: the entry with this key removed.
    RemoveEntry(Value),
    /// A typed closure: a field of the entry with this key set.
    SetEntry(Value, String, Value),
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
    /// Another entry at index 0 of the two-key list.
    Port,
    /// Another entry at index 0 of a built-in kind's list.
    Entry,
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
    /// Items' weights, by item name (numbers as stored).
    #[serde(default)]
    pub(crate) weights: Vec<(String, Value)>,
    /// Conditions' `lastTransitionTime` with fractional seconds.
    #[serde(default)]
    pub(crate) fractions: bool,
    /// Entries of the two-key list (`port`, `protocol`, `name`, `extra`).
    #[serde(default)]
    pub(crate) ports: Vec<Value>,
    /// Other fields of `spec`: `opt` (nullable), `target` (int-or-string),
    /// `cpu` (quantity), `aliases` (set list).
    #[serde(default)]
    pub(crate) fields: Vec<(String, Value)>,
    /// The entries of a built-in kind's list.
    #[serde(default)]
    pub(crate) entries: Vec<Value>,
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
    /// `onConflict: requeue`: a conflict is handed back and the case is
    /// reconciled again from a fresh copy, up to five times.
    #[serde(default)]
    pub(crate) requeue: bool,
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

    pub(crate) fn hostile(&mut self) -> String {
        match self.below(HOSTILE.len() + 2) {
            n if n < HOSTILE.len() => HOSTILE[n].to_owned(),
            n if n == HOSTILE.len() => (0..0x20u8).map(char::from).chain(['x']).collect(),
            _ => format!("c{}0", char::from(self.below(0x20) as u8)),
        }
    }

    /// A float of 16–17 significant digits in [0, 10).
    pub(crate) fn long_float(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 10.0
    }
}

/// The strategies whose writes concord calls safe.
pub(crate) const SAFE: [&str; 5] = ["strict", "guarded", "update", "locked", "apply"];
