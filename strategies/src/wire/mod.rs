//! What every request shares on the wire: retrying transient failures,
//! the server's version, and the metrics of each write.

pub(crate) mod metrics;
pub(crate) mod retry;
pub(crate) mod server_version;
