//! The body of the proxy's answers to the operator.

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub(crate) type ProxyBody = UnsyncBoxBody<Bytes, BoxError>;
