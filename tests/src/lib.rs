//! concord's integration tests. The tests are in `tests/`, one binary per
//! area, each starting one real control plane (see `kube-concord-testenv`);
//! this library holds what several of them share.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use concord::{Action, Context, Reconciler};

/// A reconciler that does nothing: a manager runs (and holds its Lease)
/// while it has a controller.
#[derive(Debug, Default)]
pub struct Idle;

#[concord::async_trait]
impl<K: concord::Object> Reconciler<K> for Idle {
    type Error = std::convert::Infallible;

    async fn reconcile(&self, _object: Arc<K>, _ctx: &Context<K>) -> Result<Action, Self::Error> {
        Ok(Action::await_change())
    }
}

/// A control plane of its own that really answers `429 Too Many Requests`:
/// API Priority and Fairness off, one mutating request in flight, no
/// controller manager. Returned with an admin client, the admin's
/// `kube::Config`, and `namespace` created. The in-flight limiter never
/// throttles the admin (`system:masters`), so writers meant to be
/// throttled need a client of their own (`concord_testenv::restricted_config`).
///
/// # Errors
///
/// The control plane did not start, or the namespace was not created.
pub async fn throttled_control_plane(
    namespace: &str,
) -> anyhow::Result<(concord_testenv::ControlPlane, kube::Client, kube::Config)> {
    use concord_testenv::{ControlPlane, ControlPlaneOptions};
    use kube::config::{KubeConfigOptions, Kubeconfig};
    let options = ControlPlaneOptions::default()
        .without_controller_manager()
        .with_apiserver_arg("--enable-priority-and-fairness=false")
        .with_apiserver_arg("--max-mutating-requests-inflight=1");
    let control_plane = tokio::task::spawn_blocking(move || ControlPlane::start(options)).await??;
    let kubeconfig = Kubeconfig::read_from(control_plane.kubeconfig_path())?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    let client = kube::Client::try_from(config.clone())?;
    let object: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": namespace}}))?;
    kube::Api::all(client.clone())
        .create(&kube::api::PostParams::default(), &object)
        .await?;
    Ok((control_plane, client, config))
}

/// Where a manifest object lives in the API, and whether it is namespaced,
/// for the kinds the examples' and the scaffold's manifests use.
///
/// # Errors
///
/// No `apiVersion` or `kind`, or a kind not listed here.
pub fn manifest_resource(
    object: &serde_json::Value,
) -> anyhow::Result<(kube::discovery::ApiResource, bool)> {
    use anyhow::Context as _;
    let api_version = object["apiVersion"].as_str().context("apiVersion")?;
    let kind = object["kind"].as_str().context("kind")?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let (plural, namespaced) = match kind {
        "Namespace" => ("namespaces", false),
        "CustomResourceDefinition" => ("customresourcedefinitions", false),
        "ClusterRole" => ("clusterroles", false),
        "ClusterRoleBinding" => ("clusterrolebindings", false),
        "ServiceAccount" => ("serviceaccounts", true),
        "Role" => ("roles", true),
        "RoleBinding" => ("rolebindings", true),
        "ConfigMap" => ("configmaps", true),
        "Deployment" => ("deployments", true),
        "Service" => ("services", true),
        "ValidatingWebhookConfiguration" => ("validatingwebhookconfigurations", false),
        "MutatingWebhookConfiguration" => ("mutatingwebhookconfigurations", false),
        "Issuer" => ("issuers", true),
        "Certificate" => ("certificates", true),
        other => anyhow::bail!("no plural known for kind {other}"),
    };
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
    Ok((
        kube::discovery::ApiResource::from_gvk_with_plural(&gvk, plural),
        namespaced,
    ))
}

/// A manifest object after [`dry_run_manifest`].
#[derive(Debug)]
pub struct DryRun {
    /// The object's kind.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Whether it is namespaced (then it went to the namespace given).
    pub namespaced: bool,
    /// The API it was sent to.
    pub api: kube::Api<kube::api::DynamicObject>,
}

/// `kubectl apply --server-side --force-conflicts --dry-run=server` of one
/// manifest object, as `manager`: a namespaced object, and the subjects of
/// a binding, are moved to `namespace` first (a dry-run does not create
/// the manifests' own Namespace).
///
/// # Errors
///
/// [`manifest_resource`]'s, no `metadata.name`, or the API server refused
/// the object (the error names its kind and name).
pub async fn dry_run_manifest(
    client: &kube::Client,
    namespace: &str,
    manager: &str,
    mut object: serde_json::Value,
) -> anyhow::Result<DryRun> {
    use anyhow::Context as _;
    let (resource, namespaced) = manifest_resource(&object)?;
    if namespaced {
        object["metadata"]["namespace"] = namespace.into();
    }
    if let Some(subjects) = object
        .get_mut("subjects")
        .and_then(serde_json::Value::as_array_mut)
    {
        for subject in subjects {
            subject["namespace"] = namespace.into();
        }
    }
    let name = object["metadata"]["name"]
        .as_str()
        .context("metadata.name")?
        .to_owned();
    let api: kube::Api<kube::api::DynamicObject> = if namespaced {
        kube::Api::namespaced_with(client.clone(), namespace, &resource)
    } else {
        kube::Api::all_with(client.clone(), &resource)
    };
    let params = kube::api::PatchParams::apply(manager).force().dry_run();
    api.patch(&name, &params, &kube::api::Patch::Apply(&object))
        .await
        .with_context(|| format!("server-side dry-run of {} {name}", resource.kind))?;
    Ok(DryRun {
        kind: resource.kind,
        name,
        namespaced,
        api,
    })
}

/// A strategy table for the chaos runs, as a temporary YAML file removed
/// when the returned path drops: every write under `strategy`, except that
/// `apply` takes only the operations server-side apply can express on
/// `resource` (finalizers, metadata, status) and leaves the rest (arbitrary
/// closures) to `strict`. Keep the path alive while a manager may read it.
///
/// # Errors
///
/// The file could not be written.
pub fn chaos_strategy_file(
    strategy: concord::featuregates::StrategyName,
    resource: &str,
) -> anyhow::Result<tempfile::TempPath> {
    let yaml = if strategy == concord::featuregates::StrategyName::Apply {
        let operations = ["add-finalizer", "remove-finalizer", "metadata", "status"]
            .map(|op| format!("        {op}: apply\n"))
            .concat();
        format!(
            "strategies:\n  default: strict\n  resources:\n    {resource}:\n      operations:\n{operations}"
        )
    } else {
        format!("strategies:\n  default: {strategy}\n")
    };
    yaml_file(&format!("concord-chaos-{strategy}-"), &yaml)
}

/// `text` in a temporary YAML file whose name starts with `prefix`,
/// removed when the returned path is dropped: keep it until the manager
/// that reads it is built.
///
/// # Errors
///
/// The file could not be written.
pub fn yaml_file(prefix: &str, text: &str) -> anyhow::Result<tempfile::TempPath> {
    use std::io::Write as _;
    let mut file = tempfile::Builder::new()
        .prefix(prefix)
        .suffix(".yaml")
        .tempfile()?;
    file.write_all(text.as_bytes())?;
    Ok(file.into_temp_path())
}

/// Sends each `(name, patch)` as a merge patch through `api`, `at_once` at
/// a time, as another client would; the first error.
///
/// # Errors
///
/// The first request that failed.
pub async fn merge_patch_all<K>(
    api: &kube::Api<K>,
    patches: impl IntoIterator<Item = (String, serde_json::Value)>,
    at_once: usize,
) -> Result<(), kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    use futures::StreamExt as _;
    let params = kube::api::PatchParams::default();
    let results = futures::stream::iter(patches)
        .map(|(name, patch)| {
            let params = &params;
            async move {
                api.patch(&name, params, &kube::api::Patch::Merge(&patch))
                    .await
                    .map(|_| ())
            }
        })
        .buffer_unordered(at_once)
        .collect::<Vec<_>>()
        .await;
    results.into_iter().collect()
}

/// Polls `check` every 100 ms until it holds, for at most `limit`; whether
/// it held.
pub async fn eventually<F, Fut>(limit: std::time::Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if check().await {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    false
}

/// The workspace's root: the folder above this crate's.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The workspace's build output: `$CARGO_TARGET_DIR`, else `target/`.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
}

/// Builds every binary and example of the workspace, once per test
/// process, and returns the path of the one named `name` (an example when
/// `example`). `--workspace` with `--examples` resolves the dependencies'
/// features as `cargo test --workspace` does, so inside that command
/// nothing is rebuilt; `cargo build -p <package>` would resolve them for
/// that package alone and rebuild half the dependency tree. The build runs
/// without the variables cargo sets for a test process (see
/// [`without_test_env`]).
///
/// # Errors
///
/// `cargo build` could not run or failed.
pub fn workspace_program(name: &str, example: bool) -> anyhow::Result<PathBuf> {
    static BUILT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let mut build = std::process::Command::new(cargo);
            without_test_env(&mut build);
            let status = build
                .args(["build", "--quiet", "--workspace", "--bins", "--examples"])
                .arg("--manifest-path")
                .arg(workspace().join("Cargo.toml"))
                .env("CARGO_TARGET_DIR", target_dir())
                .stdin(std::process::Stdio::null())
                .status()
                .map_err(|e| format!("running cargo build --workspace --bins --examples: {e}"))?;
            status.success().then_some(()).ok_or_else(|| {
                format!("cargo build --workspace --bins --examples failed: {status}")
            })
        })
        .clone()
        .map_err(anyhow::Error::msg)?;
    let debug = target_dir().join("debug");
    Ok(if example {
        debug.join("examples").join(name)
    } else {
        debug.join(name)
    })
}

/// Removes from `command` the variables cargo sets for the test process
/// itself (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, `OUT_DIR`, …), keeping the
/// user's own cargo configuration (`CARGO_HOME`, `CARGO_BUILD_*`, …).
///
/// A build script that watches one of them (`ring`'s watches
/// `CARGO_PKG_NAME` and `CARGO_MANIFEST_DIR`) would otherwise see them
/// change between the user's `cargo test` and the test's own `cargo
/// build`: each would rebuild that crate and everything above it for the
/// other, once inside the suite and once more at the start of the next run.
pub fn without_test_env(command: &mut std::process::Command) {
    const SET_FOR_TESTS: [&str; 8] = [
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_MANIFEST_LINKS",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
    ];
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        if SET_FOR_TESTS.contains(&name)
            || name == "OUT_DIR"
            || name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_BIN_EXE_")
        {
            command.env_remove(name);
        }
    }
}

/// A GET over plain HTTP/1.1 to `address`: the status code and the body
/// (an endpoint of the manager's: metrics, health, readiness).
///
/// # Errors
///
/// No answer within 10 s, or an answer that is not HTTP.
pub async fn http_get(address: std::net::SocketAddr, path: &str) -> anyhow::Result<(u16, String)> {
    use anyhow::Context as _;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(address).await?;
    let request = format!("GET {path} HTTP/1.1\r\nhost: {address}\r\nconnection: close\r\n\r\n");
    tcp.write_all(request.as_bytes()).await?;
    let mut raw = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        tcp.read_to_end(&mut raw),
    )
    .await
    .context("the endpoint did not answer within 10 s")??;
    http_answer(raw)
}

/// The status code and the body of an HTTP/1.1 answer read to its end.
///
/// # Errors
///
/// The bytes are not UTF-8 or not an HTTP answer.
pub fn http_answer(raw: Vec<u8>) -> anyhow::Result<(u16, String)> {
    use anyhow::Context as _;
    let text = String::from_utf8(raw)?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .context("an HTTP answer has a blank line after its headers")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .context("an HTTP status line")?
        .parse()?;
    Ok((status, body.to_owned()))
}

/// The value of `concord_write_requests_total` for ConfigMap writes of
/// `strategy` with `verb` in a rendered exposition; 0 when absent.
pub fn config_map_write_requests(metrics: &str, strategy: &str, verb: &str) -> u64 {
    let needle = format!(
        "concord_write_requests_total{{resource=\"configmaps\",strategy=\"{strategy}\",verb=\"{verb}\"}} "
    );
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&needle))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::without_test_env;

    /// Under `cargo test` the variables are set; the build sees none of them
    /// and keeps the user's own configuration.
    #[test]
    fn a_build_from_a_test_does_not_see_the_test_process_variables() {
        assert!(std::env::var_os("CARGO_PKG_NAME").is_some());
        let mut command = std::process::Command::new("cargo");
        command.env("CARGO_HOME", "/somewhere");
        without_test_env(&mut command);
        let removed: Vec<_> = command
            .get_envs()
            .filter(|(_, value)| value.is_none())
            .map(|(name, _)| name.to_string_lossy().into_owned())
            .collect();
        for name in [
            "CARGO_PKG_NAME",
            "CARGO_MANIFEST_DIR",
            "CARGO_PKG_VERSION_MINOR",
        ] {
            assert!(
                removed.iter().any(|r| r == name),
                "{name} not removed: {removed:?}"
            );
        }
        assert!(
            command
                .get_envs()
                .any(|(name, value)| name == "CARGO_HOME" && value.is_some())
        );
    }
}
