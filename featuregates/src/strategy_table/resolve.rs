use super::choice::StrategyChoice;
use super::reason::{GateCondition, Reason};
use super::rules::{Level, Rule, RuleKind, Rules};
use super::table::{ResourceStrategies, StrategyTable, TableRow};
use crate::{FeatureGates, Operation, Origin, Problem, STRICT_WRITES_BY_DEFAULT, StrategyName};

/// Resolves every cell once: the rule for (resource, operation), then the
/// resource's default, then the global rule for the operation, then the
/// global default, then the built-in default. A gated rule whose branch for
/// the gate's value is missing passes the decision down the same chain.
/// `apply-owned` is decided by `apply-owned` rules alone (no `default`
/// covers it: only `apply` serves it), else the built-in `apply`; `create`
/// and `delete` likewise by their own rules, else the built-in `strict`.
pub(crate) fn resolve(
    rules: &Rules,
    gates: &FeatureGates,
    problems: &mut Vec<Problem>,
) -> StrategyTable {
    let builtin = builtin(gates);
    let default_row = row(None, &[&rules.global], &builtin, gates, problems);
    let mut rows: Vec<TableRow> = rules
        .resources
        .iter()
        .map(|resource| {
            let mut row = row(
                Some(&resource.form),
                &[&resource.level, &rules.global],
                &builtin,
                gates,
                problems,
            );
            row.selector = Some(resource.selector.clone());
            row
        })
        .collect();
    rows.sort_by(|a, b| (&a.selector, &a.form).cmp(&(&b.selector, &b.form)));
    StrategyTable { default_row, rows }
}

/// `strict` unless the framework gate `StrictWritesByDefault` is off.
fn builtin(gates: &FeatureGates) -> (StrategyChoice, Reason) {
    let gate = gates.feature(STRICT_WRITES_BY_DEFAULT).map(|feature| {
        let state = gates.state(feature);
        GateCondition {
            name: state.spec.name,
            enabled: state.enabled,
            origin: state.origin.clone(),
        }
    });
    let strategy = match &gate {
        Some(gate) if !gate.enabled => StrategyName::Lax,
        _ => StrategyName::Strict,
    };
    (
        StrategyChoice::of(strategy),
        Reason {
            rule: "built-in default".to_owned(),
            origin: Origin::Default,
            gate,
        },
    )
}

fn row(
    form: Option<&str>,
    levels: &[&Level],
    builtin: &(StrategyChoice, Reason),
    gates: &FeatureGates,
    problems: &mut Vec<Problem>,
) -> TableRow {
    let owned = owned_builtin();
    let lifecycle = lifecycle_builtin();
    let cells = Operation::ALL.map(|operation| {
        let builtin = match operation {
            Operation::ApplyOwned => &owned,
            Operation::Create | Operation::Delete => &lifecycle,
            _ => builtin,
        };
        cell(
            levels,
            operation,
            operation.follows_default(),
            builtin,
            gates,
        )
    });
    for (operation, (choice, reason)) in Operation::ALL.into_iter().zip(&cells) {
        if !choice.strategy.description().serves(operation) {
            let problem = Problem::UnservableOperation {
                strategy: choice.strategy,
                operation,
                origin: reason.origin.clone(),
            };
            if !problems.contains(&problem) {
                problems.push(problem);
            }
        }
    }
    let strategies = ResourceStrategies::new(cells.clone().map(|(choice, _)| choice));
    TableRow {
        form: form.map(str::to_owned),
        selector: None,
        strategies,
        reasons: cells.map(|(_, reason)| reason),
    }
}

/// `strict` for `create` and `delete`, whatever `StrictWritesByDefault`
/// says: a create that fails on an existing object, a delete of the copy
/// the reconciler saw and no other.
fn lifecycle_builtin() -> (StrategyChoice, Reason) {
    (
        StrategyChoice::of(StrategyName::Strict),
        Reason {
            rule: "built-in default".to_owned(),
            origin: Origin::Default,
            gate: None,
        },
    )
}

/// `apply`: the only strategy that can create or update a whole child.
fn owned_builtin() -> (StrategyChoice, Reason) {
    (
        StrategyChoice::of(StrategyName::Apply),
        Reason {
            rule: "built-in default".to_owned(),
            origin: Origin::Default,
            gate: None,
        },
    )
}

fn cell(
    levels: &[&Level],
    operation: Operation,
    defaults: bool,
    builtin: &(StrategyChoice, Reason),
    gates: &FeatureGates,
) -> (StrategyChoice, Reason) {
    let candidates = levels.iter().flat_map(|level| {
        [
            &level.operations[operation.index()],
            if defaults { &level.default } else { &None },
        ]
    });
    for rule in candidates.flatten() {
        if let Some(decision) = decide(rule, gates) {
            return decision;
        }
    }
    builtin.clone()
}

fn decide(rule: &Rule, gates: &FeatureGates) -> Option<(StrategyChoice, Reason)> {
    let reason = |gate| Reason {
        rule: rule.key.clone(),
        origin: rule.origin.clone(),
        gate,
    };
    match &rule.kind {
        RuleKind::Fixed(choice) => Some((*choice, reason(None))),
        RuleKind::Gated {
            gate,
            enabled,
            disabled,
        } => {
            let state = gates.state(*gate);
            let choice = if state.enabled { enabled } else { disabled };
            let condition = GateCondition {
                name: state.spec.name,
                enabled: state.enabled,
                origin: state.origin.clone(),
            };
            choice.map(|choice| (choice, reason(Some(condition))))
        }
    }
}
