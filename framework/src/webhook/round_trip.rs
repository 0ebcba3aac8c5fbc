//! Proving a conversion loses nothing.

use serde_json::Value;

use super::Spoke;
use crate::Object;

/// A conversion that did not come back to where it started.
#[derive(Debug, thiserror::Error)]
#[error("{path} is not the identity: {diff}")]
pub struct RoundTripError {
    /// `spoke → hub → spoke` or `hub → spoke → hub`, with the versions.
    pub path: String,
    /// The JSON patch from the original to what came back: what was lost
    /// or changed.
    pub diff: String,
}

/// Checks that `spoke → hub → spoke` gives `spoke` back, compared as JSON.
/// Call it on generated values (proptest) so that a field the conversion
/// forgets is found, not hoped away.
///
/// # Errors
///
/// [`RoundTripError`] with the difference.
pub fn check_spoke_round_trip<H: Object, S: Spoke<H>>(spoke: &S) -> Result<(), RoundTripError> {
    let back = S::from_hub(spoke.clone().into_hub());
    compare(
        spoke,
        &back,
        format!("{0} → {1} → {0}", S::api_version(&()), H::api_version(&())),
    )
}

/// Checks that `hub → spoke → hub` gives `hub` back: the direction in which
/// fields only the hub has are lost unless the spoke keeps them.
///
/// # Errors
///
/// [`RoundTripError`] with the difference.
pub fn check_hub_round_trip<H: Object, S: Spoke<H>>(hub: &H) -> Result<(), RoundTripError> {
    let back = S::from_hub(hub.clone()).into_hub();
    compare(
        hub,
        &back,
        format!("{0} → {1} → {0}", H::api_version(&()), S::api_version(&())),
    )
}

fn compare<K: Object>(before: &K, after: &K, path: String) -> Result<(), RoundTripError> {
    let json = |k: &K| serde_json::to_value(k).unwrap_or(Value::Null);
    let (before, after) = (json(before), json(after));
    if before == after {
        return Ok(());
    }
    let diff = json_patch::diff(&before, &after);
    Err(RoundTripError {
        path,
        diff: serde_json::to_string(&diff).unwrap_or_default(),
    })
}
