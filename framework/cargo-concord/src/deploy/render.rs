//! The two renderings of a [`Bundle`]: the kustomize base and the Helm
//! chart, and both as the files of the deploy directory.

use super::bundle::Bundle;
use super::{chart, kustomize};
use crate::Error;

impl Bundle {
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
}

#[cfg(test)]
mod tests {
    use serde_yaml::Value;

    use super::*;
    use crate::deploy::Webhook;

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
