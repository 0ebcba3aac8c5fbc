//! `demo.concord.dev/v1alpha1`, the Widget's older shape, still served:
//! the spec said `text` and `replicas` where `v1` says `message` and
//! `shards`, and its schema had no upper bound on `replicas`. It converts to
//! and from the hub, [`crate::widgets::Widget`] (`v1`, the storage
//! version), through the webhook that
//! [`widgets_webhooks::webhooks`](crate::widgets_webhooks::webhooks) serves.

use concord::webhook::Spoke;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::widgets::{self, WidgetStatus};

// ANCHOR: v1alpha1
/// The `v1alpha1` spec: `text` became `message` and `replicas` became
/// `shards` in `v1`.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "demo.concord.dev",
    version = "v1alpha1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    shortname = "wg"
)]
pub struct WidgetSpec {
    /// What every shard holds (`spec.message` in `v1`); may be left out,
    /// the defaulter fills it.
    #[serde(default)]
    pub text: String,
    /// How many ConfigMaps hold it (`spec.shards` in `v1`). No upper
    /// bound in this version's schema: the validator applies `v1`'s bound
    /// whatever version a client writes. Signed, so that the conversion
    /// can carry a negative value to the schema check that refuses it.
    #[schemars(range(min = 0))]
    pub replicas: i32,
}

/// Every field has a place in `v1` and back: nothing to park in
/// annotations.
impl Spoke<widgets::Widget> for Widget {
    fn into_hub(self) -> widgets::Widget {
        widgets::Widget {
            metadata: self.metadata,
            spec: widgets::WidgetSpec {
                message: self.spec.text,
                shards: self.spec.replicas,
            },
            status: self.status,
        }
    }

    fn from_hub(hub: widgets::Widget) -> Self {
        Widget {
            metadata: hub.metadata,
            spec: WidgetSpec {
                text: hub.spec.message,
                replicas: hub.spec.shards,
            },
            status: hub.status,
        }
    }
}
// ANCHOR_END: v1alpha1
