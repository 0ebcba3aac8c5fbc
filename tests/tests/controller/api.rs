//! The controller API on the real control plane: label and field
//! selectors, namespace sets, the migration's writes and the context's
//! reads (predicates and error policies: `policies.rs`).
//!
//! ```text
//! cargo test -p concord-tests --test controller api::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::exact_support;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use concord::{Action, Context, Error, Manager, Mutation, Predicate, Reconciler};
use concord_testenv::TestEnv;
use concord_tests::eventually;
use exact_support::{Gadget, GadgetCondition};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

pub(crate) const WAIT: Duration = Duration::from_secs(30);

pub(crate) async fn manager(client: Client) -> Manager {
    Manager::builder("controller-api-test")
        .with_client(client)
        .with_signal_handling(false)
        .build()
        .await
        .unwrap()
}

/// Records `namespace/name` of every object it reconciles.
struct Seen<K> {
    names: Arc<Mutex<BTreeSet<String>>>,
    _kind: std::marker::PhantomData<fn(K)>,
}

fn seen<K>() -> (Seen<K>, Arc<Mutex<BTreeSet<String>>>) {
    let names = Arc::new(Mutex::new(BTreeSet::new()));
    (
        Seen {
            names: names.clone(),
            _kind: std::marker::PhantomData,
        },
        names,
    )
}

#[concord::async_trait]
impl<K: concord::Object> Reconciler<K> for Seen<K> {
    type Error = concord::WriteError;

    async fn reconcile(&self, object: Arc<K>, _: &Context<K>) -> Result<Action, Self::Error> {
        let key = format!(
            "{}/{}",
            object.namespace().unwrap_or_default(),
            object.name_any()
        );
        self.names.lock().unwrap().insert(key);
        Ok(Action::await_change())
    }
}

fn has(names: &Mutex<BTreeSet<String>>, key: &str) -> bool {
    names.lock().unwrap().contains(key)
}

pub(crate) fn config_map(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
}

#[tokio::test]
async fn a_label_selected_controller_sees_only_labelled_objects_and_a_relabelled_one() -> Result<()>
{
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let mut manager = manager(env.client()?).await;
    // ANCHOR: labels
    let (selected, selected_seen) = seen::<ConfigMap>();
    manager
        .controller("chosen-maps", maps.clone(), selected)
        .with_labels("app=chosen")
        .add()?;
    // ANCHOR_END: labels
    let (everything, all_seen) = seen::<ConfigMap>();
    manager
        .controller("all-maps", maps.clone(), everything)
        .add()?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    let pp = PostParams::default();
    maps.create(&pp, &config_map("plain", json!({"app": "other"})))
        .await?;
    maps.create(&pp, &config_map("chosen", json!({"app": "chosen"})))
        .await?;
    let plain = format!("{}/plain", ns.name());
    let chosen = format!("{}/chosen", ns.name());
    assert!(
        eventually(WAIT, || async {
            has(&selected_seen, &chosen) && has(&all_seen, &plain)
        })
        .await,
        "both controllers reconciled what they select"
    );
    assert!(
        !has(&selected_seen, &plain),
        "the label-selected controller never sees an unlabelled object"
    );

    maps.patch(
        "plain",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "chosen"}}})),
    )
    .await?;
    assert!(
        eventually(WAIT, || async { has(&selected_seen, &plain) }).await,
        "a relabelled object is seen once it is selected"
    );
    stop.shutdown();
    running.await??;
    Ok(())
}

#[tokio::test]
async fn a_field_selected_controller_sees_only_pods_on_its_node() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let mut manager = manager(env.client()?).await;
    // ANCHOR: fields
    let (on_node, on_node_seen) = seen::<Pod>();
    manager
        .controller("node-a-pods", pods.clone(), on_node)
        .with_fields("spec.nodeName=node-a")
        .add()?;
    // ANCHOR_END: fields
    let (everything, all_seen) = seen::<Pod>();
    manager
        .controller("all-pods", pods.clone(), everything)
        .add()?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    // No kubelet runs: a Pod bound to a node is created bound.
    for (name, node) in [("on-b", "node-b"), ("on-a", "node-a")] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "main", "image": "registry.invalid/app:1"}],
            },
        }))?;
        pods.create(&PostParams::default(), &pod).await?;
    }
    let on_a = format!("{}/on-a", ns.name());
    let on_b = format!("{}/on-b", ns.name());
    assert!(
        eventually(WAIT, || async {
            has(&on_node_seen, &on_a) && has(&all_seen, &on_b)
        })
        .await,
        "both controllers reconciled what they select"
    );
    assert!(
        !has(&on_node_seen, &on_b),
        "the node-a controller never sees a Pod of node-b"
    );
    stop.shutdown();
    running.await??;
    Ok(())
}

#[tokio::test]
async fn a_controller_over_three_namespaces_of_five_sees_those_three() -> Result<()> {
    let env = TestEnv::shared()?;
    let mut namespaces = Vec::new();
    for _ in 0..5 {
        namespaces.push(env.namespace().await?);
    }
    let names: Vec<String> = namespaces.iter().map(|n| n.name().to_owned()).collect();
    let client = env.client()?;
    let mut manager = manager(client.clone()).await;
    // ANCHOR: namespaces
    let (three, three_seen) = seen::<ConfigMap>();
    manager
        .controller(
            "three-namespaces",
            Api::<ConfigMap>::all(client.clone()),
            three,
        )
        .with_namespaces(names[..3].iter().cloned())
        .add()?;
    // ANCHOR_END: namespaces
    // The other two namespaces, each watched alone: proof that their
    // objects were delivered.
    let (others, others_seen) = seen::<ConfigMap>();
    manager
        .controller(
            "other-namespaces",
            Api::<ConfigMap>::all(client.clone()),
            others,
        )
        .with_namespaces(names[3..].iter().cloned())
        .add()?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    for name in &names {
        Api::<ConfigMap>::namespaced(client.clone(), name)
            .create(&PostParams::default(), &config_map("one", json!({})))
            .await?;
    }
    let key = |i: usize| format!("{}/one", names[i]);
    assert!(
        eventually(WAIT, || async {
            (0..3).all(|i| has(&three_seen, &key(i))) && (3..5).all(|i| has(&others_seen, &key(i)))
        })
        .await,
        "each controller reconciled its namespaces' objects: {:?} {:?}",
        three_seen.lock().unwrap(),
        others_seen.lock().unwrap()
    );
    let three_seen: BTreeSet<String> = three_seen.lock().unwrap().clone();
    assert_eq!(
        three_seen,
        (0..3).map(key).collect::<BTreeSet<_>>(),
        "nothing from the other namespaces (nor the rest of the cluster)"
    );
    stop.shutdown();
    running.await??;
    Ok(())
}

#[tokio::test]
async fn overlapping_selections_reconcile_a_shared_object_once_in_each_controller() -> Result<()> {
    let env = TestEnv::shared()?;
    let (ns, elsewhere) = (env.namespace().await?, env.namespace().await?);
    let client = env.client()?;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let mut manager = manager(client.clone()).await;
    let (red, red_seen) = seen::<ConfigMap>();
    manager
        .controller("red-maps", maps.clone(), red)
        .with_labels("team=red")
        .add()?;
    let (set, set_seen) = seen::<ConfigMap>();
    manager
        .controller("namespace-set", Api::<ConfigMap>::all(client.clone()), set)
        .with_namespaces([ns.name(), elsewhere.name()])
        .add()?;
    let metrics = manager.metrics();
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    let pp = PostParams::default();
    maps.create(&pp, &config_map("shared", json!({"team": "red"})))
        .await?;
    maps.create(&pp, &config_map("unlabelled", json!({})))
        .await?;
    let (shared, unlabelled) = (
        format!("{}/shared", ns.name()),
        format!("{}/unlabelled", ns.name()),
    );
    assert!(
        eventually(WAIT, || async {
            has(&red_seen, &shared) && has(&set_seen, &shared) && has(&set_seen, &unlabelled)
        })
        .await,
        "each controller reconciled what it selects"
    );
    // Nothing changes from here on: a second reconcile would be a
    // duplicate delivery from the other controller's cache.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(metrics.reconciles("red-maps"), 1, "the shared object, once");
    assert_eq!(
        metrics.reconciles("namespace-set"),
        2,
        "the shared object and the unlabelled one, once each"
    );
    assert!(!has(&red_seen, &unlabelled));
    stop.shutdown();
    running.await??;
    Ok(())
}

#[tokio::test]
async fn invalid_selections_are_refused_naming_the_controller_and_the_value() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let client = env.client()?;
    let mut manager = manager(client.clone()).await;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let error = manager
        .controller("bad", maps.clone(), seen::<ConfigMap>().0)
        .with_labels("app=we b")
        .with_fields("spec.nodeName")
        .with_namespaces(["elsewhere"])
        .add()
        .unwrap_err();
    assert!(matches!(error, Error::InvalidController { .. }), "{error}");
    let message = error.to_string();
    for part in ["`bad`", "`app=we b`", "`spec.nodeName`", "elsewhere"] {
        assert!(message.contains(part), "{part} in {message}");
    }
    let error = manager
        .controller("both", maps, seen::<ConfigMap>().0)
        .with_backoff(concord::manager::Backoff::default())
        .with_error_policy(|_, _, _| Action::await_change())
        .add()
        .unwrap_err();
    assert!(error.to_string().contains("`both`"), "{error}");

    // What is accepted: a rate limit and composed predicates.
    let (reconciler, _) = seen::<ConfigMap>();
    let api = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
    // ANCHOR: backoff
    manager
        .controller("tuned", api, reconciler)
        .with_backoff(
            concord::manager::Backoff::exponential(
                Duration::from_millis(50),
                Duration::from_secs(300),
            )
            .with_jitter(0.1),
        )
        .with_predicate(
            Predicate::labels_changed()
                .or(Predicate::annotations_changed())
                .or(Predicate::new(
                    |old: Option<&ConfigMap>, new: &ConfigMap| {
                        old.is_none_or(|old| old.data != new.data)
                    },
                )),
        )
        .add()?;
    // ANCHOR_END: backoff
    Ok(())
}

#[tokio::test]
async fn the_migration_writes_reach_the_server() -> Result<()> {
    let env = TestEnv::shared()?;
    exact_support::install(env).await?;
    let ns = env.namespace().await?;
    let gadgets: Api<Gadget> = Api::namespaced(ns.client(), ns.name());
    let gadget: Gadget = serde_json::from_value(json!({
        "apiVersion": "exact.concord.example/v1", "kind": "Gadget",
        "metadata": {"name": "w"}, "spec": {"size": 1},
    }))?;
    let gadget = gadgets.create(&PostParams::default(), &gadget).await?;
    let manager = manager(env.client()?).await;
    let ctx = manager.context::<Gadget>();
    // ANCHOR: write
    // Any change to the object, through the resource's strategy:
    let written = ctx
        .write(&gadget, Mutation::typed(|g: &mut Gadget| g.spec.size = 3))
        .await?;
    // ANCHOR_END: write
    let gadget = written.object.expect("the write answers the object");
    // ANCHOR: status
    // A status change goes to the status subresource, as the table's
    // `status` operation says:
    ctx.write(
        &gadget,
        Mutation::typed_status(|g: &mut Gadget| {
            g.status.get_or_insert_default().conditions = vec![GadgetCondition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: "Up".into(),
                message: "serving".into(),
                last_transition_time: None,
            }];
        }),
    )
    .await?;
    // ANCHOR_END: status
    let stored = gadgets.get("w").await?;
    assert_eq!(stored.spec.size, 3);
    let conditions = stored.status.map(|s| s.conditions).unwrap_or_default();
    assert_eq!(
        conditions
            .iter()
            .map(|c| c.type_.as_str())
            .collect::<Vec<_>>(),
        ["Ready"]
    );
    Ok(())
}

#[tokio::test]
async fn the_context_reads_its_cache_first_then_the_server() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let mut manager = manager(env.client()?).await;
    let (selected, selected_seen) = seen::<ConfigMap>();
    manager
        .controller("cached-maps", maps.clone(), selected)
        .with_labels("app=cached")
        .add()?;
    let ctx = manager.context::<ConfigMap>();
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    let pp = PostParams::default();
    maps.create(&pp, &config_map("cached", json!({"app": "cached"})))
        .await?;
    maps.create(&pp, &config_map("outside", json!({}))).await?;
    let cached_key = format!("{}/cached", ns.name());
    assert!(eventually(WAIT, || async { has(&selected_seen, &cached_key) }).await);

    let store = ctx.store().expect("the controller's cache");
    let (decoded, _) = store.decoding();
    // ANCHOR: get
    let from_cache = ctx.get(Some(ns.name()), "cached").await?;
    // ANCHOR_END: get
    // Read from the compact cache (the default): one copy decoded from
    // it, and the same object as the cache's.
    assert_eq!(
        store.decoding().0,
        decoded + 1,
        "ctx.get decoded the cache's copy"
    );
    let in_cache = ctx.cached(Some(ns.name()), "cached").expect("cached");
    assert!(
        from_cache.is_some_and(|got| got.as_ref() == in_cache.as_ref()),
        "the cache's copy, no request"
    );
    assert!(ctx.cached(Some(ns.name()), "outside").is_none());
    let outside = ctx.get(Some(ns.name()), "outside").await?;
    assert_eq!(
        outside.map(|cm| cm.name_any()).as_deref(),
        Some("outside"),
        "outside the selection: read from the server"
    );
    assert!(ctx.get(Some(ns.name()), "missing").await?.is_none());
    stop.shutdown();
    running.await??;
    Ok(())
}
