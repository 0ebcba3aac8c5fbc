//! Admission webhooks called by the real kube-apiserver: validation with
//! warnings, defaulting, malformed requests, slow validators, failure
//! policies, and a denial seen through every write strategy.
//!
//! ```text
//! cargo test -p concord-tests --test webhooks admission::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use anyhow::Result;
use concord::webhook::{FailurePolicy, Validator, Verdict, WebhookOptions, Webhooks};
use concord::{Intent, Manager, ManagerArgs, Mutation, WriteError};
use concord_testenv::TestEnv;
use kube::api::{Api, PostParams};
use kube::{CustomResourceExt, ResourceExt};
use serde_json::json;
use support::gizmo::*;
use support::{admin, certs, https, only_namespace, register, unregister};

// ANCHOR: denied
#[tokio::test]
async fn invalid_object_is_denied_with_the_validators_message() -> Result<()> {
    let served = Served::start(WebhookOptions::new()).await?;
    let status = api_error(
        served
            .api
            .create(&PostParams::default(), &gizmo("big", 500))
            .await,
    );
    assert_eq!(status.code, 403, "{status:?}");
    assert!(
        status
            .message
            .contains("spec.size must be between 0 and 100, got 500"),
        "{}",
        status.message
    );
    assert!(served.api.get_opt("big").await?.is_none(), "nothing stored");
    assert!(
        served
            .metrics
            .requests("validate.gizmos.webhooks.test.concord.dev", "denied")
            >= 1
    );
    served.done().await;
    Ok(())
}
// ANCHOR_END: denied

#[tokio::test]
async fn warnings_reach_the_api_client() -> Result<()> {
    let served = Served::start(WebhookOptions::new()).await?;
    let body = serde_json::to_vec(&gizmo("large", 60))?;
    let request = kube::core::Request::new(format!(
        "/apis/webhooks.test.concord.dev/v1/namespaces/{}/gizmos",
        served.ns.name()
    ))
    .create(&PostParams::default(), body)?;
    let response = served
        .ns
        .client()
        .send(request.map(kube::client::Body::from))
        .await?;
    assert!(response.status().is_success(), "{:?}", response.status());
    let warnings: Vec<String> = response
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("spec.size above 50 makes a slow gizmo")),
        "{warnings:?}"
    );
    served.done().await;
    Ok(())
}

#[tokio::test]
async fn defaults_appear_on_the_stored_object() -> Result<()> {
    let served = Served::start(WebhookOptions::new()).await?;
    served
        .api
        .create(&PostParams::default(), &gizmo("plain", 3))
        .await?;
    let stored = served.api.get("plain").await?;
    assert_eq!(stored.spec.color.as_deref(), Some("blue"));
    assert_eq!(stored.spec.size, 3, "the rest is untouched");
    // A value the user gave is kept.
    let mut red = gizmo("red", 3);
    red.spec.color = Some("red".into());
    served.api.create(&PostParams::default(), &red).await?;
    assert_eq!(
        served.api.get("red").await?.spec.color.as_deref(),
        Some("red")
    );
    served.done().await;
    Ok(())
}

#[tokio::test]
async fn an_immutable_field_cannot_change() -> Result<()> {
    let served = Served::start(WebhookOptions::new()).await?;
    served
        .api
        .create(&PostParams::default(), &gizmo("owned", 3))
        .await?;
    let mut changed = served.api.get("owned").await?;
    changed.spec.owner = "mallory".into();
    let status = api_error(
        served
            .api
            .replace("owned", &PostParams::default(), &changed)
            .await,
    );
    assert!(
        status
            .message
            .contains("spec.owner is immutable (was `alice`)"),
        "{status:?}"
    );
    // Other changes still go through.
    let mut resized = served.api.get("owned").await?;
    resized.spec.size = 4;
    served
        .api
        .replace("owned", &PostParams::default(), &resized)
        .await?;
    assert_eq!(served.api.get("owned").await?.spec.owner, "alice");
    served.done().await;
    Ok(())
}

#[tokio::test]
async fn malformed_requests_get_a_clear_400_and_the_server_keeps_serving() -> Result<()> {
    let served = Served::start(WebhookOptions::new()).await?;
    let path = "/validate-webhooks-test-concord-dev-v1-gizmo";
    let ca = served.ca.pem().to_owned();

    let (status, body, _) = https(served.address, &ca, "POST", path, b"{not json").await?;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("malformed AdmissionReview"), "{body}");

    let (status, body, _) = https(
        served.address,
        &ca,
        "POST",
        path,
        b"{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1\"}",
    )
    .await?;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("without a request"), "{body}");

    // A well-formed review of another kind: denied inside the review.
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE", "userInfo": {},
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}},
        }
    });
    let (status, body, _) = https(
        served.address,
        &ca,
        "POST",
        path,
        review.to_string().as_bytes(),
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body)?;
    assert_eq!(answer["response"]["uid"], "u1");
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(answer["response"]["status"]["code"], 400);
    let message = answer["response"]["status"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("serves webhooks.test.concord.dev/v1 Gizmo, not v1 Pod"),
        "{message}"
    );

    // The right kind, a spec that is not a Gizmo.
    let mut wrong = review.clone();
    wrong["request"]["kind"] =
        json!({"group": "webhooks.test.concord.dev", "version": "v1", "kind": "Gizmo"});
    wrong["request"]["object"] = json!({"apiVersion": "webhooks.test.concord.dev/v1", "kind": "Gizmo", "metadata": {"name": "g"}, "spec": {"size": "large"}});
    let (status, body, _) = https(
        served.address,
        &ca,
        "POST",
        path,
        wrong.to_string().as_bytes(),
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("not a valid Gizmo"), "{body}");

    let (status, body, _) = https(served.address, &ca, "POST", "/validate-nothing", b"{}").await?;
    assert_eq!(status, 404, "{body}");

    // Still serving the API server.
    let status = api_error(
        served
            .api
            .create(&PostParams::default(), &gizmo("after", -5))
            .await,
    );
    assert!(status.message.contains("got -5"), "{status:?}");
    assert!(
        served
            .metrics
            .requests("validate.gizmos.webhooks.test.concord.dev", "invalid")
            >= 3
    );
    served.done().await;
    Ok(())
}

#[tokio::test]
async fn a_review_of_another_api_version_or_kind_is_refused() -> Result<()> {
    let served = Served::start(WebhookOptions::new()).await?;
    let ca = served.ca.pem().to_owned();
    let review = |api_version: &str, kind: &str| {
        json!({
            "apiVersion": api_version, "kind": kind,
            "request": {
                "uid": "u1",
                "kind": {"group": "webhooks.test.concord.dev", "version": "v1", "kind": "Gizmo"},
                "resource": {"group": "webhooks.test.concord.dev", "version": "v1", "resource": "gizmos"},
                "operation": "CREATE", "userInfo": {},
                "object": {"apiVersion": "webhooks.test.concord.dev/v1", "kind": "Gizmo",
                           "metadata": {"name": "g"}, "spec": {"size": 1, "owner": "a"}},
            }
        })
        .to_string()
    };
    for path in [
        "/validate-webhooks-test-concord-dev-v1-gizmo",
        "/mutate-webhooks-test-concord-dev-v1-gizmo",
    ] {
        for (api_version, kind) in [
            ("foo.bar/v9", "Nonsense"),
            ("admission.k8s.io/v1beta1", "AdmissionReview"),
            ("admission.k8s.io/v1", "Nonsense"),
        ] {
            let body = review(api_version, kind);
            let (status, body, _) =
                https(served.address, &ca, "POST", path, body.as_bytes()).await?;
            assert_eq!(status, 400, "{path} {api_version} {kind}: {body}");
            assert!(
                body.contains(
                    "expected apiVersion `admission.k8s.io/v1` and kind `AdmissionReview`"
                ),
                "{body}"
            );
            assert!(!body.contains("\"allowed\""), "no review answer: {body}");
        }
        // The same review with the right envelope is answered.
        let body = review("admission.k8s.io/v1", "AdmissionReview");
        let (status, body, _) = https(served.address, &ca, "POST", path, body.as_bytes()).await?;
        assert_eq!(status, 200, "{path}: {body}");
        assert!(body.contains("\"allowed\":true"), "{body}");
    }
    served.done().await;
    Ok(())
}

#[tokio::test]
async fn a_slow_validator_is_cut_off_before_the_api_server_gives_up() -> Result<()> {
    let options = WebhookOptions::new().with_timeout(Duration::from_secs(2));
    let served = Served::start(options).await?;
    let mut slow = gizmo("slow", 1);
    slow.spec.color = Some("slow".into());
    let status = api_error(served.api.create(&PostParams::default(), &slow).await);
    // The webhook's own answer, not the API server's "context deadline
    // exceeded" under failurePolicy.
    assert!(
        status
            .message
            .contains("the validator did not answer within 1800 ms"),
        "{status:?}"
    );
    assert_eq!(
        served
            .metrics
            .requests("validate.gizmos.webhooks.test.concord.dev", "timed_out"),
        1
    );
    served.done().await;
    Ok(())
}

// ANCHOR: failure_policy
#[tokio::test]
async fn when_the_webhook_is_down_fail_blocks_writes() -> Result<()> {
    let mut served =
        Served::start(WebhookOptions::new().with_failure_policy(FailurePolicy::Fail)).await?;
    served.stop().await;
    let status = api_error(
        served
            .api
            .create(&PostParams::default(), &gizmo("valid", 1))
            .await,
    );
    assert_eq!(status.code, 500, "{status:?}");
    assert!(
        status.message.contains("failed calling webhook"),
        "{status:?}"
    );
    assert!(served.api.get_opt("valid").await?.is_none());
    served.done().await;
    Ok(())
}

#[tokio::test]
async fn when_the_webhook_is_down_ignore_admits_writes() -> Result<()> {
    let mut served =
        Served::start(WebhookOptions::new().with_failure_policy(FailurePolicy::Ignore)).await?;
    served.stop().await;
    // Invalid, and the webhook that would deny it is registered: admitted
    // unchecked (and undefaulted) because the policy says Ignore.
    served
        .api
        .create(&PostParams::default(), &gizmo("unchecked", 500))
        .await?;
    let stored = served.api.get("unchecked").await?;
    assert_eq!(stored.spec.size, 500);
    assert_eq!(stored.spec.color, None);
    served.done().await;
    Ok(())
}
// ANCHOR_END: failure_policy

fn config_file(strategy: &str) -> Result<tempfile::NamedTempFile> {
    let file = tempfile::NamedTempFile::new()?;
    // Server-side apply cannot serve arbitrary closures, so it is chosen
    // for metadata writes (the label below) only.
    let yaml = if strategy == "apply" {
        "strategies:\n  resources:\n    gizmos.webhooks.test.concord.dev:\n      operations:\n        metadata: apply\n".to_owned()
    } else {
        format!("strategies:\n  default: {strategy}\n")
    };
    std::fs::write(file.path(), yaml)?;
    Ok(file)
}

/// Denies any Gizmo labelled `frozen`.
struct NoFrozen;

#[concord::async_trait]
impl Validator<Gizmo> for NoFrozen {
    async fn validate_update(&self, _old: &Gizmo, new: &Gizmo) -> Verdict {
        if new.labels().contains_key("frozen") {
            return Verdict::deny("gizmos cannot be frozen");
        }
        Verdict::allow()
    }
}

// ANCHOR: rejected
#[tokio::test]
async fn a_denied_write_is_a_permanent_rejection_under_every_strategy() -> Result<()> {
    let env = TestEnv::shared()?;
    env.install_crd(Gizmo::crd()).await?;
    for strategy in ["lax", "strict", "update", "locked", "apply", "guarded"] {
        let ns = env.namespace().await?;
        let (ca, dir) = certs()?;
        let webhooks = Webhooks::new().with_validator::<Gizmo, _>(
            NoFrozen,
            WebhookOptions::new().with_namespace_selector(only_namespace(ns.name())),
        );
        let config = config_file(strategy)?;
        let manager = Manager::builder("webhook-test")
            .with_client(env.client()?)
            .with_args(
                ManagerArgs::new()
                    .with_config(config.path())
                    .with_webhook_server("127.0.0.1:0", dir.path()),
            )
            .with_signal_handling(false)
            .with_webhooks(webhooks.clone())
            .build()
            .await?;
        let address = manager.webhook_address().unwrap();
        let metrics = manager.webhook_metrics().unwrap();
        let ctx = manager.context::<Gizmo>();
        let shutdown = manager.shutdown_handle();
        let running = tokio::spawn(manager.run());
        register(&admin()?, &webhooks, ns.name(), address, &ca).await?;

        let api: Api<Gizmo> = Api::namespaced(ns.client(), ns.name());
        let created = api.create(&PostParams::default(), &gizmo("g", 1)).await?;
        let freeze = || {
            Mutation::new().with(Intent::SetLabel {
                key: "frozen".into(),
                value: "yes".into(),
            })
        };
        // Until the API server has loaded the configuration a write may pass.
        let mut observed = created;
        let mut result = ctx.write(&observed, freeze()).await;
        for _ in 0..100 {
            if result.is_err() {
                break;
            }
            let mut thawed = api.get("g").await?;
            thawed.labels_mut().remove("frozen");
            observed = api.replace("g", &PostParams::default(), &thawed).await?;
            tokio::time::sleep(Duration::from_millis(100)).await;
            result = ctx.write(&observed, freeze()).await;
        }
        let denied_before = metrics.requests("validate.gizmos.webhooks.test.concord.dev", "denied");
        match result {
            Err(WriteError::Rejected { source, .. }) => {
                let kube::Error::Api(status) = *source else {
                    panic!("{strategy}: not an API answer: {source:?}")
                };
                assert_eq!(status.code, 403, "{strategy}: {status:?}");
                assert!(
                    status.message.contains("gizmos cannot be frozen"),
                    "{strategy}: {status:?}"
                );
            }
            other => panic!("{strategy}: expected Rejected, got {other:?}"),
        }
        // Never retried: one more write costs exactly one more denial.
        let again = ctx.write(&observed, freeze()).await;
        assert!(
            matches!(again, Err(WriteError::Rejected { .. })),
            "{strategy}: {again:?}"
        );
        assert_eq!(
            metrics.requests("validate.gizmos.webhooks.test.concord.dev", "denied"),
            denied_before + 1,
            "{strategy}: the denied write was retried"
        );
        assert!(!api.get("g").await?.labels().contains_key("frozen"));

        shutdown.shutdown();
        running.await??;
        unregister(&admin()?, ns.name()).await;
    }
    Ok(())
}
// ANCHOR_END: rejected
