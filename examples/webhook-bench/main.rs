//! Webhook latency and conversion throughput on the embedded control plane.
//!
//! Creates `--creates` ConfigMap-like custom objects with and without a
//! trivial validating webhook, alternately (so machine drift lands on both
//! alike), and reports the p50/p99 of each and the p99
//! the webhook adds; reports the webhook server's own p99 (histogram bucket
//! bound); then, on a second control plane without the watch cache,
//! stores `--objects` objects as v1 (the storage version) and lists them as
//! v1alpha1 through the conversion webhook, reporting objects/s. Each figure is
//! printed beside issue 14's target for it.
//!
//! What it needs: Go and Rust (the embedded control plane is built from its
//! Go modules on first use, then cached). Measure in a release build on a
//! quiet machine; a debug build only checks that it works:
//! `cargo run -p concord-examples --example webhook-bench -- --creates 50 --objects 200`.
//!
//! ```text
//! cargo run --release -p concord-examples --example webhook-bench -- --creates 1000 --objects 10000
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)]

use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Parser;
use concord::webhook::{
    Conversion, Spoke, Validator, WebhookClient, WebhookMetrics, WebhookOptions, WebhookServer,
    Webhooks,
};
use concord_testenv::{ControlPlane, ControlPlaneOptions, TestCa, TestEnv};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::crd::merge_crds;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Parser)]
struct Args {
    /// Creates per run (with and without the webhook).
    #[arg(long, default_value_t = 1000)]
    creates: usize,
    /// Stored objects listed in the other version.
    #[arg(long, default_value_t = 10_000)]
    objects: usize,
}

mod v1alpha1 {
    use super::*;
    /// Old spec.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
    #[kube(
        group = "bench.concord.dev",
        version = "v1alpha1",
        kind = "Thing",
        namespaced
    )]
    pub struct ThingSpec {
        /// Size.
        pub size: i32,
    }
}

mod v1 {
    use super::*;
    /// Hub spec.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
    #[kube(
        group = "bench.concord.dev",
        version = "v1",
        kind = "Thing",
        namespaced
    )]
    pub struct ThingSpec {
        /// Size.
        pub size: i32,
        /// New in v1.
        #[serde(default)]
        pub note: String,
    }
}

impl Spoke<v1::Thing> for v1alpha1::Thing {
    fn into_hub(self) -> v1::Thing {
        v1::Thing {
            metadata: self.metadata,
            spec: v1::ThingSpec {
                size: self.spec.size,
                note: String::new(),
            },
        }
    }
    fn from_hub(hub: v1::Thing) -> Self {
        v1alpha1::Thing {
            metadata: hub.metadata,
            spec: v1alpha1::ThingSpec {
                size: hub.spec.size,
            },
        }
    }
}

struct Trivial;
#[concord::async_trait]
impl Validator<v1::Thing> for Trivial {}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT met" }
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1]
}

async fn create(api: &Api<v1::Thing>, name: &str) -> Result<Duration> {
    let thing = v1::Thing::new(
        name,
        v1::ThingSpec {
            size: 1,
            note: String::new(),
        },
    );
    let start = Instant::now();
    api.create(&PostParams::default(), &thing).await?;
    Ok(start.elapsed())
}

/// `n` creates in each namespace, alternating one without the webhook and
/// one with it, so that whatever else the machine does lands on both
/// alike. Each list comes back sorted.
async fn creates(
    without: &Api<v1::Thing>,
    with: &Api<v1::Thing>,
    prefix: &str,
    n: usize,
) -> Result<(Vec<Duration>, Vec<Duration>)> {
    let (mut base, mut hooked) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        base.push(create(without, &format!("{prefix}-{i}")).await?);
        hooked.push(create(with, &format!("{prefix}-{i}")).await?);
    }
    base.sort();
    hooked.sort();
    Ok((base, hooked))
}

/// Stores `objects` Things as v1 (the hub) and lists them as v1alpha1:
/// how many were listed, how long the list took, how many conversion
/// reviews it cost.
///
/// On a control plane of its own started with `--watch-cache=false`: with
/// the watch cache a list is served from objects converted one by one as
/// they were written, and nothing is converted at list time. Without it
/// the list reads etcd and converts every object then, as the watch cache
/// itself does when it fills at start-up.
async fn conversion(
    crd: CustomResourceDefinition,
    objects: usize,
    metrics: &WebhookMetrics,
) -> Result<(usize, Duration, u64)> {
    let plane = ControlPlane::start(
        ControlPlaneOptions::default()
            .without_controller_manager()
            .with_apiserver_arg("--watch-cache=false"),
    )?;
    let kubeconfig = Kubeconfig::read_from(plane.kubeconfig_path())?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    let client = kube::Client::try_from(config)?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.metadata.name.clone().unwrap_or_default();
    crds.patch(
        &name,
        &PatchParams::apply("webhook-bench").force(),
        &Patch::Apply(&crd),
    )
    .await?;
    let established = |crd: &CustomResourceDefinition| {
        crd.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            })
    };
    while !established(&crds.get(&name).await?) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("conversion".into());
    namespaces.create(&PostParams::default(), &ns).await?;
    let new: Api<v1::Thing> = Api::namespaced(client.clone(), "conversion");
    for i in 0..objects {
        let thing = v1::Thing::new(
            &format!("o-{i}"),
            v1::ThingSpec {
                size: 1,
                note: String::new(),
            },
        );
        new.create(&PostParams::default(), &thing).await?;
    }
    let old: Api<v1alpha1::Thing> = Api::namespaced(client, "conversion");
    let convert = "convert.things.bench.concord.dev";
    let reviews = metrics.requests(convert, "allowed");
    let start = Instant::now();
    let listed = old.list(&ListParams::default()).await?.items.len();
    let took = start.elapsed();
    let reviews = metrics.requests(convert, "allowed") - reviews;
    anyhow::ensure!(
        reviews > 0 && listed == objects,
        "the list was not converted by the webhook ({reviews} conversion reviews, {listed} objects)"
    );
    Ok((listed, took, reviews))
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let env = TestEnv::shared()?;
    let ca = TestCa::new()?;
    let dir = tempfile::tempdir()?;
    ca.serving_cert(&["127.0.0.1"])?.write_to(dir.path())?;
    let with_ns = env.namespace().await?;
    let without_ns = env.namespace().await?;
    let selector = LabelSelector {
        match_labels: Some(
            [(
                "kubernetes.io/metadata.name".to_owned(),
                with_ns.name().to_owned(),
            )]
            .into(),
        ),
        ..LabelSelector::default()
    };
    let webhooks = Webhooks::new()
        .with_validator::<v1::Thing, _>(
            Trivial,
            WebhookOptions::new().with_namespace_selector(selector),
        )
        .with_conversion(Conversion::<v1::Thing>::new().with_spoke::<v1alpha1::Thing>());
    let server = WebhookServer::bind("127.0.0.1:0".parse()?, dir.path(), webhooks.clone()).await?;
    let address = server.local_addr().unwrap();
    let metrics = server.metrics();
    tokio::spawn(server.serve(std::future::pending()));
    let client = WebhookClient::url(format!("https://{address}"))
        .with_ca_bundle(ca.pem().as_bytes().to_vec())
        .with_configuration_name("webhook-bench");
    // Latency first, with v1 stored: creates through v1 call no
    // conversion, so the only webhook call they differ by is the validator.
    let crd = merge_crds(vec![v1alpha1::Thing::crd(), v1::Thing::crd()], "v1")?;
    env.install_crd(webhooks.with_crd_conversion(crd, &client)?)
        .await?;
    Api::<ValidatingWebhookConfiguration>::all(env.client()?)
        .create(
            &PostParams::default(),
            &webhooks.validating_configuration(&client).unwrap(),
        )
        .await?;
    let with: Api<v1::Thing> = Api::namespaced(env.client()?, with_ns.name());
    let without: Api<v1::Thing> = Api::namespaced(env.client()?, without_ns.name());
    // Wait until the API server calls the webhook, then warm both paths.
    let name = "validate.things.bench.concord.dev";
    let mut i = 0;
    while metrics.requests(name, "allowed") == 0 {
        with.create(
            &PostParams::default(),
            &v1::Thing::new(
                &format!("warm-{i}"),
                v1::ThingSpec {
                    size: 1,
                    note: String::new(),
                },
            ),
        )
        .await?;
        i += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    creates(&without, &with, "warmup", 20).await?;

    let (base, hooked) = creates(&without, &with, "t", args.creates).await?;
    let added = percentile(&hooked, 0.99).saturating_sub(percentile(&base, 0.99));
    let server_p99 = metrics.latency_quantile(name, 0.99);
    println!(
        "creates: {} each, sequential and interleaved (one without, one with), through the real API server",
        args.creates
    );
    println!(
        "  without webhook: p50 {:?} p99 {:?}",
        percentile(&base, 0.5),
        percentile(&base, 0.99)
    );
    println!(
        "  with webhook:    p50 {:?} p99 {:?}",
        percentile(&hooked, 0.5),
        percentile(&hooked, 0.99)
    );
    println!(
        "  added p99:       {added:?}   (target <= 5 ms: {}); added p50: {:?}",
        verdict(added <= Duration::from_millis(5)),
        percentile(&hooked, 0.5).saturating_sub(percentile(&base, 0.5))
    );
    println!(
        "  webhook server p99: {}   (target <= 1 ms for a trivial validator: {})",
        server_p99.map_or("beyond the last bucket".to_owned(), |d| format!(
            "<= {d:?} (histogram bucket bound)"
        )),
        verdict(server_p99.is_some_and(|d| d <= Duration::from_millis(1)))
    );

    let crd = merge_crds(vec![v1alpha1::Thing::crd(), v1::Thing::crd()], "v1")?;
    let crd = webhooks.with_crd_conversion(crd, &client)?;
    let (listed, took, reviews) = conversion(crd, args.objects, &metrics).await?;
    println!(
        "conversion: listed {listed} objects stored as v1 as v1alpha1 in {took:?} ({reviews} conversion review(s), API server without watch cache): {:.0} objects/s   (target: report objects/s)",
        listed as f64 / took.as_secs_f64()
    );
    Ok(())
}
