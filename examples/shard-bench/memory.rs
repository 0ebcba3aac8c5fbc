//! The memory benchmark: `label` or `selector` replicas against one
//! unsharded replica, each its own process, RSS read from
//! `/proc/<pid>/status` and CPU time from `/proc/<pid>/stat` once its
//! cache has synced.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use concord_testenv::TestEnv;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

/// Sizes of the memory benchmark.
#[derive(clap::Args)]
pub struct Args {
    /// Pods to create (they need no nodes: nothing schedules or runs them).
    #[arg(long, default_value_t = 1000)]
    pods: usize,
    /// Sharded replicas.
    #[arg(long, default_value_t = 3)]
    replicas: usize,
    /// How the sharded replicas place objects: `label` (a sharder labels
    /// each object for its owner) or `selector` (the API server's shard
    /// selectors; no object is written).
    #[arg(long, default_value = "label", value_parser = ["label", "selector", "hash"])]
    shards: String,
    /// Bytes of annotation on each Pod, so that its JSON (≈ 2 KiB bare
    /// after defaulting) is nearer a real Pod's 4–8 KiB.
    #[arg(long, default_value_t = 4096)]
    pad_bytes: usize,
    /// Seconds to keep running after the caches synced before reading RSS.
    #[arg(long, default_value_t = 5)]
    settle_secs: u64,
    /// Directory the Markdown table `memory.md` is written to (the book
    /// includes it from `book/src/scaling-out`).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

/// A replica process and the last status line it printed.
struct Proc {
    child: Child,
    status: Arc<Mutex<String>>,
}

impl Proc {
    fn spawn(env: &TestEnv, namespace: &str, shards: &str) -> Result<Proc> {
        let mut child = Command::new(std::env::current_exe()?)
            .arg("replica")
            .arg("--kubeconfig")
            .arg(env.kubeconfig_path())
            .args(["--namespace", namespace])
            .args(["--leader-election-namespace", namespace])
            .args(["--shards", shards])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdout = child.stdout.take().context("piped stdout")?;
        let status = Arc::new(Mutex::new(String::new()));
        let last = status.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                *last.lock().unwrap() = line;
            }
        });
        Ok(Proc { child, status })
    }

    /// `(cached, owned, settled)` from the last status line.
    fn progress(&self) -> Option<(u64, u64, bool)> {
        let line = self.status.lock().unwrap().clone();
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
                .map(str::to_owned)
        };
        Some((
            field("cached")?.parse().ok()?,
            field("owned")?.parse().ok()?,
            field("settled")? == "true",
        ))
    }

    /// `(VmRSS, VmHWM)` in KiB and the CPU time used so far, in seconds.
    fn usage(&self) -> Result<(u64, u64, f64)> {
        let pid = self.child.id();
        let m = concord_examples::procfs::memory(Some(pid))?;
        let cpu = concord_examples::procfs::cpu_ms(Some(pid))
            .with_context(|| format!("reading /proc/{pid}/stat"))?;
        Ok((m.rss_kib, m.hwm_kib, cpu / 1000.0))
    }

    fn stop(mut self) -> Result<()> {
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()?;
        let status = self.child.wait()?;
        ensure!(status.success(), "a replica exited with {status}");
        Ok(())
    }
}

/// What one replica used, once synced.
struct Usage {
    mode: String,
    cached: u64,
    rss: u64,
    hwm: u64,
    cpu_secs: f64,
}

async fn create_pods(api: &Api<Pod>, n: usize, pad: usize) -> Result<()> {
    let padding = "x".repeat(pad);
    let started = Instant::now();
    let results: Vec<Result<()>> = futures::stream::iter(0..n)
        .map(|i| {
            let (api, padding) = (api.clone(), padding.clone());
            async move {
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {
                        "name": format!("pod-{i}"),
                        "labels": {"app": "shard-bench"},
                        "annotations": {"shard-bench/padding": padding},
                    },
                    "spec": {"containers": [{"name": "main", "image": "registry.invalid/pause:1"}]},
                }))?;
                api.create(&PostParams::default(), &pod).await?;
                Ok(())
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    results.into_iter().collect::<Result<Vec<()>>>()?;
    println!(
        "created {n} Pods in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Waits until `done` holds for every process' progress, for at most 5 minutes.
async fn wait_for(procs: &[Proc], done: impl Fn(&[(u64, u64, bool)]) -> bool) -> Result<()> {
    let start = Instant::now();
    loop {
        let progress: Option<Vec<_>> = procs.iter().map(Proc::progress).collect();
        if progress.as_deref().is_some_and(&done) {
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(300) {
            bail!("the replicas did not sync within 300 s: {progress:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The pid in a candidate identity `host_pid-nanos-n`.
fn pid_of(identity: &str) -> Option<u32> {
    identity.rsplit_once('_')?.1.split('-').next()?.parse().ok()
}

/// Runs the benchmark and prints its table.
pub async fn run(args: Args) -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let api: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    create_pods(&api, args.pods, args.pad_bytes).await?;
    let pods = args.pods as u64;
    let settle = Duration::from_secs(args.settle_secs);
    let mut usage = Vec::new();

    // The part of a replica's memory that is no cache: an unsharded
    // replica of the same binary watching an empty namespace.
    let empty = env.namespace().await?;
    let idle = Proc::spawn(env, empty.name(), "off")?;
    tokio::time::sleep(settle + Duration::from_secs(2)).await;
    let (fixed_rss, ..) = idle.usage()?;
    idle.stop()?;
    println!(
        "a replica caching nothing: VmRSS {:.1} MiB",
        fixed_rss as f64 / 1024.0
    );

    let procs: Vec<Proc> = (0..args.replicas)
        .map(|_| Proc::spawn(env, ns.name(), &args.shards))
        .collect::<Result<_>>()?;
    let started = Instant::now();
    let n = args.replicas;
    // Each caches exactly the objects it owns, together all of them.
    wait_for(&procs, |p| {
        p.iter()
            .all(|(cached, owned, settled)| *settled && *cached == *owned)
            && p.iter().map(|(cached, ..)| cached).sum::<u64>() == pods
    })
    .await?;
    let sharded_sync = started.elapsed();
    let shards = &args.shards;
    println!(
        "{n} {shards} replicas synced their shards in {:.1} s",
        sharded_sync.as_secs_f64()
    );
    tokio::time::sleep(settle).await;
    let leases: Api<Lease> = Api::namespaced(ns.client(), ns.name());
    // The ring's sharder Lease: `<ring>-<configuration fingerprint>-sharder`.
    let sharder = leases
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .find(|l| {
            l.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.ends_with("-sharder"))
        })
        .and_then(|l| l.spec?.holder_identity)
        .and_then(|id| pid_of(&id));
    for proc in &procs {
        let (rss, hwm, cpu_secs) = proc.usage()?;
        let (cached, ..) = proc.progress().context("a status line")?;
        let pid = proc.child.id();
        let mode = if Some(pid) == sharder {
            format!("`{shards}`, the sharder")
        } else {
            format!("`{shards}`")
        };
        usage.push(Usage {
            mode,
            cached,
            rss,
            hwm,
            cpu_secs,
        });
    }
    for proc in procs {
        proc.stop()?;
    }

    let single = Proc::spawn(env, ns.name(), "off")?;
    let started = Instant::now();
    wait_for(std::slice::from_ref(&single), |p| p[0].0 == pods).await?;
    let single_sync = started.elapsed();
    println!(
        "the unsharded replica synced in {:.1} s",
        single_sync.as_secs_f64()
    );
    tokio::time::sleep(settle).await;
    let (rss, hwm, cpu_secs) = single.usage()?;
    let unsharded = Usage {
        mode: "unsharded (`off`)".to_owned(),
        cached: pods,
        rss,
        hwm,
        cpu_secs,
    };
    single.stop()?;

    let mib = |kib: u64| kib as f64 / 1024.0;
    // A replica's cache memory: its VmRSS above the idle replica's.
    let cache = |u: &Usage| u.rss.saturating_sub(fixed_rss) as f64;
    let cache_ratio = |u: &Usage| cache(u) / cache(&unsharded).max(1.0);
    // 0.4: a third of the objects each, and a margin for an uneven split.
    let met = usage.iter().filter(|u| cache_ratio(u) <= 0.4).count();
    let mut table = format!(
        "{} Pods, {} B of annotation each; {n} `--shards={shards}` replica processes synced their shards in {:.1} s, \
         the unsharded one its cache in {:.1} s; memory and CPU time (since the process started) read {} s after each synced. \
         A replica's cache memory is its VmRSS above that of a replica caching nothing ({:.1} MiB).\n\n",
        args.pods,
        args.pad_bytes,
        sharded_sync.as_secs_f64(),
        single_sync.as_secs_f64(),
        args.settle_secs,
        mib(fixed_rss)
    );
    table.push_str(
        "| replica | cached | VmRSS (MiB) | VmHWM (MiB) | RSS / unsharded | cache memory (MiB) | cache / unsharded | CPU (s) | CPU / unsharded |\n",
    );
    table.push_str("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for u in usage.iter().chain(std::iter::once(&unsharded)) {
        table.push_str(&format!(
            "| {} | {} | {:.1} | {:.1} | {:.2} | {:.1} | {:.2} | {:.2} | {:.2} |\n",
            u.mode,
            u.cached,
            mib(u.rss),
            mib(u.hwm),
            u.rss as f64 / unsharded.rss as f64,
            cache(u) / 1024.0,
            cache_ratio(u),
            u.cpu_secs,
            u.cpu_secs / unsharded.cpu_secs.max(0.01)
        ));
    }
    table.push_str(&format!(
        "\nTarget: each sharded replica's cache memory ≤ 0.4 × the unsharded one's: {met} of {} within.\n",
        usage.len()
    ));
    println!();
    println!("{table}");
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)?;
        let name = if args.shards == "label" {
            "memory.md".to_owned()
        } else {
            format!("memory-{}.md", args.shards)
        };
        let path = dir.join(name);
        std::fs::write(&path, &table).with_context(|| format!("writing {}", path.display()))?;
        println!("written: {}", path.display());
    }
    let namespaces: Api<Namespace> = Api::all(ns.client());
    for name in [ns.name(), empty.name()] {
        namespaces.delete(name, &DeleteParams::default()).await?;
    }
    Ok(())
}
