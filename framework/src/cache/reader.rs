//! [`CacheReader`]: a read handle to every shared cache of a manager, for
//! reconcilers (through [`Context::caches`](crate::Context::caches)) and
//! for the mappers of watched kinds.

use std::fmt;
use std::sync::Arc;

use kube::core::ApiResource;

use super::{CacheError, Caches, Store};
use crate::{Object, object::AnyObject};

/// A read handle to a manager's shared caches: the store of any kind a
/// controller, a watch or [`Manager::cache`](crate::Manager::cache) keeps
/// a cache of, with its indexes. Cheap to clone; reads never send a
/// request.
///
/// ```no_run
/// # fn demo(caches: &concord::cache::CacheReader) -> Result<(), concord::cache::CacheError> {
/// use k8s_openapi::api::core::v1::ConfigMap;
/// let maps = caches.store::<ConfigMap>()?;
/// for map in maps.list(Some("default"), Some("app=web"))? {
///     println!("{:?}", map.metadata.name);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CacheReader(Arc<Caches>);

impl fmt::Debug for CacheReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CacheReader").field(&self.0).finish()
    }
}

impl CacheReader {
    pub(crate) fn new(caches: Arc<Caches>) -> Self {
        CacheReader(caches)
    }

    /// The shared cache of `C` (the first one added, when several
    /// selections of `C` have a cache each).
    ///
    /// # Errors
    ///
    /// [`CacheError::NoCache`] when the manager keeps no cache of `C`.
    pub fn store<C: Object>(&self) -> Result<Store<C>, CacheError> {
        self.store_with(&())
    }

    /// [`store`](Self::store) for a kind known at run time
    /// ([`DynamicObject`](kube::core::DynamicObject) and its
    /// [`ApiResource`]).
    ///
    /// # Errors
    ///
    /// As [`store`](Self::store).
    pub fn store_with<C: AnyObject>(
        &self,
        dyntype: &C::DynamicType,
    ) -> Result<Store<C>, CacheError> {
        let resource = ApiResource::erase::<C>(dyntype);
        self.0
            .first_store::<C>(&resource)
            .ok_or_else(|| CacheError::NoCache {
                resource: if resource.group.is_empty() {
                    resource.plural
                } else {
                    format!("{}.{}", resource.plural, resource.group)
                },
            })
    }
}
