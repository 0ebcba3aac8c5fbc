//! The run: rounds, each with one hold of the children's watch, in which
//! every contender takes its turn on fresh parents in a namespace of its
//! own, in an order rotated per round.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result};
use concord_testenv::TestEnv;
use concord_testenv::faults::{FaultProxy, Faults, Verb};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams};

use crate::args::Args;
use crate::contender::Contender;
use crate::outcome::{Outcome, Turn};
use crate::phases::{self, Plan};
use crate::tally::Tally;
use crate::{manager, peer};

/// A contender running on its namespace.
enum Running {
    Concord(manager::Running),
    Peer(Box<peer::Running>, PathBuf),
}

/// Runs every round `args` asks for.
///
/// # Errors
///
/// When the control plane, the peer's build, a namespace, a parent write
/// or the API server's count fails, or a contender fails to start or stop.
/// A phase that does not settle is a result, not an error.
pub(crate) async fn run(args: &Args) -> Result<Outcome> {
    let env = tokio::task::spawn_blocking(TestEnv::shared).await??;
    let contenders = args.contenders();
    let peer = if contenders.contains(&Contender::ControllerRuntime) {
        Some(tokio::task::spawn_blocking(peer::ensure).await??)
    } else {
        None
    };
    let per_round = args.parents.div_ceil(args.rounds);
    let mut turns: Vec<(Contender, Vec<Turn>)> =
        contenders.iter().map(|c| (*c, Vec::new())).collect();
    for round in 0..args.rounds {
        let hold = args.holds[round % args.holds.len()];
        let plan = Plan {
            parents: per_round,
            scale: &args.scale,
            // A reconcile woken by the last change decides on a cache one
            // hold old, and its write reaches the server a hold later.
            quiet: 2 * hold + Duration::from_secs(2),
            timeout: Duration::from_secs(args.phase_timeout),
        };
        let mut order: Vec<usize> = (0..turns.len()).collect();
        order.rotate_left(round % turns.len().max(1));
        for i in order {
            let contender = turns[i].0;
            let turn = take_turn(env, contender, round, hold, &plan, peer.as_deref(), args)
                .await
                .with_context(|| format!("{} in round {}", contender.as_str(), round + 1))?;
            eprintln!("{}", crate::report::line(contender, &turn));
            turns[i].1.push(turn);
        }
    }
    Ok(Outcome { turns, per_round })
}

async fn take_turn(
    env: &TestEnv,
    contender: Contender,
    round: usize,
    hold: Duration,
    plan: &Plan<'_>,
    peer: Option<&Path>,
    args: &Args,
) -> Result<Turn> {
    let ns = env.namespace().await?;
    let direct: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    // ANCHOR: faults
    let faults = Faults::seeded(0)
        .on(Verb::Watch)
        .resource("configmaps")
        .hold_events(hold);
    // ANCHOR_END: faults
    let proxy = FaultProxy::start(env.config(), faults).await?;
    let tally = Tally::start(direct.clone()).await?;
    let running = match contender {
        Contender::Concord | Contender::ConcordUngated => Running::Concord(
            manager::start(
                proxy.config(),
                ns.name(),
                contender == Contender::Concord,
                args.concurrency,
            )
            .await?,
        ),
        Contender::ControllerRuntime => {
            let binary = peer.context("the controller-runtime peer was not built")?;
            let kubeconfig =
                std::env::temp_dir().join(format!("stale-bench-{}.kubeconfig", ns.name()));
            std::fs::write(&kubeconfig, peer::kubeconfig(proxy.address()))
                .with_context(|| format!("writing {}", kubeconfig.display()))?;
            let running = peer::start(binary, &kubeconfig, ns.name(), args.concurrency).await?;
            Running::Peer(Box::new(running), kubeconfig)
        }
    };
    // The contender stops even when the phases failed.
    let phases = phases::run(&direct, &tally, plan).await;
    let (reconciles, held) = match running {
        Running::Concord(running) => {
            let s = running.stop().await?;
            let held = (contender == Contender::Concord).then_some((
                s.held_ran,
                s.held_requeued,
                s.held_seconds,
            ));
            (s.reconciles, held)
        }
        Running::Peer(running, kubeconfig) => {
            let stopped = running.stop().await;
            let _ = std::fs::remove_file(&kubeconfig);
            let s = stopped?;
            tracing::debug!(s.creates, s.deletes, s.errors, "the peer's own counts");
            (s.reconciles, None)
        }
    };
    let phases = phases?;
    let last = phases.last().map_or(0, |p| p.replicas);
    let right = phases::parents_right(&direct, plan.parents, last).await?;
    drop(tally);
    drop(proxy);
    cleanup(&direct, &ns).await;
    Ok(Turn {
        round,
        hold,
        parents: plan.parents,
        phases,
        right,
        reconciles,
        held,
    })
}

/// Deletes the turn's ConfigMaps and its namespace; a failure is logged,
/// not fatal (the namespace is then left behind).
async fn cleanup(direct: &Api<ConfigMap>, ns: &concord_testenv::TestNamespace) {
    if let Err(e) = direct
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
    {
        tracing::warn!("deleting the ConfigMaps of {}: {e}", ns.name());
    }
    let namespaces: Api<Namespace> = Api::all(ns.client());
    if let Err(e) = namespaces.delete(ns.name(), &DeleteParams::default()).await {
        tracing::warn!("deleting namespace {}: {e}", ns.name());
    }
}
