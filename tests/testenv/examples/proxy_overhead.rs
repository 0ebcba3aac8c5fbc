//! What the fault proxy adds to a request on its happy path (no fault
//! scheduled): sequential GETs of one ConfigMap, alternately direct and
//! through the proxy, on the embedded control plane; prints the latency
//! percentiles of both and the difference of their medians.
//!
//! ```text
//! cargo run --release -p kube-concord-testenv --example proxy_overhead -- 2000
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use concord_testenv::TestEnv;
use concord_testenv::faults::{FaultProxy, Faults};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rounds: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(2000);
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let proxy = FaultProxy::start(env.config(), Faults::none()).await?;
    let direct: Api<ConfigMap> = Api::namespaced(env.client()?, ns.name());
    let through: Api<ConfigMap> = Api::namespaced(Client::try_from(proxy.config())?, ns.name());
    let map = ConfigMap {
        metadata: ObjectMeta {
            name: Some("probe".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    direct.create(&PostParams::default(), &map).await?;
    // Warm both connection pools.
    for _ in 0..50 {
        direct.get("probe").await?;
        through.get("probe").await?;
    }
    let (mut a, mut b) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for _ in 0..rounds {
        let start = Instant::now();
        direct.get("probe").await?;
        a.push(start.elapsed());
        let start = Instant::now();
        through.get("probe").await?;
        b.push(start.elapsed());
    }
    a.sort();
    b.sort();
    for (label, samples) in [("direct", &a), ("through proxy", &b)] {
        println!(
            "{label:>14}: p50 {:?}  p90 {:?}  p99 {:?}",
            percentile(samples, 0.5),
            percentile(samples, 0.9),
            percentile(samples, 0.99)
        );
    }
    let added = percentile(&b, 0.5).as_secs_f64() - percentile(&a, 0.5).as_secs_f64();
    println!(
        "p50 added by the proxy: {:.3} ms over {rounds} GETs",
        added * 1e3
    );
    Ok(())
}
