//! Turning an AdmissionReview into a call of the author's validator and
//! back; the envelope and replies the defaulter shares.

use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};

use super::handler::{Answer, Handler, Outcome, expect_review};
use super::{Validator, Verdict};
use crate::Object;

/// Serves a [`Validator`] for `K`.
pub(crate) struct ValidatingHandler<K, V> {
    pub(crate) validator: Arc<V>,
    pub(crate) deadline: Duration,
    pub(crate) _kind: PhantomData<fn() -> K>,
}

/// Parses the envelope and checks the request is for `K`; `Err` is the
/// answer to send instead (400 for a body that is no `admission.k8s.io/v1`
/// AdmissionReview, a denial naming the problem for a review of another
/// resource kind).
pub(crate) fn envelope<K: Object>(body: &[u8]) -> Result<AdmissionRequest<DynamicObject>, Answer> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body)
        .map_err(|e| Answer::bad_request(format!("malformed AdmissionReview: {e}")))?;
    expect_review(&review.types, "admission.k8s.io/v1", "AdmissionReview")?;
    let request: AdmissionRequest<DynamicObject> = review
        .try_into()
        .map_err(|_| Answer::bad_request("AdmissionReview without a request".to_owned()))?;
    let (group, version, kind) = (K::group(&()), K::version(&()), K::kind(&()));
    let got = &request.kind;
    if got.group != group || got.version != version || got.kind != kind {
        let message = format!(
            "this webhook serves {}, not {}",
            gvk(&group, &version, &kind),
            gvk(&got.group, &got.version, &got.kind)
        );
        return Err(reply(&request, Outcome::Invalid, |r| invalid(r, message)));
    }
    Ok(request)
}

/// A request that parsed as an AdmissionReview, its objects decoded as `K`.
struct Decoded<K> {
    request: AdmissionRequest<DynamicObject>,
    object: Option<K>,
    old: Option<K>,
}

/// [`envelope`], then the objects as `K`: a denial naming the problem for
/// an object that does not decode.
fn decode<K: Object>(body: &[u8]) -> Result<Decoded<K>, Answer> {
    let request = envelope::<K>(body)?;
    let kind = K::kind(&());
    let as_k = |what: &str, object: &DynamicObject| -> Result<K, Answer> {
        let typed = serde_json::to_value(object)
            .and_then(serde_json::from_value::<K>)
            .map_err(|e| {
                let message = format!("the {what} object is not a valid {kind}: {e}");
                reply(&request, Outcome::Invalid, |r| invalid(r, message))
            })?;
        Ok(typed)
    };
    let object = request
        .object
        .as_ref()
        .map(|o| as_k("new", o))
        .transpose()?;
    let old = request
        .old_object
        .as_ref()
        .map(|o| as_k("old", o))
        .transpose()?;
    Ok(Decoded {
        request,
        object,
        old,
    })
}

fn gvk(group: &str, version: &str, kind: &str) -> String {
    if group.is_empty() {
        format!("{version} {kind}")
    } else {
        format!("{group}/{version} {kind}")
    }
}

pub(crate) fn invalid(mut response: AdmissionResponse, message: String) -> AdmissionResponse {
    response = response.deny(message);
    response.result.code = 400;
    response.result.reason = "BadRequest".into();
    response
}

/// Serialises the response to `request` that `build` makes from the default
/// (allowed) one.
pub(crate) fn reply(
    request: &AdmissionRequest<DynamicObject>,
    outcome: Outcome,
    build: impl FnOnce(AdmissionResponse) -> AdmissionResponse,
) -> Answer {
    let response = build(AdmissionResponse::from(request));
    match serde_json::to_vec(&response.into_review()) {
        Ok(body) => Answer::ok(body, outcome),
        Err(e) => Answer::internal(format!("cannot encode the AdmissionReview: {e}")),
    }
}

fn missing(request: &AdmissionRequest<DynamicObject>, what: &str) -> Answer {
    let message = format!("{:?} request without {what}", request.operation);
    reply(request, Outcome::Invalid, |r| invalid(r, message))
}

#[async_trait]
impl<K: Object, V: Validator<K>> Handler for ValidatingHandler<K, V> {
    async fn handle(&self, body: &[u8]) -> Answer {
        let decoded = match decode::<K>(body) {
            Ok(decoded) => decoded,
            Err(answer) => return answer,
        };
        let request = &decoded.request;
        let new = decoded.object.as_ref();
        let old = decoded.old.as_ref();
        let verdict = match request.operation {
            Operation::Create => match new {
                Some(new) => self.validator.validate_create(new),
                None => return missing(request, "an object"),
            },
            Operation::Update => match (old, new) {
                (Some(old), Some(new)) => self.validator.validate_update(old, new),
                _ => return missing(request, "the old and new objects"),
            },
            Operation::Delete => match old {
                Some(old) => self.validator.validate_delete(old),
                None => return missing(request, "the old object"),
            },
            Operation::Connect => return reply(request, Outcome::Allowed, |r| r),
        };
        let verdict = tokio::time::timeout(self.deadline, AssertUnwindSafe(verdict).catch_unwind());
        match verdict.await {
            Ok(Ok(verdict)) => answer_verdict(request, verdict),
            Ok(Err(_panic)) => reply(request, Outcome::Error, |r| {
                let mut r = r.deny("the validator panicked; see the operator's log");
                r.result.code = 500;
                r.result.reason = "InternalError".into();
                r
            }),
            Err(_elapsed) => reply(request, Outcome::TimedOut, |r| {
                let message = format!(
                    "the validator did not answer within {} ms",
                    self.deadline.as_millis()
                );
                let mut r = r.deny(message);
                // 408, not 504: clients and the write strategies retry 5xx
                // answers, and a validator that hangs once will likely hang
                // again; the caller decides whether to try later.
                r.result.code = 408;
                r.result.reason = "Timeout".into();
                r
            }),
        }
    }
}

fn answer_verdict(request: &AdmissionRequest<DynamicObject>, verdict: Verdict) -> Answer {
    let (denial, warnings) = verdict.into_parts();
    let outcome = if denial.is_some() {
        Outcome::Denied
    } else {
        Outcome::Allowed
    };
    reply(request, outcome, |mut r| {
        if !warnings.is_empty() {
            r.warnings = Some(warnings);
        }
        match denial {
            Some(message) => {
                let mut r = r.deny(message);
                r.result.code = 403;
                r.result.reason = "Forbidden".into();
                r
            }
            None => r,
        }
    })
}
