//! Shared plumbing for concord's runnable examples: connecting to a cluster
//! or, when none is configured, to an embedded control plane.

mod connect;

#[doc(inline)]
pub use connect::{Connection, connect};
