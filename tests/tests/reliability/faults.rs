//! The fault proxy against the real API server: it forwards faithfully,
//! injects exactly the faults its schedule names, and crashes a supervised
//! operator between two writes.
//!
//! ```text
//! cargo test -p concord-tests --test reliability faults::
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use concord_testenv::TestEnv;
use concord_testenv::faults::{FaultClass, FaultError, FaultProxy, Faults, Verb};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

fn map(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some([("v".to_owned(), value.to_owned())].into()),
        ..Default::default()
    }
}

fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

fn value(map: &ConfigMap) -> String {
    map.data
        .as_ref()
        .and_then(|d| d.get("v"))
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn forwards_reads_writes_and_watches_untouched() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let proxy = FaultProxy::start(env.config(), Faults::none()).await?;
    let through: Api<ConfigMap> = Api::namespaced(Client::try_from(proxy.config())?, ns.name());
    let direct: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());

    let mut events = through.watch(&WatchParams::default(), "0").await?.boxed();
    through
        .create(&PostParams::default(), &map("a", "1"))
        .await?;
    let patch = Patch::Merge(json!({"data": {"v": "2"}}));
    through.patch("a", &PatchParams::default(), &patch).await?;
    assert_eq!(
        value(&direct.get("a").await?),
        "2",
        "the write reached etcd"
    );
    assert_eq!(through.list(&Default::default()).await?.items.len(), 1);

    let mut seen = Vec::new();
    while seen.len() < 2 {
        match tokio::time::timeout(Duration::from_secs(10), events.try_next()).await?? {
            Some(WatchEvent::Added(m) | WatchEvent::Modified(m)) => seen.push(value(&m)),
            Some(_) => {}
            None => break,
        }
    }
    assert_eq!(seen, ["1", "2"], "every watch event, in order");
    assert_eq!(proxy.report().total(), 0);
    Ok(())
}

#[tokio::test]
async fn injects_errors_per_verb_resource_and_name() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    // ANCHOR: errors
    let faults = Faults::seeded(1)
        .on(Verb::Patch)
        .resource("configmaps")
        .named("target")
        .fail_with(409)
        .times(2)
        .on(Verb::Get)
        .resource("configmaps")
        .named("target")
        .fail_with(500)
        .times(1)
        .on(Verb::Create)
        .resource("configmaps")
        .fail_with(503)
        .times(1);
    let proxy = FaultProxy::start(env.config(), faults).await?;
    // ANCHOR_END: errors
    let mut config = proxy.config();
    config.default_retry = false; // see the answers kube would otherwise retry
    let api: Api<ConfigMap> = Api::namespaced(Client::try_from(config)?, ns.name());
    let direct: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    direct
        .create(&PostParams::default(), &map("target", "0"))
        .await?;
    direct
        .create(&PostParams::default(), &map("other", "0"))
        .await?;

    let patch = Patch::Merge(json!({"data": {"v": "1"}}));
    let pp = PatchParams::default();
    let conflict = api.patch("target", &pp, &patch).await.unwrap_err();
    assert_eq!(status_code(&conflict), Some(409));
    assert_eq!(
        status_code(&api.patch("target", &pp, &patch).await.unwrap_err()),
        Some(409)
    );
    api.patch("other", &pp, &patch).await?; // another name passes
    api.patch("target", &pp, &patch).await?; // times(2) is spent
    assert_eq!(value(&direct.get("target").await?), "1");

    assert_eq!(
        status_code(&api.get("target").await.unwrap_err()),
        Some(500)
    );
    assert_eq!(value(&api.get("target").await?), "1");
    let refused = api.create(&PostParams::default(), &map("new", "0")).await;
    assert_eq!(status_code(&refused.unwrap_err()), Some(503));
    assert!(
        direct.get_opt("new").await?.is_none(),
        "a refused write never happened"
    );

    let report = proxy.report();
    assert_eq!(report.count(FaultClass::Conflict), 2);
    assert_eq!(report.count(FaultClass::ServerError), 2);
    Ok(())
}

#[tokio::test]
async fn throttles_with_retry_after_which_kube_honours() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let faults = Faults::seeded(2)
        .on(Verb::Get)
        .resource("configmaps")
        .throttle(1)
        .times(1);
    let proxy = FaultProxy::start(env.config(), faults).await?;
    // kube's default client retries 429 after Retry-After.
    let api: Api<ConfigMap> = Api::namespaced(Client::try_from(proxy.config())?, ns.name());
    Api::<ConfigMap>::namespaced(ns.client(), ns.name())
        .create(&PostParams::default(), &map("a", "0"))
        .await?;
    let start = Instant::now();
    api.get("a").await?;
    assert!(
        start.elapsed() >= Duration::from_millis(900),
        "waited Retry-After: 1"
    );
    assert_eq!(proxy.report().count(FaultClass::Throttle), 1);
    Ok(())
}

#[tokio::test]
async fn timeout_answers_504_after_the_write_went_through() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let faults = Faults::seeded(3)
        .on(Verb::Create)
        .resource("configmaps")
        .time_out()
        .times(1);
    let proxy = FaultProxy::start(env.config(), faults).await?;
    let mut config = proxy.config();
    config.default_retry = false;
    let api: Api<ConfigMap> = Api::namespaced(Client::try_from(config)?, ns.name());
    let error = api
        .create(&PostParams::default(), &map("a", "0"))
        .await
        .unwrap_err();
    assert_eq!(status_code(&error), Some(504));
    let direct: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    assert!(
        direct.get_opt("a").await?.is_some(),
        "the write happened anyway"
    );
    Ok(())
}

#[tokio::test]
async fn resets_connections_mid_response() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let faults = Faults::seeded(4)
        .on(Verb::List)
        .resource("configmaps")
        .reset_mid_response()
        .times(1)
        .on(Verb::Watch)
        .resource("configmaps")
        .reset_mid_response()
        .times(1);
    let proxy = FaultProxy::start(env.config(), faults).await?;
    let api: Api<ConfigMap> = Api::namespaced(Client::try_from(proxy.config())?, ns.name());
    let direct: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    direct
        .create(&PostParams::default(), &map("a", "0"))
        .await?;
    direct
        .create(&PostParams::default(), &map("b", "0"))
        .await?;

    let cut = api.list(&Default::default()).await;
    assert!(cut.is_err(), "half a list is an error: {cut:?}");
    assert_eq!(api.list(&Default::default()).await?.items.len(), 2);

    let mut events = api.watch(&WatchParams::default(), "0").await?.boxed();
    let mut delivered = 0;
    let ended = loop {
        match tokio::time::timeout(Duration::from_secs(10), events.next()).await? {
            Some(Ok(_)) => delivered += 1,
            Some(Err(error)) => break format!("error: {error}"),
            None => break "end".to_owned(),
        }
    };
    assert_eq!(delivered, 1, "one event, then the cut ({ended})");
    assert_eq!(proxy.report().count(FaultClass::Reset), 2);
    Ok(())
}

#[tokio::test]
async fn holds_back_and_coalesces_watch_events() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    // ANCHOR: watch
    let faults = Faults::seeded(5)
        .on(Verb::Watch)
        .resource("configmaps")
        .named("late")
        .hold_events(Duration::from_millis(800))
        .on(Verb::Watch)
        .resource("configmaps")
        .named("busy")
        .drop_intermediate(Duration::from_millis(300));
    // ANCHOR_END: watch
    let proxy = FaultProxy::start(env.config(), faults).await?;
    let api: Api<ConfigMap> = Api::namespaced(Client::try_from(proxy.config())?, ns.name());
    let direct: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let mut events = api.watch(&WatchParams::default(), "0").await?.boxed();

    let start = Instant::now();
    direct
        .create(&PostParams::default(), &map("late", "0"))
        .await?;
    direct
        .create(&PostParams::default(), &map("busy", "0"))
        .await?;
    for v in 1..=3 {
        let patch = Patch::Merge(json!({"data": {"v": v.to_string()}}));
        direct
            .patch("busy", &PatchParams::default(), &patch)
            .await?;
    }
    direct
        .create(&PostParams::default(), &map("prompt", "0"))
        .await?;

    let mut order = Vec::new();
    while order.len() < 3 {
        let next = tokio::time::timeout(Duration::from_secs(10), events.try_next()).await??;
        if let Some(WatchEvent::Added(m) | WatchEvent::Modified(m)) = next {
            order.push((m.name_any(), value(&m), start.elapsed()));
        }
    }
    let names: Vec<_> = order.iter().map(|(n, v, _)| format!("{n}={v}")).collect();
    assert_eq!(
        names,
        ["prompt=0", "busy=3", "late=0"],
        "stale and coalesced"
    );
    assert!(
        order[2].2 >= Duration::from_millis(800),
        "late came late: {order:?}"
    );
    let report = proxy.report();
    assert_eq!(report.count(FaultClass::StaleCache), 1);
    assert_eq!(
        report.count(FaultClass::UnobservedState),
        3,
        "busy=0, 1 and 2 dropped"
    );
    Ok(())
}

#[tokio::test]
async fn crashes_the_operator_between_two_writes_and_starts_it_again() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    // ANCHOR: crash
    // The "operator" writes `first` then `second`; it dies as `second` is sent.
    let faults = Faults::seeded(6)
        .on(Verb::Create)
        .resource("configmaps")
        .named("second")
        .crash_before()
        .times(1);
    let proxy = FaultProxy::start(env.config(), faults).await?;
    let starts = Arc::new(AtomicU32::new(0));
    let namespace = ns.name().to_owned();
    let counter = starts.clone();
    let operator = proxy.supervise(move |config| {
        let (namespace, counter) = (namespace.clone(), counter.clone());
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            let api: Api<ConfigMap> = Api::namespaced(Client::try_from(config)?, &namespace);
            for name in ["first", "second"] {
                if api.get_opt(name).await?.is_none() {
                    api.create(&PostParams::default(), &map(name, "0")).await?;
                }
            }
            std::future::pending::<()>().await;
            Ok::<(), kube::Error>(())
        }
    });
    // ANCHOR_END: crash
    let direct: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let deadline = Instant::now() + Duration::from_secs(30);
    while direct.get_opt("second").await?.is_none() {
        assert!(
            Instant::now() < deadline,
            "the restarted operator wrote `second`"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    proxy
        .settle(Duration::from_millis(300), Duration::from_secs(30))
        .await?;
    let report = operator.stop().await?;
    assert_eq!(report.starts, 2, "crashed once, started again");
    assert_eq!(starts.load(Ordering::SeqCst), 2);
    assert_eq!(report.exited, None);
    assert_eq!(proxy.report().count(FaultClass::Crash), 1);
    Ok(())
}

#[tokio::test]
async fn rejects_a_schedule_with_mistakes_naming_each() -> Result<()> {
    let env = TestEnv::shared()?;
    let faults = Faults::seeded(9)
        .on(Verb::Patch)
        .fail_with(200)
        .on(Verb::Get)
        .hold_events(Duration::from_millis(1));
    let error = FaultProxy::start(env.config(), faults).await.unwrap_err();
    let FaultError::InvalidSchedule { problems, .. } = &error else {
        panic!("{error}");
    };
    assert_eq!(problems.len(), 2, "{error}");
    assert!(
        error
            .to_string()
            .contains("fail_with(200) is not an error status")
    );
    Ok(())
}
