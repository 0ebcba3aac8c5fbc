//! The `--dev` mode and the tests: an embedded control plane, the CRDs
//! installed on it, the objects of `config/samples` created (of this
//! operator's kinds, and of any other the server serves, such as a
//! ConfigMap one of them reads), and a wait until each of this operator's
//! objects reports the `Ready` condition.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use concord_testenv::{ControlPlane, ControlPlaneOptions};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};

/// Where the sample objects live.
pub const SAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/samples");
/// The field manager of what these helpers write.
const MANAGER: &str = "{{name}}-dev";

/// An embedded kube-apiserver + etcd for `--dev`, stopped when dropped.
pub struct DevCluster {
    _control_plane: ControlPlane,
    config: kube::Config,
}

impl DevCluster {
    /// Starts the embedded control plane (building it on first use).
    ///
    /// # Errors
    ///
    /// When it cannot be built or started.
    pub async fn start() -> anyhow::Result<Self> {
        println!("--dev: starting an embedded control plane (--kubeconfig PATH runs on a cluster instead)");
        let control_plane =
            tokio::task::spawn_blocking(|| ControlPlane::start(ControlPlaneOptions::default()))
                .await??;
        let path = control_plane.kubeconfig_path().to_path_buf();
        let kubeconfig = Kubeconfig::read_from(&path)?;
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        println!("--dev: control plane ready, kubeconfig {}", path.display());
        Ok(DevCluster {
            _control_plane: control_plane,
            config,
        })
    }

    /// The client configuration of the control plane.
    pub fn config(&self) -> &kube::Config {
        &self.config
    }

    /// Installs `crds`, creates the samples in `default`, and prints a line
    /// as each becomes Ready (in the background).
    ///
    /// # Errors
    ///
    /// When a CRD or a sample is refused.
    pub async fn install_and_report(
        &self,
        client: Client,
        crds: Vec<CustomResourceDefinition>,
    ) -> anyhow::Result<()> {
        install_crds(&client, &crds).await?;
        let samples = apply_samples(&client, &crds, Path::new(SAMPLES), "default").await?;
        for sample in &samples {
            println!("--dev: created {sample}");
        }
        tokio::spawn(async move {
            // Objects of other kinds are seeds: nothing makes them Ready.
            for sample in samples.into_iter().filter(|s| s.reconciled) {
                match sample.wait_ready(&client, Duration::from_secs(300)).await {
                    Ok(message) => println!("--dev: {sample} is Ready: {message}"),
                    Err(error) => println!("--dev: {sample}: {error:#}"),
                }
            }
        });
        Ok(())
    }
}

/// Installs (server-side applies) `crds` and waits until each is established.
///
/// # Errors
///
/// When one is refused or not established within a minute.
pub async fn install_crds(client: &Client, crds: &[CustomResourceDefinition]) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(MANAGER).force();
    for crd in crds {
        let name = crd.name_any();
        api.patch(&name, &params, &Patch::Apply(crd))
            .await
            .with_context(|| format!("installing CRD {name}"))?;
    }
    for crd in crds {
        let name = crd.name_any();
        poll(&format!("CRD {name} to be established"), Duration::from_secs(60), || async {
            let crd = api.get(&name).await?;
            let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
            Ok(conditions
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True"))
        })
        .await?;
    }
    Ok(())
}

/// One object created from `config/samples`.
#[derive(Clone, Debug)]
pub struct Sample {
    /// The file it came from.
    pub file: PathBuf,
    /// Its kind.
    pub resource: ApiResource,
    /// Its namespace; `None` when the kind is cluster-scoped.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// Whether it is of one of this operator's kinds (reconciled, and
    /// waited for until Ready), rather than an object of another kind it
    /// was seeded beside.
    pub reconciled: bool,
}

impl std::fmt::Display for Sample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.resource.kind, self.name),
            None => write!(f, "{} {}", self.resource.kind, self.name),
        }
    }
}

impl Sample {
    /// An API handle for this object's kind and namespace.
    pub fn api(&self, client: &Client) -> Api<DynamicObject> {
        match &self.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &self.resource),
            None => Api::all_with(client.clone(), &self.resource),
        }
    }

    /// Waits until the object's `Ready` condition is `True`, and returns
    /// its message; at once for an object of another kind than this
    /// operator's, which nothing makes Ready.
    ///
    /// # Errors
    ///
    /// When it is not Ready within `limit`.
    pub async fn wait_ready(&self, client: &Client, limit: Duration) -> anyhow::Result<String> {
        if !self.reconciled {
            return Ok("seeded, not reconciled by this operator".to_owned());
        }
        let api = self.api(client);
        let start = Instant::now();
        while start.elapsed() < limit {
            let object = api.get(&self.name).await?;
            let ready = object.data["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "Ready" && c["status"] == "True");
            if let Some(ready) = ready {
                return Ok(ready["message"].as_str().unwrap_or_default().to_owned());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        anyhow::bail!("{self} is not Ready after {limit:?}")
    }

    /// Deletes the object and waits until it is gone (its finalizers removed).
    ///
    /// # Errors
    ///
    /// When it is still there after `limit`.
    pub async fn delete_and_wait(&self, client: &Client, limit: Duration) -> anyhow::Result<()> {
        let api = self.api(client);
        api.delete(&self.name, &DeleteParams::default()).await?;
        poll(&format!("{self} to be deleted"), limit, || async {
            Ok(api.get_opt(&self.name).await?.is_none())
        })
        .await
    }
}

/// Creates (server-side applies) every object of the YAML files in `dir`,
/// in the order of their file names; namespaced ones in `namespace`. A
/// kind among `crds` is this operator's; any other is looked up in the
/// API server's discovery (a ConfigMap, a Secret, another operator's
/// kind), so a sample can come with the objects it reads.
///
/// # Errors
///
/// When a file cannot be read, names a kind the server does not serve,
/// or is refused.
pub async fn apply_samples(
    client: &Client,
    crds: &[CustomResourceDefinition],
    dir: &Path,
    namespace: &str,
) -> anyhow::Result<Vec<Sample>> {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e).with_context(|| dir.display().to_string()),
    };
    files.sort();
    let mut samples = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).with_context(|| file.display().to_string())?;
        let mut object: DynamicObject =
            serde_yaml::from_str(&text).with_context(|| file.display().to_string())?;
        let types = object
            .types
            .clone()
            .with_context(|| format!("{}: no apiVersion or kind", file.display()))?;
        let (group, version) = types
            .api_version
            .split_once('/')
            .unwrap_or(("", types.api_version.as_str()));
        let gvk = GroupVersionKind::gvk(group, version, &types.kind);
        let crd = crds
            .iter()
            .find(|c| c.spec.group == group && c.spec.names.kind == types.kind);
        let (resource, namespaced) = match crd {
            Some(crd) => (
                ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural),
                crd.spec.scope == "Namespaced",
            ),
            None => {
                let (resource, capabilities) = kube::discovery::pinned_kind(client, &gvk)
                    .await
                    .with_context(|| {
                        format!(
                            "{}: the API server serves no kind {} in {}",
                            file.display(),
                            types.kind,
                            types.api_version
                        )
                    })?;
                (resource, capabilities.scope == kube::discovery::Scope::Namespaced)
            }
        };
        let sample = Sample {
            file: file.clone(),
            resource,
            namespace: namespaced.then(|| namespace.to_owned()),
            name: object.name_any(),
            reconciled: crd.is_some(),
        };
        object.metadata.namespace = sample.namespace.clone();
        sample
            .api(client)
            .patch(&sample.name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&object))
            .await
            .with_context(|| format!("creating {sample} from {}", file.display()))?;
        samples.push(sample);
    }
    Ok(samples)
}

async fn poll<F, Fut>(what: &str, limit: Duration, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let start = Instant::now();
    while start.elapsed() < limit {
        if check().await? {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    anyhow::bail!("timed out after {limit:?} waiting for {what}")
}
