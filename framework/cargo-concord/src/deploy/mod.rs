//! The deploy objects of an operator, modelled once and rendered two ways:
//! a kustomize base (`deploy/`) and a Helm chart (`deploy/chart/<name>/`).
//!
//! | object | from |
//! | --- | --- |
//! | Namespace, ServiceAccount | the operator's name and namespace |
//! | Role, ClusterRole, metrics readers' ClusterRole | the strategy table (`--print-rbac`) |
//! | RoleBinding, ClusterRoleBinding | one per Role and ClusterRole named after the operator |
//! | ConfigMap | the configuration file (gates and strategies) |
//! | Deployment | probes `/healthz` and `/readyz` on the health port, the metrics port, the configuration mounted, webhook serving certificate when there are webhooks |
//! | metrics Service, ServiceMonitor | the metrics port; the ServiceMonitor only when asked for |
//! | CRDs, webhook Service and configurations | the Rust types and webhooks (`--print-crds`) |
//!
//! # Guarantees
//!
//! Both renderings come from the same [`Bundle::objects`]: the chart's
//! templates are those objects with the namespace, image, replica count
//! and resources replaced by their values, so `helm template` with the
//! default values gives what `kubectl apply -k` applies.

mod chart;
mod initial;
mod kustomize;
mod objects;

use std::collections::BTreeMap;

use serde_yaml::Value;

use crate::Error;

pub(crate) use initial::initial;
#[doc(inline)]
pub use objects::{HEALTH_PORT, METRICS_PORT};

/// The label every object carries, with the operator's name.
pub const NAME_LABEL: &str = "app.kubernetes.io/name";

/// What an operator's deployment is made of.
///
/// ```
/// use cargo_concord::deploy::Bundle;
/// let bundle = Bundle::new("demo", "demo-system").with_config("strategies:\n  default: guarded\n");
/// let base = bundle.kustomize_base()?;
/// assert!(base.iter().any(|(file, _)| file == "deployment.yaml"));
/// let chart = bundle.chart()?;
/// assert!(chart.iter().any(|(file, _)| file == "templates/deployment.yaml"));
/// # Ok::<(), cargo_concord::Error>(())
/// ```
#[derive(Clone, Debug)]
#[must_use]
pub struct Bundle {
    name: String,
    namespace: String,
    version: String,
    image: String,
    replicas: i32,
    labels: BTreeMap<String, String>,
    generated_by: String,
    config: String,
    args: Vec<String>,
    rbac: Vec<Value>,
    crds: Vec<Value>,
    webhook: Option<Webhook>,
    extra: Vec<(String, Value)>,
}

/// The webhook server of an operator: the Service the API server calls,
/// the port the container serves on, and the Secret holding its serving
/// certificate (made by cert-manager or by hand), mounted at
/// `--webhook-cert-dir`.
#[derive(Clone, Debug)]
#[must_use]
pub struct Webhook {
    service: String,
    port: i32,
    container_port: i32,
    cert_dir: String,
    secret: String,
    configurations: Vec<Value>,
}

impl Webhook {
    /// A webhook server behind the Service `service` on `port`, serving on
    /// `container_port`, its certificate from the Secret `secret` mounted
    /// at `cert_dir`.
    pub fn new(
        service: impl Into<String>,
        port: i32,
        container_port: i32,
        secret: impl Into<String>,
        cert_dir: impl Into<String>,
    ) -> Self {
        Webhook {
            service: service.into(),
            port,
            container_port,
            cert_dir: cert_dir.into(),
            secret: secret.into(),
            configurations: Vec::new(),
        }
    }

    /// Adds a ValidatingWebhookConfiguration or MutatingWebhookConfiguration
    /// (as `Webhooks::validating_configuration` renders it).
    ///
    /// # Errors
    ///
    /// [`Error::Serialize`] when it cannot be serialised.
    pub fn with_configuration(mut self, object: impl serde::Serialize) -> Result<Self, Error> {
        self.configurations
            .push(to_value(object, "a webhook configuration")?);
        Ok(self)
    }
}

impl Bundle {
    /// The objects of operator `name` deployed in `namespace`: two
    /// replicas of image `name:0.1.0`, no CRDs, no RBAC rules, no webhooks.
    pub fn new(name: impl Into<String>, namespace: impl Into<String>) -> Self {
        let name = name.into();
        Bundle {
            image: format!("{name}:0.1.0"),
            namespace: namespace.into(),
            version: "0.1.0".into(),
            replicas: 2,
            labels: BTreeMap::new(),
            generated_by: "`cargo concord generate`".into(),
            config: String::new(),
            args: Vec::new(),
            rbac: Vec::new(),
            crds: Vec::new(),
            webhook: None,
            extra: Vec::new(),
            name,
        }
    }

    /// The container image (the chart's default `image` value).
    pub fn with_image(mut self, image: impl Into<String>) -> Self {
        self.image = image.into();
        self
    }

    /// The number of replicas (the chart's default `replicas` value).
    pub fn with_replicas(mut self, replicas: i32) -> Self {
        self.replicas = replicas;
        self
    }

    /// A label on every object, beside `app.kubernetes.io/name`.
    pub fn with_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// What the header of every file names as its maker.
    pub fn with_generated_by(mut self, command: impl Into<String>) -> Self {
        self.generated_by = command.into();
        self
    }

    /// The configuration file (feature gates and strategy table), held by
    /// the ConfigMap and passed as `--config`.
    pub fn with_config(mut self, text: impl Into<String>) -> Self {
        self.config = text.into();
        self
    }

    /// A flag the container is started with, before the standard ones.
    pub fn with_arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// The Role, ClusterRole and metrics readers' ClusterRole as
    /// `--print-rbac` prints them (YAML documents). A Role or ClusterRole
    /// named after the operator is bound to its ServiceAccount.
    ///
    /// # Errors
    ///
    /// [`Error::BadManifest`] when a document is not YAML or has no kind.
    pub fn with_rbac_yaml(mut self, yaml: &str, source: &str) -> Result<Self, Error> {
        self.rbac.extend(documents(yaml, source)?);
        Ok(self)
    }

    /// A Role or ClusterRole (see [`Bundle::with_rbac_yaml`]).
    ///
    /// # Errors
    ///
    /// [`Error::Serialize`] when it cannot be serialised.
    pub fn with_rbac(mut self, object: impl serde::Serialize) -> Result<Self, Error> {
        self.rbac.push(to_value(object, "an RBAC object")?);
        Ok(self)
    }

    /// The CustomResourceDefinitions as `--print-crds` prints them.
    ///
    /// # Errors
    ///
    /// [`Error::BadManifest`] when a document is not YAML or has no kind.
    pub fn with_crds_yaml(mut self, yaml: &str, source: &str) -> Result<Self, Error> {
        self.crds.extend(documents(yaml, source)?);
        Ok(self)
    }

    /// A CustomResourceDefinition.
    ///
    /// # Errors
    ///
    /// [`Error::Serialize`] when it cannot be serialised.
    pub fn with_crd(mut self, object: impl serde::Serialize) -> Result<Self, Error> {
        self.crds
            .push(to_value(object, "a CustomResourceDefinition")?);
        Ok(self)
    }

    /// The webhook server: a Service, its configurations, the Deployment's
    /// webhook port and mounted certificate.
    pub fn with_webhook(mut self, webhook: Webhook) -> Self {
        self.webhook = Some(webhook);
        self
    }

    /// Another object, written to `file` (objects of one file are kept
    /// together, in the order given) — cert-manager's Issuer and
    /// Certificate, say.
    ///
    /// # Errors
    ///
    /// [`Error::Serialize`] when it cannot be serialised.
    pub fn with_object(
        mut self,
        file: impl Into<String>,
        object: impl serde::Serialize,
    ) -> Result<Self, Error> {
        self.extra
            .push((file.into(), to_value(object, "an object")?));
        Ok(self)
    }

    /// The operator's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The namespace it is deployed in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Every object of the deployment, by file, in apply order; the
    /// ServiceMonitor (file `servicemonitor.yaml`) only when
    /// `service_monitor` is set.
    ///
    /// # Errors
    ///
    /// [`Error::Serialize`] when an object cannot be serialised.
    pub fn objects(&self, service_monitor: bool) -> Result<Vec<(String, Value)>, Error> {
        objects::all(self, service_monitor)
    }

    /// The kustomize base: files relative to the base directory, the
    /// `kustomization.yaml` last. `servicemonitor.yaml` is written beside
    /// the others but not listed (it needs the Prometheus Operator's CRD).
    ///
    /// # Errors
    ///
    /// [`Error::Serialize`].
    pub fn kustomize_base(&self) -> Result<Vec<(String, String)>, Error> {
        kustomize::render(self)
    }

    /// The Helm chart: files relative to the chart directory.
    ///
    /// # Errors
    ///
    /// [`Error::Serialize`].
    pub fn chart(&self) -> Result<Vec<(String, String)>, Error> {
        chart::render(self)
    }

    /// Every file of both renderings, relative to the deploy directory:
    /// the kustomize base at its top, the chart under `chart/<name>/`.
    ///
    /// # Errors
    ///
    /// [`Error::Serialize`].
    pub fn files(&self) -> Result<Vec<(String, String)>, Error> {
        let mut files = self.kustomize_base()?;
        for (file, text) in self.chart()? {
            files.push((format!("chart/{}/{file}", self.name), text));
        }
        Ok(files)
    }

    /// The header of every file.
    fn header(&self) -> String {
        format!(
            "# Generated by {} from the operator's code and configuration:\n# change those, then run it again.\n",
            self.generated_by
        )
    }
}

fn to_value(object: impl serde::Serialize, what: &'static str) -> Result<Value, Error> {
    serde_yaml::to_value(object).map_err(|source| Error::Serialize { what, source })
}

/// The YAML documents of `yaml`, blank ones skipped; each must have a kind.
fn documents(yaml: &str, source: &str) -> Result<Vec<Value>, Error> {
    let mut out = Vec::new();
    for document in serde_yaml::Deserializer::from_str(yaml) {
        let value: Value =
            serde::Deserialize::deserialize(document).map_err(|e| Error::BadManifest {
                source_name: source.to_owned(),
                message: e.to_string(),
            })?;
        if value.is_null() {
            continue;
        }
        if value.get("kind").and_then(Value::as_str).is_none() {
            return Err(Error::BadManifest {
                source_name: source.to_owned(),
                message: format!("document {} has no kind", out.len() + 1),
            });
        }
        out.push(value);
    }
    Ok(out)
}

/// One object as YAML, without a document marker.
fn yaml(value: &Value, what: &'static str) -> Result<String, Error> {
    serde_yaml::to_string(value).map_err(|source| Error::Serialize { what, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(bundle: &Bundle, service_monitor: bool) -> Result<Vec<String>, Error> {
        Ok(bundle
            .objects(service_monitor)?
            .iter()
            .map(|(file, o)| format!("{file}:{}", o["kind"].as_str().unwrap_or_default()))
            .collect())
    }

    #[test]
    fn roles_named_after_the_operator_are_bound_to_its_service_account() -> Result<(), Error> {
        let rbac = "kind: Role\nmetadata: {name: demo, namespace: demo-system}\n---\n\
                    kind: ClusterRole\nmetadata: {name: demo}\n---\n\
                    kind: ClusterRole\nmetadata: {name: demo-metrics-reader}\n";
        let bundle = Bundle::new("demo", "demo-system").with_rbac_yaml(rbac, "test")?;
        let objects = bundle.objects(false)?;
        let bindings: Vec<&Value> = objects
            .iter()
            .filter(|(file, _)| file == "rolebinding.yaml")
            .map(|(_, o)| o)
            .collect();
        assert_eq!(
            bindings.len(),
            2,
            "no binding for the metrics readers' role"
        );
        assert_eq!(bindings[0]["kind"].as_str(), Some("RoleBinding"));
        assert_eq!(bindings[1]["kind"].as_str(), Some("ClusterRoleBinding"));
        for binding in bindings {
            assert_eq!(binding["roleRef"]["name"].as_str(), Some("demo"));
            assert_eq!(binding["subjects"][0]["name"].as_str(), Some("demo"));
            assert_eq!(
                binding["subjects"][0]["namespace"].as_str(),
                Some("demo-system")
            );
        }
        Ok(())
    }

    #[test]
    fn a_document_without_a_kind_is_refused() {
        let err = Bundle::new("demo", "demo-system")
            .with_rbac_yaml(
                "kind: Role\n---\nmetadata: {name: x}\n",
                "cargo run -- --print-rbac",
            )
            .err();
        assert!(
            matches!(&err, Some(Error::BadManifest { source_name, message })
                if source_name == "cargo run -- --print-rbac" && message.contains("document 2")),
            "{err:?}"
        );
    }

    #[test]
    fn a_webhook_adds_its_service_port_and_mounted_secret() -> Result<(), Error> {
        let plain = Bundle::new("demo", "demo-system");
        let webhook = Webhook::new("demo-webhook", 443, 9443, "demo-cert", "/certs");
        let served = plain.clone().with_webhook(webhook);
        assert_eq!(
            kinds(&served, false)?.len(),
            kinds(&plain, false)?.len() + 1,
            "one more Service"
        );
        let objects = served.objects(false)?;
        let deployment = &objects
            .iter()
            .find(|(_, o)| o["kind"].as_str() == Some("Deployment"))
            .expect("a Deployment")
            .1;
        let pod = &deployment["spec"]["template"]["spec"];
        let container = &pod["containers"][0];
        let args: Vec<&str> = container["args"]
            .as_sequence()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        assert!(args.contains(&"--webhook-bind-address=:9443"), "{args:?}");
        assert!(args.contains(&"--webhook-cert-dir=/certs"), "{args:?}");
        assert_eq!(
            pod["volumes"][1]["secret"]["secretName"].as_str(),
            Some("demo-cert")
        );
        assert_eq!(
            container["volumeMounts"][1]["mountPath"].as_str(),
            Some("/certs")
        );
        Ok(())
    }

    #[test]
    fn the_service_monitor_is_written_but_not_listed() -> Result<(), Error> {
        let bundle = Bundle::new("demo", "demo-system");
        assert!(
            !kinds(&bundle, false)?
                .iter()
                .any(|k| k.ends_with("ServiceMonitor"))
        );
        let base = bundle.kustomize_base()?;
        assert!(
            base.iter().any(|(file, text)| file == "servicemonitor.yaml"
                && text.contains("kind: ServiceMonitor"))
        );
        let (_, kustomization) = base
            .iter()
            .find(|(file, _)| file == "kustomization.yaml")
            .expect("a kustomization.yaml");
        assert!(!kustomization.contains("- servicemonitor.yaml"));
        assert!(kustomization.contains("- deployment.yaml"));
        Ok(())
    }
}
