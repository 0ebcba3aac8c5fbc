//! What a resource type needs to be reconciled ([`Object`]) or cached
//! ([`AnyObject`]).

use std::fmt::Debug;
use std::hash::Hash;

use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A Kubernetes object type concord can reconcile and write, statically
/// typed (`DynamicType = ()`: see [`Object`]) or known only at run time: a
/// [`DynamicObject`](kube::core::DynamicObject), whose dynamic type is the
/// [`ApiResource`](kube::core::ApiResource) it was discovered or given as.
///
/// Implemented for every type that qualifies. Controllers, contexts,
/// stores and writers take it; the calls that need no dynamic type
/// ([`Manager::controller`](crate::Manager::controller),
/// [`Manager::context`](crate::Manager::context)) take an [`Object`], and
/// their `_with` forms take the dynamic type
/// ([`Manager::controller_with`](crate::Manager::controller_with)).
pub trait AnyObject:
    Resource<DynamicType: Clone + Eq + Hash + Debug + Unpin + Send + Sync + 'static>
    + Clone
    + Serialize
    + DeserializeOwned
    + Debug
    + Send
    + Sync
    + 'static
{
}

impl<T> AnyObject for T where
    T: Resource<DynamicType: Clone + Eq + Hash + Debug + Unpin + Send + Sync + 'static>
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static
{
}

/// A statically typed Kubernetes object type concord can reconcile and
/// write: any kube resource whose kind is known at compile time, built-in
/// (`Pod`) or derived with `CustomResource`.
///
/// Implemented for every type that qualifies; it exists so that signatures
/// say `K: Object` instead of repeating eight bounds.
pub trait Object: AnyObject + Resource<DynamicType = ()> {}

impl<T> Object for T where T: AnyObject + Resource<DynamicType = ()> {}
