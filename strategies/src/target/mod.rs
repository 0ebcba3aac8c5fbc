//! Where a write goes and what it may use there: the [`Target`](crate::Target)
//! (client, resource, field manager, policies), the watch cache it re-reads
//! from, the turns and locks its writers take, and what discovery said of
//! the status subresource.

#[cfg(feature = "testing")]
pub(crate) mod before_write;
pub(crate) mod fresh;
pub(crate) mod lock_table;
pub(crate) mod settings;
pub(crate) mod status_subresource;
pub(crate) mod turns;
