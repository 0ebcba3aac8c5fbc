//! Hub-and-spoke conversion: round trips on generated values, and the real
//! kube-apiserver converting stored objects through the webhook.
//!
//! ```text
//! cargo test -p concord-tests --test webhooks admission::conversion::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use anyhow::Result;
use concord::webhook::{
    Conversion, Spoke, WebhookClient, WebhookServer, Webhooks, check_hub_round_trip,
    check_spoke_round_trip,
};
use concord_testenv::TestEnv;
use kube::api::{Api, PostParams};
use kube::core::crd::merge_crds;
use kube::{CustomResourceExt, ResourceExt};
use proptest::prelude::*;
use support::{admin, certs, eventually};
use tokio::sync::oneshot;

// ANCHOR: versions
/// The old version: no colour field, so it keeps the hub's in an annotation.
pub(crate) mod v1alpha1 {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// Spec of `v1alpha1`.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[kube(
        group = "conversion.test.concord.dev",
        version = "v1alpha1",
        kind = "Doohickey",
        namespaced
    )]
    pub(crate) struct DoohickeySpec {
        /// Size.
        pub size: i32,
    }
}

/// The hub.
pub(crate) mod v1 {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// Spec of `v1`.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[kube(
        group = "conversion.test.concord.dev",
        version = "v1",
        kind = "Doohickey",
        namespaced
    )]
    pub(crate) struct DoohickeySpec {
        /// Size.
        pub size: i32,
        /// New in v1.
        pub color: String,
    }
}

const COLOR: &str = "conversion.test.concord.dev/color";

impl Spoke<v1::Doohickey> for v1alpha1::Doohickey {
    fn into_hub(self) -> v1::Doohickey {
        let mut metadata = self.metadata;
        let color = metadata
            .annotations
            .as_mut()
            .and_then(|a| a.remove(COLOR))
            .unwrap_or_default();
        if metadata.annotations.as_ref().is_some_and(|a| a.is_empty()) {
            metadata.annotations = None;
        }
        let spec = v1::DoohickeySpec {
            size: self.spec.size,
            color,
        };
        v1::Doohickey { metadata, spec }
    }

    fn from_hub(hub: v1::Doohickey) -> Self {
        let mut metadata = hub.metadata;
        if !hub.spec.color.is_empty() {
            metadata
                .annotations
                .get_or_insert_default()
                .insert(COLOR.to_owned(), hub.spec.color);
        }
        let spec = v1alpha1::DoohickeySpec {
            size: hub.spec.size,
        };
        v1alpha1::Doohickey { metadata, spec }
    }
}
// ANCHOR_END: versions

// ANCHOR: round_trip
proptest! {
    #[test]
    fn conversion_loses_nothing(size in any::<i32>(), color in "[a-z]{0,12}", name in "[a-z]{1,10}",
                                other in proptest::option::of("[a-z]{1,8}")) {
        let mut hub = v1::Doohickey::new(&name, v1::DoohickeySpec { size, color });
        if let Some(value) = other {
            hub.annotations_mut().insert("other".into(), value);
        }
        check_hub_round_trip::<_, v1alpha1::Doohickey>(&hub).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let spoke = v1alpha1::Doohickey::from_hub(hub);
        check_spoke_round_trip(&spoke).map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
}
// ANCHOR_END: round_trip

/// A careless v1alpha1 that forgets the colour.
#[allow(unreachable_pub)]
mod lossy {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// Spec of the lossy `v1alpha1`.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[kube(
        group = "conversion.test.concord.dev",
        version = "v1alpha1",
        kind = "Doohickey",
        namespaced
    )]
    pub(crate) struct DoohickeySpec {
        /// Size.
        pub size: i32,
    }
}

impl Spoke<v1::Doohickey> for lossy::Doohickey {
    fn into_hub(self) -> v1::Doohickey {
        let spec = v1::DoohickeySpec {
            size: self.spec.size,
            color: String::new(),
        };
        v1::Doohickey {
            metadata: self.metadata,
            spec,
        }
    }

    fn from_hub(hub: v1::Doohickey) -> Self {
        let spec = lossy::DoohickeySpec {
            size: hub.spec.size,
        };
        lossy::Doohickey {
            metadata: hub.metadata,
            spec,
        }
    }
}

#[test]
fn a_lossy_conversion_is_caught() {
    let hub = v1::Doohickey::new(
        "x",
        v1::DoohickeySpec {
            size: 1,
            color: "red".into(),
        },
    );
    let err = check_hub_round_trip::<_, lossy::Doohickey>(&hub).unwrap_err();
    assert!(err.diff.contains("/spec/color"), "{err}");
    assert!(check_hub_round_trip::<_, v1alpha1::Doohickey>(&hub).is_ok());
}

#[tokio::test]
async fn objects_convert_both_ways_through_the_real_api_server() -> Result<()> {
    let env = TestEnv::shared()?;
    let (ca, dir) = certs()?;
    let webhooks = Webhooks::new()
        .with_conversion(Conversion::<v1::Doohickey>::new().with_spoke::<v1alpha1::Doohickey>());
    let server = WebhookServer::bind("127.0.0.1:0".parse()?, dir.path(), webhooks.clone()).await?;
    let address = server.local_addr().unwrap();
    let metrics = server.metrics();
    let (_stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server.serve(async move {
        let _ = stopped.await;
    }));
    let client = WebhookClient::url(format!("https://{address}"))
        .with_ca_bundle(ca.pem().as_bytes().to_vec());

    // v1alpha1 is stored first; both are served.
    let crd = merge_crds(
        vec![v1alpha1::Doohickey::crd(), v1::Doohickey::crd()],
        "v1alpha1",
    )?;
    env.install_crd(webhooks.with_crd_conversion(crd, &client)?)
        .await?;

    let ns = env.namespace().await?;
    let old: Api<v1alpha1::Doohickey> = Api::namespaced(ns.client(), ns.name());
    let new: Api<v1::Doohickey> = Api::namespaced(ns.client(), ns.name());

    // Written as v1alpha1, read as v1.
    old.create(
        &PostParams::default(),
        &v1alpha1::Doohickey::new("a", v1alpha1::DoohickeySpec { size: 7 }),
    )
    .await?;
    eventually(Duration::from_secs(30), "v1 reads to convert", || async {
        new.get("a").await.is_ok()
    })
    .await?;
    let read = new.get("a").await?;
    assert_eq!(
        read.spec,
        v1::DoohickeySpec {
            size: 7,
            color: String::new()
        }
    );

    // Written as v1 with the field v1alpha1 lacks, read as v1alpha1 and back.
    new.create(
        &PostParams::default(),
        &v1::Doohickey::new(
            "b",
            v1::DoohickeySpec {
                size: 3,
                color: "teal".into(),
            },
        ),
    )
    .await?;
    let spoke = old.get("b").await?;
    assert_eq!(spoke.spec.size, 3);
    assert_eq!(
        spoke.annotations().get(COLOR).map(String::as_str),
        Some("teal")
    );
    assert_eq!(
        new.get("b").await?.spec.color,
        "teal",
        "nothing lost in storage"
    );

    // An update through the old version keeps the new field.
    let mut spoke = old.get("b").await?;
    spoke.spec.size = 4;
    old.replace("b", &PostParams::default(), &spoke).await?;
    let hub = new.get("b").await?;
    assert_eq!(
        hub.spec,
        v1::DoohickeySpec {
            size: 4,
            color: "teal".into()
        }
    );

    // Storage version migration: store v1, rewrite every object, and the
    // CRD then records only v1 as stored.
    let crd = merge_crds(vec![v1alpha1::Doohickey::crd(), v1::Doohickey::crd()], "v1")?;
    env.install_crd(webhooks.with_crd_conversion(crd, &client)?)
        .await?;
    for object in new.list(&Default::default()).await? {
        new.replace(&object.name_any(), &PostParams::default(), &object)
            .await?;
    }
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(admin()?);
    let name = "doohickeys.conversion.test.concord.dev";
    let mut crd = crds.get(name).await?;
    let mut status = crd.status.take().unwrap_or_default();
    status.stored_versions = Some(vec!["v1".into()]);
    crd.status = Some(status);
    crds.replace_status(name, &PostParams::default(), &crd)
        .await?;
    let stored = crds.get(name).await?.status.and_then(|s| s.stored_versions);
    assert_eq!(stored, Some(vec!["v1".to_owned()]));
    assert_eq!(new.get("a").await?.spec.size, 7);
    assert_eq!(
        old.get("b")
            .await?
            .annotations()
            .get(COLOR)
            .map(String::as_str),
        Some("teal")
    );

    assert!(metrics.requests("convert.doohickeys.conversion.test.concord.dev", "allowed") > 0);
    assert_eq!(
        metrics.requests("convert.doohickeys.conversion.test.concord.dev", "invalid"),
        0
    );
    Ok(())
}
