//! The Helm chart: the objects of the kustomize base with the values a
//! user sets at install time (namespace, image, replicas, resources,
//! whether to create the namespace and a ServiceMonitor) replaced by
//! template expressions.

use serde::Serialize;
use serde_yaml::Value;

use super::bundle::Bundle;
use super::kustomize::{SERVICE_MONITOR_FILE, by_file, join};
use super::objects::resources;
use crate::Error;

const NAMESPACE: &str = "{{ .Values.namespace }}";
const IMAGE: &str = "{{ .Values.image }}";
/// Stand-ins for values that are not strings: replaced in the text, where
/// they can be unquoted.
const REPLICAS: &str = "__concord_values_replicas__";
const RESOURCES: &str = "__concord_values_resources__";

/// `values.yaml`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Values {
    image: String,
    replicas: i32,
    namespace: String,
    create_namespace: bool,
    service_monitor: ServiceMonitorValues,
    resources: k8s_openapi::api::core::v1::ResourceRequirements,
}

#[derive(Serialize)]
struct ServiceMonitorValues {
    enabled: bool,
}

/// `Chart.yaml`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Chart {
    api_version: &'static str,
    name: String,
    description: String,
    #[serde(rename = "type")]
    kind: &'static str,
    version: String,
    app_version: String,
}

pub(super) fn render(bundle: &Bundle) -> Result<Vec<(String, String)>, Error> {
    let header = bundle.header();
    let chart = Chart {
        api_version: "v2",
        name: bundle.name.clone(),
        description: format!("The {} Kubernetes operator", bundle.name),
        kind: "application",
        version: bundle.version.clone(),
        app_version: bundle.version.clone(),
    };
    let values = Values {
        image: bundle.image.clone(),
        replicas: bundle.replicas,
        namespace: bundle.namespace.clone(),
        create_namespace: true,
        service_monitor: ServiceMonitorValues { enabled: false },
        resources: resources(),
    };
    let values_text = serde_yaml::to_string(&values).map_err(|source| Error::Serialize {
        what: "values.yaml",
        source,
    })?;
    let mut out = vec![
        (
            "Chart.yaml".to_owned(),
            format!(
                "{header}{}",
                serde_yaml::to_string(&chart).map_err(|source| Error::Serialize {
                    what: "Chart.yaml",
                    source,
                })?
            ),
        ),
        (
            "values.yaml".to_owned(),
            format!("{header}{VALUES_DOC}{values_text}"),
        ),
    ];
    let mut objects = bundle.objects(true)?;
    for (_, object) in &mut objects {
        templated(object, &bundle.namespace);
    }
    for (file, objects) in by_file(objects) {
        let body = expand(&join(&objects)?);
        let body = match file.as_str() {
            "namespace.yaml" => {
                format!("{{{{- if .Values.createNamespace }}}}\n{body}{{{{- end }}}}\n")
            }
            SERVICE_MONITOR_FILE => {
                format!("{{{{- if .Values.serviceMonitor.enabled }}}}\n{body}{{{{- end }}}}\n")
            }
            _ => body,
        };
        out.push((format!("templates/{file}"), format!("{header}{body}")));
    }
    Ok(out)
}

/// What each value does, at the top of `values.yaml`.
const VALUES_DOC: &str = "\
# image            the operator's container image
# replicas         Deployment replicas (one leads: --leader-elect)
# namespace        where the operator runs and what it watches
# createNamespace  create that namespace (false when it exists already)
# serviceMonitor   a Prometheus Operator ServiceMonitor for the metrics Service
# resources        the container's requests and limits
";

/// Replaces, in place, the namespace wherever the object names it (a
/// `namespace` field, a Namespace's name, a `namespace/name` reference such
/// as cert-manager's annotation, a `<service>.<namespace>.svc` DNS name), and
/// the Deployment's image, replicas and resources.
fn templated(object: &mut Value, namespace: &str) {
    if object["kind"].as_str() == Some("Namespace") {
        object["metadata"]["name"] = NAMESPACE.into();
    }
    if object["kind"].as_str() == Some("Deployment") {
        object["spec"]["replicas"] = REPLICAS.into();
        if let Some(containers) = object["spec"]["template"]["spec"]["containers"].as_sequence_mut()
        {
            for container in containers {
                container["image"] = IMAGE.into();
                container["resources"] = RESOURCES.into();
            }
        }
    }
    replace_namespace(object, namespace);
}

fn replace_namespace(value: &mut Value, namespace: &str) {
    match value {
        Value::Mapping(map) => {
            for (key, child) in map.iter_mut() {
                if key.as_str() == Some("namespace") && child.as_str() == Some(namespace) {
                    *child = NAMESPACE.into();
                } else {
                    replace_namespace(child, namespace);
                }
            }
        }
        Value::Sequence(items) => items
            .iter_mut()
            .for_each(|item| replace_namespace(item, namespace)),
        Value::String(text) => {
            if let Some(rest) = text.strip_prefix(&format!("{namespace}/")) {
                *text = format!("{NAMESPACE}/{rest}");
            }
            let dns = format!(".{namespace}.svc");
            if text.contains(&dns) {
                *text = text.replace(&dns, &format!(".{NAMESPACE}.svc"));
            }
        }
        Value::Tagged(tagged) => replace_namespace(&mut tagged.value, namespace),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Turns the stand-ins for non-string values into template expressions.
fn expand(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if let Some(at) = line.find(&format!("resources: {RESOURCES}")) {
            out.push_str(&format!(
                "{}resources:\n{{{{- toYaml .Values.resources | nindent {} }}}}\n",
                &line[..at],
                at + 2
            ));
        } else {
            out.push_str(&line.replace(REPLICAS, "{{ .Values.replicas }}"));
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_references_become_the_namespace_value() -> Result<(), Error> {
        let mut object: Value = serde_yaml::from_str(
            "kind: ValidatingWebhookConfiguration\nmetadata:\n  name: demo\n  annotations:\n    cert-manager.io/inject-ca-from: demo/demo-cert\nwebhooks:\n- clientConfig:\n    service:\n      name: demo\n      namespace: demo\n      port: 443\n  dnsNames: [demo-webhook.demo.svc]\n",
        )
        .map_err(|source| Error::Serialize { what: "test", source })?;
        templated(&mut object, "demo");
        let text = super::super::yaml::yaml(&object, "a test object")?;
        assert!(
            text.contains("inject-ca-from: '{{ .Values.namespace }}/demo-cert'"),
            "{text}"
        );
        assert!(
            text.contains("namespace: '{{ .Values.namespace }}'"),
            "{text}"
        );
        assert!(
            text.contains("demo-webhook.{{ .Values.namespace }}.svc"),
            "{text}"
        );
        // The names that merely equal the namespace stay.
        assert!(text.contains("name: demo\n"), "{text}");
        Ok(())
    }

    #[test]
    fn resources_are_indented_under_their_key() {
        let text =
            format!("    - image: x\n      resources: {RESOURCES}\n  replicas: {REPLICAS}\n");
        assert_eq!(
            expand(&text),
            "    - image: x\n      resources:\n{{- toYaml .Values.resources | nindent 8 }}\n  replicas: {{ .Values.replicas }}\n"
        );
    }
}
