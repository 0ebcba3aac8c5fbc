use std::fmt::Debug;

use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A Kubernetes object type concord can reconcile and write: any statically
/// typed kube resource, built-in (`Pod`) or derived with `CustomResource`.
///
/// Implemented for every type that qualifies; it exists so that signatures
/// say `K: Object` instead of repeating seven bounds.
pub trait Object:
    Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug + Send + Sync + 'static
{
}

impl<T> Object for T where
    T: Resource<DynamicType = ()>
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static
{
}
