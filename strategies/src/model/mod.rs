//! The model of a change: what a mutation asks, what it changed on the
//! JSON copy (edits on paths), and how those edits land on a newer copy.

pub(crate) mod align;
pub(crate) mod carry;
pub(crate) mod change;
pub(crate) mod intent;
pub(crate) mod mutation;
pub(crate) mod observed;
