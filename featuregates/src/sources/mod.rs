//! Reading the configuration sources and merging them with figment.

mod keys;
mod loader;
mod locator;
mod provider;
mod values;

pub(crate) use keys::join_key;
pub use keys::{ENV_FEATURE_GATES, ENV_GATE_PREFIX};
pub use loader::ConfigLoader;
pub(crate) use locator::Locator;
pub(crate) use values::{describe, number};
