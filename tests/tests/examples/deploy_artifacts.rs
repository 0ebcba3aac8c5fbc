//! The deploy artifacts `cargo concord init`/`generate` write and the
//! examples carry: a kustomize base and a Helm chart rendered from one
//! model (`cargo_concord::deploy::Bundle`).
//!
//! Always: the chart's templates, rendered with their default values by a
//! small renderer of the Helm subset they use, hold exactly the objects of
//! the kustomize base; with another `namespace` value every reference to
//! the namespace follows it; the ServiceMonitor appears only when enabled.
//!
//! With `CONCORD_TEST_DEPLOY_TOOLS=1` (`.ci/run` sets it): helm (v4.3.2)
//! and kustomize (api v0.21.2), built from their Go modules in
//! `tests/testenv/deploytools` and cached like the control plane, run
//! `helm lint`, `helm template` and `kustomize build`; both outputs hold
//! the same objects and pass a server-side dry-run on the real API server
//! (CRDs installed for real first, ServiceMonitor enabled against a
//! minimal stand-in of its CRD).
//!
//! ```text
//! cargo test -p concord-tests --test examples deploy_artifacts::
//! CONCORD_TEST_DEPLOY_TOOLS=1 cargo test -p concord-tests --test examples deploy_artifacts::
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, bail, ensure};
use concord_testenv::{GoProgram, TestEnv};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Scope, pinned_kind};
use serde::Deserialize as _;
use serde_json::Value;

/// The variable that turns on the runs of the real tools.
const TOOLS_FLAG: &str = "CONCORD_TEST_DEPLOY_TOOLS";

/// A deploy directory: its kustomize base at the top, its chart under
/// `chart/<name>/`.
struct Case {
    name: String,
    namespace: String,
    dir: PathBuf,
}

impl Case {
    fn chart(&self) -> PathBuf {
        self.dir.join("chart").join(&self.name)
    }
}

/// The examples' deploy directories and the one of a freshly scaffolded
/// project (kept alive by the returned directory).
fn cases() -> Result<(Vec<Case>, tempfile::TempDir)> {
    let mut cases: Vec<Case> = concord_examples::deploy::EXAMPLES
        .iter()
        .map(|example| Case {
            name: (*example).to_owned(),
            namespace: (*example).to_owned(),
            dir: concord_examples::deploy::dir(example),
        })
        .collect();
    let tmp = tempfile::tempdir()?;
    let project = tmp.path().join("lantern");
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let args = cargo_concord::InitArgs {
        name: "lantern".into(),
        domain: "beacons.test".into(),
        concord_path: Some(checkout.canonicalize()?),
        concord_git: None,
        concord_version: None,
        dir: Some(project.clone()),
    };
    cargo_concord::init(&args)?;
    cases.push(Case {
        name: "lantern".into(),
        namespace: "lantern-system".into(),
        dir: project.join("deploy"),
    });
    Ok((cases, tmp))
}

/// The objects of a stream of YAML documents.
fn documents(text: &str, what: &str) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value = Value::deserialize(document).with_context(|| what.to_owned())?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

/// What `kustomize build` would gather: the objects of every file the
/// kustomization lists, plus `extra` files.
fn base_objects(dir: &Path, extra: &[&str]) -> Result<Vec<Value>> {
    let kustomization = documents(
        &std::fs::read_to_string(dir.join("kustomization.yaml"))?,
        "kustomization.yaml",
    )?;
    let mut files: Vec<String> = kustomization[0]["resources"]
        .as_array()
        .context("resources")?
        .iter()
        .map(|f| f.as_str().unwrap_or_default().to_owned())
        .collect();
    files.extend(extra.iter().map(|f| (*f).to_owned()));
    let mut out = Vec::new();
    for file in files {
        let path = dir.join(&file);
        out.extend(documents(
            &std::fs::read_to_string(&path).with_context(|| path.display().to_string())?,
            &file,
        )?);
    }
    Ok(out)
}

/// The value at a dotted `path` of `values`.
fn lookup<'v>(values: &'v Value, path: &str) -> Result<&'v Value> {
    path.split('.')
        .try_fold(values, |v, key| v.get(key))
        .with_context(|| format!("values.yaml has no {path}"))
}

/// Renders the chart as `helm template` does for the constructs its
/// templates use — `{{ .Values.X }}`, `{{- toYaml .Values.X | nindent N }}`
/// and a whole-file `{{- if .Values.X }}` … `{{- end }}` — and fails on any
/// other.
fn render_chart(chart: &Path, overrides: &[(&str, Value)]) -> Result<Vec<Value>> {
    let mut values: Value =
        serde_yaml::from_str(&std::fs::read_to_string(chart.join("values.yaml"))?)?;
    for (path, value) in overrides {
        let mut slot = &mut values;
        for key in path.split('.') {
            slot = slot
                .get_mut(key)
                .with_context(|| format!("no value {path}"))?;
        }
        *slot = value.clone();
    }
    let mut templates: Vec<PathBuf> = std::fs::read_dir(chart.join("templates"))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    templates.sort();
    let mut objects = Vec::new();
    for template in templates {
        let mut out = String::new();
        let mut keep = true;
        for line in std::fs::read_to_string(&template)?.lines() {
            let trimmed = line.trim();
            if let Some(path) = trimmed
                .strip_prefix("{{- if .Values.")
                .and_then(|r| r.strip_suffix(" }}"))
            {
                keep = lookup(&values, path)?.as_bool().context("a boolean")?;
            } else if trimmed == "{{- end }}" {
                keep = true;
            } else if !keep {
            } else if let Some(rest) = trimmed.strip_prefix("{{- toYaml .Values.") {
                let (path, indent) = rest
                    .strip_suffix(" }}")
                    .and_then(|r| r.split_once(" | nindent "))
                    .context("toYaml .Values.X | nindent N")?;
                let indent: usize = indent.parse()?;
                while out.ends_with(char::is_whitespace) {
                    out.pop();
                }
                for value_line in serde_yaml::to_string(lookup(&values, path)?)?.lines() {
                    out.push('\n');
                    out.push_str(&" ".repeat(indent));
                    out.push_str(value_line);
                }
                out.push('\n');
            } else {
                let mut line = line.to_owned();
                while let Some(start) = line.find("{{ .Values.") {
                    let end = line[start..].find(" }}").context("an unclosed {{")? + start;
                    let value = lookup(&values, &line[start + 11..end])?;
                    let text = match value {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    line.replace_range(start..end + 3, &text);
                }
                ensure!(
                    !line.contains("{{"),
                    "{}: a template construct this test does not know: {line}",
                    template.display()
                );
                out.push_str(&line);
                out.push('\n');
            }
        }
        objects.extend(documents(&out, &template.display().to_string())?);
    }
    Ok(objects)
}

/// `value` with every whole float written as an integer: YAML's `20.0` and
/// `20` are one number to the API server, and kustomize writes the first
/// as the second.
fn normalized(value: Value) -> Value {
    match value {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e15 => Value::from(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(normalized).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, normalized(v))).collect())
        }
        other => other,
    }
}

/// `(kind, namespace, name)` of every object, sorted, with the object.
fn keyed(objects: Vec<Value>) -> BTreeMap<(String, String, String), Value> {
    objects
        .into_iter()
        .map(normalized)
        .map(|o| {
            let field = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (
                (
                    field(&o["kind"]),
                    field(&o["metadata"]["namespace"]),
                    field(&o["metadata"]["name"]),
                ),
                o,
            )
        })
        .collect()
}

/// Every string of `value`, with the key it sits under.
fn strings<'v>(value: &'v Value, key: &str, out: &mut Vec<(String, &'v str)>) {
    match value {
        Value::String(s) => out.push((key.to_owned(), s)),
        Value::Array(items) => items.iter().for_each(|i| strings(i, key, out)),
        Value::Object(map) => map.iter().for_each(|(k, v)| strings(v, k, out)),
        _ => {}
    }
}

#[test]
fn chart_and_kustomize_base_hold_the_same_objects() -> Result<()> {
    let (cases, _tmp) = cases()?;
    for case in &cases {
        let base = keyed(base_objects(&case.dir, &[])?);
        let chart = keyed(render_chart(&case.chart(), &[])?);
        assert_eq!(
            base.keys().collect::<Vec<_>>(),
            chart.keys().collect::<Vec<_>>(),
            "{}: the chart with its default values and the kustomize base hold the same objects",
            case.name
        );
        for (key, object) in &base {
            assert_eq!(&chart[key], object, "{}: {key:?}", case.name);
        }
        for kind in [
            "Namespace",
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "ConfigMap",
            "Deployment",
            "Service",
        ] {
            assert!(
                base.keys().any(|(k, ..)| k == kind),
                "{}: has a {kind}",
                case.name
            );
        }
        let deployment = base
            .iter()
            .find(|((k, ..), _)| k == "Deployment")
            .map(|(_, o)| o)
            .context("a Deployment")?;
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
        assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
        assert!(
            container["ports"]
                .as_array()
                .context("ports")?
                .iter()
                .any(|p| p["name"] == "metrics"),
            "{}: a metrics port",
            case.name
        );

        // The ServiceMonitor: only when enabled, the same as the base's file.
        assert!(!chart.keys().any(|(k, ..)| k == "ServiceMonitor"));
        let monitored = keyed(render_chart(
            &case.chart(),
            &[("serviceMonitor.enabled", Value::Bool(true))],
        )?);
        let with_monitor = keyed(base_objects(&case.dir, &["servicemonitor.yaml"])?);
        assert_eq!(
            monitored, with_monitor,
            "{}: serviceMonitor.enabled=true adds servicemonitor.yaml",
            case.name
        );

        // Another namespace: every reference to the default one follows.
        let elsewhere = "elsewhere";
        let moved = render_chart(
            &case.chart(),
            &[
                ("namespace", Value::String(elsewhere.into())),
                ("replicas", Value::from(5)),
                ("image", Value::String("registry.test/op:9".into())),
            ],
        )?;
        assert_eq!(moved.len(), base.len());
        for object in &moved {
            let mut found = Vec::new();
            strings(object, "", &mut found);
            for (key, text) in found {
                let old = &case.namespace;
                assert!(
                    !(key == "namespace" && text == old
                        || text.starts_with(&format!("{old}/"))
                        || text.contains(&format!(".{old}.svc"))),
                    "{}: {} {} still names namespace {old} in {key}: {text}",
                    case.name,
                    object["kind"],
                    object["metadata"]["name"]
                );
            }
            match object["kind"].as_str() {
                Some("Namespace") => assert_eq!(object["metadata"]["name"], elsewhere),
                Some("Deployment") => {
                    assert_eq!(object["spec"]["replicas"], 5);
                    assert_eq!(
                        object["spec"]["template"]["spec"]["containers"][0]["image"],
                        "registry.test/op:9"
                    );
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// helm and kustomize in one executable, built from their Go modules.
fn deploytools() -> Result<PathBuf> {
    Ok(GoProgram::new(
        "deploytools",
        concat!(env!("CARGO_MANIFEST_DIR"), "/testenv/deploytools"),
        "helm and kustomize",
    )
    .with_hint("to skip it, unset CONCORD_TEST_DEPLOY_TOOLS (the rendering from the model is still checked)")
    .ensure()?)
}

/// Runs `tool args`, returning its standard output.
fn run(tool: &Path, args: &[&str]) -> Result<String> {
    let output = Command::new(tool)
        .args(args)
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("concord-helm-cache"),
        )
        .env(
            "HELM_CONFIG_HOME",
            std::env::temp_dir().join("concord-helm-config"),
        )
        .env(
            "HELM_DATA_HOME",
            std::env::temp_dir().join("concord-helm-data"),
        )
        .output()
        .with_context(|| format!("running {}", tool.display()))?;
    if !output.status.success() {
        bail!(
            "`deploytools {}` failed: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8(output.stdout)?)
}

/// A minimal stand-in CRD of `group` accepting any `spec` (the test control
/// plane has neither cert-manager nor the Prometheus Operator).
fn stand_in(group: &str, kind: &str, plural: &str) -> Result<CustomResourceDefinition> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase()},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": true
                    }}
                }}
            }]
        }
    }))?)
}

/// A server-side dry-run of every object, in the namespaces they name
/// (which must exist).
async fn dry_run(client: &kube::Client, objects: &[Value], what: &str) -> Result<()> {
    let params = PatchParams::apply("concord-deploy-artifacts")
        .force()
        .dry_run();
    for object in objects {
        let api_version = object["apiVersion"].as_str().context("apiVersion")?;
        let kind = object["kind"].as_str().context("kind")?;
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let (resource, caps) =
            pinned_kind(client, &GroupVersionKind::gvk(group, version, kind)).await?;
        let name = object["metadata"]["name"].as_str().context("name")?;
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => {
                let ns = object["metadata"]["namespace"]
                    .as_str()
                    .with_context(|| format!("{what}: {kind} {name} has a namespace"))?;
                Api::namespaced_with(client.clone(), ns, &resource)
            }
            Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        api.patch(name, &params, &Patch::Apply(object))
            .await
            .with_context(|| format!("{what}: server-side dry-run of {kind} {name}"))?;
    }
    Ok(())
}

async fn ensure_namespace(client: &kube::Client, name: &str) -> Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(name).await?.is_none() {
        let namespace = Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            ..Namespace::default()
        };
        namespaces
            .create(&PostParams::default(), &namespace)
            .await?;
    }
    Ok(())
}

#[tokio::test]
async fn helm_and_kustomize_render_what_the_api_server_accepts() -> Result<()> {
    if std::env::var_os(TOOLS_FLAG).is_none() {
        println!(
            "deploy_artifacts: helm lint, helm template, kustomize build and their dry-runs need {TOOLS_FLAG}=1 (helm and kustomize are built from Go modules); the rendering from the model was checked"
        );
        return Ok(());
    }
    let tools = deploytools()?;
    let env = TestEnv::shared()?;
    let client = env.client()?;
    env.install_crd(stand_in("cert-manager.io", "Issuer", "issuers")?)
        .await?;
    env.install_crd(stand_in("cert-manager.io", "Certificate", "certificates")?)
        .await?;
    env.install_crd(stand_in(
        "monitoring.coreos.com",
        "ServiceMonitor",
        "servicemonitors",
    )?)
    .await?;
    let (cases, _tmp) = cases()?;
    for case in &cases {
        let chart = case.chart();
        let chart = chart.to_str().context("a UTF-8 path")?;
        let dir = case.dir.to_str().context("a UTF-8 path")?;
        run(&tools, &["helm", "lint", "--strict", chart])?;
        let built = documents(
            &run(&tools, &["kustomize", "build", dir])?,
            "kustomize build",
        )?;
        let templated = documents(
            &run(&tools, &["helm", "template", &case.name, chart])?,
            "helm template",
        )?;
        assert_eq!(
            keyed(built.clone()),
            keyed(templated),
            "{}: helm template (default values) and kustomize build give the same objects",
            case.name
        );

        // The CRDs for real, so that custom objects can be dry-run.
        for crd in built
            .iter()
            .filter(|o| o["kind"] == "CustomResourceDefinition")
        {
            env.install_crd(serde_json::from_value(crd.clone())?)
                .await?;
        }
        ensure_namespace(&client, &case.namespace).await?;
        dry_run(&client, &built, &format!("{}: kustomize build", case.name)).await?;

        // The chart into another namespace, with its ServiceMonitor.
        let elsewhere = format!("{}-helm", case.name);
        ensure_namespace(&client, &elsewhere).await?;
        let set = format!("namespace={elsewhere},serviceMonitor.enabled=true,replicas=3");
        let installed = documents(
            &run(
                &tools,
                &["helm", "template", &case.name, chart, "--set", &set],
            )?,
            "helm template --set",
        )?;
        assert!(
            installed.iter().any(|o| o["kind"] == "ServiceMonitor"),
            "{}: serviceMonitor.enabled=true renders a ServiceMonitor",
            case.name
        );
        dry_run(
            &client,
            &installed,
            &format!("{}: helm template", case.name),
        )
        .await?;
    }
    Ok(())
}
