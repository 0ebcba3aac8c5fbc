//! Secure metrics (`--metrics-secure`): the metrics endpoint over TLS,
//! every request authenticated with a TokenReview and authorized with a
//! SubjectAccessReview (`get` on the request's non-resource path), as
//! controller-runtime's `WithAuthenticationAndAuthorization` does.
//!
//! The certificate comes from `--metrics-cert-dir` (`tls.crt`, `tls.key`,
//! re-read when they change) or, without one, is self-signed in memory at
//! start (`cert.rs`). Decisions are cached per token and path for a short
//! while, in a bounded map (`cache.rs`); a review that fails (the API
//! server cannot be reached, or refuses the operator the review) refuses
//! the request (`review.rs`).

mod cache;
mod cert;
mod review;

pub(crate) use cert::MetricsTls;
pub(crate) use review::{Reviewer, Verdict};

use std::time::Duration;

/// How long a review's decision is reused by default.
pub(crate) const DEFAULT_TTL: Duration = Duration::from_secs(10);
/// How many decisions are kept by default.
pub(crate) const DEFAULT_ENTRIES: usize = 1024;
