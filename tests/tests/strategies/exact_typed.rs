//! Exact writes from typed objects, against a real kube-apiserver and etcd:
//! a write through a Rust type that lags its CRD's schema never drops a
//! field the type does not know — for a typed closure, an intent, a
//! condition, with and without a conflict forcing a re-read.
//!
//! ```text
//! cargo test -p concord-tests --test strategies incidents::exact_typed::
//! ```
use concord_strategies::{Condition, Intent, Mutation, StrategyName, Writer, strategy_for};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject};
use serde_json::json;

use crate::exact_support;
use crate::support;

use exact_support::{Gadget, Gadgets, all_kept, create, unknown_fields};
use support::policy;

/// The strategies that run closures.
const CLOSURES: [StrategyName; 4] = [
    StrategyName::Lax,
    StrategyName::Strict,
    StrategyName::Update,
    StrategyName::Locked,
];

/// Another writer changes the gadget, so that a write from the copy read
/// before meets a conflict and re-reads.
async fn touch(api: &Api<DynamicObject>, name: &str, value: &str) -> anyhow::Result<()> {
    let label = json!({"metadata": {"labels": {"touched": value}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(label))
        .await?;
    Ok(())
}

/// A typed closure setting `spec.size` keeps `spec.color`, which the type
/// lacks, from a typed observed copy and after a conflict forced a re-read.
#[tokio::test]
async fn typed_closure_keeps_fields_its_type_lacks() -> anyhow::Result<()> {
    let Gadgets {
        env,
        ns: _ns,
        resource,
        raw,
        typed,
    } = Gadgets::new().await?;
    for name in CLOSURES {
        let object = format!("closure-{name}");
        create(&raw, &resource, &object).await?;
        let writer = Writer::<Gadget>::new(env.client()?, strategy_for(name, policy()));
        // ANCHOR: typed_closure
        // `Gadget` knows `spec.size`; the server also stores `spec.color`.
        let observed = typed.get(&object).await?;
        let size = |to: i64| Mutation::typed(move |g: &mut Gadget| g.spec.size = to);
        writer.write(&observed, &size(2)).await?;
        // ANCHOR_END: typed_closure
        let fresh = raw.get(&object).await?;
        assert_eq!(
            fresh.data["spec"]["size"], 2,
            "{name}: the closure's change"
        );
        assert_eq!(
            unknown_fields(&raw, &object).await?,
            all_kept(),
            "{name}: from the typed copy"
        );

        let stale = typed.get(&object).await?;
        touch(&raw, &object, "1").await?;
        writer.write(&stale, &size(3)).await?;
        let fresh = raw.get(&object).await?;
        assert_eq!(fresh.data["spec"]["size"], 3, "{name}: after a conflict");
        assert_eq!(fresh.labels().get("touched").map(String::as_str), Some("1"));
        assert_eq!(
            unknown_fields(&raw, &object).await?,
            all_kept(),
            "{name}: after a conflict and a re-read"
        );
    }
    Ok(())
}

/// A typed closure on a `DynamicObject` observed copy (complete) keeps
/// what the closure's type lacks too.
#[tokio::test]
async fn typed_closure_on_a_dynamic_copy_keeps_fields_its_type_lacks() -> anyhow::Result<()> {
    let Gadgets {
        env,
        ns: _ns,
        resource,
        raw,
        ..
    } = Gadgets::new().await?;
    for name in CLOSURES {
        let object = format!("dynamic-{name}");
        let observed = create(&raw, &resource, &object).await?;
        let writer = Writer::<DynamicObject>::new_with(
            env.client()?,
            strategy_for(name, policy()),
            &resource,
        );
        let size = Mutation::typed(|g: &mut Gadget| g.spec.size = 5);
        writer.write(&observed, &size).await?;
        assert_eq!(raw.get(&object).await?.data["spec"]["size"], 5, "{name}");
        assert_eq!(unknown_fields(&raw, &object).await?, all_kept(), "{name}");
    }
    Ok(())
}

/// A condition whose stored entries carry a field the Rust condition type
/// lacks (`severity`) keeps it, on the changed entry and the others, under
/// every strategy, from a typed copy and after a conflict.
#[tokio::test]
async fn set_condition_keeps_fields_and_entries_it_does_not_write() -> anyhow::Result<()> {
    let Gadgets {
        env,
        ns: _ns,
        resource,
        raw,
        typed,
    } = Gadgets::new().await?;
    let ready = |status: &str| {
        Mutation::from(Intent::SetCondition(Condition {
            type_: "Ready".into(),
            status: status.into(),
            reason: "Reconciled".into(),
            message: "set by concord".into(),
        }))
    };
    for name in StrategyName::ALL {
        let object = format!("condition-{name}");
        create(&raw, &resource, &object).await?;
        let writer = Writer::<Gadget>::new(env.client()?, strategy_for(name, policy()));
        writer
            .write(&typed.get(&object).await?, &ready("True"))
            .await?;
        let stored = raw.get(&object).await?;
        let conditions = &stored.data["status"]["conditions"];
        assert_eq!(conditions[0]["type"], "Ready", "{name}");
        assert_eq!(conditions[0]["status"], "True", "{name}");
        assert_eq!(conditions[0]["message"], "set by concord", "{name}");
        assert_eq!(conditions[1]["message"], "theirs", "{name}");
        assert_eq!(unknown_fields(&raw, &object).await?, all_kept(), "{name}");

        let stale = typed.get(&object).await?;
        touch(&raw, &object, "1").await?;
        let written = writer.write(&stale, &ready("False")).await?;
        if name == StrategyName::Strict {
            // The entry-by-entry patch carries the observed version as
            // its precondition, as the merge patch does.
            assert_eq!(
                written.outcome.conflicts, 1,
                "{name}: {:?}",
                written.outcome
            );
        }
        let stored = raw.get(&object).await?;
        assert_eq!(
            stored.data["status"]["conditions"][0]["status"], "False",
            "{name}"
        );
        assert_eq!(
            unknown_fields(&raw, &object).await?,
            all_kept(),
            "{name}: after a conflict"
        );
    }
    Ok(())
}

/// A CRD in a `*.k8s.io` group (an approved API, typed by a crate that can
/// lag it) is not taken for a k8s-openapi type: `update` reads it raw
/// before its `PUT` and keeps the fields its Rust type lacks.
#[tokio::test]
async fn update_of_a_crd_in_a_kubernetes_group_keeps_unknown_fields() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let group = "exact-concord.k8s.io";
    env.install_crd(exact_support::crd(group, "gadgets", "Gadget", false)?)
        .await?;
    let ns = env.namespace().await?;
    let resource = ApiResource {
        group: group.into(),
        version: "v1".into(),
        api_version: format!("{group}/v1"),
        kind: "Gadget".into(),
        plural: "gadgets".into(),
    };
    let raw: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &resource);
    create(&raw, &resource, "approved").await?;
    // The Rust type of the approved group, lagging its schema as
    // `Gadget` does: read through it, as a typed cache would.
    let stored = raw.get("approved").await?;
    let observed: Gadget = serde_json::from_value(serde_json::to_value(&stored)?)?;
    let writer = Writer::<Gadget>::from_target(
        concord_strategies::Target::new(env.client()?, resource.clone()),
        strategy_for(StrategyName::Update, policy()),
    );
    writer
        .write(&observed, &Intent::set_label("approved", "yes").into())
        .await?;
    let stored = raw.get("approved").await?;
    assert_eq!(
        stored.labels().get("approved").map(String::as_str),
        Some("yes")
    );
    assert_eq!(unknown_fields(&raw, "approved").await?, all_kept());
    Ok(())
}

/// `apply` of a condition on a CRD whose `conditions` is an atomic list
/// (the CRD default) does not replace the other managers' entries.
#[tokio::test]
async fn apply_of_a_condition_on_an_atomic_list_keeps_other_entries() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let group = exact_support::GROUP;
    env.install_crd(exact_support::crd(
        group,
        "atomicgadgets",
        "AtomicGadget",
        true,
    )?)
    .await?;
    let ns = env.namespace().await?;
    let resource = ApiResource {
        group: group.into(),
        version: "v1".into(),
        api_version: format!("{group}/v1"),
        kind: "AtomicGadget".into(),
        plural: "atomicgadgets".into(),
    };
    let raw: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &resource);
    let observed = create(&raw, &resource, "atomic").await?;
    let writer = Writer::<DynamicObject>::new_with(
        env.client()?,
        strategy_for(StrategyName::Apply, policy()),
        &resource,
    );
    let ready = Intent::SetCondition(Condition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: "Reconciled".into(),
        message: "set by concord".into(),
    });
    let written = writer.write(&observed, &ready.into()).await?;
    let stored = raw.get("atomic").await?;
    let conditions = &stored.data["status"]["conditions"];
    assert_eq!(conditions[0]["status"], "True");
    assert_eq!(conditions[1]["type"], "Other", "{conditions}");
    assert_eq!(unknown_fields(&raw, "atomic").await?, all_kept());
    assert!(
        written.outcome.fell_back,
        "an atomic list takes the guarded path"
    );
    Ok(())
}
