use std::fmt::{self, Debug};
use std::marker::PhantomData;
use std::sync::Arc;

use std::any::TypeId;

use kube::core::{ApiResource, DynamicObject, Resource};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

use crate::wire::server_version::TypedBuiltinsComplete;
use crate::{Error, Mutation, ObjectKey, Observed, Target, WriteStrategy, Written};

/// Typed writes for objects of `K`, through one strategy.
///
/// # What a typed copy holds
///
/// A Rust type may lack fields the API server stores, and a write that
/// sends a whole object or a whole list (`update`'s `PUT`, a list the
/// mutation sets whole) built from it would erase them. So the writer
/// trusts a copy to hold every stored field only when that is known:
///
/// - a [`DynamicObject`] holds every field;
/// - a type the caller states `k8s-openapi` generates
///   ([`with_builtin_type`](Writer::with_builtin_type), bounded on
///   `k8s_openapi::Resource`) holds every field of the Kubernetes version
///   it was compiled for: complete on an API server not newer (learnt once,
///   `GET /version`);
/// - any other type — a custom resource's, or a built-in one nobody made a
///   statement for — is not: such a write reads the object first.
///
/// Works for any kube resource: k8s-openapi types and `#[derive(CustomResource)]`
/// types (`DynamicType = ()`) via [`Writer::new`], and [`DynamicObject`] via
/// [`Writer::new_with`] and an [`ApiResource`]; namespaced and cluster-scoped;
/// a copy read through another served version of the resource is written
/// (and re-read) through that version;
/// main resource and status subresource (chosen by the mutation; status
/// goes through the main resource of a custom resource without the
/// subresource).
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
    /// Set when the caller stated that `K` is a type `k8s-openapi`
    /// generates: whether the server is not newer than those types.
    builtin: Option<TypedBuiltinsComplete>,
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
            builtin: None,
            _kind: PhantomData,
        }
    }

    /// States that `K` is a type `k8s-openapi` generates, so a copy of it
    /// holds every field of the Kubernetes version those types describe.
    /// On an API server not newer than that version, the writer then
    /// sends a copy whole (`update`'s `PUT`, a list set whole) without
    /// reading the object first; on a newer one, or one whose version
    /// cannot be learnt, it reads first as for any typed copy.
    ///
    /// Without this statement a typed copy counts as possibly missing
    /// fields: safe, at one `GET` before each `PUT`.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use concord_featuregates::{ConflictPolicy, StrategyName};
    /// use concord_strategies::{Writer, strategy_for};
    /// use k8s_openapi::api::core::v1::Pod;
    ///
    /// let client = kube::Client::try_default().await?;
    /// let update = strategy_for(StrategyName::Update, ConflictPolicy::default());
    /// let writer = Writer::<Pod>::new(client, update).with_builtin_type();
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_builtin_type(mut self) -> Self
    where
        K: k8s_openapi::Resource,
    {
        self.builtin = Some(TypedBuiltinsComplete::default());
        self
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
    /// the way out. It is handed to the strategy as [`Observed::complete`]
    /// or [`Observed::typed`] as the [writer knows](Writer#what-a-typed-copy-holds):
    /// from a typed copy, `update` reads the object before its `PUT`, and
    /// a list set whole takes its entries from a fresh read.
    ///
    /// # Errors
    ///
    /// The strategy's [`Error`]s, and [`Error::Convert`] if `K` does not
    /// round-trip through JSON.
    pub async fn write(&self, observed: &K, mutation: &Mutation) -> Result<Written<K>, Error> {
        let json = to_json(&self.target, observed)?;
        let complete = if TypeId::of::<K>() == TypeId::of::<DynamicObject>() {
            true
        } else if let Some(builtin) = &self.builtin {
            builtin.get(&self.target.client).await
        } else {
            false
        };
        let observed = if complete {
            Observed::complete(json)
        } else {
            Observed::typed(json)
        };
        let written = self
            .strategy
            .write_json(&self.target, observed, mutation)
            .await?;
        self.typed(written)
    }

    /// Creates `object` through this writer's strategy (the table's
    /// `create` cell): one `POST`. Under `lax` an object of that name that
    /// already exists counts as done and comes back as stored; under
    /// `strict`, `update` and `guarded` it is [`Error::AlreadyExists`].
    /// `object` is sent as its type serializes it, so a field the type
    /// lacks is not set.
    ///
    /// An object with `metadata.generateName` and no name is created under
    /// the name the server generates (the written object carries it) by
    /// every strategy that serves `create`. It is never sent twice after an
    /// answer that may come after it was stored (a `5xx`): that answer is
    /// [`Error::Request`], and an object may then exist under a generated
    /// name.
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyExists`], [`Error::MissingField`] without a name or
    /// `generateName`,
    /// [`Error::NotFound`] naming the namespace when it does not exist,
    /// [`Error::Rejected`], [`Error::UnsupportedMutation`] for `locked` and
    /// `apply`, and the transient and transport errors of every write.
    pub async fn create(&self, object: &K) -> Result<Written<K>, Error> {
        let json = to_json(&self.target, object)?;
        let written =
            crate::runner::whole_objects::create(&self.target, self.strategy.name(), json).await?;
        self.typed(written)
    }

    /// Deletes the object `observed` is a copy of through this writer's
    /// strategy (the table's `delete` cell): one `DELETE` with the copy's
    /// uid as a precondition, and its `resourceVersion` too unless the
    /// strategy is `lax`. An object already gone, or gone and created
    /// again under its name, counts as done ([`Outcome::gone`](crate::Outcome)),
    /// and is left alone. The written object is `None` once deleted, or
    /// the object with its `deletionTimestamp` while finalizers hold it.
    /// Only the copy's name, namespace, uid and `resourceVersion` are read,
    /// so a metadata-only copy or a view serves.
    ///
    /// # Errors
    ///
    /// [`Error::Conflict`] when the copy is older than the stored object
    /// (never retried: the reconciler decides again on the newer copy),
    /// [`Error::MissingField`] when a strategy other than `lax` is given a
    /// copy without uid or `resourceVersion`, [`Error::Rejected`],
    /// [`Error::UnsupportedMutation`] for `locked` and `apply`, and the
    /// transient and transport errors of every write.
    pub async fn delete(&self, observed: &K) -> Result<Written<K>, Error> {
        let json = to_json(&self.target, observed)?;
        let written =
            crate::runner::whole_objects::delete(&self.target, self.strategy.name(), json).await?;
        self.typed(written)
    }

    fn typed(&self, written: Written<Value>) -> Result<Written<K>, Error> {
        let object = written
            .object
            .map(serde_json::from_value)
            .transpose()
            .map_err(|source| Error::Convert {
                object: ObjectKey::new(self.target.resource.plural.clone(), None, "?"),
                source,
            })?;
        Ok(Written::new(object, written.outcome))
    }
}

/// `observed` as JSON, with apiVersion and kind filled in from the target
/// if the typed form omits them (or names the metadata-only wire type).
fn to_json<K: Serialize>(target: &Target, observed: &K) -> Result<Value, Error> {
    let mut value = serde_json::to_value(observed).map_err(|source| Error::Convert {
        object: ObjectKey::new(target.resource.plural.clone(), None, "?"),
        source,
    })?;
    if let Value::Object(map) = &mut value {
        // A metadata-only copy (`PartialObjectMeta<K>`, read through the
        // metadata API) names its own wire type: the object is the target's.
        if map.get("kind").and_then(Value::as_str) == Some("PartialObjectMetadata") {
            map.remove("apiVersion");
            map.remove("kind");
        }
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
            builtin: self.builtin.clone(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::{config_map, target};
    use crate::{ConflictPolicy, Intent, StrategyName, strategy_for};
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    fn version(minor: &str) -> (u16, Value) {
        let info = json!({
            "major": "1", "minor": minor, "gitVersion": format!("v1.{minor}.0"),
            "gitCommit": "", "gitTreeState": "", "buildDate": "", "goVersion": "",
            "compiler": "", "platform": "",
        });
        (200, info)
    }

    /// `update` of a typed ConfigMap, stated a built-in type or not: the
    /// requests it sends, given the server's minor version, writing twice
    /// through one writer.
    async fn update_requests(minor: &str, builtin: bool) -> Vec<String> {
        // The server's copy (with a field the typed ConfigMap lacks), then
        // the stored answer to the PUT; repeated for the second write.
        let mut raw = config_map("8", json!({}));
        raw["newerField"] = json!("kept");
        let stored = (200, config_map("9", json!({"a": "b"})));
        let reads = vec![
            (200, raw.clone()),
            stored.clone(),
            (200, raw),
            stored.clone(),
        ];
        let answers = match (builtin, minor) {
            (true, "37") => vec![version(minor), stored.clone(), stored],
            (true, _) => [vec![version(minor)], reads].concat(),
            (false, _) => reads,
        };
        let (target, seen) = target(answers);
        let writer = Writer::<ConfigMap>::from_target(
            target,
            strategy_for(StrategyName::Update, ConflictPolicy::default()),
        );
        let writer = if builtin {
            writer.with_builtin_type()
        } else {
            writer
        };
        let observed: ConfigMap = serde_json::from_value(config_map("7", json!({}))).unwrap();
        for _ in 0..2 {
            writer
                .write(&observed, &Intent::set_label("a", "b").into())
                .await
                .unwrap();
        }
        seen.lock().unwrap().clone()
    }

    #[tokio::test]
    async fn a_server_not_newer_than_k8s_openapi_puts_the_typed_object() {
        let path = "/api/v1/namespaces/ns/configmaps/cm";
        assert_eq!(
            update_requests("37", true).await,
            [
                "GET /version".to_owned(),
                format!("PUT {path}"),
                format!("PUT {path}")
            ],
            "the version is learnt once; no read before the PUT"
        );
    }

    #[tokio::test]
    async fn a_newer_server_reads_the_object_raw_before_the_put() {
        let path = "/api/v1/namespaces/ns/configmaps/cm";
        assert_eq!(
            update_requests("38", true).await,
            [
                "GET /version".to_owned(),
                format!("GET {path}"),
                format!("PUT {path}"),
                format!("GET {path}"),
                format!("PUT {path}"),
            ],
            "fields the compiled type lacks would be dropped by a PUT of it"
        );
    }

    #[tokio::test]
    async fn a_typed_object_nobody_stated_a_built_in_is_read_before_the_put() {
        let path = "/api/v1/namespaces/ns/configmaps/cm";
        assert_eq!(
            update_requests("37", false).await,
            [
                format!("GET {path}"),
                format!("PUT {path}"),
                format!("GET {path}"),
                format!("PUT {path}"),
            ],
            "without the statement the type may lack stored fields, whatever its name"
        );
    }
}
