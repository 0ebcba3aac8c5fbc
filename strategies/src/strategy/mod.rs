//! The strategies themselves: the sealed `WriteStrategy` trait and the six
//! strategies, each a plan read from its description and handed to the
//! runner, built by name.

pub(crate) mod apply;
pub(crate) mod by_name;
pub(crate) mod guarded;
pub(crate) mod lax;
pub(crate) mod locked;
pub(crate) mod strict;
pub(crate) mod update;
pub(crate) mod write_strategy;
