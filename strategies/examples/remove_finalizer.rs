//! Remove a finalizer from a Pod with the write strategy named on the
//! command line, and print what the write cost.
//!
//! Shows: choosing a strategy by name, the typed `Writer`, mutations as
//! intent, the `Outcome` of a write and the metrics hook.
//!
//! Needs: a cluster in the current kubeconfig and a Pod carrying the
//! finalizer, e.g. `kubectl run web --image=busybox -- sleep 1d` followed by
//! `kubectl patch pod web -p '{"metadata":{"finalizers":["example.com/cleanup"]}}'`.
//!
//! Run: `cargo run -p kube-concord-strategies --example remove_finalizer -- strict default web`

use std::sync::Arc;

use concord_strategies::{
    ConflictPolicy, Intent, Mutation, RetryPolicy, StrategyName, Target, WriteMetrics, Writer,
    strategy_for,
};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let strategy: StrategyName = args.next().as_deref().unwrap_or("strict").parse()?;
    let namespace = args.next().unwrap_or_else(|| "default".into());
    let name = args.next().unwrap_or_else(|| "web".into());

    let client = kube::Client::try_default().await?;
    // The observed object: in a controller, the copy in the reflector cache.
    let pod = Api::<Pod>::namespaced(client.clone(), &namespace)
        .get(&name)
        .await?;

    // ANCHOR: writer
    let policy = ConflictPolicy::Retry(RetryPolicy::default()); // client-go DefaultRetry
    let metrics = Arc::new(WriteMetrics::default());
    let writer =
        Writer::<Pod>::new(client, strategy_for(strategy, policy)).with_target(|target: Target| {
            target
                .with_field_manager("example-operator")
                .with_metrics(metrics.clone())
        });
    // ANCHOR_END: writer

    // ANCHOR: write
    let mutation = Mutation::from(Intent::remove_finalizer("example.com/cleanup"));
    let written = writer.write(&pod, &mutation).await?;
    let o = &written.outcome;
    println!(
        "{}: {} requests, {} conflicts, {} retries, {:?}{}",
        o.strategy,
        o.total_requests(),
        o.conflicts,
        o.retries,
        o.elapsed,
        if o.unchanged { " (nothing to do)" } else { "" },
    );
    // ANCHOR_END: write
    println!("metrics: {:?}", metrics.snapshot());
    Ok(())
}
