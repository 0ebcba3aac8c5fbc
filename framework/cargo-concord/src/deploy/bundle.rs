//! [`Bundle`]: what an operator's deployment is made of, set up one
//! builder method at a time.

use std::collections::BTreeMap;

use serde_yaml::Value;

use super::webhook::Webhook;
use super::yaml::{documents, to_value};
use crate::Error;

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
    pub(super) name: String,
    pub(super) namespace: String,
    pub(super) version: String,
    pub(super) image: String,
    pub(super) replicas: i32,
    pub(super) labels: BTreeMap<String, String>,
    pub(super) generated_by: String,
    pub(super) config: String,
    pub(super) args: Vec<String>,
    pub(super) rbac: Vec<Value>,
    pub(super) crds: Vec<Value>,
    pub(super) webhook: Option<Webhook>,
    pub(super) extra: Vec<(String, Value)>,
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

    /// The header of every file.
    pub(super) fn header(&self) -> String {
        format!(
            "# Generated by {} from the operator's code and configuration:\n# change those, then run it again.\n",
            self.generated_by
        )
    }
}
