//! Admission and conversion webhooks, served over HTTPS by the manager and
//! called by the API server.
//!
//! | item | what it is |
//! | --- | --- |
//! | [`Validator`] | accept or deny creates, updates (with the old object) and deletes, with warnings |
//! | [`Defaulter`] | fill defaults; the framework sends the API server the JSON patch |
//! | [`Spoke`], [`Conversion`] | hub-and-spoke conversion between CRD versions: 2(N−1) functions for N versions |
//! | [`check_spoke_round_trip`], [`check_hub_round_trip`] | prove a conversion loses nothing, on generated values |
//! | [`Webhooks`] | what an operator serves, at paths derived from group, version and kind |
//! | [`WebhookServer`] | the HTTPS server (rustls), certificates reloaded from `tls.crt`/`tls.key` |
//! | [`WebhookLimits`] | how long a client may take to send headers and body, how many may connect |
//! | [`ManagedCertificates`] | certificates the manager makes, stores, trusts and renews itself (no cert-manager) |
//! | [`WebhookClient`] | generates the `ValidatingWebhookConfiguration`, `MutatingWebhookConfiguration` and CRD `conversion` stanza |
//! | [`kubernetes_formats`] | CRD schemas the API server enforces without warnings (`format: uint32` → `minimum: 0`) |
//! | [`WebhookMetrics`] | requests by outcome and latency, per webhook |
//!
//! [`ManagerBuilder::with_webhooks`](crate::manager::ManagerBuilder::with_webhooks)
//! serves them beside the controllers, on `--webhook-bind-address` with the
//! certificates in `--webhook-cert-dir`.

mod admission;
pub(crate) mod certs;
mod conversion;
mod defaulting;
mod error;
mod fill;
mod handler;
mod limits;
mod manifests;
mod metrics;
mod options;
pub(crate) mod registry;
mod round_trip;
mod schema;
mod server;
pub(crate) mod tls;
mod traits;
mod verdict;
mod zero;

#[doc(inline)]
pub use certs::ManagedCertificates;
#[doc(inline)]
pub use conversion::{Conversion, Spoke};
#[doc(inline)]
pub use error::WebhookError;
#[doc(inline)]
pub use limits::{MAX_CONNECTIONS_RANGE, READ_TIMEOUT_RANGE, WebhookLimits};
#[doc(inline)]
pub use manifests::{INJECT_CA_FROM, WebhookClient};
#[doc(inline)]
pub use metrics::WebhookMetrics;
#[doc(inline)]
pub use options::{FailurePolicy, WebhookOptions};
#[doc(inline)]
pub use registry::{WebhookKind, Webhooks};
#[doc(inline)]
pub use round_trip::{RoundTripError, check_hub_round_trip, check_spoke_round_trip};
#[doc(inline)]
pub use schema::kubernetes_formats;
#[doc(inline)]
pub use server::WebhookServer;
#[doc(inline)]
pub use tls::{CERT_FILE, KEY_FILE};
#[doc(inline)]
pub use traits::{Defaulter, Validator};
#[doc(inline)]
pub use verdict::Verdict;
