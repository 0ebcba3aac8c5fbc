use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::ObjectMeta;
use kube::{Client, Config};

use crate::poll::poll;
use crate::{ControlPlane, ControlPlaneOptions, Error, TestNamespace};

/// Set this to a kubeconfig path to run the tests against an existing
/// cluster instead of starting a control plane.
pub const KUBECONFIG_ENV: &str = "CONCORD_TEST_KUBECONFIG";

/// The kube-apiserver flag the shared control plane starts with: the
/// `ShardedListAndWatch` feature gate on.
pub const SHARDED_LIST_AND_WATCH: &str = "--feature-gates=ShardedListAndWatch=true";

/// Field manager of everything the harness itself writes.
pub(crate) const MANAGER: &str = "concord-testenv";

/// The control plane a test binary shares, and the helpers tests use on it.
#[derive(Debug)]
pub struct TestEnv {
    config: Config,
    kubeconfig: PathBuf,
    // Kept so the process lives as long as the test binary; never dropped,
    // the control plane exits when this process's end closes its stdin.
    control_plane: Option<ControlPlane>,
}

static SHARED: OnceLock<Result<TestEnv, String>> = OnceLock::new();

impl TestEnv {
    /// The environment shared by every test of this binary, started on the
    /// first call.
    ///
    /// Uses the cluster of `$CONCORD_TEST_KUBECONFIG` when it is set,
    /// otherwise starts a [`ControlPlane`] (building it on the very first run).
    ///
    /// # Errors
    ///
    /// The start-up error, on the first call and every later one.
    pub fn shared() -> Result<&'static TestEnv, Error> {
        SHARED
            .get_or_init(|| TestEnv::start().map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|message| Error::SharedUnavailable(message.clone()))
    }

    fn start() -> Result<TestEnv, Error> {
        if let Some(path) = std::env::var_os(KUBECONFIG_ENV) {
            let kubeconfig = PathBuf::from(path);
            let config = load_config(&kubeconfig)?;
            return Ok(TestEnv {
                config,
                kubeconfig,
                control_plane: None,
            });
        }
        // Server-side shard selectors (KEP-5866, alpha in 1.36) for the
        // `selector` sharding mode; a test wanting a server without them
        // starts its own `ControlPlane` with the default options.
        let control_plane = ControlPlane::start(
            ControlPlaneOptions::default().with_apiserver_arg(SHARDED_LIST_AND_WATCH),
        )?;
        let kubeconfig = control_plane.kubeconfig_path().to_path_buf();
        let config = load_config(&kubeconfig)?;
        Ok(TestEnv {
            config,
            kubeconfig,
            control_plane: Some(control_plane),
        })
    }

    /// A new admin client. Call it inside the tokio runtime that will use it
    /// (each `#[tokio::test]` has its own).
    ///
    /// # Errors
    ///
    /// [`Error::Api`] when the client cannot be built.
    pub fn client(&self) -> Result<Client, Error> {
        Client::try_from(self.config.clone()).map_err(|e| Error::api("building a client", e))
    }

    /// The admin client configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The process id of the control plane this environment started
    /// (kube-apiserver and etcd run in it), for tests that read its CPU or
    /// memory; `None` on a cluster named by [`KUBECONFIG_ENV`].
    pub fn control_plane_pid(&self) -> Option<u32> {
        self.control_plane.as_ref().map(ControlPlane::pid)
    }

    /// The admin kubeconfig file, for programs a test starts.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// Creates a fresh namespace (`concord-test-xxxxx`) and waits until its
    /// default ServiceAccount exists, so Pods can be created in it.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] or [`Error::Timeout`].
    pub async fn namespace(&self) -> Result<TestNamespace, Error> {
        TestNamespace::create(self.client()?).await
    }

    /// Installs (server-side applies) a CRD and waits until it is established.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] or [`Error::Timeout`] after 60 s.
    pub async fn install_crd(&self, crd: CustomResourceDefinition) -> Result<(), Error> {
        let client = self.client()?;
        let crds: Api<CustomResourceDefinition> = Api::all(client);
        let name = crd.metadata.name.clone().unwrap_or_default();
        crds.patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .map_err(|e| Error::api(format!("applying CRD {name}"), e))?;
        poll(
            &format!("CRD {name} to be established"),
            Duration::from_secs(60),
            || async {
                let crd = crds
                    .get(&name)
                    .await
                    .map_err(|e| Error::api(format!("reading CRD {name}"), e))?;
                let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
                Ok(conditions
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True"))
            },
        )
        .await
    }

    /// A client for a new ServiceAccount in `namespace` that holds exactly
    /// `rules` through a Role, for least-privilege tests.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] when any of the objects cannot be created.
    pub async fn restricted_client(
        &self,
        namespace: &str,
        rules: Vec<PolicyRule>,
    ) -> Result<Client, Error> {
        let config = restricted_config(&self.client()?, &self.config, namespace, rules).await?;
        Client::try_from(config).map_err(|e| Error::api("building a restricted client", e))
    }
}

/// A client configuration for a new ServiceAccount in `namespace` that holds
/// exactly `rules` through a Role, created with `admin` on the cluster that
/// `base` points at. The token comes from the TokenRequest API and is valid
/// for an hour.
///
/// Useful on a [`ControlPlane`] of a test's own, where [`TestEnv`] is not in
/// play; note that `system:masters` (the admin) is exempt from API server
/// throttling, so throttling tests must write as such an identity.
///
/// # Errors
///
/// [`Error::Api`] when any of the objects cannot be created.
pub async fn restricted_config(
    admin: &Client,
    base: &Config,
    namespace: &str,
    rules: Vec<PolicyRule>,
) -> Result<Config, Error> {
    let name = format!("restricted-{}", crate::namespace::suffix());
    let meta = ObjectMeta {
        name: Some(name.clone()),
        namespace: Some(namespace.into()),
        ..Default::default()
    };
    let pp = PostParams::default();
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    accounts
        .create(
            &pp,
            &ServiceAccount {
                metadata: meta.clone(),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| Error::api(format!("creating ServiceAccount {namespace}/{name}"), e))?;
    Api::<Role>::namespaced(admin.clone(), namespace)
        .create(
            &pp,
            &Role {
                metadata: meta.clone(),
                rules: Some(rules),
            },
        )
        .await
        .map_err(|e| Error::api(format!("creating Role {namespace}/{name}"), e))?;
    let binding = RoleBinding {
        metadata: meta,
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: name.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: name.clone(),
            namespace: Some(namespace.into()),
            ..Default::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(admin.clone(), namespace)
        .create(&pp, &binding)
        .await
        .map_err(|e| Error::api(format!("creating RoleBinding {namespace}/{name}"), e))?;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let token = accounts
        .create_token_request(&name, &pp, &request)
        .await
        .map_err(|e| Error::api(format!("requesting a token for {namespace}/{name}"), e))?
        .status
        .and_then(|s| s.token)
        .unwrap_or_default();
    let mut config = base.clone();
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.into()),
        ..Default::default()
    };
    Ok(config)
}

fn load_config(path: &Path) -> Result<Config, Error> {
    let unusable = |message: String| Error::Kubeconfig {
        path: path.into(),
        message,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| unusable(e.to_string()))?;
    // Building a Config is async in kube; run it on a private runtime in its
    // own thread so this works from inside and outside a tokio runtime alike.
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| unusable(e.to_string()))?;
                runtime
                    .block_on(Config::from_custom_kubeconfig(
                        kubeconfig,
                        &KubeConfigOptions::default(),
                    ))
                    .map_err(|e| unusable(e.to_string()))
            })
            .join()
            .unwrap_or_else(|_| Err(unusable("loading panicked".into())))
    })
}
