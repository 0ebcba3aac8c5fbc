//! The benchmark's custom resource, for `--kind widgets`: a small spec, as
//! the Go peer's typed `Widget` has it.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a `Widget` (`memory-bench.concord.dev/v1`) holds.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "memory-bench.concord.dev",
    version = "v1",
    kind = "Widget",
    namespaced
)]
pub struct WidgetSpec {
    /// A short text.
    pub message: String,
    /// A number.
    pub size: i32,
}
