use std::fmt;
use std::sync::Arc;

use concord_featuregates::Operation;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

use crate::Intent;

/// What a reconciler wants changed on one object: a list of [`Intent`]s,
/// applied in order.
///
/// A strategy may apply a mutation several times, each time to a fresher
/// copy of the object, so closures must be re-runnable: compute the result
/// from the object they receive, not from captured state that the first run
/// changed.
///
/// ```
/// use concord_strategies::{Intent, Mutation};
/// use concord_featuregates::Operation;
///
/// let done = Mutation::new()
///     .with(Intent::remove_finalizer("workflows.argoproj.io/status"))
///     .with(Intent::set_label("workflows.argoproj.io/completed", "true"));
/// assert_eq!(done.operation(), Operation::RemoveFinalizer);
/// ```
#[derive(Clone, Default)]
pub struct Mutation {
    intents: Vec<Intent>,
    depends: Vec<String>,
}

impl Mutation {
    /// A mutation that changes nothing yet.
    pub fn new() -> Self {
        Mutation::default()
    }

    /// This mutation followed by `intent`.
    #[must_use]
    pub fn with(mut self, intent: Intent) -> Self {
        self.intents.push(intent);
        self
    }

    /// An arbitrary change to the main resource's JSON.
    pub fn custom<F>(f: F) -> Self
    where
        F: Fn(&mut Value) + Send + Sync + 'static,
    {
        Mutation::from(Intent::Custom {
            status: false,
            closure: Arc::new(move |v| {
                f(v);
                Ok(())
            }),
        })
    }

    /// An arbitrary change written to the status subresource.
    pub fn custom_status<F>(f: F) -> Self
    where
        F: Fn(&mut Value) + Send + Sync + 'static,
    {
        Mutation::from(Intent::Custom {
            status: true,
            closure: Arc::new(move |v| {
                f(v);
                Ok(())
            }),
        })
    }

    /// An arbitrary change to the typed object `K` (main resource).
    ///
    /// The closure sees `K`'s view of the object, and only its *change* is
    /// written: the difference between the view before and after the
    /// closure is applied to the object as stored. A field `K` does not
    /// know (a CRD whose Rust type lags its schema, a built-in field newer
    /// than `k8s-openapi`) is never in the request and never lost, whatever
    /// copy the strategy starts from.
    ///
    /// Stored values are judged in `K`'s own terms: a stored entry is
    /// decoded through `K` before it is compared with `K`'s view, so a
    /// value the type writes differently (`1` stored under an `f64` shown
    /// as `1.0`, a time with fractions under whole seconds) is neither
    /// taken for a change nor rewritten; a list entry `K` shows is paired
    /// with the stored entry it was decoded from.
    ///
    /// ```
    /// use concord_strategies::Mutation;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    ///
    /// let tag = Mutation::typed(|cm: &mut ConfigMap| {
    ///     cm.data.get_or_insert_default().insert("tier".into(), "web".into());
    /// });
    /// # let _ = tag;
    /// ```
    pub fn typed<K, F>(f: F) -> Self
    where
        K: Serialize + DeserializeOwned,
        F: Fn(&mut K) + Send + Sync + 'static,
    {
        Mutation::from(Intent::Custom {
            status: false,
            closure: Arc::new(move |v| {
                let mut typed: K = serde_json::from_value(v.clone())?;
                let before = serde_json::to_value(&typed)?;
                f(&mut typed);
                let after = serde_json::to_value(&typed)?;
                // How `K` sees any stored object, to judge stored values
                // in `K`'s own terms (`1` is `1.0` to an `f64`); used to
                // compare and locate, never written.
                let view = |raw: &Value| {
                    let typed: K = serde_json::from_value(raw.clone()).ok()?;
                    serde_json::to_value(&typed).ok()
                };
                crate::model::carry::apply_change(v, &before, &after, &view);
                Ok(())
            }),
        })
    }

    /// An arbitrary change to the typed object `K`'s status, written to
    /// the status subresource; only its change is written, as with
    /// [`typed`](Self::typed).
    ///
    /// A main-resource mutation (`typed`, `custom`) that changes `status`
    /// is refused ([`Error::UnsupportedMutation`](crate::Error::UnsupportedMutation))
    /// where the resource has a status subresource: the API server would
    /// store the write without it. On a custom resource without one, both
    /// are written through the main resource, under the same strategy
    /// (discovery decides, once per target; see `runner/subresource.rs`).
    pub fn typed_status<K, F>(f: F) -> Self
    where
        K: Serialize + DeserializeOwned,
        F: Fn(&mut K) + Send + Sync + 'static,
    {
        let Intent::Custom { closure, .. } = Mutation::typed(f).intents.remove(0) else {
            unreachable!("typed builds one closure")
        };
        Mutation::from(Intent::Custom {
            status: true,
            closure,
        })
    }

    /// This mutation, declared to depend on the field at `path` (a JSON
    /// pointer, `/spec/replicas`) although it does not write it: the
    /// decision it carries was taken from that field's observed value.
    ///
    /// `guarded` tests the observed value of every such path, so the write
    /// lands only if they are unchanged (a conflict otherwise, re-read and
    /// retried as any other); `strict` and `update` already hold the whole
    /// object to its observed version. `lax`, `locked` and `apply` cannot
    /// test a field they do not write and refuse such a mutation
    /// ([`Error::UnsupportedMutation`](crate::Error::UnsupportedMutation)).
    ///
    /// ```
    /// use concord_strategies::{Intent, Mutation};
    /// let scaled = Mutation::from(Intent::MergeStatus(serde_json::json!({"scaled": true})))
    ///     .depending_on("/spec/replicas");
    /// assert_eq!(scaled.dependencies(), ["/spec/replicas"]);
    /// ```
    #[must_use]
    pub fn depending_on(mut self, path: impl Into<String>) -> Self {
        self.depends.push(path.into());
        self
    }

    /// The paths the mutation depends on besides those it writes.
    pub fn dependencies(&self) -> &[String] {
        &self.depends
    }

    /// The intents, in order.
    pub fn intents(&self) -> &[Intent] {
        &self.intents
    }

    /// The operation the strategy table files this mutation under:
    /// `apply-owned` for a whole owned object, else `other` if any closure
    /// is involved, else `status`, else finalizer removal, else finalizer
    /// addition, else `metadata`.
    pub fn operation(&self) -> Operation {
        let ops: Vec<Operation> = self.intents.iter().map(Intent::operation).collect();
        [
            Operation::ApplyOwned,
            Operation::Other,
            Operation::Status,
            Operation::RemoveFinalizer,
            Operation::AddFinalizer,
        ]
        .into_iter()
        .find(|op| ops.contains(op))
        .unwrap_or(Operation::Metadata)
    }

    /// Whether the mutation goes to the status subresource. `None` when it
    /// mixes status and main-resource intents.
    pub fn is_status(&self) -> Option<bool> {
        let status = self.intents.iter().filter(|i| i.is_status()).count();
        match status {
            0 => Some(false),
            n if n == self.intents.len() => Some(true),
            _ => None,
        }
    }

    /// Whether the mutation only removes finalizers, so that a missing
    /// object means it is done.
    pub fn only_removes_finalizers(&self) -> bool {
        !self.intents.is_empty()
            && self
                .intents
                .iter()
                .all(|i| matches!(i, Intent::RemoveFinalizer(_)))
    }

    /// Whether every intent is one server-side apply can express.
    pub fn is_declarative(&self) -> bool {
        !self
            .intents
            .iter()
            .any(|i| matches!(i, Intent::Custom { .. }))
    }

    /// Apply every intent to a copy of `object`; `None` if nothing changed.
    pub(crate) fn apply(&self, object: &Value) -> Result<Option<Value>, serde_json::Error> {
        let mut next = object.clone();
        for intent in &self.intents {
            intent.apply_to(&mut next)?;
        }
        Ok((next != *object).then_some(next))
    }
}

impl From<Intent> for Mutation {
    fn from(intent: Intent) -> Self {
        Mutation {
            intents: vec![intent],
            depends: Vec::new(),
        }
    }
}

impl FromIterator<Intent> for Mutation {
    fn from_iter<T: IntoIterator<Item = Intent>>(iter: T) -> Self {
        Mutation {
            intents: iter.into_iter().collect(),
            depends: Vec::new(),
        }
    }
}

impl fmt::Debug for Mutation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.depends.is_empty() {
            return f.debug_list().entries(&self.intents).finish();
        }
        f.debug_struct("Mutation")
            .field("intents", &self.intents)
            .field("depends", &self.depends)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mutation_that_changes_nothing_yields_none() {
        let obj = json!({"metadata": {"labels": {"a": "1"}}});
        let m = Mutation::from(Intent::set_label("a", "1"));
        assert_eq!(m.apply(&obj).unwrap(), None);
    }

    #[test]
    fn closure_mutation_is_classified_other() {
        let m = Mutation::custom(|v| v["spec"] = json!({})).with(Intent::add_finalizer("f"));
        assert_eq!(m.operation(), Operation::Other);
        assert!(!m.is_declarative());
    }

    #[test]
    fn mixing_status_and_metadata_is_detected() {
        let m =
            Mutation::from(Intent::MergeStatus(json!({"a": 1}))).with(Intent::set_label("a", "b"));
        assert_eq!(m.is_status(), None);
    }

    #[test]
    fn typed_closure_writes_its_change_and_keeps_what_its_type_lacks() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let m = Mutation::typed(|cm: &mut ConfigMap| {
            cm.data
                .get_or_insert_default()
                .insert("k".into(), "v".into());
        });
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "newerField": {"kept": true}});
        let next = m.apply(&obj).unwrap().unwrap();
        assert_eq!(next["data"], json!({"k": "v"}));
        assert_eq!(next["newerField"], json!({"kept": true}));
    }

    /// A type whose encoding differs from the stored one: `f64` weights
    /// over whole numbers, conditions with whole-second times, no
    /// `owner` or `severity`.
    #[derive(serde::Deserialize, serde::Serialize)]
    struct Ledger {
        spec: Spec,
        #[serde(default)]
        status: Status,
    }

    #[derive(serde::Deserialize, serde::Serialize)]
    struct Spec {
        entries: Vec<Entry>,
    }

    #[derive(serde::Deserialize, serde::Serialize)]
    struct Entry {
        name: String,
        weight: f64,
    }

    #[derive(Default, serde::Deserialize, serde::Serialize)]
    struct Status {
        #[serde(default)]
        conditions: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
    }

    #[test]
    fn a_typed_change_keeps_entries_whose_values_the_type_writes_differently() {
        let stored = json!({"spec": {"entries": [
            {"name": "a", "weight": 1, "owner": "x"},
            {"name": "b", "weight": 2, "owner": "y"},
            {"name": "c", "weight": 9_007_199_254_740_993_u64, "owner": "z"},
        ]}});
        let m = Mutation::typed(|l: &mut Ledger| l.spec.entries[1].weight = 0.5);
        let next = m.apply(&stored).unwrap().unwrap();
        let mut expected = stored.clone();
        expected["spec"]["entries"][1]["weight"] = json!(0.5);
        assert_eq!(next, expected);
    }

    #[test]
    fn typed_list_edits_keep_stored_entries_whose_bytes_differ() {
        let (a, b, c) = (
            json!({"name": "a", "weight": 1, "owner": "x"}),
            json!({"name": "b", "weight": 2, "owner": "y"}),
            json!({"name": "c", "weight": 3, "owner": "z"}),
        );
        let stored = json!({"spec": {"entries": [a, b, c]}});
        let new = json!({"name": "n", "weight": 0.5});
        let reverse: fn(&mut Ledger) = |l| l.spec.entries.reverse();
        let insert: fn(&mut Ledger) = |l| {
            let entry = Entry {
                name: "n".into(),
                weight: 0.5,
            };
            l.spec.entries.insert(1, entry);
        };
        let remove: fn(&mut Ledger) = |l| drop(l.spec.entries.remove(0));
        let cases = [
            (reverse, json!([c, b, a])),
            (insert, json!([a, new, b, c])),
            (remove, json!([b, c])),
        ];
        for (closure, expected) in cases {
            let next = Mutation::typed(closure).apply(&stored).unwrap().unwrap();
            assert_eq!(next["spec"]["entries"], expected);
        }
    }

    #[test]
    fn a_typed_status_change_keeps_other_conditions_as_stored() {
        let theirs = json!({"type": "Synced", "status": "True", "reason": "R", "message": "m",
            "lastTransitionTime": "2026-01-02T03:04:05.678901Z", "severity": "Warning"});
        let stored = json!({"spec": {"entries": []}, "status": {"conditions": [
            {"type": "Ready", "status": "False", "reason": "R", "message": "old",
             "lastTransitionTime": "2026-01-01T00:00:00.5Z"},
            theirs,
        ]}});
        let m =
            Mutation::typed_status(|l: &mut Ledger| l.status.conditions[0].message = "new".into());
        let next = m.apply(&stored).unwrap().unwrap();
        let mut expected = stored.clone();
        expected["status"]["conditions"][0]["message"] = json!("new");
        assert_eq!(next, expected);
    }

    #[test]
    fn a_type_that_sorts_a_list_pairs_each_entry_with_its_stored_one() {
        fn sorted<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Entry>, D::Error> {
            let mut entries: Vec<Entry> = serde::Deserialize::deserialize(d)?;
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(entries)
        }
        #[derive(serde::Deserialize, serde::Serialize)]
        struct Sorted {
            #[serde(deserialize_with = "sorted")]
            entries: Vec<Entry>,
        }
        let stored = json!({"entries": [
            {"name": "b", "weight": 2, "owner": "y"},
            {"name": "a", "weight": 1, "owner": "x"},
        ]});
        let m = Mutation::typed(|s: &mut Sorted| s.entries[1].weight = 0.5);
        // The list goes in the type's order; each entry is the stored one
        // it was decoded from, with the change applied.
        assert_eq!(
            m.apply(&stored).unwrap().unwrap(),
            json!({"entries": [
                {"name": "a", "weight": 1, "owner": "x"},
                {"name": "b", "weight": 0.5, "owner": "y"},
            ]})
        );
    }

    #[test]
    fn numbers_are_read_and_written_exactly() {
        // serde_json without `float_roundtrip` reads about one float of
        // 17 digits in twenty one ulp off; the workspace enables it.
        let text = r#"[9.204938554384977,0.9999999999999999,1.2909075938396821,9007199254740993,18446744073709551615,-9223372036854775808]"#;
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(value[0].as_f64(), Some(9.204938554384977));
        assert_eq!(serde_json::to_string(&value).unwrap(), text);
    }

    #[test]
    fn typed_closure_round_trips_through_json() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let m = Mutation::typed(|cm: &mut ConfigMap| {
            cm.data
                .get_or_insert_default()
                .insert("k".into(), "v".into());
        });
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        let next = m.apply(&obj).unwrap().unwrap();
        assert_eq!(next["data"], json!({"k": "v"}));
    }
}
