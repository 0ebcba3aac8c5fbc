//! The crd-operator example's webhooks, served by its manager and called
//! by the real kube-apiserver: a `v1alpha1` Widget read as `v1` with
//! nothing lost, an out-of-bounds one denied with the validator's message,
//! defaults on the stored object, an immutable field, the webhook series
//! on the manager's `/metrics`; and the conversion's round trips on
//! generated Widgets.
//!
//! ```text
//! cargo test -p concord-tests --test webhooks admission::example::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Result;
use concord::webhook::{WebhookClient, check_hub_round_trip, check_spoke_round_trip};
use concord::{Manager, ManagerArgs};
use concord_examples::widgets::{self, Widget, WidgetCondition, WidgetStatus};
use concord_examples::widgets_v1alpha1;
use concord_examples::widgets_webhooks::{self, CONFIGURATION, DEFAULT_MESSAGE};
use concord_testenv::TestEnv;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use proptest::prelude::*;
use serde_json::json;
use support::{admin, certs, eventually, https, unregister};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn hub(name: &str, message: String, shards: i32, status: Option<WidgetStatus>) -> Widget {
    let mut widget = Widget::new(name, widgets::WidgetSpec { message, shards });
    widget.status = status;
    widget
}

fn status_strategy() -> impl Strategy<Value = Option<WidgetStatus>> {
    proptest::option::of(
        (
            any::<i32>(),
            proptest::option::of(any::<i64>()),
            "[A-Za-z]{0,8}",
        )
            .prop_map(|(shards, observed_generation, reason)| WidgetStatus {
                shards,
                observed_generation,
                conditions: vec![WidgetCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    reason,
                    ..WidgetCondition::default()
                }],
            }),
    )
}

// ANCHOR: round_trip
proptest! {
    #[test]
    fn widget_conversion_loses_nothing(name in "[a-z]{1,12}", message in ".{0,40}",
                                       shards in any::<i32>(), status in status_strategy()) {
        let widget = hub(&name, message, shards, status);
        check_hub_round_trip::<_, widgets_v1alpha1::Widget>(&widget)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let old = <widgets_v1alpha1::Widget as concord::webhook::Spoke<Widget>>::from_hub(widget);
        check_spoke_round_trip(&old).map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
}
// ANCHOR_END: round_trip

/// `GET /metrics` on the manager's metrics endpoint.
async fn scrape(address: SocketAddr) -> Result<String> {
    let mut tcp = tokio::net::TcpStream::connect(address).await?;
    tcp.write_all(b"GET /metrics HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
        .await?;
    let mut text = String::new();
    tcp.read_to_string(&mut text).await?;
    Ok(text)
}

/// The value of the series `series` (name and labels, exactly).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)
            .and_then(|v| v.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    })
}

fn api_error<T: std::fmt::Debug>(result: kube::Result<T>) -> kube::core::Status {
    match result {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn old_widget(name: &str, text: &str, replicas: i32) -> widgets_v1alpha1::Widget {
    widgets_v1alpha1::Widget::new(
        name,
        widgets_v1alpha1::WidgetSpec {
            text: text.into(),
            replicas,
        },
    )
}

// ANCHOR: e2e
#[tokio::test]
async fn the_example_operator_serves_its_webhooks() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let (ca, dir) = certs()?;
    // The operator as its Deployment runs it, on loopback ports.
    let args = ManagerArgs::new()
        .with_config(widgets::CONFIG)
        .with_metrics_bind_address("127.0.0.1:0")
        .with_webhook_server("127.0.0.1:0", dir.path());
    let mut manager = Manager::builder("crd-operator")
        .with_client(env.client()?)
        .with_args(args)
        .with_signal_handling(false)
        .with_webhooks(widgets_webhooks::webhooks())
        .build()
        .await?;
    let webhook_at = manager.webhook_address().unwrap();
    let metrics_at = manager.metrics_address().unwrap();
    let served = manager.webhook_metrics().unwrap();

    // The generated CRD and configurations, addressed to the test server
    // by URL instead of the in-cluster Service.
    let target = WebhookClient::url(format!("https://{webhook_at}"))
        .with_ca_bundle(ca.pem().as_bytes().to_vec())
        .with_configuration_name(CONFIGURATION);
    env.install_crd(widgets_webhooks::crd(&target)?).await?;
    support::register(
        &admin()?,
        &widgets_webhooks::webhooks(),
        CONFIGURATION,
        webhook_at,
        &ca,
    )
    .await?;

    widgets::add_controller(&mut manager, ns.name())?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    let old: Api<widgets_v1alpha1::Widget> = Api::namespaced(ns.client(), ns.name());
    let new: Api<Widget> = Api::namespaced(ns.client(), ns.name());
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    eventually(
        Duration::from_secs(30),
        "the validator to be called",
        || async {
            matches!(old.create(&dry, &old_widget("probe", "x", 50)).await,
                 Err(kube::Error::Api(s)) if s.message.contains("spec.shards must be"))
        },
    )
    .await?;

    // Written as v1alpha1, read as v1 with nothing lost, and reconciled.
    let mut legacy = old_widget("legacy", "from the past", 2);
    legacy.labels_mut().insert("team".into(), "widgets".into());
    let written = old.create(&PostParams::default(), &legacy).await?;
    let read = new.get("legacy").await?;
    assert_eq!(read.spec.message, "from the past");
    assert_eq!(read.spec.shards, 2);
    assert_eq!(
        read.labels().get("team").map(String::as_str),
        Some("widgets")
    );
    assert_eq!(old.get("legacy").await?.spec, written.spec);
    // And the other way: written as v1, read as v1alpha1.
    new.create(
        &PostParams::default(),
        &Widget::new(
            "current",
            widgets::WidgetSpec {
                message: "from now".into(),
                shards: 3,
            },
        ),
    )
    .await?;
    assert_eq!(
        old.get("current").await?.spec,
        widgets_v1alpha1::WidgetSpec {
            text: "from now".into(),
            replicas: 3
        }
    );
    eventually(Duration::from_secs(60), "legacy reconciled", || async {
        old.get("legacy")
            .await
            .ok()
            .and_then(|w| w.status)
            .is_some_and(|s| s.shards == 2 && s.conditions.iter().any(|c| c.type_ == "Ready"))
    })
    .await?;

    // Out of bounds: v1alpha1's schema allows it, the validator does not.
    let status = api_error(
        old.create(&PostParams::default(), &old_widget("huge", "x", 50))
            .await,
    );
    assert_eq!(status.code, 403, "{status:?}");
    assert!(
        status
            .message
            .contains("spec.shards must be between 0 and 20, got 50"),
        "{}",
        status.message
    );
    assert!(new.get_opt("huge").await?.is_none(), "nothing stored");

    // Defaults on the stored object, whichever version reads it.
    old.create(&PostParams::default(), &old_widget("quiet", "", 1))
        .await?;
    assert_eq!(new.get("quiet").await?.spec.message, DEFAULT_MESSAGE);
    assert_eq!(old.get("quiet").await?.spec.text, DEFAULT_MESSAGE);

    // An immutable field, through the new version.
    let mut changed = new.get("legacy").await?;
    changed.spec.message = "rewritten".into();
    let status = api_error(
        new.replace("legacy", &PostParams::default(), &changed)
            .await,
    );
    assert!(
        status.message.contains("spec.message is immutable"),
        "{status:?}"
    );
    assert_eq!(new.get("legacy").await?.spec.message, "from the past");

    as_a_user(&ns, &env.client()?).await?;
    reviews_of_another_type_are_refused(webhook_at, ca.pem()).await?;

    // The webhook series on the manager's own /metrics.
    let text = scrape(metrics_at).await?;
    let denied = value(
        &text,
        "concord_webhook_requests_total{webhook=\"validate.widgets.demo.concord.dev\",outcome=\"denied\"}",
    );
    assert!(denied.is_some_and(|n| n >= 2.0), "{text}");
    assert_eq!(
        denied,
        Some(served.requests("validate.widgets.demo.concord.dev", "denied") as f64)
    );
    let patched = value(
        &text,
        "concord_webhook_requests_total{webhook=\"default.widgets.demo.concord.dev\",outcome=\"patched\"}",
    );
    assert!(patched.is_some_and(|n| n >= 1.0), "{text}");
    let conversions = value(
        &text,
        "concord_webhook_latency_seconds_count{webhook=\"convert.widgets.demo.concord.dev\"}",
    );
    assert!(conversions.is_some_and(|n| n >= 1.0), "{text}");

    stop.shutdown();
    running.await??;
    unregister(&admin()?, CONFIGURATION).await;
    Ok(())
}
// ANCHOR_END: e2e

/// A Widget written as raw JSON in `version`, as `kubectl apply` sends it.
async fn create_raw(
    client: &kube::Client,
    ns: &str,
    version: &str,
    name: &str,
    spec: serde_json::Value,
) -> kube::Result<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "demo.concord.dev",
        version,
        "Widget",
    ));
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("demo.concord.dev/{version}"),
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("a Widget as JSON");
    api.create(&PostParams::default(), &object).await
}

// ANCHOR: as_a_user
/// What a user meets through the API server: defaults for fields left
/// out, bad values refused with a 4xx naming the field in either version.
async fn as_a_user(ns: &concord_testenv::TestNamespace, client: &kube::Client) -> Result<()> {
    let new: Api<Widget> = Api::namespaced(ns.client(), ns.name());

    // `message` left out in v1: the defaulter fills it, `shards` keeps
    // what the user said.
    create_raw(client, ns.name(), "v1", "bare", json!({"shards": 2})).await?;
    let bare = new.get("bare").await?;
    assert_eq!(bare.spec.message, DEFAULT_MESSAGE);
    assert_eq!(bare.spec.shards, 2);
    // Nothing at all in the spec: the schema's default for `shards`, the
    // defaulter's for `message`.
    create_raw(client, ns.name(), "v1", "empty", json!({})).await?;
    let empty = new.get("empty").await?;
    assert_eq!(
        (empty.spec.message.as_str(), empty.spec.shards),
        (DEFAULT_MESSAGE, 1)
    );
    // And `text` left out in v1alpha1.
    create_raw(
        client,
        ns.name(),
        "v1alpha1",
        "bare-old",
        json!({"replicas": 1}),
    )
    .await?;
    assert_eq!(new.get("bare-old").await?.spec.message, DEFAULT_MESSAGE);

    // Bad values, in both versions: a 4xx naming the field, never a 5xx,
    // and nothing stored.
    let cases = [
        (
            "v1",
            "minus",
            json!({"message": "m", "shards": -1}),
            "spec.shards",
        ),
        (
            "v1",
            "many",
            json!({"message": "m", "shards": 50}),
            "spec.shards",
        ),
        (
            "v1",
            "words",
            json!({"message": "m", "shards": "two"}),
            "spec.shards",
        ),
        (
            "v1alpha1",
            "minus-old",
            json!({"text": "m", "replicas": -1}),
            "spec.replicas",
        ),
        (
            "v1alpha1",
            "many-old",
            json!({"text": "m", "replicas": 50}),
            "spec.shards",
        ),
    ];
    for (version, name, spec, field) in cases {
        let status = api_error(create_raw(client, ns.name(), version, name, spec.clone()).await);
        assert!(
            (400..500).contains(&status.code),
            "{version} {spec}: expected a 4xx, got {status:?}"
        );
        assert!(
            status.message.contains(field),
            "{version} {spec}: {status:?}"
        );
        assert!(new.get_opt(name).await?.is_none(), "{name} not stored");
    }
    Ok(())
}
// ANCHOR_END: as_a_user

/// Reviews of another apiVersion or kind get a 400 naming what the
/// endpoint takes, on each webhook of the example.
async fn reviews_of_another_type_are_refused(webhook_at: SocketAddr, ca: &str) -> Result<()> {
    let conversion = json!({
        "apiVersion": "nope/v0", "kind": "ConversionReview",
        "request": {"uid": "u1", "desiredAPIVersion": "demo.concord.dev/v1", "objects": []}
    });
    let (status, body, _) = https(
        webhook_at,
        ca,
        "POST",
        "/convert-demo-concord-dev-widget",
        conversion.to_string().as_bytes(),
    )
    .await?;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("expected apiVersion `apiextensions.k8s.io/v1` and kind `ConversionReview`"),
        "{body}"
    );
    let admission = json!({"apiVersion": "foo.bar/v9", "kind": "Nonsense", "request": {
        "uid": "u2", "kind": {"group": "demo.concord.dev", "version": "v1", "kind": "Widget"},
        "resource": {"group": "demo.concord.dev", "version": "v1", "resource": "widgets"},
        "operation": "CREATE", "userInfo": {},
        "object": {"apiVersion": "demo.concord.dev/v1", "kind": "Widget",
                   "metadata": {"name": "w"}, "spec": {"shards": 1}}}});
    for path in [
        "/validate-demo-concord-dev-v1-widget",
        "/mutate-demo-concord-dev-v1-widget",
    ] {
        let (status, body, _) = https(
            webhook_at,
            ca,
            "POST",
            path,
            admission.to_string().as_bytes(),
        )
        .await?;
        assert_eq!(status, 400, "{path}: {body}");
        assert!(!body.contains("patch"), "{path}: not patched: {body}");
    }
    Ok(())
}

/// Whether creating `crd` (dry run, under a group of its own so that it
/// never meets the installed one) draws a `Warning` header.
async fn crd_warnings(
    client: &kube::Client,
    mut crd: CustomResourceDefinition,
    group: &str,
) -> Result<Vec<String>> {
    crd.spec.group = group.to_owned();
    crd.metadata.name = Some(format!("{}.{group}", crd.spec.names.plural));
    crd.spec.conversion = None;
    let body = serde_json::to_vec(&crd)?;
    let request =
        http::Request::post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions?dryRun=All")
            .header("content-type", "application/json")
            .body(body)?;
    let response = client.send(request.map(kube::client::Body::from)).await?;
    assert!(response.status().is_success(), "{:?}", response.status());
    Ok(response
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect())
}

#[tokio::test]
async fn the_generated_crd_is_created_without_warnings() -> Result<()> {
    let env = TestEnv::shared()?;
    let client = env.client()?;
    let target = WebhookClient::url("https://127.0.0.1:1").with_ca_bundle(b"unused".to_vec());
    let crd = widgets_webhooks::crd(&target)?;
    let warnings = crd_warnings(&client, crd.clone(), "nowarn.concord.dev").await?;
    assert!(warnings.is_empty(), "{warnings:?}");
    // The same check sees the warning an unsigned format draws.
    let mut unsigned = crd;
    let schema = unsigned.spec.versions[0]
        .schema
        .as_mut()
        .and_then(|s| s.open_api_v3_schema.as_mut())
        .and_then(|s| s.properties.as_mut())
        .and_then(|p| p.get_mut("spec"))
        .and_then(|s| s.properties.as_mut())
        .and_then(|p| p.get_mut("shards"))
        .unwrap();
    schema.format = Some("uint32".into());
    let warnings = crd_warnings(&client, unsigned, "warn.concord.dev").await?;
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("unrecognized format") && w.contains("uint32")),
        "{warnings:?}"
    );
    Ok(())
}
