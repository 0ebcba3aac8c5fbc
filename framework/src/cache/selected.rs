//! The watch of a cache whose selection carries a shard selector
//! (`selector` sharding): sent through the manager's client, which turns
//! the selection's marker into the `shardSelector` parameter
//! (`sharding/selectors.rs`), whichever client built the controller's
//! `Api`. The watch reads dynamic objects at the `Api`'s own path and
//! decodes each into `K`, as a typed watch decodes the wire's JSON.

use futures::stream::{BoxStream, StreamExt};
use kube::api::{Api, DynamicObject};
use kube::core::ApiResource;
use kube::runtime::watcher;
use kube::{Client, Resource};

use crate::object::AnyObject;

/// The events of `api`'s objects selected by `config`, watched through
/// `client`.
pub(super) fn watch<K: AnyObject>(
    client: Client,
    api: &Api<K>,
    dyntype: &K::DynamicType,
    config: watcher::Config,
) -> BoxStream<'static, Result<watcher::Event<K>, watcher::Error>> {
    let resource = ApiResource::erase::<K>(dyntype);
    let dynamic: Api<DynamicObject> = match api.namespace() {
        Some(namespace) => Api::namespaced_with(client, namespace, &resource),
        None => Api::all_with(client, &resource),
    };
    watcher(dynamic, config)
        .filter_map(|event| async move {
            let event = match event {
                Ok(event) => event,
                Err(error) => return Some(Err(error)),
            };
            decoded::<K>(event).map(Ok)
        })
        .boxed()
}

/// `event` with its object decoded into `K`; `None` (and a warning) for
/// an object `K` cannot hold, as a typed watch would fail on it.
fn decoded<K: AnyObject>(event: watcher::Event<DynamicObject>) -> Option<watcher::Event<K>> {
    let decode = |object: DynamicObject| -> Option<K> {
        let name = object.meta().name.clone().unwrap_or_default();
        match serde_json::to_value(object).and_then(serde_json::from_value) {
            Ok(decoded) => Some(decoded),
            Err(error) => {
                tracing::warn!(%error, object = %name, "a sharded watch's object did not decode");
                None
            }
        }
    };
    Some(match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(decode(o)?),
        watcher::Event::Delete(o) => watcher::Event::Delete(decode(o)?),
        watcher::Event::InitApply(o) => watcher::Event::InitApply(decode(o)?),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
    })
}
