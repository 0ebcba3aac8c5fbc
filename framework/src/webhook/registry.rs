//! The webhooks an operator serves, and where.

use std::marker::PhantomData;
use std::sync::Arc;

use super::admission::ValidatingHandler;
use super::conversion::ConversionHandler;
use super::defaulting::MutatingHandler;
use super::handler::Handler;
use super::{Conversion, Defaulter, Validator, WebhookOptions};
use crate::Object;

/// Which admission or conversion call a webhook answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WebhookKind {
    /// A validating admission webhook ([`Validator`]).
    Validating,
    /// A mutating admission webhook ([`Defaulter`]).
    Mutating,
    /// A CRD conversion webhook ([`Conversion`]).
    Conversion,
}

/// The resource a webhook is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) kind: String,
    pub(crate) plural: String,
}

impl Target {
    fn of<K: Object>() -> Self {
        Target {
            group: K::group(&()).into_owned(),
            version: K::version(&()).into_owned(),
            kind: K::kind(&()).into_owned(),
            plural: K::plural(&()).into_owned(),
        }
    }

    /// `validate-demo-concord-dev-v1-widget`, controller-runtime's scheme.
    fn path(&self, verb: &str, with_version: bool) -> String {
        let group = self.group.replace('.', "-");
        let kind = self.kind.to_lowercase();
        if with_version {
            format!("/{verb}-{group}-{}-{kind}", self.version)
        } else {
            format!("/{verb}-{group}-{kind}")
        }
    }

    /// `validate.widgets.demo.concord.dev`: fully qualified, as the API
    /// server requires.
    fn webhook_name(&self, verb: &str) -> String {
        let group = if self.group.is_empty() {
            "core.k8s.io"
        } else {
            &self.group
        };
        format!("{verb}.{}.{group}", self.plural)
    }
}

/// One registered webhook.
#[derive(Clone)]
pub(crate) struct Entry {
    pub(crate) kind: WebhookKind,
    pub(crate) name: String,
    pub(crate) path: String,
    pub(crate) target: Target,
    pub(crate) options: WebhookOptions,
    pub(crate) handler: Arc<dyn Handler>,
}

/// The webhooks an operator serves: validators, defaulters and conversions,
/// each at a path derived from its group, version and kind.
///
/// ```no_run
/// # use concord::webhook::{Webhooks, Validator, Defaulter, WebhookOptions};
/// # use k8s_openapi::api::core::v1::ConfigMap;
/// # struct Check; #[concord::async_trait] impl Validator<ConfigMap> for Check {}
/// # struct Fill; impl Defaulter<ConfigMap> for Fill { fn default(&self, _: &mut ConfigMap) {} }
/// let webhooks = Webhooks::new()
///     .with_validator::<ConfigMap, _>(Check, WebhookOptions::new())
///     .with_defaulter::<ConfigMap, _>(Fill, WebhookOptions::new());
/// # let _ = webhooks;
/// ```
#[derive(Clone, Default)]
#[must_use]
pub struct Webhooks {
    pub(crate) entries: Vec<Entry>,
    pub(crate) problems: Vec<String>,
}

impl std::fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|e| (&e.name, &e.path)))
            .finish()
    }
}

impl Webhooks {
    /// No webhooks yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves `validator` for `K` at `/validate-<group>-<version>-<kind>`.
    pub fn with_validator<K: Object, V: Validator<K>>(
        self,
        validator: V,
        options: WebhookOptions,
    ) -> Self {
        let handler = ValidatingHandler::<K, V> {
            validator: Arc::new(validator),
            deadline: options.deadline(),
            _kind: PhantomData,
        };
        let target = Target::of::<K>();
        self.push(Entry {
            kind: WebhookKind::Validating,
            name: target.webhook_name("validate"),
            path: target.path("validate", true),
            target,
            options,
            handler: Arc::new(handler),
        })
    }

    /// Serves `defaulter` for `K` at `/mutate-<group>-<version>-<kind>`.
    pub fn with_defaulter<K: Object, D: Defaulter<K>>(
        self,
        defaulter: D,
        options: WebhookOptions,
    ) -> Self {
        let handler = MutatingHandler::<K, D> {
            defaulter: Arc::new(defaulter),
            _kind: PhantomData,
        };
        let target = Target::of::<K>();
        self.push(Entry {
            kind: WebhookKind::Mutating,
            name: target.webhook_name("default"),
            path: target.path("mutate", true),
            target,
            options,
            handler: Arc::new(handler),
        })
    }

    /// Serves `conversion` for the custom resource of hub `H` at
    /// `/convert-<group>-<kind>`.
    pub fn with_conversion<H: Object>(mut self, conversion: Conversion<H>) -> Self {
        self.problems.extend(conversion.problems.iter().cloned());
        let target = Target::of::<H>();
        let handler = ConversionHandler {
            conversion: Arc::new(conversion),
        };
        self.push(Entry {
            kind: WebhookKind::Conversion,
            name: target.webhook_name("convert"),
            path: target.path("convert", false),
            target,
            options: WebhookOptions::new(),
            handler: Arc::new(handler),
        })
    }

    fn push(mut self, entry: Entry) -> Self {
        if self.entries.iter().any(|e| e.path == entry.path) {
            self.problems.push(format!(
                "two webhooks registered at {}: register one {:?} webhook per kind",
                entry.path, entry.kind
            ));
        } else {
            self.entries.push(entry);
        }
        self
    }

    /// Whether nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// `(kind, webhook name, path)` of every registered webhook.
    pub fn paths(&self) -> Vec<(WebhookKind, String, String)> {
        self.entries
            .iter()
            .map(|e| (e.kind, e.name.clone(), e.path.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(group: &str, version: &str, kind: &str, plural: &str) -> Target {
        Target {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
        }
    }

    /// controller-runtime's `generateValidatePath`/`generateMutatePath`
    /// (pkg/builder/webhook.go) give the same admission paths; conversion
    /// is per CRD here, where controller-runtime serves one `/convert`.
    #[test]
    fn admission_paths_are_controller_runtimes_and_conversion_is_per_crd() {
        let widget = target("demo.concord.dev", "v1", "Widget", "widgets");
        assert_eq!(
            widget.path("validate", true),
            "/validate-demo-concord-dev-v1-widget"
        );
        assert_eq!(
            widget.path("mutate", true),
            "/mutate-demo-concord-dev-v1-widget"
        );
        assert_eq!(
            widget.path("convert", false),
            "/convert-demo-concord-dev-widget"
        );
        let config_map = target("", "v1", "ConfigMap", "configmaps");
        assert_eq!(config_map.path("validate", true), "/validate--v1-configmap");
        assert_eq!(
            config_map.webhook_name("validate"),
            "validate.configmaps.core.k8s.io"
        );
        assert_eq!(
            widget.webhook_name("default"),
            "default.widgets.demo.concord.dev"
        );
    }
}
