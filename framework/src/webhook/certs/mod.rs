//! Webhook certificates the manager makes itself, for clusters without
//! cert-manager: a CA kept in a Secret of the manager's namespace (shared
//! by replicas and restarts), a serving certificate per replica signed by
//! it, the CA written into the `caBundle` of the webhook configurations
//! and CRD conversions the manager's [`Webhooks`](super::Webhooks) name,
//! and both renewed before they expire.
//!
//! | file | what it does |
//! | --- | --- |
//! | `authority.rs` | the CA as the Secret stores it; signing serving certificates (rcgen) |
//! | `secret.rs` | create the Secret if absent (a replica that loses the race reads the winner's), renew the CA |
//! | `inject.rs` | the `caBundle` writes, through the strategy table |
//! | `rotation.rs` | the loop that renews and hot-swaps the serving certificate |

mod authority;
mod inject;
mod managed;
mod rotation;
mod secret;

pub use managed::ManagedCertificates;
pub(crate) use rotation::CertRotator;
