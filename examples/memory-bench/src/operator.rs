//! The concord operator the harness measures: `memory-bench operator …`,
//! its own process. A [`Manager`] with one controller on the objects of
//! one namespace (shared cache, metrics and health served on 127.0.0.1
//! ephemeral ports, leader election off) whose reconciler copies each
//! object's wanted round ([`WANT`]) into its [`ROUND`] label through
//! `ctx.set_label`, with the strategy of `config.yaml` (`strict`).
//!
//! It prints a [`Status`] line on stdout four times a
//! second, and stops on SIGTERM.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use anyhow::Context as _;
use concord::{
    Action, Context, Manager, ManagerArgs, Object, Reconciler, WriteError, cache::CacheLayout,
    memory::MemoryRelease, metrics::Metrics,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::{Client, ResourceExt};

use concord_examples::kueue::PodPhase;

use crate::alloc::CountingAlloc;
use crate::objects::{Kind, ROUND, WANT};
use crate::status::Status;
use crate::widget::Widget;

/// The operator's strategy table.
const CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config.yaml");
/// How often the status line is printed.
const TICK: Duration = Duration::from_millis(250);
/// How long reconciles must stop before `--trim-when-idle` trims.
const IDLE: Duration = MemoryRelease::DEFAULT_IDLE;

/// How both operators cache the objects they watch: each mode is what
/// either framework does when asked for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    /// Each framework's default: concord's shared cache of whole objects
    /// without `managedFields` and the last-applied annotation;
    /// controller-runtime's informer cache of whole objects as sent.
    Full,
    /// Whole objects without `managedFields` in both: concord's default,
    /// controller-runtime with `cache.TransformStripManagedFields()`.
    Stripped,
    /// Metadata only, through the metadata API: concord's controller on
    /// `Api<PartialObjectMeta<K>>`, controller-runtime's on
    /// `metav1.PartialObjectMetadata`.
    Metadata,
    /// The Kueue example's view of a Pod (`kueue::PodPhase`: metadata and
    /// `status.phase`) in concord; controller-runtime's default cache of
    /// whole Pods, as the same controller written for it would hold.
    /// Pods only.
    View,
}

impl CacheMode {
    /// The word used on command lines and in reports.
    pub const fn as_str(self) -> &'static str {
        match self {
            CacheMode::Full => "full",
            CacheMode::Stripped => "stripped",
            CacheMode::Metadata => "metadata",
            CacheMode::View => "view",
        }
    }

    /// What the controller-runtime operator is started with: the same
    /// mode, except that it has no views and keeps its default for `view`.
    pub const fn peer(self) -> CacheMode {
        match self {
            CacheMode::View => CacheMode::Full,
            mode => mode,
        }
    }
}

/// The operator's command line (the harness writes it).
#[derive(Clone, Debug, clap::Args)]
pub struct OperatorArgs {
    /// Kubeconfig of the cluster.
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// Namespace to watch.
    #[arg(long)]
    pub namespace: String,
    /// What to watch.
    #[arg(long, value_enum, default_value = "pods")]
    pub kind: Kind,
    /// How to cache it.
    #[arg(long, value_enum, default_value = "full")]
    pub cache: CacheMode,
    /// How concord's cache holds them.
    #[arg(long, value_enum, default_value_t)]
    pub layout: CacheLayout,
    /// Reconciles at once.
    #[arg(long, default_value_t = 4)]
    pub concurrency: u16,
    /// Milliseconds each reconcile sleeps first (a slow reconciler).
    #[arg(long, default_value_t = 0)]
    pub sleep_ms: u64,
    /// Give glibc's free memory back (`malloc_trim(0)`) once reconciles
    /// stop for a second (`MemoryRelease::DEFAULT_IDLE`): the manager's
    /// `MemoryRelease::WhenIdle`. Without it, `MemoryRelease::Off`.
    #[arg(long)]
    pub trim_when_idle: bool,
}

/// Counts the objects in the controller's cache, and reads its decoding
/// time in microseconds.
type Size = Box<dyn Fn() -> (usize, u64) + Send + Sync>;

/// What the reconciler counts.
#[derive(Debug, Default)]
struct Counters {
    reconciles: AtomicU64,
    writes: AtomicU64,
    failed: AtomicU64,
    /// Microseconds of reconciling, summed.
    reconcile_us: AtomicU64,
}

/// Copies the wanted round into the label.
struct CopyWant {
    counters: Arc<Counters>,
    sleep: Duration,
}

#[concord::async_trait]
impl<K: Object> Reconciler<K> for CopyWant {
    type Error = WriteError;

    async fn reconcile(&self, object: Arc<K>, ctx: &Context<K>) -> Result<Action, WriteError> {
        self.counters.reconciles.fetch_add(1, Relaxed);
        let started = std::time::Instant::now();
        let result = self.copy_want(object, ctx).await;
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.counters.reconcile_us.fetch_add(micros, Relaxed);
        result
    }
}

impl CopyWant {
    async fn copy_want<K: Object>(
        &self,
        object: Arc<K>,
        ctx: &Context<K>,
    ) -> Result<Action, WriteError> {
        let object = if self.sleep.is_zero() {
            object
        } else {
            tokio::time::sleep(self.sleep).await;
            // The newest copy, as a Go reconciler's Get from its cache
            // after the same sleep would see.
            let name = object.name_any();
            ctx.cached(object.namespace().as_deref(), &name)
                .unwrap_or(object)
        };
        let Some(want) = object.annotations().get(WANT) else {
            return Ok(Action::await_change());
        };
        if object.labels().get(ROUND) == Some(want) {
            return Ok(Action::await_change());
        }
        match ctx.set_label(&object, ROUND, want).await {
            Ok(_) => {
                self.counters.writes.fetch_add(1, Relaxed);
                Ok(Action::await_change())
            }
            Err(err) => {
                self.counters.failed.fetch_add(1, Relaxed);
                Err(err)
            }
        }
    }
}

/// Runs the operator until SIGTERM; `allocator` is the process's global
/// allocator, whose counts the status line reports.
///
/// # Errors
///
/// When the manager cannot be built or fails.
pub async fn run(args: OperatorArgs, allocator: &'static CountingAlloc) -> anyhow::Result<()> {
    let mut manager_args = ManagerArgs::new()
        .with_config(CONFIG)
        .with_metrics_bind_address("127.0.0.1:0")
        .with_health_probe_bind_address("127.0.0.1:0");
    manager_args.kubeconfig = Some(args.kubeconfig.clone());
    let mut manager = Manager::builder("memory-bench")
        .with_builtin_type::<Pod>()
        .with_args(manager_args)
        .with_cache_layout(args.layout)
        // ANCHOR: memory_release
        .with_memory_release(if args.trim_when_idle {
            MemoryRelease::WhenIdle { after: IDLE }
        } else {
            MemoryRelease::Off
        })
        // ANCHOR_END: memory_release
        .build()
        .await
        .context("building the manager")?;
    let counters = Arc::new(Counters::default());
    let reconciler = CopyWant {
        counters: counters.clone(),
        sleep: Duration::from_millis(args.sleep_ms),
    };
    let client = manager.client().clone();
    let synced = Arc::new(AtomicBool::new(false));
    let (m, c, a, s) = (&mut manager, &client, &args, synced.clone());
    let size = match (args.kind, args.cache) {
        // concord's cache strips managed fields by default.
        (Kind::Pods, CacheMode::Full | CacheMode::Stripped) => {
            add_controller::<Pod>(m, c, a, reconciler, s)?
        }
        (Kind::Pods, CacheMode::Metadata) => {
            add_controller::<PartialObjectMeta<Pod>>(m, c, a, reconciler, s)?
        }
        (Kind::Pods, CacheMode::View) => add_controller::<PodPhase>(m, c, a, reconciler, s)?,
        (Kind::Widgets, CacheMode::View) => {
            anyhow::bail!("--cache view: there is a view of Pods only (use --kind pods)")
        }
        (Kind::Widgets, CacheMode::Full | CacheMode::Stripped) => {
            add_controller::<Widget>(m, c, a, reconciler, s)?
        }
        (Kind::Widgets, CacheMode::Metadata) => {
            add_controller::<PartialObjectMeta<Widget>>(m, c, a, reconciler, s)?
        }
    };
    let metrics = manager.metrics();
    let reporter = tokio::spawn(report(size, synced, counters, metrics, allocator));
    let result = manager.run().await;
    reporter.abort();
    Ok(result?)
}

/// Adds the controller of `K` (a whole type, or `PartialObjectMeta` of
/// one), sets `synced` once its cache has listed everything, and returns
/// how to count the objects in it.
fn add_controller<K>(
    manager: &mut Manager,
    client: &Client,
    args: &OperatorArgs,
    reconciler: CopyWant,
    synced: Arc<AtomicBool>,
) -> anyhow::Result<Size>
where
    K: Object + kube::Resource<Scope = kube::core::NamespaceResourceScope>,
{
    let api: Api<K> = Api::namespaced(client.clone(), &args.namespace);
    let concurrency = args.concurrency;
    manager
        .controller("memory-bench", api, reconciler)
        .with_concurrency(concurrency)
        .add()?;
    let store = manager
        .context::<K>()
        .store()
        .context("the manager's shared cache")?;
    let ready = store.clone();
    tokio::spawn(async move {
        if ready.wait_until_ready().await.is_ok() {
            synced.store(true, Relaxed);
        }
    });
    Ok(Box::new(move || {
        let (_, decoding) = store.decoding();
        let micros = u64::try_from(decoding.as_micros()).unwrap_or(u64::MAX);
        (store.len(), micros)
    }))
}

/// Prints the status line every [`TICK`] until aborted.
async fn report(
    size: Size,
    synced: Arc<AtomicBool>,
    counters: Arc<Counters>,
    metrics: Arc<Metrics>,
    allocator: &'static CountingAlloc,
) {
    let kib = |bytes: usize| u64::try_from(bytes / 1024).unwrap_or(u64::MAX);
    let mut malloc = crate::alloc::MallocInfo::default();
    for tick in 0u64.. {
        // mallinfo2 walks every arena's free lists under their locks: once
        // a second is enough.
        if tick % 4 == 0 && allocator.allocator() == crate::alloc::Allocator::System {
            malloc = crate::alloc::malloc_info().unwrap_or_default();
        }
        let (cached, decode_us) = size();
        let heap = allocator.heap();
        let (releases, released_in) = metrics.memory_releases();
        let status = Status {
            cached: cached as u64,
            synced: synced.load(Relaxed),
            reconciles: counters.reconciles.load(Relaxed),
            writes: counters.writes.load(Relaxed),
            failed: counters.failed.load(Relaxed),
            allocs: allocator.allocations(),
            reconcile_us: counters.reconcile_us.load(Relaxed),
            decode_us,
            heap_kib: kib(heap.live),
            heap_peak_kib: kib(heap.peak),
            malloc_arena_kib: malloc.arena_kib + malloc.mmap_kib,
            malloc_free_kib: malloc.free_kib,
            trims: releases,
            trim_us: u64::try_from(released_in.as_micros()).unwrap_or(u64::MAX),
        };
        println!("{status}");
        tokio::time::sleep(TICK).await;
    }
}
