//! The [`Manager`]: its builder ([`ManagerBuilder`], `builder.rs`), how it
//! connects (`connection.rs`) and its run loop (`run.rs`); a controller's
//! selection, predicate and error policy ([`ControllerBuilder`],
//! [`Backoff`]); leader election ([`LeaderElectionConfig`]).

mod builder;
mod caches;
mod checks;
mod connection;
mod controller_builder;
mod instance;
mod run;
mod table_check;

#[doc(inline)]
pub use crate::backoff::Backoff;
#[doc(inline)]
pub use crate::controller::DEFAULT_CONCURRENCY;
#[doc(inline)]
pub use crate::leader::LeaderElectionConfig;
pub use builder::{Built, ManagerBuilder};
pub use controller_builder::ControllerBuilder;
pub(crate) use instance::Parts;
pub use instance::{Manager, ShutdownHandle};
