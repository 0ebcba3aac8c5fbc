//! [`ControllerBuilder`]: a controller with a selection, a predicate and an
//! error policy.

use std::fmt;

use kube::api::Api;
use kube::core::NamespaceScope;

use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use super::{Manager, Parts};
use crate::cache::{CacheReader, Selection};
use crate::controller::Trigger;
use crate::selector::{field_selector, is_namespace_name, label_selector};
use crate::{Action, Error, Object, Predicate, Reconciler, backoff::Backoff, object::AnyObject};

/// A controller being added to a [`Manager`] by [`Manager::controller`]:
/// which objects it watches, which of their changes it queues, and how it
/// retries a failed reconcile; [`add`](Self::add) checks it all and adds it.
///
/// ```no_run
/// # use std::{sync::Arc, time::Duration};
/// # use concord::{Action, manager::Backoff, Context, Manager, Predicate, Reconciler};
/// # use k8s_openapi::api::core::v1::Pod;
/// # struct Placer;
/// # #[concord::async_trait]
/// # impl Reconciler<Pod> for Placer {
/// #     type Error = concord::WriteError;
/// #     async fn reconcile(&self, _: Arc<Pod>, _: &Context<Pod>) -> Result<Action, Self::Error> {
/// #         Ok(Action::await_change())
/// #     }
/// # }
/// # async fn demo(manager: &mut Manager) -> Result<(), concord::Error> {
/// let pods = kube::Api::<Pod>::all(manager.client().clone());
/// manager
///     .controller("placer", pods, Placer)
///     .with_labels("app=web")
///     .with_fields("spec.nodeName=node-a")
///     .with_namespaces(["team-a", "team-b"])
///     .with_predicate(Predicate::generation_changed())
///     .with_backoff(Backoff::exponential(Duration::from_millis(100), Duration::from_secs(60)))
///     .add()?;
/// # Ok(())
/// # }
/// ```
///
/// # Guarantees
///
/// The label selector, the field selector and the namespace set are part of
/// the shared cache's key: controllers of one type with the same selection
/// (however the selectors are spelled: terms are sorted) share one watch
/// and one store; controllers whose selections differ or overlap get a
/// cache each, so an object two of them select is reconciled by each, from
/// its own cache.
#[must_use]
pub struct ControllerBuilder<'m, K: AnyObject, R: Reconciler<K>> {
    manager: &'m mut Manager,
    name: String,
    api: Api<K>,
    dyntype: K::DynamicType,
    reconciler: R,
    labels: Option<String>,
    fields: Option<String>,
    namespaces: Option<Vec<(String, Api<K>)>>,
    predicate: Option<Predicate<K>>,
    backoff: Option<Backoff>,
    policy: Option<crate::controller::Policy<K, R::Error>>,
    concurrency: u16,
    triggers: Vec<Trigger<K>>,
    read_your_writes: bool,
    skip_own_writes: bool,
}

impl<K: AnyObject, R: Reconciler<K>> fmt::Debug for ControllerBuilder<'_, K, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControllerBuilder")
            .field("name", &self.name)
            .field("labels", &self.labels)
            .field("fields", &self.fields)
            .finish_non_exhaustive()
    }
}

impl Manager {
    /// Starts adding a controller named `name` for `K`, listing and
    /// watching through `api`; see [`ControllerBuilder`] for its options,
    /// and [`add`](ControllerBuilder::add) to add it:
    /// `manager.controller("pods", api, reconciler).add()?`. This is the
    /// one way to add a controller.
    ///
    /// Controllers of the same type, `api` scope and watch selector share
    /// one watch and one cache (see [`Context::cached`](crate::Context::cached)),
    /// which also serves their writes' re-reads after a conflict. In a
    /// sharded manager (`--shards`) the cache holds what this replica's
    /// shard selects (in `label` mode only its own shard's objects).
    ///
    /// The cache stores objects trimmed by the builder's
    /// [`CacheTrim`](crate::cache::CacheTrim) (by default without
    /// `managedFields` and the last-applied annotation, each kept where the
    /// resource's strategies read it). For a controller that reads only
    /// metadata, pass an `Api<PartialObjectMeta<K>>` (kube's metadata
    /// type): the watch and the cache then hold `ObjectMeta` only, and
    /// writes still go to `K` through its strategies.
    pub fn controller<K, R>(
        &mut self,
        name: &str,
        api: Api<K>,
        reconciler: R,
    ) -> ControllerBuilder<'_, K, R>
    where
        K: Object,
        R: Reconciler<K>,
    {
        self.controller_with(name, api, (), reconciler)
    }

    /// Starts adding a controller named `name` for a resource known only
    /// at run time: `K` is [`DynamicObject`](kube::core::DynamicObject)
    /// and `dyntype` its [`ApiResource`](kube::core::ApiResource) (given,
    /// or found by kube's discovery), and `api` lists and watches it
    /// (`Api::all_with(client, &resource)`). Otherwise as
    /// [`controller`](Self::controller): the same options, one shared cache
    /// per resource and selection, and every write through the strategy
    /// table row of the resource's group, version and plural.
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # use concord::{Action, Context, Manager, Reconciler};
    /// use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
    /// # struct Tagger;
    /// # #[concord::async_trait]
    /// # impl Reconciler<DynamicObject> for Tagger {
    /// #     type Error = concord::WriteError;
    /// #     async fn reconcile(&self, o: Arc<DynamicObject>, ctx: &Context<DynamicObject>) -> Result<Action, Self::Error> {
    /// #         ctx.add_finalizer(&o, "example.com/cleanup").await?;
    /// #         Ok(Action::await_change())
    /// #     }
    /// # }
    /// # async fn demo(manager: &mut Manager) -> Result<(), concord::Error> {
    /// let gvk = GroupVersionKind::gvk("example.com", "v1", "Gadget");
    /// let gadgets = ApiResource::from_gvk_with_plural(&gvk, "gadgets");
    /// let api = kube::Api::<DynamicObject>::all_with(manager.client().clone(), &gadgets);
    /// manager.controller_with("gadgets", api, gadgets, Tagger).add()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn controller_with<K, R>(
        &mut self,
        name: &str,
        api: Api<K>,
        dyntype: K::DynamicType,
        reconciler: R,
    ) -> ControllerBuilder<'_, K, R>
    where
        K: AnyObject,
        R: Reconciler<K>,
    {
        ControllerBuilder {
            manager: self,
            name: name.to_owned(),
            api,
            dyntype,
            reconciler,
            labels: None,
            fields: None,
            namespaces: None,
            predicate: None,
            backoff: None,
            policy: None,
            concurrency: crate::controller::DEFAULT_CONCURRENCY,
            triggers: Vec::new(),
            read_your_writes: true,
            skip_own_writes: false,
        }
    }
}

impl<K: AnyObject, R: Reconciler<K>> ControllerBuilder<'_, K, R> {
    /// Watches only objects this label selector selects (`app=web`,
    /// `tier!=db`, `env in (a,b)`, `!legacy`, comma-separated: all must
    /// hold), as kube-rs's `watcher::Config::labels` and controller-runtime's
    /// `cache.Options.ByObject[..].Label`. An object relabelled into the
    /// selection is seen as new; one relabelled out of it leaves the cache.
    pub fn with_labels(mut self, selector: &str) -> Self {
        self.labels = Some(selector.to_owned());
        self
    }

    /// Watches only objects this field selector selects (`spec.nodeName=a`,
    /// `status.phase!=Failed`, comma-separated), as kube-rs's
    /// `watcher::Config::fields`. Which fields a resource can be selected by
    /// is the API server's choice (`metadata.name`, `metadata.namespace`,
    /// and a few per resource); another is refused when the watch starts.
    pub fn with_fields(mut self, selector: &str) -> Self {
        self.fields = Some(selector.to_owned());
        self
    }

    /// Queues only the watch events `predicate` passes (default: every
    /// change). Requeues and retries are never filtered.
    pub fn with_predicate(mut self, predicate: Predicate<K>) -> Self {
        self.predicate = Some(predicate);
        self
    }

    /// Retries a failed reconcile of each object after `backoff`'s delay
    /// for its consecutive failures (default [`Backoff::default`]).
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = Some(backoff);
        self
    }

    /// Chooses what follows a failed reconcile: `policy` gets the object,
    /// the error and how many times in a row the object has failed (1 the
    /// first time; a success starts it over), and returns the
    /// [`Action`], as kube-rs's `error_policy`. Replaces the backoff, so it
    /// cannot be combined with [`with_backoff`](Self::with_backoff) (call
    /// [`Backoff::delay`] from the policy instead).
    pub fn with_error_policy(
        mut self,
        policy: impl Fn(&K, &R::Error, u32) -> Action + Send + Sync + 'static,
    ) -> Self {
        self.policy = Some(Box::new(policy));
        self
    }

    /// Reconciles at most `n` objects at once (default
    /// [`DEFAULT_CONCURRENCY`](crate::controller::DEFAULT_CONCURRENCY); 0 for no
    /// limit). The controller's queue hands out an object only for a free
    /// slot, new and changed objects first; see the book's "The queue".
    pub fn with_concurrency(mut self, n: u16) -> Self {
        self.concurrency = n;
        self
    }

    /// Whether a reconcile waits until the manager's caches show its own
    /// last writes it depends on (default: on). With it on, a reconcile of
    /// an object does not start while a cache that selects every object
    /// of its resource still holds a copy older than the manager's last
    /// write of that object, or of a child written (created, changed or
    /// deleted) while reconciling it: it waits up to 2 s for the watch,
    /// then is requeued. The reconcile then gets the cache's current copy.
    /// The idea of Kubernetes' own KEP-5647, for every concord controller;
    /// see the book's "Guarantees and failure modes". Off only for
    /// measurements, or a reconciler that reads nothing it wrote.
    pub fn with_read_your_writes(mut self, on: bool) -> Self {
        self.read_your_writes = on;
        self
    }

    /// Skips the watch events of this controller's objects that the
    /// manager's own writes caused (the event's `resourceVersion` is the
    /// one its last write of the object stored), so a write does not cost
    /// a second reconcile where the reconciler would decide nothing new.
    /// Together with [`with_predicate`](Self::with_predicate), an event
    /// must pass both. The start of a deletion of an object holding a
    /// finalizer is never skipped.
    ///
    /// # Caveats
    ///
    /// Another writer's change folded into the same event (a later
    /// version) is not skipped; a change of the manager's own that the
    /// reconciler must react to again (a status it computes from itself)
    /// would be. An event that reaches the cache before the write's own
    /// answer reaches the manager is not recognised, and is reconciled;
    /// so may be one of a write made before the first controller that
    /// skips them was added (one added while the manager runs).
    pub fn skip_own_writes(mut self) -> Self {
        self.skip_own_writes = true;
        self
    }

    /// Reconciles the objects `mapper` names whenever the watch of `W`
    /// applies or deletes an object, as controller-runtime's
    /// `Watches(obj, handler.EnqueueRequestsFromMapFunc(..))`. The watch
    /// is the manager's shared cache of `W` for `api` (one per kind and
    /// scope, shared with any controller of `W` without a selector and
    /// with [`Manager::cache`], and gated by its own `/readyz` check), and
    /// `mapper` gets that object and a [`CacheReader`] of every cache, so
    /// it can look up an [index](Manager::index) of this controller's
    /// kind rather than decode every object of it.
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # use concord::{Action, Context, Manager, Reconciler};
    /// # use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    /// # use kube::runtime::reflector::ObjectRef;
    /// # struct Users;
    /// # #[concord::async_trait]
    /// # impl Reconciler<ConfigMap> for Users {
    /// #     type Error = concord::WriteError;
    /// #     async fn reconcile(&self, _: Arc<ConfigMap>, _: &Context<ConfigMap>) -> Result<Action, Self::Error> {
    /// #         Ok(Action::await_change())
    /// #     }
    /// # }
    /// # fn demo(manager: &mut Manager) -> Result<(), concord::Error> {
    /// // ConfigMaps name the Secret they use in the annotation `secret`.
    /// manager.index::<ConfigMap>("secret", |map| {
    ///     map.metadata.annotations.as_ref()
    ///         .and_then(|a| a.get("secret").cloned()).into_iter().collect()
    /// })?;
    /// let maps = kube::Api::<ConfigMap>::all(manager.client().clone());
    /// let secrets = kube::Api::<Secret>::all(manager.client().clone());
    /// manager
    ///     .controller("users", maps, Users)
    ///     .watches(secrets, |secret: &Secret, caches| {
    ///         let name = secret.metadata.name.clone().unwrap_or_default();
    ///         caches.store::<ConfigMap>()
    ///             .and_then(|maps| maps.indexed("secret", &name))
    ///             .unwrap_or_default()
    ///     })
    ///     .add()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Caveats
    ///
    /// `mapper` runs on the watch's task: keep it to cache reads. After a
    /// watch gap, an object deleted during the gap reaches no mapper (the
    /// relist only drops it).
    pub fn watches<W, I>(
        mut self,
        api: Api<W>,
        mapper: impl Fn(&W, &CacheReader) -> I + Send + Sync + 'static,
    ) -> Self
    where
        W: Object,
        I: IntoIterator<Item = ObjectRef<K>>,
    {
        let cache = self
            .manager
            .shared_cache(api, Vec::new(), Selection::default(), &());
        let reader = self.manager.caches();
        let (sender, receiver) = futures::channel::mpsc::unbounded();
        cache.listen(Box::new(move |object: &W, _deleted| {
            for target in mapper(object, &reader) {
                // The controller stopped: nobody needs the trigger.
                let _ = sender.unbounded_send(target);
            }
        }));
        self.triggers.push(Box::pin(receiver));
        self
    }

    /// Reconciles the owner of each object of `C` that `api` watches — the
    /// object its controller owner reference names, when that is of this
    /// controller's kind — whenever one changes or goes, as
    /// controller-runtime's `Owns`. The watch is the manager's shared
    /// cache of `C` (see [`watches`](Self::watches)), which reconcilers
    /// read through [`Context::cache`](crate::Context::cache).
    ///
    /// ```no_run
    /// # use concord::Manager;
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # use k8s_openapi::api::apps::v1::Deployment;
    /// # fn demo(manager: &mut Manager, r: impl concord::Reconciler<Deployment>) -> Result<(), concord::Error> {
    /// let client = manager.client().clone();
    /// manager
    ///     .controller("deployments", kube::Api::<Deployment>::all(client.clone()), r)
    ///     .owns(kube::Api::<ConfigMap>::all(client))
    ///     .add()?;
    /// # Ok(()) }
    /// ```
    pub fn owns<C: Object>(self, api: Api<C>) -> Self
    where
        K: Resource<DynamicType = ()>,
    {
        self.watches(api, |child: &C, _| {
            child
                .owner_references()
                .iter()
                .filter(|owner| {
                    owner.controller == Some(true)
                        && owner.kind == K::kind(&())
                        && owner.api_version == K::api_version(&())
                })
                .map(|owner| {
                    let key = ObjectRef::<K>::new(&owner.name);
                    match child.namespace() {
                        // An owner of the child's kind is in its namespace,
                        // unless it is cluster-scoped.
                        Some(namespace) if !crate::context::is_cluster_scoped::<K>() => {
                            key.within(&namespace)
                        }
                        _ => key,
                    }
                })
                .collect::<Vec<_>>()
        })
    }

    /// Reconciles the objects `triggers` names, whenever it names them:
    /// for a source of changes that is not a watch of the API server (an
    /// external system's events, a timer, a channel). Each goes through
    /// the controller's queue as a watch event would: coalesced with
    /// whatever else names the object, never run twice at once, and
    /// dropped when the cache no longer holds the object.
    pub fn reconcile_on(
        mut self,
        triggers: impl futures::Stream<Item = ObjectRef<K>> + Send + 'static,
    ) -> Self {
        self.triggers.push(Box::pin(triggers));
        self
    }

    /// Checks the controller and adds it to the manager.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidController`] naming the controller and every
    /// problem at once: a label or field selector that does not parse (the
    /// API server would refuse every list, and the controller would see
    /// nothing), an empty or invalid namespace set or one that contradicts
    /// the `Api`'s own namespace, several namespaces in a sharded manager,
    /// a backoff without a positive base below its cap or with a jitter
    /// outside 0 to 1, or both a backoff and an error policy.
    pub fn add(self) -> Result<(), Error> {
        let mut problems = Vec::new();
        let labels = self.labels.as_deref().and_then(|text| {
            label_selector(text)
                .map_err(|why| problems.push(format!("label selector `{text}`: {why}")))
                .ok()
        });
        let fields = self.fields.as_deref().and_then(|text| {
            field_selector(text)
                .map_err(|why| problems.push(format!("field selector `{text}`: {why}")))
                .ok()
        });
        let backoff = self.backoff.unwrap_or_default();
        if let Some(why) = backoff.problem() {
            problems.push(format!("backoff {backoff:?}: {why}"));
        }
        if self.backoff.is_some() && self.policy.is_some() {
            problems.push(
                "both a backoff and an error policy: the policy chooses every requeue".into(),
            );
        }
        let mut api = self.api;
        let mut more = Vec::new();
        if let Some(mut namespaces) = self.namespaces {
            namespaces.sort_by(|a, b| a.0.cmp(&b.0));
            namespaces.dedup_by(|a, b| a.0 == b.0);
            let names: Vec<&str> = namespaces.iter().map(|(n, _)| n.as_str()).collect();
            for name in names.iter().filter(|n| !is_namespace_name(n)) {
                problems.push(format!("namespace `{name}` is not a namespace name"));
            }
            if names.is_empty() {
                problems.push("an empty namespace set: it would watch nothing".into());
            }
            if let Some(own) = api.namespace()
                && names != [own]
            {
                problems.push(format!(
                    "the Api is for namespace `{own}` but the namespace set is {names:?}: \
                     give `Api::all` with a set, or the namespaced Api alone"
                ));
            }
            if names.len() > 1 && self.manager.sharding.is_some() {
                problems.push(format!(
                    "the namespace set {names:?} in a sharded manager: shard over all \
                     namespaces or one"
                ));
            }
            let mut apis = namespaces.into_iter().map(|(_, api)| api);
            if let Some(first) = apis.next() {
                api = first;
                more = apis.collect();
            }
        }
        if !problems.is_empty() {
            return Err(Error::InvalidController {
                controller: self.name,
                problems: problems.join("; "),
            });
        }
        let predicate = match (self.skip_own_writes, self.predicate) {
            (false, predicate) => predicate,
            (true, predicate) => {
                let own = self.manager.writes.own_writes().clone();
                own.tell_own_events();
                let resource =
                    crate::cache::label_of(&kube::core::ApiResource::erase::<K>(&self.dyntype));
                let not_own = Predicate::new(move |_, new: &K| {
                    let meta = new.meta();
                    let key = (
                        resource.clone(),
                        meta.namespace.clone(),
                        meta.name.clone().unwrap_or_default(),
                    );
                    !meta
                        .resource_version
                        .as_deref()
                        .is_some_and(|version| own.caused(&key, version))
                });
                Some(match predicate {
                    Some(predicate) => predicate.and(not_own),
                    None => not_own,
                })
            }
        };
        let parts = Parts {
            labels,
            fields,
            predicate,
            backoff,
            policy: self.policy,
            concurrency: self.concurrency,
            triggers: self.triggers,
            read_your_writes: self.read_your_writes,
        };
        self.manager
            .install(&self.name, api, more, self.dyntype, self.reconciler, parts);
        Ok(())
    }
}

impl<K, R> ControllerBuilder<'_, K, R>
where
    K: AnyObject,
    K::Scope: NamespaceScope,
    R: Reconciler<K>,
{
    /// Watches only these namespaces: one watch per namespace, one cache
    /// for the set, as controller-runtime's `cache.Options.DefaultNamespaces`
    /// (or `ByObject[..].Namespaces`). Only namespaced resources have the
    /// method; pass `Api::all` (or the one namespace's `Api` with a set of
    /// that namespace). An operator whose RBAC reaches only these
    /// namespaces needs no cluster-wide list.
    pub fn with_namespaces<I, S>(mut self, namespaces: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.namespaces = Some(
            namespaces
                .into_iter()
                .map(Into::into)
                .map(|name| {
                    let api = self.api.clone().constrain(&name);
                    (name, api)
                })
                .collect(),
        );
        self
    }
}
