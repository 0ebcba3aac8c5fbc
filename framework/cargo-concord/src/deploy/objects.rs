//! The objects of a [`Bundle`], with the namespace, image and replica
//! count it holds: the kustomize base writes them as they are, the chart
//! replaces those values by template expressions.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EnvVar, EnvVarSource,
    HTTPGetAction, Namespace, ObjectFieldSelector, PodSpec, PodTemplateSpec, Probe,
    ResourceRequirements, SecretVolumeSource, SecurityContext, Service, ServiceAccount,
    ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_yaml::Value;

use super::bundle::Bundle;
use super::webhook::Webhook;
use super::yaml::to_value;
use crate::Error;

/// The label every object carries, with the operator's name.
pub const NAME_LABEL: &str = "app.kubernetes.io/name";

/// The port the Deployment serves `/metrics` on (`--metrics-bind-address`).
pub const METRICS_PORT: i32 = 8080;
/// The port the Deployment serves `/healthz` and `/readyz` on
/// (`--health-probe-bind-address`).
pub const HEALTH_PORT: i32 = 8081;
/// Where the ConfigMap is mounted.
const CONFIG_DIR: &str = "/etc/concord";
/// The label that tells the metrics Service from the webhook Service.
const COMPONENT_LABEL: &str = "app.kubernetes.io/component";

impl Bundle {
    /// Every object of the deployment, by file, in apply order; the
    /// ServiceMonitor (file `servicemonitor.yaml`) only when
    /// `service_monitor` is set.
    ///
    /// # Errors
    ///
    /// [`Error::Serialize`] when an object cannot be serialised.
    pub fn objects(&self, service_monitor: bool) -> Result<Vec<(String, Value)>, Error> {
        all(self, service_monitor)
    }
}

/// Every object, by file, in apply order.
pub(super) fn all(bundle: &Bundle, service_monitor: bool) -> Result<Vec<(String, Value)>, Error> {
    let mut out: Vec<(String, Value)> = Vec::new();
    let mut push = |file: &str, value: Value| out.push((file.to_owned(), value));
    for crd in &bundle.crds {
        push("crds.yaml", crd.clone());
    }
    push(
        "namespace.yaml",
        to_value(namespace(bundle), "the Namespace")?,
    );
    push(
        "serviceaccount.yaml",
        to_value(service_account(bundle), "the ServiceAccount")?,
    );
    for object in &bundle.rbac {
        push("rbac.yaml", object.clone());
    }
    for binding in bindings(bundle)? {
        push("rolebinding.yaml", binding);
    }
    push(
        "configmap.yaml",
        to_value(configmap(bundle), "the ConfigMap")?,
    );
    push(
        "deployment.yaml",
        to_value(deployment(bundle), "the Deployment")?,
    );
    push(
        "service.yaml",
        to_value(metrics_service(bundle), "the metrics Service")?,
    );
    if let Some(webhook) = &bundle.webhook {
        push(
            "service.yaml",
            to_value(webhook_service(bundle, webhook), "the webhook Service")?,
        );
        for configuration in &webhook.configurations {
            push("webhooks.yaml", configuration.clone());
        }
    }
    for (file, object) in &bundle.extra {
        push(file, object.clone());
    }
    if service_monitor {
        push("servicemonitor.yaml", service_monitor_object(bundle)?);
    }
    Ok(out)
}

fn labels(bundle: &Bundle) -> BTreeMap<String, String> {
    let mut labels = bundle.labels.clone();
    labels.insert(NAME_LABEL.to_owned(), bundle.name.clone());
    labels
}

fn selector(bundle: &Bundle) -> BTreeMap<String, String> {
    BTreeMap::from([(NAME_LABEL.to_owned(), bundle.name.clone())])
}

fn metadata(bundle: &Bundle, name: &str, namespaced: bool) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespaced.then(|| bundle.namespace.clone()),
        labels: Some(labels(bundle)),
        ..ObjectMeta::default()
    }
}

fn namespace(bundle: &Bundle) -> Namespace {
    Namespace {
        metadata: metadata(bundle, &bundle.namespace, false),
        ..Namespace::default()
    }
}

fn service_account(bundle: &Bundle) -> ServiceAccount {
    ServiceAccount {
        metadata: metadata(bundle, &bundle.name, true),
        ..ServiceAccount::default()
    }
}

/// A RoleBinding for the Role, a ClusterRoleBinding for the ClusterRole
/// named after the operator; other roles (the metrics readers') are bound
/// by whoever uses them.
fn bindings(bundle: &Bundle) -> Result<Vec<Value>, Error> {
    let subject = Subject {
        kind: "ServiceAccount".into(),
        name: bundle.name.clone(),
        namespace: Some(bundle.namespace.clone()),
        ..Subject::default()
    };
    let role_ref = |kind: &str| RoleRef {
        api_group: Some("rbac.authorization.k8s.io".into()),
        kind: kind.into(),
        name: bundle.name.clone(),
    };
    let mut out = Vec::new();
    for object in &bundle.rbac {
        if object["metadata"]["name"].as_str() != Some(bundle.name.as_str()) {
            continue;
        }
        match object["kind"].as_str() {
            Some("Role") => out.push(to_value(
                RoleBinding {
                    metadata: metadata(bundle, &bundle.name, true),
                    role_ref: role_ref("Role"),
                    subjects: Some(vec![subject.clone()]),
                },
                "the RoleBinding",
            )?),
            Some("ClusterRole") => out.push(to_value(
                ClusterRoleBinding {
                    metadata: metadata(bundle, &bundle.name, false),
                    role_ref: role_ref("ClusterRole"),
                    subjects: Some(vec![subject.clone()]),
                },
                "the ClusterRoleBinding",
            )?),
            _ => {}
        }
    }
    Ok(out)
}

fn configmap(bundle: &Bundle) -> ConfigMap {
    ConfigMap {
        metadata: metadata(bundle, &config_name(bundle), true),
        data: Some(BTreeMap::from([(
            "config.yaml".to_owned(),
            bundle.config.clone(),
        )])),
        ..ConfigMap::default()
    }
}

fn config_name(bundle: &Bundle) -> String {
    format!("{}-config", bundle.name)
}

/// The name of the metrics Service.
pub(super) fn metrics_service_name(bundle: &Bundle) -> String {
    format!("{}-metrics", bundle.name)
}

/// Requests and limits of the container (the chart's `resources` value).
pub(super) fn resources() -> ResourceRequirements {
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_owned(), Quantity("50m".into())),
            ("memory".to_owned(), Quantity("32Mi".into())),
        ])),
        limits: Some(BTreeMap::from([(
            "memory".to_owned(),
            Quantity("128Mi".into()),
        )])),
        ..ResourceRequirements::default()
    }
}

fn port(name: &str, number: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.into()),
        container_port: number,
        ..ContainerPort::default()
    }
}

fn probe(path: &str, initial_delay: Option<i32>, period: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::String("health".into()),
            ..HTTPGetAction::default()
        }),
        initial_delay_seconds: initial_delay,
        period_seconds: Some(period),
        ..Probe::default()
    }
}

fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: Some(true),
        ..VolumeMount::default()
    }
}

fn deployment(bundle: &Bundle) -> Deployment {
    let mut args = bundle.args.clone();
    args.extend([
        format!("--config={CONFIG_DIR}/config.yaml"),
        "--leader-elect".into(),
        format!("--leader-election-id={}", bundle.name),
        format!("--metrics-bind-address=:{METRICS_PORT}"),
        format!("--health-probe-bind-address=:{HEALTH_PORT}"),
    ]);
    let mut ports = vec![port("metrics", METRICS_PORT), port("health", HEALTH_PORT)];
    let mut mounts = vec![mount("config", CONFIG_DIR)];
    let mut volumes = vec![Volume {
        name: "config".into(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_name(bundle),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    }];
    if let Some(webhook) = &bundle.webhook {
        args.push(format!(
            "--webhook-bind-address=:{}",
            webhook.container_port
        ));
        args.push(format!("--webhook-cert-dir={}", webhook.cert_dir));
        ports.push(port("webhook", webhook.container_port));
        mounts.push(mount("webhook-cert", &webhook.cert_dir));
        volumes.push(Volume {
            name: "webhook-cert".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(webhook.secret.clone()),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
    }
    let container = Container {
        name: "operator".into(),
        image: Some(bundle.image.clone()),
        args: Some(args),
        env: Some(vec![
            // Watch only this namespace; the Role grants nothing elsewhere.
            EnvVar {
                name: "WATCH_NAMESPACE".into(),
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        field_path: "metadata.namespace".into(),
                        ..ObjectFieldSelector::default()
                    }),
                    ..EnvVarSource::default()
                }),
                ..EnvVar::default()
            },
            EnvVar {
                name: "RUST_LOG".into(),
                value: Some("info".into()),
                ..EnvVar::default()
            },
        ]),
        ports: Some(ports),
        liveness_probe: Some(probe("/healthz", Some(5), 10)),
        readiness_probe: Some(probe("/readyz", None, 5)),
        resources: Some(resources()),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Capabilities::default()
            }),
            ..SecurityContext::default()
        }),
        volume_mounts: Some(mounts),
        ..Container::default()
    };
    Deployment {
        metadata: metadata(bundle, &bundle.name, true),
        spec: DeploymentSpec {
            replicas: Some(bundle.replicas),
            selector: LabelSelector {
                match_labels: Some(selector(bundle)),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(bundle)),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(bundle.name.clone()),
                    containers: vec![container],
                    volumes: Some(volumes),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        },
        ..Deployment::default()
    }
}

fn service(bundle: &Bundle, name: &str, component: &str, port: i32, target: &str) -> Service {
    let mut metadata = metadata(bundle, name, true);
    if let Some(labels) = metadata.labels.as_mut() {
        labels.insert(COMPONENT_LABEL.into(), component.into());
    }
    Service {
        metadata,
        spec: Some(ServiceSpec {
            selector: Some(selector(bundle)),
            ports: Some(vec![ServicePort {
                name: Some(target.into()),
                port,
                target_port: Some(IntOrString::String(target.into())),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

fn metrics_service(bundle: &Bundle) -> Service {
    service(
        bundle,
        &metrics_service_name(bundle),
        "metrics",
        METRICS_PORT,
        "metrics",
    )
}

fn webhook_service(bundle: &Bundle, webhook: &Webhook) -> Service {
    service(bundle, &webhook.service, "webhook", webhook.port, "webhook")
}

/// The Prometheus Operator's ServiceMonitor (`monitoring.coreos.com/v1`),
/// with the fields concord fills.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ServiceMonitor {
    api_version: &'static str,
    kind: &'static str,
    metadata: ObjectMeta,
    spec: ServiceMonitorSpec,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ServiceMonitorSpec {
    selector: LabelSelector,
    endpoints: Vec<BTreeMap<&'static str, &'static str>>,
}

/// A ServiceMonitor for the metrics Service.
fn service_monitor_object(bundle: &Bundle) -> Result<Value, Error> {
    let mut match_labels = selector(bundle);
    match_labels.insert(COMPONENT_LABEL.into(), "metrics".into());
    to_value(
        ServiceMonitor {
            api_version: "monitoring.coreos.com/v1",
            kind: "ServiceMonitor",
            metadata: metadata(bundle, &bundle.name, true),
            spec: ServiceMonitorSpec {
                selector: LabelSelector {
                    match_labels: Some(match_labels),
                    ..LabelSelector::default()
                },
                endpoints: vec![BTreeMap::from([("port", "metrics"), ("path", "/metrics")])],
            },
        },
        "the ServiceMonitor",
    )
}
