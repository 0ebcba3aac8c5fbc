//! Secure metrics on the real API server: the metrics endpoint serves TLS,
//! and a scrape is answered only for a token the API server accepts
//! (TokenReview) whose user may `get` `/metrics` (SubjectAccessReview).
//! The operator itself runs as a ServiceAccount holding exactly the RBAC
//! concord generates for this.
//!
//! ```text
//! cargo test -p concord-tests --test observability metrics::secure::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::webhooks_support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use concord::featuregates::FeatureRegistry;
use concord::{Manager, ManagerArgs, rbac::Permissions};
use concord_testenv::TestEnv;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How a scrape trusts the endpoint's certificate.
enum Trust<'a> {
    /// Signed by this CA (PEM), for 127.0.0.1.
    Ca(&'a str),
    /// Anything: the endpoint's certificate is self-signed.
    Any,
}

/// A GET of `/metrics` over HTTPS with an optional bearer token: the
/// status code and the body.
async fn scrape(
    address: SocketAddr,
    trust: Trust<'_>,
    token: Option<&str>,
) -> Result<(u16, String)> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let config = match trust {
        Trust::Ca(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                roots.add(cert?)?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        Trust::Any => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
            .with_no_client_auth(),
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(address).await?;
    let mut tls = connector
        .connect(ServerName::try_from("127.0.0.1")?, tcp)
        .await
        .context("TLS handshake with the metrics endpoint")?;
    let authorization = token
        .map(|t| format!("authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "GET /metrics HTTP/1.1\r\nhost: 127.0.0.1\r\n{authorization}connection: close\r\n\r\n"
    );
    tls.write_all(head.as_bytes()).await?;
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), tls.read_to_end(&mut raw))
        .await
        .context("the metrics endpoint did not answer within 30 s")?;
    concord_tests::http_answer(raw)
}

/// Trusts any certificate (the signatures are still checked).
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// ServiceAccounts and cluster-wide RBAC made for one test, deleted at
/// the end (the cluster-scoped objects outlive the namespace otherwise).
struct Identities {
    admin: Client,
    namespace: String,
    cluster_objects: Vec<String>,
}

impl Identities {
    fn new(admin: Client, namespace: &str) -> Self {
        Identities {
            admin,
            namespace: namespace.to_owned(),
            cluster_objects: Vec::new(),
        }
    }

    /// A ServiceAccount `name` bound to a ClusterRole of `role` (when
    /// given), and a token for it from the TokenRequest API.
    async fn account(&mut self, name: &str, role: Option<ClusterRole>) -> Result<String> {
        let pp = PostParams::default();
        let accounts: Api<ServiceAccount> = Api::namespaced(self.admin.clone(), &self.namespace);
        let account = ServiceAccount {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            ..ServiceAccount::default()
        };
        accounts.create(&pp, &account).await?;
        if let Some(mut role) = role {
            let role_name = format!("{}-{name}", self.namespace);
            role.metadata.name = Some(role_name.clone());
            Api::<ClusterRole>::all(self.admin.clone())
                .create(&pp, &role)
                .await?;
            let binding = ClusterRoleBinding {
                metadata: ObjectMeta {
                    name: Some(role_name.clone()),
                    ..ObjectMeta::default()
                },
                role_ref: RoleRef {
                    api_group: Some("rbac.authorization.k8s.io".into()),
                    kind: "ClusterRole".into(),
                    name: role_name.clone(),
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".into(),
                    name: name.to_owned(),
                    namespace: Some(self.namespace.clone()),
                    ..Subject::default()
                }]),
            };
            Api::<ClusterRoleBinding>::all(self.admin.clone())
                .create(&pp, &binding)
                .await?;
            self.cluster_objects.push(role_name);
        }
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                expiration_seconds: Some(3600),
                ..TokenRequestSpec::default()
            }),
            ..TokenRequest::default()
        };
        accounts
            .create_token_request(name, &pp, &request)
            .await?
            .status
            .and_then(|s| s.token)
            .context("the TokenRequest API answered without a token")
    }

    async fn delete(self) {
        let dp = DeleteParams::default();
        for name in &self.cluster_objects {
            let _ = Api::<ClusterRoleBinding>::all(self.admin.clone())
                .delete(name, &dp)
                .await;
            let _ = Api::<ClusterRole>::all(self.admin.clone())
                .delete(name, &dp)
                .await;
        }
    }
}

fn cluster_role(rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        rules: Some(rules),
        ..ClusterRole::default()
    }
}

/// The operator's ClusterRole: it watches ConfigMaps and, when `secure`,
/// holds what secure metrics need, both as concord generates them.
fn operator_role(secure: bool) -> Result<ClusterRole> {
    let config = ManagerArgs::new().load_config(FeatureRegistry::new())?;
    let permissions = Permissions::new(config.strategies()).watches::<ConfigMap>();
    let permissions = if secure {
        permissions.secure_metrics()
    } else {
        permissions
    };
    Ok(cluster_role(permissions.rules()))
}

/// A manager running as `token`, serving secure metrics with the
/// certificate in `cert_dir` (self-signed when `None`).
async fn manager(
    env: &TestEnv,
    namespace: &str,
    token: String,
    cert_dir: Option<std::path::PathBuf>,
) -> Result<Manager> {
    let mut config = env.config().clone();
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.into()),
        ..Default::default()
    };
    // ANCHOR: args
    let args = ManagerArgs::new()
        .with_metrics_bind_address("127.0.0.1:0")
        .with_metrics_secure(cert_dir);
    // ANCHOR_END: args
    let mut manager = Manager::builder("secure-metrics-test")
        .with_kube_config(config)
        .with_args(args)
        .with_signal_handling(false)
        .build()
        .await?;
    let maps: Api<ConfigMap> = Api::namespaced(manager.client().clone(), namespace);
    manager
        .controller("configmaps", maps, concord_tests::Idle)
        .add()?;
    Ok(manager)
}

#[tokio::test]
async fn only_a_token_allowed_to_get_metrics_is_served() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let mut ids = Identities::new(env.client()?, ns.name());
    let result = async {
        let operator = ids.account("operator", Some(operator_role(true)?)).await?;
        // ANCHOR: identities
        // The scraper is bound to the ClusterRole concord generates for
        // metrics readers; the stranger holds nothing.
        let reader = concord::rbac::metrics_reader("unused");
        let allowed = ids.account("scraper", Some(reader)).await?;
        let denied = ids.account("stranger", None).await?;
        let (ca, certs) = webhooks_support::certs()?;
        let manager = manager(env, ns.name(), operator, Some(certs.path().to_owned())).await?;
        // ANCHOR_END: identities
        let at = manager.metrics_address().context("metrics are served")?;
        let stop = manager.shutdown_handle();
        let running = tokio::spawn(manager.run());

        // ANCHOR: scrapes
        let (status, body) = scrape(at, Trust::Ca(ca.pem()), Some(&allowed)).await?;
        assert_eq!(status, 200, "{body}");
        assert!(
            body.contains("concord_reconcile_total"),
            "an allowed scrape gets the series: {body}"
        );
        let (status, body) = scrape(at, Trust::Ca(ca.pem()), Some(&denied)).await?;
        assert_eq!(status, 403, "{body}");
        assert!(!body.contains("concord_"), "{body}");
        let (status, body) = scrape(at, Trust::Ca(ca.pem()), None).await?;
        assert_eq!(status, 401, "{body}");
        assert!(!body.contains("concord_"), "{body}");
        let (status, body) = scrape(at, Trust::Ca(ca.pem()), Some("not-a-token")).await?;
        assert_eq!(status, 401, "{body}");
        // ANCHOR_END: scrapes
        // A second allowed scrape (a cached decision) is served the same.
        assert_eq!(
            scrape(at, Trust::Ca(ca.pem()), Some(&allowed)).await?.0,
            200
        );

        stop.shutdown();
        tokio::time::timeout(Duration::from_secs(30), running).await???;
        anyhow::Ok(())
    }
    .await;
    ids.delete().await;
    result
}

#[tokio::test]
async fn without_a_cert_dir_the_endpoint_self_signs() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let mut ids = Identities::new(env.client()?, ns.name());
    let result = async {
        let operator = ids.account("operator", Some(operator_role(true)?)).await?;
        let allowed = ids
            .account("scraper", Some(concord::rbac::metrics_reader("unused")))
            .await?;
        let manager = manager(env, ns.name(), operator, None).await?;
        let at = manager.metrics_address().context("metrics are served")?;
        let stop = manager.shutdown_handle();
        let running = tokio::spawn(manager.run());
        let (status, body) = scrape(at, Trust::Any, Some(&allowed)).await?;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("concord_reconcile_total"), "{body}");
        assert_eq!(scrape(at, Trust::Any, None).await?.0, 401);
        stop.shutdown();
        tokio::time::timeout(Duration::from_secs(30), running).await???;
        anyhow::Ok(())
    }
    .await;
    ids.delete().await;
    result
}

#[tokio::test]
async fn a_scrape_that_cannot_be_reviewed_is_refused() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let mut ids = Identities::new(env.client()?, ns.name());
    let result = async {
        // The operator may not create reviews: every review fails.
        let operator = ids.account("operator", Some(operator_role(false)?)).await?;
        let allowed = ids
            .account("scraper", Some(concord::rbac::metrics_reader("unused")))
            .await?;
        let manager = manager(env, ns.name(), operator, None).await?;
        let at = manager.metrics_address().context("metrics are served")?;
        let stop = manager.shutdown_handle();
        let running = tokio::spawn(manager.run());
        let (status, body) = scrape(at, Trust::Any, Some(&allowed)).await?;
        assert_eq!(status, 503, "{body}");
        assert!(!body.contains("concord_"), "{body}");
        assert_eq!(body, "the request could not be reviewed\n");
        stop.shutdown();
        tokio::time::timeout(Duration::from_secs(30), running).await???;
        anyhow::Ok(())
    }
    .await;
    ids.delete().await;
    result
}
