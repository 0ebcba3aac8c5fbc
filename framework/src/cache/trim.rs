//! What the shared cache leaves out of the objects it stores.
//!
//! Two fields are most of a typical object's bytes and no reconciler reads
//! them: `metadata.managedFields` (server-side apply's bookkeeping, often
//! larger than the rest of a Pod) and the annotation `kubectl apply` keeps a
//! whole copy of the object in. Dropping them before an object is stored
//! makes every cached copy smaller, for as long as it is cached.
//!
//! A write never loses them: the strategies send only what a mutation
//! changed (`lax`, `strict`, `guarded`, `locked`), or an apply
//! configuration of the fields one manager owns (`apply`). The one request
//! that carries a whole object is `update`'s `PUT`, and two rules keep it
//! exact:
//! - a `PUT` without `managedFields` leaves the stored ones as they are
//!   (the API server keeps them for clients that do not know of them);
//! - the annotation is kept for a resource whose table row has an `update`
//!   cell, so a `PUT` built from a cached copy carries it.
//!
//! And `apply` of an intent reads `managedFields` (to know what it owns,
//! and whether conditions are a map list), so they are kept for a resource
//! with an `apply` cell other than `apply-owned` (which sends a whole child
//! and reads nothing of the stored one).

use concord_featuregates::{Operation, RequestShape, ResourceStrategies};
use kube::Resource;

/// The annotation `kubectl apply` stores the last applied configuration in.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// What the manager's shared caches drop from each object before storing
/// it, set with
/// [`ManagerBuilder::with_cache_trim`](crate::manager::ManagerBuilder::with_cache_trim).
///
/// The default drops `metadata.managedFields` and the
/// [`kubectl.kubernetes.io/last-applied-configuration`](LAST_APPLIED)
/// annotation, except where a strategy configured for the resource needs
/// them: `managedFields` are kept when any of the resource's cells is
/// `apply`, the annotation when any is `update`. [`CacheTrim::NONE`] keeps
/// every object as the API server sent it (for reconcilers that read
/// either field themselves).
///
/// ```
/// use concord::cache::CacheTrim;
/// assert_ne!(CacheTrim::default(), CacheTrim::NONE);
/// let keep_fields = CacheTrim::default().with_managed_fields(false);
/// assert!(!keep_fields.drops_managed_fields());
/// assert!(keep_fields.drops_last_applied());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CacheTrim {
    managed_fields: bool,
    last_applied: bool,
}

impl Default for CacheTrim {
    fn default() -> Self {
        CacheTrim {
            managed_fields: true,
            last_applied: true,
        }
    }
}

impl CacheTrim {
    /// Keep every field.
    pub const NONE: CacheTrim = CacheTrim {
        managed_fields: false,
        last_applied: false,
    };

    /// Whether `metadata.managedFields` is dropped.
    pub fn with_managed_fields(mut self, drop: bool) -> Self {
        self.managed_fields = drop;
        self
    }

    /// Whether the last-applied annotation is dropped.
    pub fn with_last_applied(mut self, drop: bool) -> Self {
        self.last_applied = drop;
        self
    }

    /// Whether `metadata.managedFields` is dropped (before a resource's
    /// strategies are taken into account).
    pub fn drops_managed_fields(&self) -> bool {
        self.managed_fields
    }

    /// Whether the last-applied annotation is dropped (before a resource's
    /// strategies are taken into account).
    pub fn drops_last_applied(&self) -> bool {
        self.last_applied
    }

    /// This trim for a resource written with `row`: what its strategies
    /// read is kept.
    pub(crate) fn for_row(self, row: &ResourceStrategies) -> CacheTrim {
        // `apply-owned` sends the desired child whole, `create` a new
        // object and `delete` no body: none reads the stored fields, so
        // only `apply` of an intent reads managedFields and only `update`
        // of a change sends last-applied back.
        let any = |reads: fn(RequestShape) -> bool| {
            Operation::ALL
                .iter()
                .filter(|op| {
                    !matches!(
                        op,
                        Operation::ApplyOwned | Operation::Create | Operation::Delete
                    )
                })
                .any(|op| reads(row.strategy(*op).description().request))
        };
        CacheTrim {
            managed_fields: self.managed_fields
                && !any(|shape| shape == RequestShape::ServerSideApply),
            last_applied: self.last_applied && !any(RequestShape::sends_whole_object),
        }
    }

    /// Drops what this trim drops from `object`. An annotation map left
    /// empty stays an (empty) map, so a write that adds an annotation
    /// adds an entry rather than the map the API server still has.
    pub(crate) fn apply<K: Resource>(&self, object: &mut K) {
        let meta = object.meta_mut();
        if self.managed_fields {
            meta.managed_fields = None;
        }
        if self.last_applied
            && let Some(annotations) = meta.annotations.as_mut()
        {
            annotations.remove(LAST_APPLIED);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use concord_featuregates::{ConfigLoader, FeatureRegistry, ResourceKey};
    use k8s_openapi::api::core::v1::Pod;

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "web-0",
                "annotations": {LAST_APPLIED: "{\"big\": true}"},
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
            },
        }))
        .unwrap()
    }

    #[test]
    fn drops_both_and_keeps_an_empty_annotation_map() {
        let mut pod = pod();
        CacheTrim::default().apply(&mut pod);
        assert_eq!(pod.metadata.managed_fields, None);
        assert_eq!(pod.metadata.annotations, Some(Default::default()));
        let mut kept = self::pod();
        CacheTrim::NONE.apply(&mut kept);
        assert_eq!(kept, self::pod());
    }

    #[test]
    fn keeps_what_apply_and_update_read() {
        let row = |yaml: &str| {
            let config = ConfigLoader::new()
                .with_yaml("config.yaml", yaml)
                .load(FeatureRegistry::new())
                .unwrap();
            config
                .strategies()
                .for_resource(&ResourceKey::new("", "v1", "Pod", "pods"))
        };
        let default = CacheTrim::default();
        assert_eq!(default.for_row(&row("{}")), default);
        let apply = default.for_row(&row(
            "strategies:\n  operations:\n    add-finalizer: apply\n",
        ));
        assert!(!apply.drops_managed_fields() && apply.drops_last_applied());
        let update = default.for_row(&row("strategies:\n  default: update\n"));
        assert!(update.drops_managed_fields() && !update.drops_last_applied());
    }
}
