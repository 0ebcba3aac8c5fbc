//! The strategy table: which write strategy each (resource, operation) gets.

mod choice;
pub(crate) mod duration;
mod reason;
mod resolve;
mod resource_key;
pub(crate) mod rules;
mod table;

pub use choice::StrategyChoice;
pub use reason::{GateCondition, Reason};
pub(crate) use resolve::resolve;
pub use resource_key::ResourceKey;
pub use table::{ResourceStrategies, StrategyTable, TableRow};
