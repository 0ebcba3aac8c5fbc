//! Finalizers written exactly once, and "gone" meaning gone, against a real
//! kube-apiserver and etcd: an add retried after a `504` whose first
//! attempt did commit stores one copy; a removal is done only when every
//! copy is gone; a finalizer removal against a resource the server does not
//! serve is an error, not "object gone".
//!
//! ```text
//! cargo test -p concord-tests --test strategies incidents::exact_retries::
//! ```
use concord_strategies::{Error, Intent, Mutation, StrategyName, Target, Writer, strategy_for};
use concord_testenv::faults::{FaultProxy, Faults, Verb};
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject};
use serde_json::json;

use crate::exact_support;
use crate::support;

use exact_support::{Gadgets, clear_finalizers, create};
use support::{FOREIGN, OURS, policy};

/// The copies of `name` among the object's finalizers.
fn copies(object: &DynamicObject, name: &str) -> usize {
    object
        .metadata
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f == name)
        .count()
}

/// An add retried after a `504` that committed stores the finalizer once,
/// under every strategy (a mutation of two intents, so that `apply` sends
/// its one guarded patch).
#[tokio::test]
async fn a_retried_finalizer_add_stores_one_copy() -> anyhow::Result<()> {
    let Gadgets {
        env,
        ns: _ns,
        resource,
        raw,
        ..
    } = Gadgets::new().await?;
    for name in StrategyName::ALL {
        let object = format!("add-{name}");
        create(&raw, &resource, &object).await?;
        // Lists and maps that exist, so that `apply` guards entries.
        let start = json!({"metadata": {"finalizers": [FOREIGN], "labels": {"x": "1"}}});
        let observed = raw
            .patch(&object, &PatchParams::default(), &Patch::Merge(start))
            .await?;
        // The first write request goes through, its answer is lost.
        let faults = Faults::seeded(2)
            .on(Verb::Patch)
            .resource("gadgets")
            .named(&object)
            .time_out()
            .times(1)
            .on(Verb::Update)
            .resource("gadgets")
            .named(&object)
            .time_out()
            .times(1);
        let proxy = FaultProxy::start(env.config(), faults).await?;
        let mut config = proxy.config();
        config.default_retry = false;
        let writer = Writer::<DynamicObject>::from_target(
            Target::new(kube::Client::try_from(config)?, resource.clone()),
            strategy_for(name, policy()),
        );
        let add = Mutation::from(Intent::add_finalizer(OURS)).with(Intent::set_label("added", "1"));
        writer.write(&observed, &add).await?;
        let stored = raw.get(&object).await?;
        assert_eq!(
            copies(&stored, OURS),
            1,
            "{name}: {:?}",
            stored.metadata.finalizers
        );
        assert_eq!(
            stored.labels().get("added").map(String::as_str),
            Some("1"),
            "{name}"
        );
        assert_eq!(copies(&stored, FOREIGN), 1, "{name}");
        clear_finalizers(&raw, &object).await?;
    }
    Ok(())
}

/// A removal takes out every copy of the finalizer (the API server allows
/// duplicates) and leaves the others.
#[tokio::test]
async fn a_removal_leaves_no_copy_of_the_finalizer() -> anyhow::Result<()> {
    let Gadgets {
        env,
        ns: _ns,
        resource,
        raw,
        ..
    } = Gadgets::new().await?;
    for name in StrategyName::ALL {
        let object = format!("remove-{name}");
        create(&raw, &resource, &object).await?;
        let twice = json!({"metadata": {"finalizers": [OURS, FOREIGN, OURS]}});
        let observed = raw
            .patch(&object, &PatchParams::default(), &Patch::Merge(twice))
            .await?;
        assert_eq!(copies(&observed, OURS), 2, "the server keeps duplicates");
        let writer = Writer::<DynamicObject>::new_with(
            env.client()?,
            strategy_for(name, policy()),
            &resource,
        );
        writer
            .write(&observed, &Intent::remove_finalizer(OURS).into())
            .await?;
        let stored = raw.get(&object).await?;
        assert_eq!(
            copies(&stored, OURS),
            0,
            "{name}: {:?}",
            stored.metadata.finalizers
        );
        assert_eq!(copies(&stored, FOREIGN), 1, "{name}");
        clear_finalizers(&raw, &object).await?;
    }
    Ok(())
}

/// A `404` for a resource the server does not serve is an error: a
/// finalizer removal against it never reports the object gone.
#[tokio::test]
async fn a_finalizer_removal_against_an_unserved_resource_is_an_error() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let unserved = ApiResource {
        group: "nowhere.concord.example".into(),
        version: "v1".into(),
        api_version: "nowhere.concord.example/v1".into(),
        kind: "Thing".into(),
        plural: "things".into(),
    };
    let mut thing = DynamicObject::new("thing", &unserved).within(ns.name());
    thing.metadata.uid = Some("00000000-0000-0000-0000-000000000001".into());
    thing.metadata.resource_version = Some("1".into());
    thing.metadata.finalizers = Some(vec![OURS.into()]);
    for name in StrategyName::ALL {
        let writer = Writer::<DynamicObject>::new_with(
            env.client()?,
            strategy_for(name, policy()),
            &unserved,
        );
        let result = writer
            .write(&thing, &Intent::remove_finalizer(OURS).into())
            .await;
        match result {
            Err(Error::Rejected { .. }) => {}
            other => panic!("{name}: a removal against an unserved resource gave {other:?}"),
        }
    }
    Ok(())
}
