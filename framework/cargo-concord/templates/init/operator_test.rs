//! The {{name}} operator against a real kube-apiserver and etcd, started
//! on 127.0.0.1 by concord's test environment (set
//! `CONCORD_TEST_KUBECONFIG` to use a cluster of your own instead).
//!
//! It installs the CRDs the binary prints, starts the binary as it runs in
//! a cluster, creates every object of `config/samples` and waits until
//! each reports `Ready`; then deletes them and waits until the
//! finalizers are removed and the objects gone.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use concord_testenv::TestEnv;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::Deserialize;
use {{crate}}::dev::{SAMPLES, apply_samples, install_crds};

const OPERATOR: &str = env!("CARGO_BIN_EXE_{{name}}");

/// The CRDs, as the binary prints them with `--print-crds`.
fn crds() -> anyhow::Result<Vec<CustomResourceDefinition>> {
    let output = Command::new(OPERATOR).arg("--print-crds").output()?;
    anyhow::ensure!(output.status.success(), "{OPERATOR} --print-crds failed");
    if output.stdout.trim_ascii().is_empty() {
        return Ok(Vec::new());
    }
    serde_yaml::Deserializer::from_slice(&output.stdout)
        .map(|doc| Ok(CustomResourceDefinition::deserialize(doc)?))
        .collect()
}

/// Kills the operator when the test ends, however it ends.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn every_sample_becomes_ready_and_is_cleaned_up() -> anyhow::Result<()> {
    let env = TestEnv::shared()?;
    let client = env.client()?;
    let ns = env.namespace().await?;
    let crds = crds()?;
    install_crds(&client, &crds).await?;

    let mut operator = Running(
        Command::new(OPERATOR)
            .arg("--kubeconfig")
            .arg(env.kubeconfig_path())
            .args(["--namespace", ns.name()])
            .stdin(Stdio::null())
            .spawn()?,
    );
    let samples = apply_samples(&client, &crds, Path::new(SAMPLES), ns.name()).await?;
    for sample in &samples {
        let message = sample.wait_ready(&client, Duration::from_secs(60)).await?;
        println!("{sample} is Ready: {message}");
    }
    for sample in &samples {
        sample.delete_and_wait(&client, Duration::from_secs(60)).await?;
    }
    assert!(
        operator.0.try_wait()?.is_none(),
        "the operator is still running after reconciling every sample"
    );
    Ok(())
}
