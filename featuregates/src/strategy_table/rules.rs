use figment::value::{Dict, Value};

use super::choice::StrategyChoice;
use super::duration::parse_duration;
use super::resource_key::ResourceSelector;
use crate::sources::{Locator, describe, join_key, number};
use crate::{
    ConflictPolicy, Feature, FeatureGates, Operation, Origin, Problem, RetryPolicy, StrategyName,
};

/// The `strategies` section, checked but not yet resolved against gates.
#[derive(Debug, Default)]
pub(crate) struct Rules {
    pub(crate) global: Level,
    pub(crate) resources: Vec<ResourceRules>,
}

/// A `default` rule and one optional rule per operation.
#[derive(Debug, Default)]
pub(crate) struct Level {
    pub(crate) default: Option<Rule>,
    pub(crate) operations: [Option<Rule>; Operation::ALL.len()],
}

#[derive(Debug)]
pub(crate) struct ResourceRules {
    pub(crate) form: String,
    pub(crate) selector: ResourceSelector,
    pub(crate) level: Level,
}

#[derive(Debug)]
pub(crate) struct Rule {
    pub(crate) key: String,
    pub(crate) origin: Origin,
    pub(crate) kind: RuleKind,
}

#[derive(Debug)]
pub(crate) enum RuleKind {
    Fixed(StrategyChoice),
    Gated {
        gate: Feature,
        enabled: Option<StrategyChoice>,
        disabled: Option<StrategyChoice>,
    },
}

/// Reads the `strategies` value, pushing every problem it finds.
pub(crate) fn parse_rules(
    value: Option<&Value>,
    locator: &Locator<'_>,
    gates: &FeatureGates,
    problems: &mut Vec<Problem>,
) -> Rules {
    let mut parser = Parser {
        locator,
        gates,
        problems,
    };
    value
        .map(|value| parser.strategies(value))
        .unwrap_or_default()
}

struct Parser<'a> {
    locator: &'a Locator<'a>,
    gates: &'a FeatureGates,
    problems: &'a mut Vec<Problem>,
}

type Path<'p> = &'p [&'p str];

impl Parser<'_> {
    fn origin(&self, value: &Value, path: Path<'_>) -> Origin {
        self.locator.origin(value, path)
    }

    fn wrong_type(&mut self, value: &Value, path: Path<'_>, expected: &'static str) {
        let origin = self.origin(value, path);
        self.problems.push(Problem::WrongType {
            expected,
            found: describe(value),
            origin,
        });
    }

    fn dict<'v>(&mut self, value: &'v Value, path: Path<'_>) -> Option<&'v Dict> {
        match value {
            Value::Dict(_, dict) => Some(dict),
            _ => {
                self.wrong_type(value, path, "a mapping");
                None
            }
        }
    }

    fn unknown_key(&mut self, key: &str, value: &Value, path: Path<'_>, expected: &'static str) {
        let origin = self.origin(value, &[path, &[key]].concat());
        self.problems.push(Problem::UnknownKey {
            key: key.to_owned(),
            expected,
            origin,
        });
    }

    fn strategies(&mut self, value: &Value) -> Rules {
        let path: Path<'_> = &["strategies"];
        let mut rules = Rules::default();
        let Some(dict) = self.dict(value, path) else {
            return rules;
        };
        for (key, value) in dict {
            let sub = [path, &[key.as_str()]].concat();
            match key.as_str() {
                "default" => rules.global.default = self.rule(value, &sub),
                "operations" => rules.global.operations = self.operations(value, &sub),
                "resources" => rules.resources = self.resources(value, &sub),
                _ => self.unknown_key(key, value, path, "default, operations, resources"),
            }
        }
        rules
    }

    fn resources(&mut self, value: &Value, path: Path<'_>) -> Vec<ResourceRules> {
        let Some(dict) = self.dict(value, path) else {
            return Vec::new();
        };
        let mut resources = Vec::new();
        for (form, value) in dict {
            let sub = [path, &[form.as_str()]].concat();
            let selector = ResourceSelector::parse(form);
            if selector.is_none() {
                let origin = self.origin(value, &sub);
                self.problems.push(Problem::UnknownResourceForm {
                    form: form.clone(),
                    origin,
                });
            }
            let mut level = Level::default();
            if let Some(dict) = self.dict(value, &sub) {
                for (key, value) in dict {
                    let key_path = [sub.as_slice(), &[key.as_str()]].concat();
                    match key.as_str() {
                        "default" => level.default = self.rule(value, &key_path),
                        "operations" => level.operations = self.operations(value, &key_path),
                        _ => self.unknown_key(key, value, &sub, "default, operations"),
                    }
                }
            }
            if let Some(selector) = selector {
                resources.push(ResourceRules {
                    form: form.clone(),
                    selector,
                    level,
                });
            }
        }
        resources
    }

    fn operations(
        &mut self,
        value: &Value,
        path: Path<'_>,
    ) -> [Option<Rule>; Operation::ALL.len()] {
        let mut operations: [Option<Rule>; Operation::ALL.len()] = Default::default();
        let Some(dict) = self.dict(value, path) else {
            return operations;
        };
        for (name, value) in dict {
            let sub = [path, &[name.as_str()]].concat();
            let Ok(operation) = name.parse::<Operation>() else {
                let origin = self.origin(value, &sub);
                self.problems.push(Problem::UnknownOperation {
                    name: name.clone(),
                    origin,
                });
                continue;
            };
            let lifecycle = matches!(operation, Operation::Create | Operation::Delete);
            if lifecycle && names_conflict_policy(value) {
                let origin = self.origin(value, &sub);
                self.problems.push(Problem::InvalidRule {
                    message: "`onConflict` and `retry` do not apply to `create` or `delete`: a delete whose copy is stale hands the object back to the reconciler, and a create has nothing to retry onto",
                    origin,
                });
                continue;
            }
            let rule = self.rule(value, &sub);
            if let Some(rule) = &rule {
                self.check_serves(rule, operation);
            }
            operations[operation.index()] = rule;
        }
        operations
    }

    /// Rejects a rule written for `operation` whose strategy, under either
    /// value of its gate, cannot serve it.
    fn check_serves(&mut self, rule: &Rule, operation: Operation) {
        let choices = match &rule.kind {
            RuleKind::Fixed(choice) => [Some(*choice), None],
            RuleKind::Gated {
                enabled, disabled, ..
            } => [*enabled, *disabled],
        };
        for choice in choices.into_iter().flatten() {
            if !choice.strategy.description().serves(operation) {
                let problem = Problem::UnservableOperation {
                    strategy: choice.strategy,
                    operation,
                    origin: rule.origin.clone(),
                };
                if !self.problems.contains(&problem) {
                    self.problems.push(problem);
                }
            }
        }
    }

    fn rule(&mut self, value: &Value, path: Path<'_>) -> Option<Rule> {
        let origin = self.origin(value, path);
        let kind = match value {
            Value::Dict(_, dict) if dict.contains_key("gate") => self.gated(dict, path)?,
            _ => RuleKind::Fixed(self.choice(value, path)?),
        };
        Some(Rule {
            key: join_key(path),
            origin,
            kind,
        })
    }

    fn gated(&mut self, dict: &Dict, path: Path<'_>) -> Option<RuleKind> {
        let (mut gate, mut enabled, mut disabled, mut ok) = (None, None, None, true);
        for (key, value) in dict {
            let sub = [path, &[key.as_str()]].concat();
            match key.as_str() {
                "gate" => match value {
                    Value::String(_, name) => {
                        gate = self.gates.feature(name);
                        if gate.is_none() {
                            let origin = self.origin(value, &sub);
                            self.problems.push(Problem::UnknownGate {
                                name: name.clone(),
                                origin,
                            });
                        }
                    }
                    _ => self.wrong_type(value, &sub, "a feature gate name"),
                },
                "enabled" => enabled = self.choice(value, &sub),
                "disabled" => disabled = self.choice(value, &sub),
                _ => {
                    self.unknown_key(key, value, path, "gate, enabled, disabled");
                    ok = false;
                }
            }
        }
        let has_branch = dict.contains_key("enabled") || dict.contains_key("disabled");
        if !has_branch {
            let origin = self.origin(&dict["gate"], path);
            self.problems.push(Problem::InvalidRule {
                message: "a gated rule needs `enabled`, `disabled` or both",
                origin,
            });
        }
        let valid_branches = dict.get("enabled").is_none_or(|_| enabled.is_some())
            && dict.get("disabled").is_none_or(|_| disabled.is_some());
        match gate {
            Some(gate) if has_branch && valid_branches && ok => Some(RuleKind::Gated {
                gate,
                enabled,
                disabled,
            }),
            _ => None,
        }
    }

    fn choice(&mut self, value: &Value, path: Path<'_>) -> Option<StrategyChoice> {
        match value {
            Value::String(_, name) => self
                .strategy_name(name, value, path)
                .map(StrategyChoice::of),
            Value::Dict(_, dict) => self.choice_dict(dict, value, path),
            _ => {
                self.wrong_type(value, path, "a strategy name or a mapping with `strategy`");
                None
            }
        }
    }

    fn strategy_name(&mut self, name: &str, value: &Value, path: Path<'_>) -> Option<StrategyName> {
        let parsed = name.parse().ok();
        if parsed.is_none() {
            let origin = self.origin(value, path);
            self.problems.push(Problem::UnknownStrategy {
                name: name.to_owned(),
                origin,
            });
        }
        parsed
    }

    fn choice_dict(
        &mut self,
        dict: &Dict,
        whole: &Value,
        path: Path<'_>,
    ) -> Option<StrategyChoice> {
        let (mut strategy, mut requeue, mut retry, mut ok) = (None, false, None, true);
        for (key, value) in dict {
            let sub = [path, &[key.as_str()]].concat();
            match (key.as_str(), value) {
                ("strategy", Value::String(_, name)) => {
                    strategy = self.strategy_name(name, value, &sub);
                    ok &= strategy.is_some();
                }
                ("onConflict", Value::String(_, policy))
                    if policy == "retry" || policy == "requeue" =>
                {
                    requeue = policy == "requeue";
                }
                ("onConflict", Value::String(_, policy)) => {
                    let origin = self.origin(value, &sub);
                    self.problems.push(Problem::UnknownConflictPolicy {
                        name: policy.clone(),
                        origin,
                    });
                    ok = false;
                }
                ("retry", _) => {
                    retry = self.retry(value, &sub);
                    ok &= retry.is_some();
                }
                ("strategy" | "onConflict", _) => {
                    self.wrong_type(value, &sub, "a string");
                    ok = false;
                }
                _ => {
                    self.unknown_key(key, value, path, "strategy, onConflict, retry");
                    ok = false;
                }
            }
        }
        let origin = self.origin(whole, path);
        let Some(strategy) = strategy else {
            if !dict.contains_key("strategy") {
                self.problems.push(Problem::InvalidRule {
                    message: "missing `strategy`",
                    origin,
                });
            }
            return None;
        };
        let has_policy = dict.contains_key("onConflict") || dict.contains_key("retry");
        if has_policy && !strategy.description().takes_conflict_policy() {
            self.problems
                .push(Problem::UnexpectedConflictPolicy { strategy, origin });
            return None;
        }
        if requeue && dict.contains_key("retry") {
            self.problems.push(Problem::InvalidRule {
                message: "`retry` settings contradict `onConflict: requeue`",
                origin,
            });
            return None;
        }
        let on_conflict = if requeue {
            ConflictPolicy::Requeue
        } else {
            ConflictPolicy::Retry(retry.unwrap_or_default())
        };
        ok.then_some(StrategyChoice::new(strategy, on_conflict))
    }

    fn retry(&mut self, value: &Value, path: Path<'_>) -> Option<RetryPolicy> {
        let dict = self.dict(value, path)?;
        let mut policy = RetryPolicy::default();
        let mut ok = true;
        for (key, value) in dict {
            let sub = [path, &[key.as_str()]].concat();
            let result = match key.as_str() {
                "steps" => value
                    .to_u128()
                    .and_then(|n| u32::try_from(n).ok())
                    .filter(|n| *n >= 1)
                    .map(|steps| policy.steps = steps)
                    .ok_or_else(|| {
                        format!(
                            "`steps` must be a whole number from 1 to {}, found {}",
                            u32::MAX,
                            describe(value)
                        )
                    }),
                "initial" | "cap" => match value {
                    Value::String(_, text) => parse_duration(text).map(|d| match key.as_str() {
                        "initial" => policy.initial = d,
                        _ => policy.cap = d,
                    }),
                    _ => Err(format!(
                        "`{key}` must be a duration such as `10ms`, found {}",
                        describe(value)
                    )),
                },
                "factor" => number(value)
                    .filter(|f| f.is_finite() && *f >= 1.0)
                    .map(|factor| policy.factor = factor)
                    .ok_or_else(|| {
                        format!(
                            "`factor` must be a number of at least 1.0, found {}",
                            describe(value)
                        )
                    }),
                "jitter" => number(value)
                    .filter(|j| j.is_finite() && *j >= 0.0)
                    .map(|jitter| policy.jitter = jitter)
                    .ok_or_else(|| {
                        format!(
                            "`jitter` must be a number of at least 0.0, found {}",
                            describe(value)
                        )
                    }),
                _ => {
                    self.unknown_key(key, value, path, "steps, initial, factor, jitter, cap");
                    ok = false;
                    continue;
                }
            };
            if let Err(message) = result {
                let origin = self.origin(value, &sub);
                self.problems
                    .push(Problem::InvalidRetry { message, origin });
                ok = false;
            }
        }
        ok.then_some(policy)
    }
}

/// Whether a rule, or either branch of a gated rule, sets `onConflict` or
/// `retry`.
fn names_conflict_policy(value: &Value) -> bool {
    let Value::Dict(_, dict) = value else {
        return false;
    };
    dict.iter()
        .any(|(key, value)| key == "onConflict" || key == "retry" || names_conflict_policy(value))
}
