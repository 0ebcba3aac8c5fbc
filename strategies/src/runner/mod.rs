//! The one loop every strategy runs, from the plan a strategy gives it:
//! the object's turn, reads (from a watch cache or the server), mutate,
//! build, send, and what a conflict means; server-side apply's own loop;
//! the status subresource in a write; create and delete.

pub(crate) mod apply;
pub(crate) mod plan;
pub(crate) mod session;
pub(crate) mod subresource;
pub(crate) mod whole_objects;
pub(crate) mod write_loop;
