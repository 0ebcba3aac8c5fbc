//! What a controller-runtime author reaches for in the first week, on the
//! real control plane: a finalizer under any predicate, owner references
//! the garbage collector would act on, and server-side apply without an
//! owner.
//!
//! ```text
//! cargo test -p concord-tests --test controller first_week::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::exact_support;
use crate::fresh::Labelling;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use concord::{
    Action, Context, Manager, Predicate, Reconciler, WriteError, finalizer, finalizer::Lifecycle,
};
use concord_testenv::TestEnv;
use concord_tests::eventually;
use exact_support::Gadget;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

async fn manager(client: Client) -> Manager {
    Manager::builder("first-week-test")
        .with_client(client)
        .with_signal_handling(false)
        .build()
        .await
        .unwrap()
}

/// What a finalizer controller did to each gadget, by name.
#[derive(Default)]
struct Log {
    applied: Vec<String>,
    cleaned: Vec<String>,
}

/// Runs `finalizer()` with its own finalizer and records each step.
struct Finalizing {
    finalizer: &'static str,
    log: Arc<Mutex<Log>>,
}

#[concord::async_trait]
impl Reconciler<Gadget> for Finalizing {
    type Error = concord::finalizer::FinalizerError<WriteError>;

    async fn reconcile(
        &self,
        gadget: Arc<Gadget>,
        ctx: &Context<Gadget>,
    ) -> Result<Action, Self::Error> {
        let log = self.log.clone();
        finalizer(ctx, self.finalizer, gadget, |step| async move {
            let mut log = log.lock().unwrap();
            match step {
                Lifecycle::Apply(g) => log.applied.push(g.name_any()),
                Lifecycle::Cleanup(g) => log.cleaned.push(g.name_any()),
            }
            Ok(Action::await_change())
        })
        .await
    }
}

/// A new object under a finalizer and a predicate that drops the
/// finalizer's own change (a generation predicate, a label predicate, one
/// that passes creations only) reaches its handler, and its deletion —
/// which the label and creation predicates drop too — runs its cleanup
/// and lets it go.
#[tokio::test]
async fn a_finalizer_under_any_predicate_reaches_the_handler_and_its_cleanup() -> Result<()> {
    let env = TestEnv::shared()?;
    exact_support::install(env).await?;
    let ns = env.namespace().await?;
    let gadgets: Api<Gadget> = Api::namespaced(ns.client(), ns.name());
    let mut manager = manager(env.client()?).await;
    let predicates: [(&str, Predicate<Gadget>); 3] = [
        ("generation", Predicate::generation_changed()),
        ("labels", Predicate::labels_changed()),
        ("created", Predicate::new(|old, _| old.is_none())),
    ];
    let mut logs = BTreeMap::new();
    for (name, predicate) in predicates {
        let log = Arc::new(Mutex::new(Log::default()));
        logs.insert(name, log.clone());
        let finalizer: &'static str = Box::leak(format!("first-week.example/{name}").into());
        manager
            .controller(
                &format!("finalizing-{name}"),
                gadgets.clone(),
                Finalizing { finalizer, log },
            )
            .with_labels(&format!("predicate={name}"))
            .with_predicate(predicate)
            .add()?;
    }
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    for name in logs.keys() {
        let gadget: Gadget = serde_json::from_value(json!({
            "apiVersion": "exact.concord.example/v1", "kind": "Gadget",
            "metadata": {"name": name, "labels": {"predicate": name}},
            "spec": {"size": 1},
        }))?;
        gadgets.create(&PostParams::default(), &gadget).await?;
    }
    for (name, log) in &logs {
        assert!(
            eventually(WAIT, || async {
                log.lock().unwrap().applied.iter().any(|n| n == name)
            })
            .await,
            "under the {name} predicate the new gadget never reached its handler"
        );
        let stored = gadgets.get(name).await?;
        assert_eq!(
            stored.finalizers(),
            [format!("first-week.example/{name}")],
            "the finalizer is stored"
        );
    }
    for name in logs.keys() {
        gadgets.delete(name, &DeleteParams::default()).await?;
    }
    for (name, log) in &logs {
        assert!(
            eventually(WAIT, || async {
                log.lock().unwrap().cleaned.iter().any(|n| n == name)
                    && gadgets.get_opt(name).await.unwrap().is_none()
            })
            .await,
            "under the {name} predicate the deleted gadget was not cleaned up and let go"
        );
    }
    stop.shutdown();
    running.await??;
    Ok(())
}

fn config_map(namespace: Option<&str>, name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: namespace.map(Into::into),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("value".to_owned(), "v & <é>".to_owned())])),
        ..ConfigMap::default()
    }
}

fn refused<T: std::fmt::Debug>(result: Result<T, WriteError>, rule: &str) {
    match result {
        Err(WriteError::InvalidOwner { rule: said, .. }) => {
            assert!(said.contains(rule), "the error names the rule: {said}");
        }
        other => panic!("expected InvalidOwner ({rule}), got {other:?}"),
    }
}

/// An owner in another namespace, or a namespaced owner of a
/// cluster-scoped child, is refused before anything is sent — through
/// `apply_owned` and `create_owned` — so the garbage collector never gets
/// an owner reference it would answer by deleting the child. A
/// cluster-scoped owner of a namespaced child is written.
#[tokio::test]
async fn an_owner_the_garbage_collector_would_not_honour_is_refused_before_sending() -> Result<()> {
    let env = TestEnv::shared()?;
    let home = env.namespace().await?;
    let away = env.namespace().await?;
    let manager = manager(env.client()?).await;
    let ctx = manager.context::<ConfigMap>();
    let maps = Api::<ConfigMap>::namespaced(home.client(), home.name());
    let owner = maps
        .create(&PostParams::default(), &config_map(None, "owner"))
        .await?;

    let elsewhere = || config_map(Some(away.name()), "child");
    refused(
        ctx.apply_owned(&owner, elsewhere()).await,
        "child's namespace",
    );
    refused(
        ctx.create_owned(&owner, elsewhere()).await,
        "child's namespace",
    );
    let away_maps = Api::<ConfigMap>::namespaced(home.client(), away.name());
    assert!(
        away_maps.get_opt("child").await?.is_none(),
        "nothing was written to the other namespace"
    );

    let role_name = format!("first-week-{}", home.name());
    let role = || ClusterRole {
        metadata: ObjectMeta {
            name: Some(role_name.clone()),
            ..ObjectMeta::default()
        },
        ..ClusterRole::default()
    };
    refused(ctx.apply_owned(&owner, role()).await, "cluster-scoped");
    refused(ctx.create_owned(&owner, role()).await, "cluster-scoped");
    let roles = Api::<ClusterRole>::all(home.client());
    assert!(roles.get_opt(&role_name).await?.is_none());

    // In its own namespace the child is written, owned.
    let child = ctx.apply_owned(&owner, config_map(None, "child")).await?;
    assert_eq!(child.namespace().as_deref(), Some(home.name()));
    assert_eq!(child.owner_references()[0].uid, owner.uid().unwrap());

    // A cluster-scoped owner (the namespace itself) of a namespaced child.
    let namespaces = manager.context::<Namespace>();
    let namespace = Api::<Namespace>::all(home.client())
        .get(away.name())
        .await?;
    let owned = namespaces
        .create_owned(&namespace, config_map(Some(away.name()), "by-namespace"))
        .await?;
    assert_eq!(owned.owner_references()[0].kind, "Namespace");
    Ok(())
}

/// `ctx.apply` creates and then updates an object with one forced apply
/// each, adds no owner reference, and keeps a field another writer set.
#[tokio::test]
async fn apply_without_an_owner_creates_updates_and_keeps_another_writers_fields() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let manager = manager(env.client()?).await;
    let ctx = manager.context::<ConfigMap>();
    let maps = Api::<ConfigMap>::namespaced(ns.client(), ns.name());
    // ANCHOR: apply
    let mut settings = config_map(Some(ns.name()), "settings");
    let stored = ctx.apply(settings.clone()).await?;
    // ANCHOR_END: apply
    assert!(stored.owner_references().is_empty(), "no owner was added");
    maps.patch(
        "settings",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"theirs": "kept & <ü>"}})),
    )
    .await?;
    settings.data = Some(BTreeMap::from([("value".to_owned(), "second".to_owned())]));
    ctx.apply(settings).await?;
    let stored = maps.get("settings").await?;
    let data = stored.data.unwrap_or_default();
    assert_eq!(data.get("value").map(String::as_str), Some("second"));
    assert_eq!(data.get("theirs").map(String::as_str), Some("kept & <ü>"));
    assert!(stored.metadata.owner_references.is_none());

    // Into a namespace that does not exist: the error names the namespace.
    let nowhere = format!("{}-missing", ns.name());
    match ctx.apply(config_map(Some(&nowhere), "settings")).await {
        Err(WriteError::NotFound { object }) => assert_eq!(
            object.to_string(),
            format!("namespaces {nowhere}"),
            "the missing namespace is named, not the object"
        ),
        other => panic!("expected NotFound for the namespace, got {other:?}"),
    }
    Ok(())
}

/// The test harness: a manager started in one call, a wait that returns
/// the object once its condition holds and otherwise says what it last
/// saw, and a graceful stop.
#[tokio::test]
async fn the_test_harness_starts_waits_and_stops_a_manager() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    // ANCHOR: harness
    let client = env.client()?;
    let maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
    let mut manager = concord::testing::manager("harness", client).await?;
    manager
        .controller("labeller", maps.clone(), Labelling::default())
        .add()?;
    let running = concord::testing::start(manager);
    maps.create(&PostParams::default(), &config_map(None, "watched"))
        .await?;
    let labelled = concord::testing::wait_for(&maps, "watched", WAIT, "get labelled", |map| {
        map.labels().get("seen").is_some_and(|v| v == "yes")
    })
    .await?;
    // ANCHOR_END: harness
    assert_eq!(labelled.name_any(), "watched");
    let never = concord::testing::wait_for(
        &maps,
        "watched",
        Duration::from_millis(300),
        "get the label never=set",
        |map| map.labels().contains_key("never"),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        never.contains("did not get the label never=set within")
            && never.contains("\"seen\":\"yes\"")
            && never.contains("watched"),
        "the failure names the object and shows what was last seen: {never}"
    );
    maps.delete("watched", &DeleteParams::default()).await?;
    concord::testing::wait_until_gone(&maps, "watched", WAIT).await?;
    running.stop().await?;
    Ok(())
}
