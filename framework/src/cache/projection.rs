//! Which of a manager's caches may serve a writer's re-read after a
//! conflict, and the copy each hands it.
//!
//! A writer re-reads from a cache of its own Rust type first. A cache of
//! another type of the same resource serves only where the copy it hands
//! over is exactly the one the writer's own cache would hold:
//!
//! | writer | its own type's cache | a `DynamicObject` cache | any other cache |
//! | --- | --- | --- | --- |
//! | metadata only (`PartialObjectMeta<K>`) | the metadata | the metadata | the metadata |
//! | any other type (`Pod`, a view, a custom resource) | the object | the object, decoded as the writer's type | never |
//!
//! - Every cache holds the whole `metadata` (a typed object, a view and a
//!   `DynamicObject` all decode `ObjectMeta`), which is all a metadata-only
//!   copy holds.
//! - A `DynamicObject` holds every field the server sent: decoded as the
//!   writer's type, it is the copy the writer's own cache would hold.
//! - A typed cache of another type may lack a field the writer's type
//!   declares (a `Pod` of `k8s-openapi` older than the server, beside a
//!   view that names a newer field), and a copy without a field the
//!   mutation reads can lose data: such a cache never serves.
//!
//! Every cache of one resource is trimmed alike (the trim follows the
//! resource's strategy row), so a copy from another cache lacks exactly
//! the `managedFields` and last-applied annotation the writer's own would.
//! And a copy is complete exactly when the writer's own cache's would be
//! ([`cached_copy`] of the writer's type): never, for a writer of another
//! type than `DynamicObject`, so `update` builds no `PUT` from it.

use std::any::TypeId;

use concord_strategies::{Observed, cached_copy};
use kube::core::{ApiResource, DynamicObject, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// What a cache hands a writer of another type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Projection {
    /// The whole object, as the cache's type encodes it.
    Whole,
    /// The whole object of a `DynamicObject` cache, decoded as the
    /// writer's type.
    Decoded,
    /// The `metadata` alone, for a metadata-only writer.
    Metadata,
}

/// The Rust type a writer writes, as far as its re-reads go.
#[derive(Clone, Copy, Debug)]
pub(super) struct WriterType {
    type_id: TypeId,
    /// kube's metadata-only `PartialObjectMeta<K>`, which says so through
    /// [`Resource::metadata_api`].
    metadata_only: bool,
    /// A whole copy of the writer's type as an [`Observed`] copy
    /// ([`cached_copy`] of the type).
    observed: fn(Value, &ApiResource) -> Observed,
    /// A whole object decoded as the writer's type and encoded again.
    decode: fn(Value) -> serde_json::Result<Value>,
}

impl WriterType {
    /// The writer of `K`.
    pub(super) fn of<K>() -> Self
    where
        K: Resource + Serialize + DeserializeOwned + 'static,
    {
        WriterType {
            type_id: TypeId::of::<K>(),
            metadata_only: K::metadata_api(),
            observed: cached_copy::<K>,
            decode: decode::<K>,
        }
    }

    /// Whether a cache of `cached` is of the writer's own type.
    pub(super) fn is_own(&self, cached: TypeId) -> bool {
        cached == self.type_id
    }

    /// How a cache of the Rust type `cached` serves this writer; `None`
    /// when it may not.
    pub(super) fn projection(&self, cached: TypeId) -> Option<Projection> {
        if self.metadata_only {
            Some(Projection::Metadata)
        } else if self.is_own(cached) {
            Some(Projection::Whole)
        } else if cached == TypeId::of::<DynamicObject>() {
            Some(Projection::Decoded)
        } else {
            None
        }
    }

    /// `copy`, as `projection` took it from a cache, as this writer's copy
    /// of an object of `resource`; `None` if it does not decode as the
    /// writer's type.
    pub(super) fn observed(
        &self,
        copy: Value,
        projection: Projection,
        resource: &ApiResource,
    ) -> Option<Observed> {
        let json = match projection {
            Projection::Whole => copy,
            Projection::Decoded => (self.decode)(copy).ok()?,
            Projection::Metadata => metadata_only(copy, resource),
        };
        Some((self.observed)(json, resource))
    }
}

fn decode<K: Serialize + DeserializeOwned>(copy: Value) -> serde_json::Result<Value> {
    serde_json::to_value(serde_json::from_value::<K>(copy)?)
}

/// `metadata` as a metadata-only copy of an object of `resource`: named
/// by the resource's own apiVersion and kind, not by the metadata type the
/// watch returns, as [`Writer::write`](concord_strategies::Writer::write)
/// names the copy a write starts from.
fn metadata_only(metadata: Value, resource: &ApiResource) -> Value {
    json!({
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": metadata,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use kube::core::PartialObjectMeta;
    use serde::Deserialize;

    #[derive(Clone, Debug, Serialize, Deserialize)]
    struct PodPhase {
        metadata: kube::core::ObjectMeta,
        status: Option<Phase>,
    }

    #[derive(Clone, Debug, Serialize, Deserialize)]
    struct Phase {
        phase: Option<String>,
    }

    crate::view!(PodPhase, of = Pod);

    fn pods() -> ApiResource {
        ApiResource::erase::<Pod>(&())
    }

    /// A Pod as a trimmed cache holds it: no managedFields, an emptied
    /// annotation map.
    fn stored() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "web-0",
                "namespace": "ns",
                "uid": "u-1",
                "resourceVersion": "7",
                "labels": {"team": "a&b <ü>"},
                "annotations": {},
            },
            "spec": {"containers": [{"name": "main", "image": "web:1"}]},
            "status": {"phase": "Running", "newerField": {"kept": true}},
        })
    }

    #[test]
    fn each_writer_is_served_only_by_the_caches_whose_copy_is_exact() {
        let dynamic = TypeId::of::<DynamicObject>();
        let (pod, view) = (TypeId::of::<Pod>(), TypeId::of::<PodPhase>());
        let metadata = TypeId::of::<PartialObjectMeta<Pod>>();
        let serves = |writer: WriterType| {
            [pod, view, metadata, dynamic].map(|cached| writer.projection(cached))
        };
        use Projection::{Decoded, Metadata, Whole};
        assert_eq!(
            serves(WriterType::of::<PartialObjectMeta<Pod>>()),
            [Some(Metadata); 4],
            "every cache holds the whole metadata"
        );
        assert_eq!(
            serves(WriterType::of::<PodPhase>()),
            [None, Some(Whole), None, Some(Decoded)],
            "a view never starts from a typed Pod, which may lack its fields"
        );
        assert_eq!(
            serves(WriterType::of::<Pod>()),
            [Some(Whole), None, None, Some(Decoded)]
        );
        assert_eq!(
            serves(WriterType::of::<DynamicObject>()),
            [None, None, None, Some(Whole)]
        );
    }

    #[test]
    fn a_metadata_copy_is_named_by_the_resource_and_never_complete() {
        let writer = WriterType::of::<PartialObjectMeta<Pod>>();
        let copy = writer
            .observed(stored()["metadata"].clone(), Projection::Metadata, &pods())
            .unwrap();
        assert_eq!(
            copy.json(),
            &json!({"apiVersion": "v1", "kind": "Pod", "metadata": stored()["metadata"]}),
            "the shape a metadata-only write starts from, the emptied annotation map kept"
        );
        assert!(!copy.is_complete(), "as the writer's own metadata copy");
    }

    #[test]
    fn a_dynamic_copy_reaches_a_view_as_the_view_holds_it() {
        let writer = WriterType::of::<PodPhase>();
        let copy = writer
            .observed(stored(), Projection::Decoded, &pods())
            .unwrap();
        let own: PodPhase = serde_json::from_value(stored()).unwrap();
        assert_eq!(copy.json(), &serde_json::to_value(own).unwrap());
        assert_eq!(copy.json()["status"], json!({"phase": "Running"}));
        assert!(!copy.is_complete(), "a view is never complete");
        let writer = WriterType::of::<DynamicObject>();
        let copy = writer
            .observed(stored(), Projection::Whole, &pods())
            .unwrap();
        assert_eq!(copy.json(), &stored());
        assert!(copy.is_complete(), "a DynamicObject's own copy, as before");
    }

    #[test]
    fn a_copy_the_writers_type_cannot_decode_serves_nothing() {
        let writer = WriterType::of::<PodPhase>();
        let copy = json!({"metadata": {"name": "web-0"}, "status": "not an object"});
        assert_eq!(writer.observed(copy, Projection::Decoded, &pods()), None);
    }
}
