//! One replica process of the `report` benchmark: a ConfigMap controller
//! of a sharded manager (`--shards=hash` or `label`) whose reconciler
//! records when it starts and ends. It prints, one line each, on stdout:
//!
//! - `member <id>`: its member id, once;
//! - `s <i> <ns>` and `e <i> <ns>`: a reconcile of `cm-<i>` started or
//!   ended (or was dropped), at `<ns>` nanoseconds of the wall clock;
//! - `v <ns> <version> <settled 0|1> <members> <owned…>`: its place in
//!   the ring whenever it changes — views acknowledged, whether the ring
//!   is settled, live members seen, and the indices it owns
//!   (comma-separated, `-` for none);
//! - `c <cached>`: the objects in its cache, whenever that changes.
//!
//! The wall clock is shared by every process on the machine, so the
//! benchmark can order reconciles of two processes; it runs until SIGTERM
//! (drain, delete its Lease) or SIGKILL.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result};
use concord::{
    Action, Context, Manager, ManagerArgs, Reconciler, WriteError, cache::CacheLayout,
    manager::LeaderElectionConfig, sharding::ShardHandle,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::Api;

/// The member's command line: every `ManagerArgs` flag, and the benchmark's.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    manager: ManagerArgs,
    /// The manager's name (its ring's name).
    #[arg(long)]
    name: String,
    /// Namespace of the ConfigMaps.
    #[arg(long)]
    namespace: String,
    /// ConfigMaps `cm-0` … `cm-<objects − 1>` whose ownership it reports.
    #[arg(long)]
    objects: usize,
    /// How long each reconcile holds its object, milliseconds.
    #[arg(long)]
    hold_ms: u64,
    /// Lease duration, seconds.
    #[arg(long)]
    lease_duration: u64,
    /// Renew deadline, milliseconds.
    #[arg(long)]
    renew_deadline_ms: u64,
    /// Retry period, milliseconds.
    #[arg(long)]
    retry_period_ms: u64,
    /// How the manager's shared cache holds the ConfigMaps.
    #[arg(long, value_enum, default_value_t)]
    cache_layout: CacheLayout,
}

/// Nanoseconds since the Unix epoch on the wall clock.
pub fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The index `i` of a ConfigMap named `cm-<i>`.
pub fn index_of(name: &str) -> Option<u32> {
    name.strip_prefix("cm-")?.parse().ok()
}

struct Printer {
    hold: Duration,
}

/// Prints the end of its reconcile when dropped: at the end, or when the
/// reconcile is cancelled.
struct Open(u32);

impl Drop for Open {
    fn drop(&mut self) {
        println!("e {} {}", self.0, wall_ns());
    }
}

#[concord::async_trait]
impl Reconciler<ConfigMap> for Printer {
    type Error = WriteError;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, WriteError> {
        let Some(index) = index_of(&cm.name_any()) else {
            return Ok(Action::await_change());
        };
        println!("s {index} {}", wall_ns());
        let _open = Open(index);
        tokio::time::sleep(self.hold).await;
        Ok(Action::await_change())
    }
}

/// The `v` line for the ring as `shard` sees it now.
fn view_line(shard: &ShardHandle, namespace: &str, objects: usize) -> (u64, String) {
    let version = shard.ring_version();
    let owned: Vec<String> = (0..objects)
        .filter(|i| shard.owns(namespace, &format!("cm-{i}")))
        .map(|i| i.to_string())
        .collect();
    let owned = if owned.is_empty() {
        "-".to_owned()
    } else {
        owned.join(",")
    };
    let line = format!(
        "v {} {version} {} {} {owned}",
        wall_ns(),
        u8::from(shard.settled()),
        shard.members().len(),
    );
    (version, line)
}

/// Runs the member until a signal stops it.
pub async fn run(args: Args) -> Result<()> {
    let mut timings = LeaderElectionConfig::default();
    timings.lease_duration = Duration::from_secs(args.lease_duration);
    timings.renew_deadline = Duration::from_millis(args.renew_deadline_ms);
    timings.retry_period = Duration::from_millis(args.retry_period_ms);
    let mut manager = Manager::builder(&args.name)
        .with_builtin_type::<ConfigMap>()
        .with_args(args.manager)
        .with_leader_election_config(timings)
        .with_cache_layout(args.cache_layout)
        .build()
        .await?;
    let api: Api<ConfigMap> = Api::namespaced(manager.client().clone(), &args.namespace);
    let printer = Printer {
        hold: Duration::from_millis(args.hold_ms),
    };
    manager.controller("configmaps", api, printer).add()?;
    let shard = manager.sharding().context("the member is sharded")?;
    println!("member {}", shard.member());
    let (namespace, objects) = (args.namespace.clone(), args.objects);
    let report = tokio::spawn(async move {
        // Each printed again when anything but the time changes. In
        // `selector` mode whether this replica owns an object is known once
        // its cache holds it (the key carries the hash of the uid), so the
        // view line is also recomputed when the cache's count changes.
        // The ring is looked at every 20 ms, the cache every 200 ms:
        // counting it lists the key of every cached object, reading each
        // one's uid from its JSON, and at every 20 ms that cost each
        // replica about a fifth of a core, taken from the reconciles the
        // benchmark times. The count only decides when the owned indices
        // are printed again, which the handover's timings do not read.
        let mut last = (u64::MAX, false, usize::MAX, usize::MAX);
        let mut cached = usize::MAX;
        for tick in 0u64.. {
            let now_cached = if tick % 10 == 0 {
                shard.keys_cached()
            } else {
                cached
            };
            if now_cached != cached {
                cached = now_cached;
                println!("c {cached}");
            }
            let key = (
                shard.ring_version(),
                shard.settled(),
                shard.members().len(),
                cached,
            );
            if key != last {
                let (version, line) = view_line(&shard, &namespace, objects);
                // The view may have moved while the line was computed: the
                // next round prints it again.
                if version == key.0 {
                    println!("{line}");
                    last = key;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let result = manager.run().await;
    report.abort();
    Ok(result?)
}
