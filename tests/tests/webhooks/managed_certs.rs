//! Webhook certificates the manager makes itself (no cert-manager), on the
//! real API server: the CA the manager writes into its CRD's conversion
//! `caBundle` is what the API server trusts when it converts objects; a
//! serving certificate with a lifetime of seconds is renewed while
//! admission requests keep coming, and none of them fails; replicas
//! starting together share one CA Secret.
//!
//! ```text
//! cargo test -p concord-tests --test webhooks admission::managed_certs::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use concord::webhook::{
    Conversion, ManagedCertificates, Spoke, WebhookClient, WebhookOptions, Webhooks,
};
use concord::{Manager, ManagerArgs};
use concord_testenv::TestEnv;
use concord_tests::http_get as get;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::core::crd::merge_crds;
use kube::{CustomResourceExt, ResourceExt};
use support::gizmo::{self, Gizmo};
use support::{admin, eventually, https, unregister};

/// The old version of the converted resource.
pub(crate) mod v1alpha1 {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// Spec of `v1alpha1`.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[kube(
        group = "certs.test.concord.dev",
        version = "v1alpha1",
        kind = "Sprocket",
        namespaced
    )]
    pub(crate) struct SprocketSpec {
        /// Teeth, as a string.
        pub teeth: String,
    }
}

/// The hub.
pub(crate) mod v1 {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// Spec of `v1`.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[kube(
        group = "certs.test.concord.dev",
        version = "v1",
        kind = "Sprocket",
        namespaced
    )]
    pub(crate) struct SprocketSpec {
        /// Teeth, as a number.
        pub teeth: i64,
    }
}

impl Spoke<v1::Sprocket> for v1alpha1::Sprocket {
    fn into_hub(self) -> v1::Sprocket {
        let spec = v1::SprocketSpec {
            teeth: self.spec.teeth.parse().unwrap_or_default(),
        };
        v1::Sprocket {
            metadata: self.metadata,
            spec,
        }
    }

    fn from_hub(hub: v1::Sprocket) -> Self {
        let spec = v1alpha1::SprocketSpec {
            teeth: hub.spec.teeth.to_string(),
        };
        v1alpha1::Sprocket {
            metadata: hub.metadata,
            spec,
        }
    }
}

/// The CA the manager stored in `secret` of `ns`, as PEM.
async fn stored_ca(ns: &str, secret: &str) -> Result<String> {
    let secret = Api::<Secret>::namespaced(admin()?, ns).get(secret).await?;
    let pem = secret
        .data
        .and_then(|d| d.get("ca.crt").cloned())
        .context("the CA Secret has ca.crt")?;
    Ok(String::from_utf8(pem.0)?)
}

// ANCHOR: options
/// The options every test uses: the certificate also names 127.0.0.1,
/// where the API server reaches the test's webhook server by URL.
fn managed(ns: &str) -> ManagedCertificates {
    ManagedCertificates::new("webhook")
        .with_namespace(ns)
        .with_configuration_name(ns)
        .with_names(["127.0.0.1"])
}
// ANCHOR_END: options

fn args() -> ManagerArgs {
    ManagerArgs::new()
        .with_health_probe_bind_address("127.0.0.1:0")
        .with_webhook_server(
            "127.0.0.1:0",
            "/nonexistent/not-read-with-managed-certificates",
        )
}

/// Waits until `/readyz` lists the webhooks check as passing.
async fn wait_ready(health: std::net::SocketAddr) -> Result<()> {
    eventually(
        Duration::from_secs(60),
        "/readyz to pass its webhooks check",
        || async {
            get(health, "/readyz?verbose")
                .await
                .is_ok_and(|(status, body)| status == 200 && body.contains("[+]webhooks ok"))
        },
    )
    .await
}

#[tokio::test]
async fn the_api_server_converts_through_a_manager_made_certificate() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let webhooks = Webhooks::new()
        .with_conversion(Conversion::<v1::Sprocket>::new().with_spoke::<v1alpha1::Sprocket>());
    // ANCHOR: builder
    let manager = Manager::builder("certs-conversion")
        .with_client(env.client()?)
        .with_args(args())
        .with_signal_handling(false)
        .with_webhooks(webhooks.clone())
        .with_managed_webhook_certificates(managed(ns.name()))
        .build()
        .await?;
    // ANCHOR_END: builder
    let webhook_at = manager.webhook_address().context("webhooks are served")?;
    let health_at = manager.health_address().context("probes are served")?;

    // The CRD as deployed: a conversion webhook and no caBundle; the
    // manager writes its CA there.
    let crd = merge_crds(
        vec![v1alpha1::Sprocket::crd(), v1::Sprocket::crd()],
        "v1alpha1",
    )?;
    let target = WebhookClient::url(format!("https://{webhook_at}"));
    env.install_crd(webhooks.with_crd_conversion(crd, &target)?)
        .await?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    wait_ready(health_at).await?;

    let crds: Api<CustomResourceDefinition> = Api::all(admin()?);
    let crd = crds.get("sprockets.certs.test.concord.dev").await?;
    let bundle = crd
        .spec
        .conversion
        .and_then(|c| c.webhook)
        .and_then(|w| w.client_config)
        .and_then(|c| c.ca_bundle)
        .context("the manager wrote a caBundle")?;
    assert_eq!(
        String::from_utf8(bundle.0)?,
        stored_ca(ns.name(), "webhook-ca").await?,
        "the caBundle is the CA in the manager's Secret"
    );

    let old: Api<v1alpha1::Sprocket> = Api::namespaced(ns.client(), ns.name());
    let new: Api<v1::Sprocket> = Api::namespaced(ns.client(), ns.name());
    old.create(
        &PostParams::default(),
        &v1alpha1::Sprocket::new("a", v1alpha1::SprocketSpec { teeth: "12".into() }),
    )
    .await?;
    // The CRD's new conversion settings reach the API server's handlers
    // asynchronously.
    eventually(
        Duration::from_secs(30),
        "a v1 read converted through the webhook",
        || async { new.get("a").await.is_ok_and(|s| s.spec.teeth == 12) },
    )
    .await?;
    new.create(
        &PostParams::default(),
        &v1::Sprocket::new("b", v1::SprocketSpec { teeth: 40 }),
    )
    .await?;
    assert_eq!(old.get("b").await?.spec.teeth, "40");

    stop.shutdown();
    tokio::time::timeout(Duration::from_secs(30), running).await???;
    Ok(())
}

/// Registers the Gizmo validator and defaulter at `address` under the
/// configuration name `name`, without a caBundle.
async fn register_without_ca(
    webhooks: &Webhooks,
    name: &str,
    address: std::net::SocketAddr,
) -> Result<()> {
    let target = WebhookClient::url(format!("https://{address}")).with_configuration_name(name);
    let client = admin()?;
    if let Some(config) = webhooks.validating_configuration(&target) {
        Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .create(&PostParams::default(), &config)
            .await?;
    }
    if let Some(config) = webhooks.mutating_configuration(&target) {
        Api::<MutatingWebhookConfiguration>::all(client)
            .create(&PostParams::default(), &config)
            .await?;
    }
    Ok(())
}

/// Admission rounds in all, at most.
const MAX_ROUNDS: usize = 600;

/// What the admission loop saw.
#[derive(Debug, Default)]
struct Seen {
    /// Serving certificates new handshakes were given.
    serving: BTreeSet<Vec<u8>>,
    /// CAs the Secret held.
    cas: BTreeSet<String>,
    /// Whether a handshake was verified with a renewed CA alone.
    served_by_new_ca: bool,
    rounds: usize,
    failures: Vec<String>,
}

/// The PEM the API server is meant to trust: the Secret's CA and the one
/// it replaced, if any.
async fn stored_bundle(ns: &str) -> Result<(String, String)> {
    let secret = Api::<Secret>::namespaced(admin()?, ns)
        .get("webhook-ca")
        .await?;
    let data = secret.data.unwrap_or_default();
    let text = |key: &str| {
        data.get(key)
            .map(|v| String::from_utf8_lossy(&v.0).into_owned())
            .unwrap_or_default()
    };
    let ca = text("ca.crt");
    Ok((ca.clone(), format!("{ca}\n{}", text("previous-ca.crt"))))
}

/// Creates valid and invalid Gizmos in rounds until `done` holds (or
/// `MAX_ROUNDS`), recording every admission that did not go as the
/// webhooks decide and the certificates in service.
async fn admit_until(
    api: &Api<Gizmo>,
    ns: &str,
    webhook_at: std::net::SocketAddr,
    done: impl Fn(&Seen) -> bool,
) -> Result<Seen> {
    let mut seen = Seen::default();
    let first_ca = stored_bundle(ns).await?.0;
    while !done(&seen) && seen.rounds < MAX_ROUNDS {
        seen.rounds += 1;
        let round = seen.rounds;
        // Admitted and defaulted…
        match api
            .create(
                &PostParams::default(),
                &gizmo::gizmo(&format!("g-{round}"), 10),
            )
            .await
        {
            Ok(created) if created.spec.color.as_deref() == Some("blue") => {}
            other => seen.failures.push(format!("create {round}: {other:?}")),
        }
        // …or denied by the validator itself, never by the API server
        // failing to reach it.
        match api
            .create(
                &PostParams::default(),
                &gizmo::gizmo(&format!("bad-{round}"), -1),
            )
            .await
        {
            Err(kube::Error::Api(s))
                if s.message.contains("spec.size must be between 0 and 100") => {}
            other => seen
                .failures
                .push(format!("invalid create {round}: {other:?}")),
        }
        // What a new handshake is given now, verified with the stored
        // bundle.
        let (ca, bundle) = stored_bundle(ns).await?;
        let (status, _, peer) = https(webhook_at, &bundle, "GET", "/healthz", b"").await?;
        ensure!(status == 200, "the webhook server answers /healthz");
        seen.serving.insert(peer);
        if ca != first_ca && !seen.served_by_new_ca {
            seen.served_by_new_ca = https(webhook_at, &ca, "GET", "/healthz", b"")
                .await
                .is_ok_and(|(status, _, _)| status == 200);
        }
        seen.cas.insert(ca);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(seen)
}

/// A manager serving the Gizmo webhooks with `options`, registered
/// without a caBundle, running, ready; and the Gizmo API of its namespace.
async fn serve_gizmos(
    name: &str,
    ns: &concord_testenv::TestNamespace,
    lifetimes: (Duration, Duration),
) -> Result<(
    Api<Gizmo>,
    std::net::SocketAddr,
    concord::manager::ShutdownHandle,
    tokio::task::JoinHandle<Result<(), concord::Error>>,
)> {
    let env = TestEnv::shared()?;
    env.install_crd(Gizmo::crd()).await?;
    let webhooks = gizmo::webhooks(ns.name(), WebhookOptions::default());
    let manager = Manager::builder(name)
        .with_client(env.client()?)
        .with_args(args())
        .with_signal_handling(false)
        .with_webhooks(webhooks.clone())
        .with_managed_webhook_certificates(
            managed(ns.name()).with_lifetimes(lifetimes.0, lifetimes.1),
        )
        .build()
        .await?;
    let webhook_at = manager.webhook_address().context("webhooks are served")?;
    let health_at = manager.health_address().context("probes are served")?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    // Serving, but nothing trusts its CA yet: not ready.
    eventually(
        Duration::from_secs(30),
        "/readyz to name the untrusted certificate",
        || async {
            get(health_at, "/readyz?verbose")
                .await
                .is_ok_and(|(status, body)| {
                    status == 503
                        && body
                            .contains("[-]webhooks not serving a certificate the API server trusts")
                })
        },
    )
    .await?;
    register_without_ca(&webhooks, ns.name(), webhook_at).await?;
    wait_ready(health_at).await?;
    let api: Api<Gizmo> = Api::namespaced(ns.client(), ns.name());
    // The API server picks the configurations' caBundle up asynchronously.
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    eventually(
        Duration::from_secs(30),
        "the validator to be called",
        || async {
            matches!(api.create(&dry, &gizmo::gizmo("probe", -1)).await,
            Err(kube::Error::Api(s)) if s.message.contains("spec.size must be"))
        },
    )
    .await?;
    Ok((api, webhook_at, stop, running))
}

#[tokio::test]
async fn the_serving_certificate_is_renewed_with_no_failed_admission() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    // A serving lifetime of seconds: renewed every few.
    let lifetimes = (Duration::from_secs(300), Duration::from_secs(6));
    let (api, webhook_at, stop, running) = serve_gizmos("certs-rotation", &ns, lifetimes).await?;
    // The first certificate and two renewals.
    let seen = admit_until(&api, ns.name(), webhook_at, |s| s.serving.len() >= 3).await?;
    assert!(
        seen.failures.is_empty(),
        "{} failed admissions: {:#?}",
        seen.failures.len(),
        seen.failures
    );
    assert!(seen.serving.len() >= 3, "{seen:?}");
    assert_eq!(seen.cas.len(), 1, "the CA outlives the loop");
    stop.shutdown();
    tokio::time::timeout(Duration::from_secs(30), running).await???;
    unregister(&admin()?, ns.name()).await;
    Ok(())
}

#[tokio::test]
async fn the_ca_is_renewed_with_overlap_and_no_failed_admission() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    // The shortest CA lifetime allowed: three serving lifetimes.
    let lifetimes = (Duration::from_secs(18), Duration::from_secs(6));
    let (api, webhook_at, stop, running) =
        serve_gizmos("certs-ca-rotation", &ns, lifetimes).await?;
    // A new CA, and a serving certificate it signed in service.
    let seen = admit_until(&api, ns.name(), webhook_at, |s| {
        s.cas.len() >= 2 && s.served_by_new_ca
    })
    .await?;
    assert!(
        seen.failures.is_empty(),
        "{} failed admissions: {:#?}",
        seen.failures.len(),
        seen.failures
    );
    assert!(seen.cas.len() >= 2 && seen.served_by_new_ca, "{seen:?}");
    stop.shutdown();
    tokio::time::timeout(Duration::from_secs(30), running).await???;
    unregister(&admin()?, ns.name()).await;
    Ok(())
}

#[tokio::test]
async fn replicas_starting_together_share_one_ca() -> Result<()> {
    let env = TestEnv::shared()?;
    env.install_crd(Gizmo::crd()).await?;
    let ns = env.namespace().await?;
    let webhooks = gizmo::webhooks(ns.name(), WebhookOptions::default());
    let replica = || {
        Manager::builder("certs-replicas")
            .with_client(env.client().unwrap())
            .with_args(args())
            .with_signal_handling(false)
            .with_webhooks(webhooks.clone())
            .with_managed_webhook_certificates(managed(ns.name()))
            .build()
    };
    // Both find no Secret and create one; one create wins, the other
    // replica reads the winner's.
    let (first, second) = tokio::join!(replica(), replica());
    let (first, second) = (first?, second?);
    let ca = stored_ca(ns.name(), "webhook-ca").await?;
    let addresses = [
        first.webhook_address().context("served")?,
        second.webhook_address().context("served")?,
    ];
    register_without_ca(&webhooks, ns.name(), addresses[0]).await?;
    let (stops, runs): (Vec<_>, Vec<_>) = [first, second]
        .into_iter()
        .map(|m| (m.shutdown_handle(), tokio::spawn(m.run())))
        .unzip();
    let mut peers = BTreeSet::new();
    for address in addresses {
        // Verified with the one stored CA: both replicas sign with it.
        let (status, _, peer) = https(address, &ca, "GET", "/healthz", b"").await?;
        assert_eq!(status, 200);
        peers.insert(peer);
    }
    assert_eq!(
        peers.len(),
        2,
        "each replica signs its own serving certificate"
    );
    // A later replica (a restart) reuses the Secret as it is.
    let before = Api::<Secret>::namespaced(admin()?, ns.name())
        .get("webhook-ca")
        .await?;
    let third = replica().await?;
    let after = Api::<Secret>::namespaced(admin()?, ns.name())
        .get("webhook-ca")
        .await?;
    assert_eq!(before.resource_version(), after.resource_version());
    assert_eq!(stored_ca(ns.name(), "webhook-ca").await?, ca);
    drop(third);
    for stop in &stops {
        stop.shutdown();
    }
    for run in runs {
        tokio::time::timeout(Duration::from_secs(30), run).await???;
    }
    unregister(&admin()?, ns.name()).await;
    Ok(())
}

#[tokio::test]
async fn the_generated_rules_are_all_a_manager_needs_for_its_certificates() -> Result<()> {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleRef, Subject};
    let env = TestEnv::shared()?;
    env.install_crd(Gizmo::crd()).await?;
    let ns = env.namespace().await?;
    let config = args().load_config(concord::featuregates::FeatureRegistry::new())?;
    let (namespaced, cluster) = concord::rbac::Permissions::new(config.strategies())
        .managed_webhook_certificates()
        .cluster_scoped();
    // The Secret rules through a Role of the namespace, the rest through a
    // ClusterRole bound to the same ServiceAccount.
    let client = env.restricted_client(ns.name(), namespaced).await?;
    let accounts = Api::<ServiceAccount>::namespaced(admin()?, ns.name())
        .list(&Default::default())
        .await?;
    let account = accounts
        .items
        .iter()
        .map(|a| a.name_any())
        .find(|n| n.starts_with("restricted-"))
        .context("the restricted ServiceAccount")?;
    let role = ClusterRole {
        metadata: kube::api::ObjectMeta {
            name: Some(ns.name().to_owned()),
            ..Default::default()
        },
        rules: Some(cluster),
        ..Default::default()
    };
    Api::<ClusterRole>::all(admin()?)
        .create(&PostParams::default(), &role)
        .await?;
    let binding = ClusterRoleBinding {
        metadata: role.metadata.clone(),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: ns.name().to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account,
            namespace: Some(ns.name().to_owned()),
            ..Default::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(admin()?)
        .create(&PostParams::default(), &binding)
        .await?;

    let webhooks = gizmo::webhooks(ns.name(), WebhookOptions::default());
    let manager = Manager::builder("certs-least-privilege")
        .with_client(client)
        .with_args(args())
        .with_signal_handling(false)
        .with_webhooks(webhooks.clone())
        .with_managed_webhook_certificates(managed(ns.name()))
        .build()
        .await?;
    let webhook_at = manager.webhook_address().context("webhooks are served")?;
    let health_at = manager.health_address().context("probes are served")?;
    register_without_ca(&webhooks, ns.name(), webhook_at).await?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    wait_ready(health_at).await?;
    let api: Api<Gizmo> = Api::namespaced(ns.client(), ns.name());
    let created = api
        .create(&PostParams::default(), &gizmo::gizmo("defaulted", 1))
        .await?;
    assert_eq!(created.spec.color.as_deref(), Some("blue"));
    stop.shutdown();
    tokio::time::timeout(Duration::from_secs(30), running).await???;
    unregister(&admin()?, ns.name()).await;
    Ok(())
}
