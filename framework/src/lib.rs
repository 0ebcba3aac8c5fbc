//! concord: a Kubernetes operator framework whose reconcilers state intent
//! while a configurable write strategy decides how each write is sent.

#[doc(inline)]
pub use concord_featuregates as featuregates;
#[doc(inline)]
pub use concord_strategies as strategies;
