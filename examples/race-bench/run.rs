//! One benchmark run: every contender in turn, each in a fresh namespace.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::race::cache::Cache;
use crate::race::progress::Progress;
use crate::race::scenarios::Workload;
use crate::race::send::Sender;
use crate::race::{
    Args, Contender, Report, StrategyResult, check, controller, foreign, json, memory, namespace,
    setup, svg, verify,
};

/// The longest the writes of one contender may take.
const WRITE_PHASE_TIMEOUT: Duration = Duration::from_secs(1800);
/// The longest the cache may take to see every created pod.
const CACHE_TIMEOUT: Duration = Duration::from_secs(300);

/// What a run produced.
#[derive(Clone, Debug)]
pub struct BenchOutcome {
    /// The figures, as in `results.json`.
    pub report: Report,
    /// Why the run fails the graduation check; empty when it passes.
    pub failures: Vec<String>,
    /// The client's peak resident set size in KiB, where measurable.
    pub peak_rss_kib: Option<u64>,
}

/// Run the benchmark `args` describe: connect (or start the embedded
/// control plane), run every contender, write `--out`, apply the check.
///
/// # Errors
///
/// When the cluster is unreachable or a setup, cleanup or verification
/// request fails. Failed or lost writes are results, not errors.
pub async fn run(args: &Args) -> anyhow::Result<BenchOutcome> {
    let connection = crate::connect(args.kubeconfig.clone()).await?;
    let kubeconfig = match &connection.control_plane {
        Some(cp) => Some(cp.kubeconfig_path().to_path_buf()),
        None => args
            .kubeconfig
            .clone()
            .or_else(|| std::env::var_os("KUBECONFIG").map(PathBuf::from)),
    };
    // The other controller gets a client (and connection pool) of its own.
    let foreign_client = match &kubeconfig {
        Some(path) => separate_client(path).await?,
        None => Client::try_default().await?,
    };
    let progress = Progress::new();
    progress.line(&format!(
        "race-bench: scenario {}, {} pods, {} writers, seed {}, on {}",
        args.scenario, args.pods, args.writers, args.seed, connection.server
    ));
    let workload = Workload::new(args.scenario, args.pods, args.writers, args.seed);
    let mut results = Vec::new();
    for contender in args.contenders() {
        let client = connection.client.clone();
        let result = run_one(
            args,
            contender,
            &workload,
            client,
            &foreign_client,
            &progress,
        )
        .await
        .with_context(|| format!("running {contender}"))?;
        progress.line(&format!(
            "{contender}: {:.0} writes/s, {} lost writes, {} conflicts, {} errors",
            result.writes_per_s, result.lost_writes, result.conflicts, result.errors
        ));
        results.push(result);
    }
    let report = Report {
        scenario: args.scenario.as_str().to_owned(),
        pods: u64::from(args.pods),
        writers: u64::from(args.writers),
        results,
    };
    if let Some(dir) = &args.out {
        json::write(dir, &report)?;
        svg::write(dir, &report)?;
    }
    let baseline = args.baseline.map(Contender::as_str);
    let failures = check::failures(&report, args.scenario, baseline, args.max_regression);
    Ok(BenchOutcome {
        report,
        failures,
        peak_rss_kib: memory::peak_rss_kib(),
    })
}

async fn run_one(
    args: &Args,
    contender: Contender,
    workload: &Workload,
    client: Client,
    foreign_client: &Client,
    progress: &Progress,
) -> anyhow::Result<StrategyResult> {
    let name = contender.as_str();
    let ns = namespace::create(&client, args.scenario.as_str(), name).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let objects = workload.specs.len();
    let cache = Arc::new(Cache::start(client.clone(), &ns, objects));

    let bar = progress.bar(name, "create", objects as u64);
    setup::create(&pods, &workload.specs, &bar).await?;
    bar.finish_and_clear();
    cache.wait_for(objects, CACHE_TIMEOUT).await?;

    let sender = Arc::new(Sender::new(contender, &client, &ns));
    let bar = progress.bar(name, "write", workload.lanes.len() as u64);
    let other = workload.foreign.then(|| {
        let (client, ns) = (foreign_client.clone(), ns.clone());
        let (pods, tasks, seed) = (args.pods, args.writers, args.seed);
        tokio::spawn(async move { foreign::add_everywhere(client, &ns, pods, tasks, seed).await })
    });
    let run = tokio::time::timeout(
        WRITE_PHASE_TIMEOUT,
        controller::run(
            &workload.lanes,
            args.writers,
            cache.clone(),
            sender.clone(),
            bar.clone(),
        ),
    )
    .await
    .with_context(|| format!("{name} did not finish its writes within {WRITE_PHASE_TIMEOUT:?}"))?;
    bar.finish_and_clear();
    if let Some(other) = other {
        let failed = other.await?;
        anyhow::ensure!(failed == 0, "the foreign writer failed {failed} adds");
    }
    drop(cache);

    let verdict = verify::check(&pods, &workload.specs).await?;
    let result = StrategyResult::new(name, &run, sender.counts(), verdict.lost_writes);
    setup::strip_finalizers(&pods, &verdict.with_finalizers).await?;
    namespace::delete(&client, &ns).await?;
    Ok(result)
}

/// A client of its own for the kubeconfig at `path`.
async fn separate_client(path: &std::path::Path) -> anyhow::Result<Client> {
    let kubeconfig = Kubeconfig::read_from(path)
        .map_err(|e| anyhow::anyhow!("kubeconfig {}: {e}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| anyhow::anyhow!("kubeconfig {}: {e}", path.display()))?;
    Ok(Client::try_from(config)?)
}
