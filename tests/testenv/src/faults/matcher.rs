//! Deciding, request by request and event by event, which rule fires.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use crate::faults::request::{RequestInfo, resource_matches};
use crate::faults::schedule::{Rule, draw};
use crate::faults::{Fault, Faults, Verb};

/// A schedule in use: the rules and how often each has matched and fired.
#[derive(Debug)]
pub(crate) struct Matcher {
    pub(crate) faults: Faults,
    matched: Vec<AtomicU32>,
    fired: Vec<AtomicU32>,
    per_object: Mutex<HashMap<(usize, String), u32>>,
    fired_per_object: Mutex<HashMap<(usize, String), u32>>,
}

/// What a watch request's events are matched against.
#[derive(Clone, Debug)]
pub(crate) struct EventScope {
    pub(crate) rules: Vec<usize>,
    pub(crate) group: String,
    pub(crate) resource: String,
    /// A streaming list: its initial events pass untouched (they are the
    /// list, which event faults do not touch).
    pub(crate) initial_events: bool,
}

impl Matcher {
    pub(crate) fn new(faults: Faults) -> Self {
        let n = faults.rules.len();
        Matcher {
            faults,
            matched: (0..n).map(|_| AtomicU32::new(0)).collect(),
            fired: (0..n).map(|_| AtomicU32::new(0)).collect(),
            per_object: Mutex::new(HashMap::new()),
            fired_per_object: Mutex::new(HashMap::new()),
        }
    }

    /// The first request-level fault that fires for this request.
    pub(crate) fn request(&self, info: &RequestInfo) -> Option<Fault> {
        self.faults
            .rules
            .iter()
            .enumerate()
            .filter(|(_, rule)| rule.fault.is_some_and(|f| !f.on_events()))
            .filter(|(_, rule)| {
                rule.verb == info.verb
                    && rule.resource.as_deref().is_none_or(|r| info.resource_is(r))
                    && rule
                        .namespace
                        .as_ref()
                        .is_none_or(|ns| info.namespace.as_ref() == Some(ns))
                    && rule
                        .name
                        .as_ref()
                        .is_none_or(|n| info.name.as_ref() == Some(n))
            })
            .find_map(|(index, rule)| self.fire(index, rule, &info.key()))
    }

    /// The event-level rules that apply to this watch, if any.
    pub(crate) fn watch(&self, info: &RequestInfo) -> Option<EventScope> {
        if info.verb != Verb::Watch {
            return None;
        }
        let rules: Vec<usize> = self
            .faults
            .rules
            .iter()
            .enumerate()
            .filter(|(_, rule)| rule.fault.is_some_and(|f| f.on_events()))
            .filter(|(_, rule)| rule.resource.as_deref().is_none_or(|r| info.resource_is(r)))
            .map(|(index, _)| index)
            .collect();
        (!rules.is_empty()).then(|| EventScope {
            rules,
            group: info.group.clone(),
            resource: info.resource.clone(),
            initial_events: info.initial_events,
        })
    }

    /// The event-level fault that fires for an event of `namespace/name`.
    pub(crate) fn event(&self, scope: &EventScope, namespace: &str, name: &str) -> Option<Fault> {
        let key = format!("{namespace}/{name}");
        scope.rules.iter().find_map(|&index| {
            let rule = &self.faults.rules[index];
            let applies = rule.namespace.as_deref().is_none_or(|ns| ns == namespace)
                && rule.name.as_deref().is_none_or(|n| n == name)
                && rule
                    .resource
                    .as_deref()
                    .is_none_or(|r| resource_matches(r, &scope.group, &scope.resource, ""));
            if applies {
                self.fire(index, rule, &key)
            } else {
                None
            }
        })
    }

    fn fire(&self, index: usize, rule: &Rule, key: &str) -> Option<Fault> {
        let occurrence = {
            let mut per_object = self
                .per_object
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let n = per_object.entry((index, key.to_owned())).or_insert(0);
            *n += 1;
            *n - 1
        };
        let seen = self.matched[index].fetch_add(1, Relaxed);
        let skipped = if rule.per_object { occurrence } else { seen };
        if skipped < rule.after {
            return None;
        }
        if rule.probability < 1.0
            && draw(self.faults.seed, index, key, occurrence) >= rule.probability
        {
            return None;
        }
        let limit = rule.times.unwrap_or(u32::MAX);
        if rule.per_object {
            let mut fired = self
                .fired_per_object
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let n = fired.entry((index, key.to_owned())).or_insert(0);
            if *n >= limit {
                return None;
            }
            *n += 1;
            return rule.fault;
        }
        self.fired[index]
            .fetch_update(Relaxed, Relaxed, |n| (n < limit).then_some(n + 1))
            .ok()
            .and(rule.fault)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use http::Method;

    use super::*;
    use crate::faults::request::parse;

    fn patch(name: &str) -> RequestInfo {
        let path = format!("/api/v1/namespaces/a/pods/{name}");
        parse(&Method::PATCH, &path, None).unwrap()
    }

    #[test]
    fn times_and_after_bound_a_rule() {
        let m = Matcher::new(
            Faults::seeded(1)
                .on(Verb::Patch)
                .resource("pods")
                .fail_with(409)
                .after(1)
                .times(2),
        );
        let fired: Vec<bool> = (0..5).map(|_| m.request(&patch("p")).is_some()).collect();
        assert_eq!(fired, [false, true, true, false, false]);
    }

    #[test]
    fn per_object_counts_each_object_apart() {
        let m = Matcher::new(
            Faults::seeded(1)
                .on(Verb::Patch)
                .fail_with(409)
                .after(1)
                .times(1)
                .per_object(),
        );
        let fired: Vec<bool> = ["a", "b", "a", "b", "a"]
            .iter()
            .map(|n| m.request(&patch(n)).is_some())
            .collect();
        assert_eq!(fired, [false, false, true, true, false]);
    }

    #[test]
    fn other_verbs_and_resources_pass() {
        let m = Matcher::new(
            Faults::seeded(1)
                .on(Verb::Update)
                .resource("pods")
                .fail_with(500),
        );
        assert!(m.request(&patch("p")).is_none());
        let get = parse(&Method::PUT, "/api/v1/namespaces/a/configmaps/c", None).unwrap();
        assert!(m.request(&get).is_none());
    }

    #[test]
    fn seeded_probability_repeats_per_object() {
        let run = |seed| {
            let m = Matcher::new(
                Faults::seeded(seed)
                    .on(Verb::Patch)
                    .fail_with(503)
                    .with_probability(0.5),
            );
            (0..40)
                .map(|i| m.request(&patch(&format!("p{}", i % 4))).is_some())
                .collect::<Vec<_>>()
        };
        assert_eq!(run(9), run(9));
        assert_ne!(run(9), run(10));
        let fired = run(9).iter().filter(|f| **f).count();
        assert!((8..=32).contains(&fired), "{fired}");
    }
}
