//! The in-process part of one write: a 4 KiB Pod (typed `Writer<Pod>`, and
//! as a `DynamicObject`) and an intent in, the request body built and sent
//! to an in-memory service that answers at once with the stored object
//! (and `/version` with v1.37), the result out. No network, no API server:
//! what concord itself costs per write, on top of the round trip.
//!
//! ```text
//! cargo bench -p kube-concord-strategies --bench write_path
//! ```

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;

use concord_featuregates::{ConflictPolicy, StrategyName};
use concord_strategies::{Intent, Mutation, Writer, strategy_for};
use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::client::Body;
use kube::core::{ApiResource, DynamicObject};
use serde_json::{Value, json};

/// A Pod of about 4 KiB as JSON: labels, annotations, two containers with
/// env, ports, probes and resources, a finalizer to remove.
fn pod() -> Value {
    let env: Vec<Value> = (0..30)
        .map(
            |i| json!({"name": format!("SETTING_{i:02}"), "value": format!("value-number-{i:02}")}),
        )
        .collect();
    let container = |name: &str| {
        json!({
            "name": name,
            "image": format!("registry.example.com/team/{name}:1.2.3"),
            "args": ["--listen=:8080", "--log-level=info"],
            "env": env,
            "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 5},
        })
    };
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "workflow-step-0001", "namespace": "bench", "uid": "0b8c7e1a-1111-2222-3333-444455556666",
            "resourceVersion": "123456",
            "labels": {"app": "bench", "workflows.argoproj.io/workflow": "wf-1", "tier": "batch"},
            "annotations": {"workflows.argoproj.io/node-name": "wf-1[0].step", "note": "x".repeat(200)},
            "finalizers": ["workflows.argoproj.io/status", "example.com/other"],
        },
        "spec": {"containers": [container("main"), container("wait")], "restartPolicy": "Never", "nodeName": "node-1"},
        "status": {"phase": "Succeeded"},
    })
}

fn client(stored: Value) -> Client {
    let body = serde_json::to_vec(&stored).unwrap();
    let version = serde_json::to_vec(&json!({
        "major": "1", "minor": "37", "gitVersion": "v1.37.2", "gitCommit": "", "gitTreeState": "",
        "buildDate": "", "goVersion": "", "compiler": "", "platform": "",
    }))
    .unwrap();
    let service = tower::service_fn(move |req: http::Request<Body>| {
        let body = if req.uri().path() == "/version" {
            version.clone()
        } else {
            body.clone()
        };
        async move {
            Ok::<_, Infallible>(
                http::Response::builder()
                    .status(200)
                    .header("content-type", "application/json")
                    .body(Body::from(body))
                    .unwrap(),
            )
        }
    });
    Client::new(service, "bench")
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let observed = pod();
    assert!(serde_json::to_vec(&observed).unwrap().len() >= 4000);
    let mut stored = observed.clone();
    stored["metadata"]["finalizers"] = json!(["example.com/other"]);
    stored["metadata"]["resourceVersion"] = json!("123457");
    let typed: Pod = serde_json::from_value(observed.clone()).unwrap();
    let untyped: DynamicObject = serde_json::from_value(observed).unwrap();
    let mutation = Mutation::from(Intent::remove_finalizer("workflows.argoproj.io/status"));
    let mut group = c.benchmark_group("write_path");
    for name in [
        StrategyName::Lax,
        StrategyName::Strict,
        StrategyName::Update,
    ] {
        let writer = runtime.block_on(async {
            Writer::<Pod>::new(
                client(stored.clone()),
                strategy_for(name, ConflictPolicy::default()),
            )
            .with_builtin_type()
        });
        group.bench_function(format!("{name}_typed_pod_4k"), |b| {
            b.iter(|| {
                runtime
                    .block_on(writer.write(&typed, &mutation))
                    .expect("write")
            })
        });
        let dynamic = runtime.block_on(async {
            Writer::<DynamicObject>::new_with(
                client(stored.clone()),
                strategy_for(name, ConflictPolicy::default()),
                &ApiResource::erase::<Pod>(&()),
            )
        });
        group.bench_function(format!("{name}_dynamic_pod_4k"), |b| {
            b.iter(|| {
                runtime
                    .block_on(dynamic.write(&untyped, &mutation))
                    .expect("write")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
