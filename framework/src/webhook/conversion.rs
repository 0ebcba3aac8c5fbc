//! Hub-and-spoke conversion between the versions of one custom resource.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use kube::core::Status;
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use serde_json::Value;

use super::handler::{Answer, Handler, Outcome, expect_review};
use crate::Object;

/// A version of a custom resource that converts to and from the hub `H`,
/// the one version every other converts through. With N versions that is
/// 2(N−1) functions instead of N².
///
/// Conversion must be lossless both ways: a field the spoke cannot hold is
/// kept somewhere it can (usually an annotation) and restored by
/// [`from_hub`](Self::from_hub). Check it with [`check_spoke_round_trip`](super::check_spoke_round_trip)
/// and [`check_hub_round_trip`](super::check_hub_round_trip) on generated values.
///
/// The framework keeps the object's `metadata` as the API server sent it,
/// except labels and annotations, which the conversion may change.
///
/// # Caveats
///
/// The API server converts a request *before* it checks the schema, and
/// reports any failed conversion as a 500 whatever the webhook answered
/// (the webhook answers 400 naming the value). So every version's type must
/// hold every value its schema's *types* allow: signed integers
/// (`i32`/`i64`) with their bounds in the schema (`#[schemars(range(min =
/// 0))]`), not `u32`, whose conversion fails on `-1` before the schema's
/// 422 could name the field.
pub trait Spoke<H>: Object {
    /// This version as the hub.
    fn into_hub(self) -> H;
    /// The hub as this version.
    fn from_hub(hub: H) -> Self;
}

type ToHub<H> = Box<dyn Fn(Value) -> Result<H, String> + Send + Sync>;
type FromHub<H> = Box<dyn Fn(H) -> Result<Value, String> + Send + Sync>;

struct Version<H> {
    to_hub: ToHub<H>,
    from_hub: FromHub<H>,
}

/// The versions of one custom resource and how each converts through the
/// hub `H`; register it with [`Webhooks::with_conversion`](super::Webhooks::with_conversion).
///
/// ```no_run
/// # use concord::webhook::{Conversion, Spoke};
/// # fn demo<V1: concord::Object, V1Alpha1: Spoke<V1>>() {
/// let conversion = Conversion::<V1>::new().with_spoke::<V1Alpha1>();
/// # }
/// ```
#[must_use]
pub struct Conversion<H> {
    versions: HashMap<String, Version<H>>,
    pub(crate) problems: Vec<String>,
}

impl<H> std::fmt::Debug for Conversion<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut versions: Vec<_> = self.versions.keys().collect();
        versions.sort();
        f.debug_struct("Conversion")
            .field("versions", &versions)
            .finish()
    }
}

impl<H: Object> Default for Conversion<H> {
    fn default() -> Self {
        Self::new()
    }
}

impl<H: Object> Conversion<H> {
    /// The hub alone.
    pub fn new() -> Self {
        let mut versions = HashMap::new();
        versions.insert(
            H::api_version(&()).into_owned(),
            Version {
                to_hub: Box::new(|v| decode::<H>(v)) as ToHub<H>,
                from_hub: Box::new(|h| encode(&h)) as FromHub<H>,
            },
        );
        Conversion {
            versions,
            problems: Vec::new(),
        }
    }

    /// Adds the spoke `S`. A spoke of another group or kind than the hub,
    /// or a version registered twice, is reported when the server is built.
    pub fn with_spoke<S: Spoke<H>>(mut self) -> Self {
        let (hub_group, hub_kind) = (H::group(&()), H::kind(&()));
        if S::group(&()) != hub_group || S::kind(&()) != hub_kind {
            self.problems.push(format!(
                "spoke {} {} does not convert to hub {} {}: group and kind must match",
                S::api_version(&()),
                S::kind(&()),
                H::api_version(&()),
                hub_kind
            ));
        }
        let version = Version {
            to_hub: Box::new(|v| decode::<S>(v).map(S::into_hub)) as ToHub<H>,
            from_hub: Box::new(|h| encode(&S::from_hub(h))) as FromHub<H>,
        };
        let api_version = S::api_version(&()).into_owned();
        if self.versions.insert(api_version.clone(), version).is_some() {
            self.problems
                .push(format!("version {api_version} is registered twice"));
        }
        self
    }

    /// The `apiVersion`s this conversion knows, sorted.
    pub fn api_versions(&self) -> Vec<String> {
        let mut versions: Vec<_> = self.versions.keys().cloned().collect();
        versions.sort();
        versions
    }

    /// Converts one object (JSON as the API server stores it) to `desired`
    /// (an `apiVersion` such as `demo.concord.dev/v1`).
    ///
    /// # Errors
    ///
    /// A message naming the object and the unknown version, or the decoding
    /// problem.
    pub fn convert(&self, object: Value, desired: &str) -> Result<Value, String> {
        let from = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if from == desired {
            return Ok(object);
        }
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("<unnamed>")
            .to_owned();
        let unknown = |v: &str| format!("cannot convert {name}: unknown version `{v}`");
        let source = self.versions.get(&from).ok_or_else(|| unknown(&from))?;
        let target = self.versions.get(desired).ok_or_else(|| unknown(desired))?;
        let metadata = object.get("metadata").cloned();
        let hub = (source.to_hub)(object).map_err(|e| format!("cannot convert {name}: {e}"))?;
        let mut converted =
            (target.from_hub)(hub).map_err(|e| format!("cannot convert {name}: {e}"))?;
        keep_metadata(&mut converted, metadata);
        Ok(converted)
    }
}

/// Puts the metadata the API server sent back, keeping only the converted
/// labels and annotations: the API server rejects any other metadata change.
fn keep_metadata(converted: &mut Value, original: Option<Value>) {
    let Some(mut original) = original else { return };
    if let (Some(meta), Some(new)) = (original.as_object_mut(), converted.get("metadata")) {
        for key in ["labels", "annotations"] {
            match new.get(key) {
                Some(value) if !value.is_null() => {
                    meta.insert(key.to_owned(), value.clone());
                }
                _ => {
                    meta.remove(key);
                }
            }
        }
    }
    if let Some(object) = converted.as_object_mut() {
        object.insert("metadata".to_owned(), original);
    }
}

fn decode<K: Object>(value: Value) -> Result<K, String> {
    serde_json::from_value(value).map_err(|e| format!("not a valid {}: {e}", K::api_version(&())))
}

fn encode<K: Object>(object: &K) -> Result<Value, String> {
    serde_json::to_value(object).map_err(|e| format!("cannot encode {}: {e}", K::api_version(&())))
}

/// Serves a [`Conversion`].
pub(crate) struct ConversionHandler<H> {
    pub(crate) conversion: Arc<Conversion<H>>,
}

#[async_trait]
impl<H: Object> Handler for ConversionHandler<H> {
    async fn handle(&self, body: &[u8]) -> Answer {
        let review: ConversionReview = match serde_json::from_slice(body) {
            Ok(review) => review,
            Err(e) => return Answer::bad_request(format!("malformed ConversionReview: {e}")),
        };
        if let Err(answer) =
            expect_review(&review.types, "apiextensions.k8s.io/v1", "ConversionReview")
        {
            return answer;
        }
        let Ok(mut request) = ConversionRequest::from_review(review) else {
            return Answer::bad_request("ConversionReview without a request".to_owned());
        };
        let desired = request.desired_api_version.clone();
        let objects = std::mem::take(&mut request.objects);
        let conversion = &self.conversion;
        let converted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            objects
                .into_iter()
                .map(|o| conversion.convert(o, &desired))
                .collect::<Result<Vec<_>, String>>()
        }));
        let response = ConversionResponse::for_request(request);
        let (response, outcome) = match converted {
            Ok(Ok(objects)) => (response.success(objects), Outcome::Allowed),
            Ok(Err(message)) => (
                response.failure(Status::failure(&message, "BadRequest").with_code(400)),
                Outcome::Invalid,
            ),
            Err(_panic) => (
                response.failure(
                    Status::failure(
                        "the conversion panicked; see the operator's log",
                        "InternalError",
                    )
                    .with_code(500),
                ),
                Outcome::Error,
            ),
        };
        match serde_json::to_vec(&response.into_review()) {
            Ok(body) => Answer::ok(body, outcome),
            Err(e) => Answer::internal(format!("cannot encode the ConversionReview: {e}")),
        }
    }
}
