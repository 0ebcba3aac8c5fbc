//! The Gizmo resource the webhook tests admit, its validator and defaulter,
//! and a namespace whose Gizmos go through a webhook server of its own.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use concord::webhook::{
    Defaulter, Validator, Verdict, WebhookMetrics, WebhookOptions, WebhookServer, Webhooks,
};
use concord_testenv::{TestCa, TestEnv, TestNamespace};
use kube::CustomResource;
use kube::CustomResourceExt;
use kube::api::{Api, PostParams};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use super::{admin, certs, eventually, only_namespace, register, unregister};

// ANCHOR: types
/// The resource under test.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "webhooks.test.concord.dev",
    version = "v1",
    kind = "Gizmo",
    namespaced
)]
pub struct GizmoSpec {
    /// 0 to 100.
    pub size: i32,
    /// Defaulted to `blue`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
    /// Immutable once set.
    #[serde(default)]
    pub owner: String,
}

/// Bounds, an immutable field, a warning.
pub struct GizmoValidator;

#[concord::async_trait]
impl Validator<Gizmo> for GizmoValidator {
    async fn validate_create(&self, gizmo: &Gizmo) -> Verdict {
        check(gizmo).await
    }

    async fn validate_update(&self, old: &Gizmo, new: &Gizmo) -> Verdict {
        if old.spec.owner != new.spec.owner {
            return Verdict::deny(format!(
                "spec.owner is immutable (was `{}`)",
                old.spec.owner
            ));
        }
        check(new).await
    }
}

pub async fn check(gizmo: &Gizmo) -> Verdict {
    if gizmo.spec.color.as_deref() == Some("slow") {
        // A validator stuck on something: the server must cut it off.
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
    let size = gizmo.spec.size;
    if !(0..=100).contains(&size) {
        return Verdict::deny(format!("spec.size must be between 0 and 100, got {size}"));
    }
    if size > 50 {
        return Verdict::allow().with_warning("spec.size above 50 makes a slow gizmo");
    }
    Verdict::allow()
}

/// Fills `spec.color`.
pub struct GizmoDefaulter;

impl Defaulter<Gizmo> for GizmoDefaulter {
    fn default(&self, gizmo: &mut Gizmo) {
        gizmo.spec.color.get_or_insert_with(|| "blue".to_owned());
    }
}
// ANCHOR_END: types

pub fn gizmo(name: &str, size: i32) -> Gizmo {
    Gizmo::new(
        name,
        GizmoSpec {
            size,
            color: None,
            owner: "alice".into(),
        },
    )
}

pub fn webhooks(ns: &str, options: WebhookOptions) -> Webhooks {
    let options = options.with_namespace_selector(only_namespace(ns));
    Webhooks::new()
        .with_validator::<Gizmo, _>(GizmoValidator, options.clone())
        .with_defaulter::<Gizmo, _>(GizmoDefaulter, options)
}

/// A namespace whose Gizmos go through a webhook server of its own.
pub struct Served {
    pub ns: TestNamespace,
    pub api: Api<Gizmo>,
    pub ca: TestCa,
    _dir: tempfile::TempDir,
    pub address: SocketAddr,
    pub metrics: Arc<WebhookMetrics>,
    stop: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl Served {
    pub async fn start(options: WebhookOptions) -> Result<Self> {
        let env = TestEnv::shared()?;
        env.install_crd(Gizmo::crd()).await?;
        let ns = env.namespace().await?;
        let (ca, dir) = certs()?;
        let webhooks = webhooks(ns.name(), options);
        let server =
            WebhookServer::bind("127.0.0.1:0".parse()?, dir.path(), webhooks.clone()).await?;
        let address = server.local_addr().unwrap();
        let metrics = server.metrics();
        let (stop, stopped) = oneshot::channel();
        let server = tokio::spawn(server.serve(async move {
            let _ = stopped.await;
        }));
        register(&admin()?, &webhooks, ns.name(), address, &ca).await?;
        let api: Api<Gizmo> = Api::namespaced(ns.client(), ns.name());
        let served = Served {
            ns,
            api,
            ca,
            _dir: dir,
            address,
            metrics,
            stop: Some(stop),
            server: Some(server),
        };
        served.wait_until_called().await?;
        Ok(served)
    }

    /// The API server picks webhook configurations up asynchronously: wait
    /// until a dry-run create of an invalid Gizmo is denied by the webhook.
    pub async fn wait_until_called(&self) -> Result<()> {
        let dry = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        eventually(
            Duration::from_secs(30),
            "the webhook to be called",
            || async {
                matches!(self.api.create(&dry, &gizmo("probe", -1)).await,
                Err(kube::Error::Api(s)) if s.message.contains("spec.size must be"))
            },
        )
        .await
    }

    pub async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }

    pub async fn done(mut self) {
        self.stop().await;
        unregister(&admin().unwrap(), self.ns.name()).await;
    }
}

pub fn api_error(result: kube::Result<Gizmo>) -> kube::core::Status {
    match result {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}
