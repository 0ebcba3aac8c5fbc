//! Two operators left on the default `--leader-election-id` in one
//! namespace: each elects its leader on a Lease named after itself (the
//! name given to `Manager::builder`), so neither waits for the other.
//!
//! ```text
//! cargo test -p concord-tests --test leader_election defaults::
//! ```

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use clap::Parser;
use concord::{Manager, ManagerArgs};
use concord_testenv::TestEnv;
use concord_tests::Idle;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

/// An operator binary's command line: only the manager's flags.
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    manager: ManagerArgs,
}

#[tokio::test]
async fn two_operators_on_defaults_elect_on_leases_of_their_own_names() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let leases: Api<Lease> = Api::namespaced(ns.client(), ns.name());
    // As each binary parses its flags: --leader-elect, no --leader-election-id.
    let cli = Cli::try_parse_from([
        "operator",
        "--leader-elect",
        "--leader-election-namespace",
        ns.name(),
    ])?;
    ensure!(cli.manager.leader_election_id.is_empty());

    let mut stops = Vec::new();
    let mut runs = Vec::new();
    for name in ["ledger-operator", "billing-operator"] {
        let mut manager = Manager::builder(name)
            .with_client(env.client()?)
            .with_args(cli.manager.clone())
            .with_signal_handling(false)
            .build()
            .await?;
        let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
        manager.controller("configmaps", maps, Idle).add()?;
        stops.push(manager.shutdown_handle());
        runs.push(tokio::spawn(manager.run()));
    }

    let deadline = Instant::now() + Duration::from_secs(30);
    let holders = loop {
        let mut holders = Vec::new();
        for name in ["ledger-operator", "billing-operator"] {
            let holder = leases
                .get_opt(name)
                .await?
                .and_then(|lease| lease.spec)
                .and_then(|spec| spec.holder_identity);
            holders.extend(holder.map(|h| (name, h)));
        }
        if holders.len() == 2 || Instant::now() > deadline {
            break holders;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let present: Vec<String> = leases
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter_map(|lease| lease.metadata.name)
        .collect();
    for stop in &stops {
        stop.shutdown();
    }
    for run in runs {
        run.await??;
    }
    assert_eq!(
        holders.len(),
        2,
        "both operators hold a Lease of their own name: {holders:?}; Leases: {present:?}"
    );
    assert!(
        leases.get_opt("concord-operator").await?.is_none(),
        "no operator used a shared default Lease"
    );
    Ok(())
}
