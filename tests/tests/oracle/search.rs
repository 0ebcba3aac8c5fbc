//! The write oracle, against a real kube-apiserver and etcd: seeded cases
//! of every safe strategy writing from every copy the framework hands out
//! (raw, trimmed, complete typed, a type lagging the schema, a type that
//! sorts a list, a `view!`, metadata-only, `f64` weights with serde
//! defaults, k8s-openapi conditions, a `HashMap` and an enum) of a custom
//! resource with and without a status subresource, a ConfigMap, a
//! Deployment, a Service, a Pod and a Node, with values from a hostile alphabet,
//! while another writer changes the object between the strategy's read
//! and its request; creates and deletes beside the writes, under `retry`
//! and `requeue`. Each stored object is checked against a model of the
//! mutation's effect. The universe is named in `support/classes.rs`;
//! the test prints how many cases each class received and fails if one
//! received none (or fewer than `CONCORD_ORACLE_AT_LEAST`).
//!
//! ```text
//! cargo test -p concord-tests --test oracle search:: -- --nocapture
//! # the soak: any number of cases, any seed, every class at least 500 times
//! CONCORD_ORACLE_CASES=100000 CONCORD_ORACLE_SEED=7 CONCORD_ORACLE_AT_LEAST=500 \
//!     cargo test -p concord-tests --test oracle search:: -- --nocapture
//! ```

use crate::support;

use support::classes::ClassCount;
use support::generate::case;
use support::model::SAFE;
use support::{Oracle, as_test, run_all};

fn env_u64(name: &str, default: u64) -> anyhow::Result<u64> {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .map_err(|e| anyhow::anyhow!("{name}={v:?} is not a whole number: {e}")),
        Err(_) => Ok(default),
    }
}

/// Every safe strategy stores exactly the other writer's change plus the
/// mutation's effect, or fails and stores nothing; `lax` is run beside
/// them and loses writes, so the oracle is shown able to fail.
#[tokio::test]
async fn no_safe_strategy_loses_or_invents_a_field_from_any_copy() -> anyhow::Result<()> {
    let cases = env_u64("CONCORD_ORACLE_CASES", 1200)?;
    let seed = env_u64("CONCORD_ORACLE_SEED", 29)?;
    println!("oracle: seed {seed}, {cases} cases (CONCORD_ORACLE_SEED, CONCORD_ORACLE_CASES)");
    let oracle = Oracle::new().await?;
    let mut strategies: Vec<&str> = SAFE.to_vec();
    strategies.push("lax");
    let all: Vec<_> = (0..cases).map(|i| case(seed, i, &strategies)).collect();
    let classes = ClassCount::of(&all);
    println!("{}", classes.table());
    let at_least = env_u64("CONCORD_ORACLE_AT_LEAST", 1)?;
    let short = classes.short_of(at_least);
    let started = std::time::Instant::now();
    let report = run_all(&oracle, all, 8, 12).await?;
    println!("{}", report.table());
    println!("{}", report.refusal_table());
    println!("{cases} cases in {:.0?}", started.elapsed());
    let mut unsafe_found = 0;
    for (case, why) in &report.violations {
        if case.strategy == "lax" {
            continue;
        }
        unsafe_found += 1;
        println!(
            "violation: {} from {:?}, {:?}, race {:?}: {}",
            case.strategy,
            case.copy,
            case.mutation,
            case.race,
            why.lines().next().unwrap_or_default()
        );
        println!("{why}\n{}", as_test(case, why));
    }
    let lax = report
        .violations
        .iter()
        .filter(|(c, _)| c.strategy == "lax");
    if let Some((case, why)) = lax.clone().next() {
        println!("lax, as expected, lost writes; e.g. {why}\n  {case:?}");
    }
    assert!(
        report.violations_of("lax") > 0,
        "lax lost nothing: the oracle cannot tell a lost write\n{}",
        report.table()
    );
    assert!(
        short.is_empty(),
        "classes of the universe drawn fewer than {at_least} times (seed {seed}, {cases} cases): {short:?}"
    );
    assert_eq!(
        unsafe_found,
        0,
        "the safe strategies lost or invented fields (seed {seed})\n{}",
        report.table()
    );
    Ok(())
}

/// The soak's plan (seed 7, 100,000 cases) draws every class of the
/// universe at least 500 times, so the soak command in the module's
/// documentation can meet its own bar. Generation only: no server.
#[test]
fn the_soak_draws_every_class_at_least_500_times() {
    let mut strategies: Vec<&str> = SAFE.to_vec();
    strategies.push("lax");
    let all: Vec<_> = (0..100_000).map(|i| case(7, i, &strategies)).collect();
    let classes = ClassCount::of(&all);
    let short = classes.short_of(500);
    assert!(
        short.is_empty(),
        "short of 500: {short:?}\n{}",
        classes.table()
    );
}
