//! Fault injection for operator authors: a proxy between the operator
//! under test and the real API server that serves stale, incomplete or
//! failing answers from a seeded schedule, and crashes the operator between
//! two writes.
//!
//! | fault | builder | what the operator sees |
//! | --- | --- | --- |
//! | conflict, throttle, server error | [`Faults::fail_with`], [`Faults::throttle`] | `409`, `429` with `Retry-After`, `500`, `503` instead of the answer |
//! | timeout | [`Faults::time_out`] | `504` although the request went through |
//! | reset | [`Faults::reset_mid_response`] | the connection cut halfway through the answer |
//! | latency | [`Faults::delay`] | a slow answer |
//! | stale cache | [`Faults::hold_events`] | watch events late, per object in order |
//! | unobserved state | [`Faults::drop_intermediate`] | only the last of quick successive states of an object |
//! | crash | [`Faults::crash_before`], [`Faults::crash_after`] | nothing: it dies between two writes and starts again |
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use concord_testenv::TestEnv;
//! use concord_testenv::faults::{FaultProxy, Faults, Verb};
//!
//! let env = TestEnv::shared()?;
//! let faults = Faults::seeded(7)
//!     .on(Verb::Patch).resource("pods").fail_with(409).times(3)
//!     .on(Verb::Watch).resource("pods").hold_events(Duration::from_millis(300));
//! let proxy = FaultProxy::start(env.config(), faults).await?;
//! let operator = proxy.supervise(|config| async move {
//!     let client = kube::Client::try_from(config)?;
//!     // ... run the operator with `client` ...
//!     # drop(client);
//!     Ok::<(), kube::Error>(())
//! });
//! // ... drive the workload, then:
//! proxy.settle(Duration::from_secs(1), Duration::from_secs(60)).await?;
//! // ... check the invariants, then:
//! operator.stop().await?;
//! println!("{}", proxy.report());
//! # Ok(()) }
//! ```

mod body;
mod chaos;
mod crashes;
mod error;
mod matcher;
mod proxy;
mod report;
mod request;
mod schedule;
mod shared;
mod supervisor;
mod watch;

#[doc(inline)]
pub use error::FaultError;
#[doc(inline)]
pub use proxy::FaultProxy;
#[doc(inline)]
pub use report::FaultReport;
#[doc(inline)]
pub use request::Verb;
#[doc(inline)]
pub use schedule::{Fault, FaultClass, Faults};
#[doc(inline)]
pub use supervisor::{Supervised, SupervisedReport};
