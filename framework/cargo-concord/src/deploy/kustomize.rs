//! The kustomize base: one file per kind of object, and a
//! `kustomization.yaml` listing them in apply order.

use serde_yaml::Value;

use super::bundle::Bundle;
use super::yaml::yaml;
use crate::Error;

/// The file the ServiceMonitor goes to: written, not listed (it needs the
/// Prometheus Operator's CRD in the cluster).
pub(super) const SERVICE_MONITOR_FILE: &str = "servicemonitor.yaml";

/// The objects grouped by file, files in the order they first appear.
pub(super) fn by_file(objects: Vec<(String, Value)>) -> Vec<(String, Vec<Value>)> {
    let mut files: Vec<(String, Vec<Value>)> = Vec::new();
    for (file, object) in objects {
        match files.iter_mut().find(|(f, _)| *f == file) {
            Some((_, list)) => list.push(object),
            None => files.push((file, vec![object])),
        }
    }
    files
}

/// Documents separated by `---`.
pub(super) fn join(objects: &[Value]) -> Result<String, Error> {
    let mut text = String::new();
    for (i, object) in objects.iter().enumerate() {
        if i > 0 {
            text.push_str("---\n");
        }
        text.push_str(&yaml(object, "a deploy object")?);
    }
    Ok(text)
}

pub(super) fn render(bundle: &Bundle) -> Result<Vec<(String, String)>, Error> {
    let header = bundle.header();
    let mut out = Vec::new();
    let mut listed = Vec::new();
    for (file, objects) in by_file(bundle.objects(true)?) {
        out.push((file.clone(), format!("{header}{}", join(&objects)?)));
        if file != SERVICE_MONITOR_FILE {
            listed.push(file);
        }
    }
    let mut kustomization = format!(
        "{header}# kubectl apply -k <this directory>; with the Prometheus Operator, add\n\
         # {SERVICE_MONITOR_FILE} to the resources (or use the Helm chart with\n\
         # serviceMonitor.enabled=true).\n\
         apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
    );
    for file in listed {
        kustomization.push_str(&format!("- {file}\n"));
    }
    out.push(("kustomization.yaml".into(), kustomization));
    Ok(out)
}
