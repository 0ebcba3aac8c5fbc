//! A canned-response API server for unit tests: no network, no races
//! proven — only how a strategy reacts to given answers.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use kube::Client;
use kube::client::Body;
use kube::core::{ApiResource, DynamicObject};
use serde_json::{Value, json};

use crate::Target;

/// Requests seen, as `METHOD path`.
pub(crate) type Seen = Arc<Mutex<Vec<String>>>;

/// A target whose client answers with `answers` in order (status, body),
/// repeating the last one.
pub(crate) fn target(answers: Vec<(u16, Value)>) -> (Target, Seen) {
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let answers = Arc::new(Mutex::new(answers));
    let service = tower::service_fn(move |req: http::Request<Body>| {
        let (log, answers) = (log.clone(), answers.clone());
        async move {
            log.lock()
                .unwrap()
                .push(format!("{} {}", req.method(), req.uri().path()));
            let (code, body) = {
                let mut answers = answers.lock().unwrap();
                if answers.len() > 1 {
                    answers.remove(0)
                } else {
                    answers[0].clone()
                }
            };
            let response = http::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(&body).unwrap()))
                .unwrap();
            Ok::<_, Infallible>(response)
        }
    });
    let client = Client::new(service, "default");
    let resource = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
    // Each mock is a server of its own, and a target has turns of its own:
    // its writes never take turns with another test's writes to the name.
    (Target::new(client, resource), seen)
}

/// A ConfigMap at `rv`.
pub(crate) fn config_map(rv: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "ns", "uid": "u1", "resourceVersion": rv, "labels": labels},
    })
}

/// A failure Status answer.
pub(crate) fn status(code: u16, reason: &str, retry_after: u32) -> (u16, Value) {
    let mut body = json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure",
        "code": code, "reason": reason, "message": reason,
    });
    if retry_after > 0 {
        body["details"] = json!({"retryAfterSeconds": retry_after});
    }
    (code, body)
}

/// `value` as a dynamic object.
pub(crate) fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}
