//! The other controller of the `kueue` scenario: a separate client that adds
//! its own finalizer, either inside our controller's window on the raced
//! pods ([`Inline`], `--race lockstep`) or to every pod at random moments
//! ([`add_everywhere`], `--race random`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::scenarios::{FOREIGN, name};

/// Attempts per pod when the server answers 429 or 5xx.
const ATTEMPTS: u32 = 3;
/// The longest pause before an add.
const MAX_PAUSE_MICROS: u64 = 2_000;

/// Add [`FOREIGN`] to pods `0..pods` of `namespace` with `tasks` concurrent
/// tasks, in an order and with pauses drawn from `seed`. Uses a strategic
/// merge patch, which appends to `metadata.finalizers` on the server, so
/// this writer itself never loses anything. Returns the adds that failed.
pub(crate) async fn add_everywhere(
    client: Client,
    namespace: &str,
    pods: u32,
    tasks: u32,
    seed: u64,
) -> u64 {
    let api: Api<Pod> = Api::namespaced(client, namespace);
    let mut order: Vec<u32> = (0..pods).collect();
    order.shuffle(&mut StdRng::seed_from_u64(seed));
    let order = Arc::new(order);
    let cursor = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let (api, order, cursor, failed) =
                (api.clone(), order.clone(), cursor.clone(), failed.clone());
            let mut rng =
                StdRng::seed_from_u64(seed ^ (u64::from(t) + 1).wrapping_mul(0x9e37_79b9));
            tokio::spawn(async move {
                let params = PatchParams {
                    field_manager: Some("foreign-controller".into()),
                    ..PatchParams::default()
                };
                let patch = Patch::Strategic(json!({"metadata": {"finalizers": [FOREIGN]}}));
                while let Some(&index) = order.get(cursor.fetch_add(1, Relaxed)) {
                    let pause = rng.random_range(0..=MAX_PAUSE_MICROS);
                    tokio::time::sleep(Duration::from_micros(pause)).await;
                    if !add(&api, &params, &patch, &name(index)).await {
                        failed.fetch_add(1, Relaxed);
                    }
                }
            })
        })
        .collect();
    for handle in handles {
        if handle.await.is_err() {
            failed.fetch_add(1, Relaxed);
        }
    }
    failed.load(Relaxed)
}

/// The other controller in lockstep mode: called by our controller's writer
/// task after it read a raced pod from its cache and before it writes, so
/// the add lands inside the window for certain.
pub(crate) struct Inline {
    api: Api<Pod>,
    params: PatchParams,
    patch: Patch<serde_json::Value>,
}

impl Inline {
    /// The other controller writing pods of `namespace` with its own
    /// `client`.
    pub(crate) fn new(client: Client, namespace: &str) -> Self {
        Inline {
            api: Api::namespaced(client, namespace),
            params: PatchParams {
                field_manager: Some("foreign-controller".into()),
                ..PatchParams::default()
            },
            patch: Patch::Strategic(json!({"metadata": {"finalizers": [FOREIGN]}})),
        }
    }

    /// Add [`FOREIGN`] to object number `object`; whether that worked.
    pub(crate) async fn add(&self, object: u32) -> bool {
        add(&self.api, &self.params, &self.patch, &name(object)).await
    }
}

async fn add(
    api: &Api<Pod>,
    params: &PatchParams,
    patch: &Patch<serde_json::Value>,
    name: &str,
) -> bool {
    for attempt in 1..=ATTEMPTS {
        match api.patch(name, params, patch).await {
            Ok(_) => return true,
            Err(kube::Error::Api(s)) if matches!(s.code, 429 | 500..=599) && attempt < ATTEMPTS => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(err) => {
                tracing::warn!(%name, error = %err, "the foreign writer could not add its finalizer");
                return false;
            }
        }
    }
    false
}
