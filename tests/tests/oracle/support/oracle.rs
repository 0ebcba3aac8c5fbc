//! The server and namespace cases run in, and how each kind of object is
//! reached there.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Service};
use kube::api::Api;
use kube::core::{ApiResource, DynamicObject};

use super::model::Kind;
use super::types::Specimen;

/// The server and namespace cases run in.
pub(crate) struct Oracle {
    pub(crate) client: kube::Client,
    pub(crate) ns: concord_testenv::TestNamespace,
}

impl Oracle {
    /// On the shared control plane, with the specimen CRD installed.
    pub(crate) async fn new() -> anyhow::Result<Self> {
        let env = concord_testenv::TestEnv::shared()?;
        env.install_crd(super::types::crd()?).await?;
        env.install_crd(super::types::bare_crd()?).await?;
        let ns = env.namespace().await?;
        Ok(Oracle {
            client: env.client()?,
            ns,
        })
    }

    pub(crate) fn resource(kind: Kind) -> ApiResource {
        match kind {
            Kind::Specimen => ApiResource::erase::<Specimen>(&()),
            Kind::ConfigMap => ApiResource::erase::<ConfigMap>(&()),
            Kind::Deployment => ApiResource::erase::<Deployment>(&()),
            Kind::Service => ApiResource::erase::<Service>(&()),
            Kind::Pod => ApiResource::erase::<Pod>(&()),
            Kind::Node => ApiResource::erase::<Node>(&()),
            Kind::Bare => {
                let mut bare = ApiResource::erase::<Specimen>(&());
                bare.kind = "Bare".into();
                bare.plural = "bares".into();
                bare
            }
        }
    }

    pub(crate) fn raw(&self, kind: Kind) -> Api<DynamicObject> {
        if kind == Kind::Node {
            return Api::all_with(self.client.clone(), &Self::resource(kind));
        }
        Api::namespaced_with(self.client.clone(), self.ns.name(), &Self::resource(kind))
    }
}
