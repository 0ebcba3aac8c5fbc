//! The gate's fixed workload: ConfigMaps whose contents a seed fixes, and
//! the strategy table that sends a label's write through one strategy.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use concord::featuregates::StrategyName;
use concord_testenv::TestNamespace;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};

// ANCHOR: workload
/// ConfigMaps the manager caches and reconciles.
pub(crate) const OBJECTS: usize = 500;
/// Writes measured per strategy, each setting a label on its own object.
pub(crate) const WRITES: usize = 100;
/// Each count is measured this many times: the least is kept (of
/// requests, the most).
pub(crate) const REPEATS: usize = 3;
/// Fixes every object's contents.
const SEED: u64 = 50;
/// Keys in each object's `data`, each value 16 to 255 characters.
const KEYS: u64 = 4;
// ANCHOR_END: workload

/// The label every object of the workload carries.
pub(crate) const SELECTOR: &str = "app=cost-gate";

/// Object `i` of the workload: `cm-0042`, its `data` drawn from [`SEED`].
pub(crate) fn object(i: usize) -> ConfigMap {
    let mut draw = SplitMix64(SEED ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let data = (0..KEYS)
        .map(|k| {
            let len = 16 + draw.next() % 240;
            let value: String = (0..len)
                .map(|_| char::from(b'a' + (draw.next() % 26) as u8))
                .collect();
            (format!("key-{k}"), value)
        })
        .collect();
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("cm-{i:04}")),
            labels: Some(BTreeMap::from([("app".to_owned(), "cost-gate".to_owned())])),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..ConfigMap::default()
    }
}

/// Creates the workload's objects in `ns`; how many ConfigMaps the
/// namespace then holds (a cluster that publishes its root CA in every
/// namespace adds one).
///
/// # Errors
///
/// A create or the list that failed.
pub(crate) async fn create(ns: &TestNamespace) -> anyhow::Result<usize> {
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    futures::stream::iter(0..OBJECTS)
        .map(|i| {
            let maps = maps.clone();
            async move { maps.create(&PostParams::default(), &object(i)).await }
        })
        .buffer_unordered(8)
        .try_collect::<Vec<_>>()
        .await
        .context("creating the workload")?;
    Ok(maps.list(&ListParams::default()).await?.items.len())
}

/// Writes a strategy table sending every label write on ConfigMaps
/// through `strategy` into `dir`; its path.
///
/// # Errors
///
/// When the file cannot be written.
pub(crate) fn strategy_table(dir: &Path, strategy: StrategyName) -> anyhow::Result<PathBuf> {
    let path = dir.join(format!("{}.yaml", strategy.as_str()));
    let table = format!(
        "strategies:\n  default: strict\n  resources:\n    configmaps:\n      operations:\n        metadata: {}\n",
        strategy.as_str()
    );
    std::fs::write(&path, table).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// SplitMix64: a seeded sequence, the same on every machine.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}
