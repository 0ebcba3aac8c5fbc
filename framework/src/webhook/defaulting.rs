//! Turning an AdmissionReview into a call of the author's defaulter, and
//! its changes into the JSON patch the API server applies.

use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use async_trait::async_trait;
use kube::core::admission::AdmissionResponse;
use serde_json::Value;

use super::Defaulter;
use super::admission::{envelope, reply};
use super::fill::{Filled, read_filling, remove_unchanged_fills};
use super::handler::{Answer, Handler, Outcome};
use crate::Object;

/// Serves a [`Defaulter`] for `K`.
pub(crate) struct MutatingHandler<K, D> {
    pub(crate) defaulter: Arc<D>,
    pub(crate) _kind: PhantomData<fn() -> K>,
}

#[async_trait]
impl<K: Object, D: Defaulter<K>> Handler for MutatingHandler<K, D> {
    async fn handle(&self, body: &[u8]) -> Answer {
        let request = match envelope::<K>(body) {
            Ok(request) => request,
            Err(answer) => return answer,
        };
        // DELETE and CONNECT carry nothing to default.
        let Some(object) = request.object.as_ref() else {
            return reply(&request, Outcome::Allowed, |r| r);
        };
        let raw = match serde_json::to_value(object) {
            Ok(raw) => raw,
            Err(e) => return Answer::internal(format!("cannot read the new object: {e}")),
        };
        let filled = match read_filling::<K>(&raw) {
            Ok(filled) => filled,
            Err(error) => {
                // Mutating webhooks run before the API server checks the
                // schema: refusing here would hide the schema's 422, which
                // names every bad field. Admit unchanged, say why, and let
                // the schema (or the validator, which only sees objects
                // that passed it) refuse.
                let warning = format!(
                    "not defaulted: the object is not a valid {}: {error}",
                    K::kind(&())
                );
                return reply(&request, Outcome::Invalid, |mut r| {
                    r.warnings = Some(vec![warning]);
                    r
                });
            }
        };
        let defaulter = &self.defaulter;
        let patch = std::panic::catch_unwind(AssertUnwindSafe(|| {
            defaulting_patch(raw, filled, |k| defaulter.default(k))
        }));
        match patch {
            Ok(Ok(patch)) if patch.0.is_empty() => reply(&request, Outcome::Allowed, |r| r),
            Ok(Ok(patch)) => {
                let response = AdmissionResponse::from(&request).with_patch(patch);
                match response {
                    Ok(response) => reply(&request, Outcome::Patched, |_| response),
                    Err(e) => Answer::internal(format!("cannot encode the patch: {e}")),
                }
            }
            Ok(Err(message)) => reply(&request, Outcome::Error, |r| {
                let mut r = r.deny(message);
                r.result.code = 500;
                r.result.reason = "InternalError".into();
                r
            }),
            Err(_panic) => reply(&request, Outcome::Error, |r| {
                let mut r = r.deny("the defaulter panicked; see the operator's log");
                r.result.code = 500;
                r.result.reason = "InternalError".into();
                r
            }),
        }
    }
}

/// The JSON patch from the object the API server sent (`raw`) to the object
/// with defaults.
///
/// The patch is computed between the typed object before and after
/// defaulting, so only what the defaulter changed is sent: fields of `raw`
/// that `K` does not model are never removed, and a field `raw` left out
/// is only added when the defaulter set it to something else than its
/// zero value. When the typed changes do not apply (a list the type reads
/// differently, say), the patch from `raw` to the defaulted object is sent
/// instead.
pub(crate) fn defaulting_patch<K: Object>(
    raw: Value,
    filled: Filled<K>,
    default: impl FnOnce(&mut K),
) -> Result<json_patch::Patch, String> {
    let Filled {
        mut typed,
        value,
        fills,
    } = filled;
    let encode =
        |k: &K| serde_json::to_value(k).map_err(|e| format!("cannot encode the object: {e}"));
    let before = encode(&typed)?;
    default(&mut typed);
    let after = encode(&typed)?;
    let changes = json_patch::diff(&before, &after);
    if changes.0.is_empty() {
        return Ok(changes);
    }
    let mut patched = value;
    if json_patch::patch(&mut patched, &changes).is_err() {
        patched = after;
    }
    remove_unchanged_fills(&mut patched, &fills);
    Ok(json_patch::diff(&raw, &patched))
}
