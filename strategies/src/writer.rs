use std::fmt::{self, Debug};
use std::marker::PhantomData;
use std::sync::Arc;

use kube::core::{ApiResource, DynamicObject, Resource};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

use crate::{Error, Mutation, ObjectKey, Target, WriteStrategy, Written};

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
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
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
    /// # Errors
    ///
    /// The strategy's [`Error`]s, and [`Error::Convert`] if `K` does not
    /// round-trip through JSON.
    pub async fn write(&self, observed: &K, mutation: &Mutation) -> Result<Written<K>, Error> {
        let dynamic = to_dynamic(&self.target, observed)?;
        let written = self
            .strategy
            .write(&self.target, &dynamic, mutation)
            .await?;
        let key = || ObjectKey::of(&self.target.resource, &dynamic);
        let object = match written.object {
            Some(object) => Some(
                serde_json::to_value(object)
                    .and_then(serde_json::from_value)
                    .map_err(|source| Error::Convert {
                        object: key(),
                        source,
                    })?,
            ),
            None => None,
        };
        Ok(Written::new(object, written.outcome))
    }
}

/// `observed` as a dynamic object, with apiVersion and kind filled in from
/// the target if the typed form omits them.
fn to_dynamic<K: Serialize>(target: &Target, observed: &K) -> Result<DynamicObject, Error> {
    let convert = |source| Error::Convert {
        object: ObjectKey::new(target.resource.plural.clone(), None, "?"),
        source,
    };
    let mut value = serde_json::to_value(observed).map_err(convert)?;
    if let Value::Object(map) = &mut value {
        map.entry("apiVersion")
            .or_insert_with(|| target.resource.api_version.clone().into());
        map.entry("kind")
            .or_insert_with(|| target.resource.kind.clone().into());
    }
    serde_json::from_value(value).map_err(convert)
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
