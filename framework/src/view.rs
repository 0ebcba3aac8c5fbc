//! Views: Rust types that hold only the fields a controller reads.

/// Declares `$view` a **view** of the resource `$of`: a struct with the
/// `metadata` and only those other fields the controller reads, written as
/// `$of`. A controller of the view lists and watches `$of` (the API server
/// sends whole objects; fields the view lacks are dropped as they arrive),
/// and its cache holds views only.
///
/// A view is safe to write from under every strategy, because none sends
/// fields the mutation did not change: a typed closure's change is the
/// difference between the view before and after it, `update` reads the
/// whole object before its `PUT` (a view is never treated as complete),
/// and a view's copies serve a re-read of another type only as metadata
/// (for a metadata-only writer), while a view re-reads only from its own
/// type's cache or a `DynamicObject` one, never from a typed cache such as
/// `Pod`'s, which may lack a field the view declares. The struct
/// needs `Clone`, `Debug`, `Serialize`, `Deserialize` and a field
/// `metadata: ObjectMeta`; every other field should be an `Option` (or
/// `#[serde(default)]`) so that an object without it still deserialises.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
/// use serde::{Deserialize, Serialize};
///
/// /// A Pod as a finalizer controller sees it: metadata and phase.
/// #[derive(Clone, Debug, Default, Serialize, Deserialize)]
/// struct PodPhase {
///     metadata: ObjectMeta,
///     status: Option<Phase>,
/// }
///
/// #[derive(Clone, Debug, Default, Serialize, Deserialize)]
/// struct Phase {
///     phase: Option<String>,
/// }
///
/// concord::view!(PodPhase, of = Pod);
///
/// use kube::Resource;
/// assert_eq!(PodPhase::kind(&()), "Pod");
/// assert_eq!(PodPhase::plural(&()), "pods");
/// ```
#[macro_export]
macro_rules! view {
    ($view:ty, of = $of:ty) => {
        impl $crate::kube::Resource for $view {
            type DynamicType = ();
            type Scope = <$of as $crate::kube::Resource>::Scope;

            fn kind(_: &()) -> ::std::borrow::Cow<'_, str> {
                <$of as $crate::kube::Resource>::kind(&())
            }

            fn group(_: &()) -> ::std::borrow::Cow<'_, str> {
                <$of as $crate::kube::Resource>::group(&())
            }

            fn version(_: &()) -> ::std::borrow::Cow<'_, str> {
                <$of as $crate::kube::Resource>::version(&())
            }

            fn plural(_: &()) -> ::std::borrow::Cow<'_, str> {
                <$of as $crate::kube::Resource>::plural(&())
            }

            fn meta(&self) -> &$crate::kube::core::ObjectMeta {
                &self.metadata
            }

            fn meta_mut(&mut self) -> &mut $crate::kube::core::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}
