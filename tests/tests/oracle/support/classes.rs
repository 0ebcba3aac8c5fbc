//! The oracle's universe, named: the classes its generator draws (object
//! kind, copy kind, value class, mutation class, concurrent change), the
//! classes each case falls in, and the table of how many cases each class
//! received. A class the generator never draws shows `0` and fails the
//! search, so the universe cannot shrink unnoticed.

use std::collections::BTreeMap;

use serde_json::Value;

use super::model::{Case, Mut};

/// Every class, by dimension, in the order the table prints them.
pub(crate) const UNIVERSE: [(&str, &[&str]); 6] = [
    (
        "kind",
        &[
            "Specimen",
            "Bare",
            "ConfigMap",
            "Deployment",
            "Service",
            "Pod",
            "Node",
        ],
    ),
    (
        "copy",
        &[
            "Raw", "Trimmed", "Typed", "Lagging", "Sorted", "View", "Meta", "Weighted", "Timed",
            "Mapped",
        ],
    ),
    ("value", VALUES),
    ("policy", &["retry", "requeue"]),
    (
        "mutation",
        &[
            "SetLabel",
            "RemoveLabel",
            "SetAnnotation",
            "RemoveAnnotation",
            "AddFinalizer",
            "RemoveFinalizer",
            "SetCondition",
            "SetPhase",
            "SetSize",
            "SetItemValue",
            "InsertItem",
            "RemoveItem",
            "ReverseItems",
            "PushTag",
            "RemoveTag",
            "SetRuleVerbs",
            "SetNested",
            "TypedConditionMessage",
            "Painted",
            "SetData",
            "SetColor",
            "SetWeight",
            "TimedConditionMessage",
            "SetAt",
            "UpsertPort",
            "RemovePort",
            "Create",
            "CreateGenerated",
            "Delete",
            "AddEntry",
            "RemoveEntry",
            "SetEntry",
        ],
    ),
    (
        "race",
        &[
            "None",
            "Label",
            "SameKey",
            "Annotation",
            "Finalizer",
            "Condition",
            "Item",
            "Tag",
            "Rule",
            "Size",
            "Color",
            "Phase",
            "Recreate",
            "Port",
            "Entry",
        ],
    ),
];

/// The value classes: what a string, a number or a map key holds.
pub(crate) const VALUES: &[&str] = &[
    "plain string",
    "empty string",
    "&<> (Go escapes)",
    "U+2028/U+2029",
    "non-ASCII",
    "quote, backslash, tab",
    "one C0 control",
    "every C0 control U+0000-U+001F",
    "DEL U+007F",
    "integer",
    "integer past 2^53",
    "float, short",
    "float, 16-17 digits",
    "whole number under f64",
    "time with fractions",
    "null",
    "key with /",
    "key with ~",
    "key with .",
    "empty key",
    "non-ASCII key",
];

/// The classes of a string value.
fn string_classes(s: &str, out: &mut Vec<&'static str>) {
    let c0 = s
        .chars()
        .filter(|c| (*c as u32) < 0x20 && *c != '\t')
        .count();
    if s.is_empty() {
        out.push("empty string");
    }
    if s.contains(['&', '<', '>']) {
        out.push("&<> (Go escapes)");
    }
    if s.contains(['\u{2028}', '\u{2029}']) {
        out.push("U+2028/U+2029");
    }
    if s.chars()
        .any(|c| !c.is_ascii() && c != '\u{2028}' && c != '\u{2029}')
    {
        out.push("non-ASCII");
    }
    if s.contains(['"', '\\', '\t']) {
        out.push("quote, backslash, tab");
    }
    if (0..0x20u8).all(|b| b == b'\t' || s.contains(char::from(b))) {
        out.push("every C0 control U+0000-U+001F");
    } else if c0 > 0 {
        out.push("one C0 control");
    }
    if s.contains('\u{7f}') {
        out.push("DEL U+007F");
    }
    if out.is_empty() {
        out.push("plain string");
    }
}

/// The classes of a map key.
pub(crate) fn key_classes(k: &str, out: &mut Vec<&'static str>) {
    if k.contains('/') {
        out.push("key with /");
    }
    if k.contains('~') {
        out.push("key with ~");
    }
    if k.contains('.') {
        out.push("key with .");
    }
    if k.is_empty() {
        out.push("empty key");
    }
    if !k.is_ascii() {
        out.push("non-ASCII key");
    }
}

/// The classes of a number.
fn number_classes(n: &serde_json::Number, out: &mut Vec<&'static str>) {
    const TWO_53: u64 = 1 << 53;
    if let Some(i) = n.as_i64() {
        out.push(if i.unsigned_abs() > TWO_53 {
            "integer past 2^53"
        } else {
            "integer"
        });
    } else if let Some(u) = n.as_u64() {
        out.push(if u > TWO_53 {
            "integer past 2^53"
        } else {
            "integer"
        });
    } else if let Some(f) = n.as_f64() {
        let digits = format!("{:e}", f.abs())
            .split('e')
            .next()
            .unwrap_or_default()
            .chars()
            .filter(char::is_ascii_digit)
            .count();
        out.push(if digits >= 16 {
            "float, 16-17 digits"
        } else if f.fract() == 0.0 && f.abs() < 1e15 {
            "whole number under f64"
        } else {
            "float, short"
        });
    }
}

/// Every value class a JSON value holds.
pub(crate) fn walk(v: &Value, out: &mut Vec<&'static str>) {
    match v {
        Value::String(s) => string_classes(s, out),
        Value::Number(n) => number_classes(n, out),
        Value::Null => {}
        Value::Array(l) => l.iter().for_each(|x| walk(x, out)),
        Value::Object(m) => m.iter().for_each(|(k, x)| {
            key_classes(k, out);
            walk(x, out);
        }),
        Value::Bool(_) => {}
    }
}

/// The variant name of a `Debug` form (`SetLabel("a", "b")` → `SetLabel`).
fn variant(debug: &str) -> String {
    debug
        .split(['(', ' ', '{'])
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// The classes `case` falls in, one or more per dimension.
pub(crate) fn classes(case: &Case) -> Vec<(&'static str, String)> {
    let mut out = vec![
        ("kind", format!("{:?}", case.kind)),
        ("copy", format!("{:?}", case.copy)),
        ("mutation", variant(&format!("{:?}", case.mutation))),
        ("race", variant(&format!("{:?}", case.race))),
        (
            "policy",
            if case.requeue { "requeue" } else { "retry" }.to_owned(),
        ),
    ];
    let mut values = Vec::new();
    let initial = serde_json::to_value(&case.initial).unwrap_or_default();
    walk(&initial, &mut values);
    walk(
        &serde_json::to_value(&case.mutation).unwrap_or_default(),
        &mut values,
    );
    walk(
        &serde_json::to_value(&case.race).unwrap_or_default(),
        &mut values,
    );
    for (k, _) in &case.initial.nested {
        key_classes(k, &mut values);
    }
    for (k, _) in &case.initial.data {
        key_classes(k, &mut values);
    }
    if let Mut::SetNested(k, _) | Mut::SetData(k, _) = &case.mutation {
        key_classes(k, &mut values);
    }
    let fields = case.initial.fields.iter().map(|(_, v)| v);
    let nested = case.initial.nested.iter().map(|(_, v)| v);
    let set = match &case.mutation {
        Mut::SetAt(_, v) | Mut::SetNested(_, v) => Some(v),
        _ => None,
    };
    if fields.chain(nested).chain(set).any(Value::is_null) {
        values.push("null");
    }
    if case.initial.fractions && !case.initial.conditions.is_empty() {
        values.push("time with fractions");
    }
    values.sort_unstable();
    values.dedup();
    out.extend(values.into_iter().map(|v| ("value", v.to_owned())));
    out
}

/// How many cases each class received.
#[derive(Debug, Default)]
pub(crate) struct ClassCount(pub(crate) BTreeMap<(&'static str, String), u64>);

impl ClassCount {
    /// Count `cases`.
    pub(crate) fn of(cases: &[Case]) -> Self {
        let mut count = ClassCount::default();
        for case in cases {
            for class in classes(case) {
                *count.0.entry(class).or_default() += 1;
            }
        }
        count
    }

    /// The classes of the universe that received fewer than `at_least`.
    pub(crate) fn short_of(&self, at_least: u64) -> Vec<String> {
        UNIVERSE
            .iter()
            .flat_map(|(dim, names)| names.iter().map(move |n| (*dim, *n)))
            .filter(|(dim, n)| self.get(dim, n) < at_least)
            .map(|(dim, n)| format!("{dim} {n}: {}", self.get(dim, n)))
            .collect()
    }

    fn get(&self, dim: &'static str, name: &str) -> u64 {
        self.0.get(&(dim, name.to_owned())).copied().unwrap_or(0)
    }

    /// The table, one row a class, by dimension; a class outside the
    /// universe (a bug of this file) is printed with a `?`.
    pub(crate) fn table(&self) -> String {
        let mut out = String::from("dimension  class                              cases\n");
        for (dim, names) in UNIVERSE {
            for n in names {
                out += &format!("{dim:<10} {n:<34} {:>6}\n", self.get(dim, n));
            }
        }
        for ((dim, n), c) in &self.0 {
            let known = UNIVERSE
                .iter()
                .any(|(d, names)| d == dim && names.contains(&n.as_str()));
            if !known {
                out += &format!("{dim:<10} {n:<34} {c:>6} ?\n");
            }
        }
        out
    }
}
