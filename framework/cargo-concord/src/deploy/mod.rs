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

mod bundle;
mod chart;
mod initial;
mod kustomize;
mod objects;
mod render;
mod webhook;
mod yaml;

#[doc(inline)]
pub use bundle::Bundle;
pub(crate) use initial::initial;
#[doc(inline)]
pub use objects::{HEALTH_PORT, METRICS_PORT, NAME_LABEL};
#[doc(inline)]
pub use webhook::Webhook;
