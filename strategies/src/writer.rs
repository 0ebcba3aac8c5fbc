use std::fmt::{self, Debug};
use std::marker::PhantomData;
use std::sync::Arc;

use std::any::TypeId;

use kube::core::{ApiResource, DynamicObject, Resource};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

use crate::{Error, Mutation, ObjectKey, Observed, Target, WriteStrategy, Written};

/// Typed writes for objects of `K`, through one strategy.
///
/// Works for any kube resource: k8s-openapi types and `#[derive(CustomResource)]`
/// types (`DynamicType = ()`) via [`Writer::new`], and [`DynamicObject`] via
/// [`Writer::new_with`] and an [`ApiResource`]; namespaced and cluster-scoped;
/// main resource and status subresource (chosen by the mutation).
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use concord_featuregates::{ConflictPolicy, StrategyName};
/// use concord_strategies::{Intent, Mutation, Writer, strategy_for};
/// use k8s_openapi::api::core::v1::Pod;
/// use kube::Api;
///
/// let client = kube::Client::try_default().await?;
/// let pod = Api::<Pod>::namespaced(client.clone(), "default").get("web-0").await?;
/// let writer = Writer::<Pod>::new(client, strategy_for(StrategyName::Strict, ConflictPolicy::default()));
/// let written = writer
///     .write(&pod, &Mutation::from(Intent::remove_finalizer("example.com/cleanup")))
///     .await?;
/// println!("{:?}", written.outcome);
/// # Ok(()) }
/// ```
pub struct Writer<K> {
    strategy: Arc<dyn WriteStrategy>,
    target: Target,
    _kind: PhantomData<fn() -> K>,
}

impl<K> Writer<K>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug + 'static,
{
    /// A writer for a statically typed resource.
    pub fn new(client: kube::Client, strategy: Arc<dyn WriteStrategy>) -> Self
    where
        K: Resource<DynamicType = ()>,
    {
        Writer::from_target(Target::new(client, ApiResource::erase::<K>(&())), strategy)
    }

    /// A writer for a resource whose type is known at run time.
    pub fn new_with(
        client: kube::Client,
        strategy: Arc<dyn WriteStrategy>,
        dyntype: &K::DynamicType,
    ) -> Self {
        Writer::from_target(
            Target::new(client, ApiResource::erase::<K>(dyntype)),
            strategy,
        )
    }

    /// A writer to an already configured target.
    pub fn from_target(target: Target, strategy: Arc<dyn WriteStrategy>) -> Self {
        Writer {
            strategy,
            target,
            _kind: PhantomData,
        }
    }

    /// The target, to adjust its settings.
    #[must_use]
    pub fn with_target(mut self, f: impl FnOnce(Target) -> Target) -> Self {
        self.target = f(self.target);
        self
    }

    /// The strategy in use.
    pub fn strategy(&self) -> &Arc<dyn WriteStrategy> {
        &self.strategy
    }

    /// The target written to.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Apply `mutation` to `observed` and write it with the strategy.
    ///
    /// The object is converted to JSON once on the way in and back once on
    /// the way out. A custom resource's Rust type may lack fields the server
    /// stores, so it is handed over as [`Observed::typed`] (and `update`
    /// reads the object before its `PUT`); a [`DynamicObject`], or a type of
    /// Kubernetes' own API groups as `k8s-openapi` generates them, as
    /// [`Observed::complete`].
    ///
    /// # Caveats
    ///
    /// A built-in type from a `k8s-openapi` older than the API server lacks
    /// the server's newer fields; `update` would drop them. Write such
    /// objects as [`DynamicObject`]s, or keep `k8s-openapi` current.
    ///
    /// # Errors
    ///
    /// The strategy's [`Error`]s, and [`Error::Convert`] if `K` does not
    /// round-trip through JSON.
    pub async fn write(&self, observed: &K, mutation: &Mutation) -> Result<Written<K>, Error> {
        let json = to_json(&self.target, observed)?;
        let complete = TypeId::of::<K>() == TypeId::of::<DynamicObject>()
            || is_kubernetes_group(&self.target.resource.group);
        let observed = if complete {
            Observed::complete(json)
        } else {
            Observed::typed(json)
        };
        let key = || ObjectKey::new(self.target.resource.plural.clone(), None, "?");
        let written = self
            .strategy
            .write_json(&self.target, observed, mutation)
            .await?;
        let object = written
            .object
            .map(serde_json::from_value)
            .transpose()
            .map_err(|source| Error::Convert {
                object: key(),
                source,
            })?;
        Ok(Written::new(object, written.outcome))
    }
}

/// Whether `group` is one of Kubernetes' own API groups (core, `apps`,
/// `*.k8s.io`), whose typed objects `k8s-openapi` generates with every
/// field of the API version it targets. Custom resources cannot use these
/// groups without the API review annotation, so their Rust types, which
/// may lag their schema, are never taken as complete.
pub(crate) fn is_kubernetes_group(group: &str) -> bool {
    !group.contains('.') || group.ends_with(".k8s.io")
}

/// `observed` as JSON, with apiVersion and kind filled in from the target
/// if the typed form omits them.
fn to_json<K: Serialize>(target: &Target, observed: &K) -> Result<Value, Error> {
    let mut value = serde_json::to_value(observed).map_err(|source| Error::Convert {
        object: ObjectKey::new(target.resource.plural.clone(), None, "?"),
        source,
    })?;
    if let Value::Object(map) = &mut value {
        if !map.contains_key("apiVersion") {
            map.insert(
                "apiVersion".into(),
                target.resource.api_version.clone().into(),
            );
        }
        if !map.contains_key("kind") {
            map.insert("kind".into(), target.resource.kind.clone().into());
        }
    }
    Ok(value)
}

impl<K> Clone for Writer<K> {
    fn clone(&self) -> Self {
        Writer {
            strategy: self.strategy.clone(),
            target: self.target.clone(),
            _kind: PhantomData,
        }
    }
}

impl<K> Debug for Writer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Writer")
            .field("strategy", &self.strategy)
            .field("target", &self.target)
            .finish()
    }
}
