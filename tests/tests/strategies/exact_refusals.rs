//! Legitimate writes that must land (issue 45's refusals), against a real
//! kube-apiserver and etcd: `test` values with every character the
//! server's Go encoder escapes, `create` with `generateName`, status on a
//! CRD without the status subresource, `guarded` under `requeue` from a
//! typed copy showing a default map, a `guarded` patch past the server's
//! operation limit, and `update` from a copy read in another served
//! version.
//!
//! ```text
//! cargo test -p concord-tests --test strategies exact_refusals::
//! ```
use std::collections::BTreeMap;
use std::sync::Arc;

use concord_strategies::{
    Condition, ConflictPolicy, Intent, Mutation, StrategyName, Target, WriteMetrics, Writer,
    strategy_for,
};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, ObjectMeta};
use kube::{CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::support::policy;

/// The group of the widgets below.
const GROUP: &str = "refusals.concord.example";

/// A widget as an operator's Rust type shows it: `tags` is always
/// serialized, so a copy read through the type shows `{}` where the
/// server stores nothing.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "refusals.concord.example",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus"
)]
pub(crate) struct WidgetSpec {
    /// A number.
    pub(crate) size: i64,
    /// A map the type defaults to empty.
    #[serde(default)]
    pub(crate) tags: BTreeMap<String, String>,
}

/// A widget's status as the type knows it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
pub(crate) struct WidgetStatus {
    /// A phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) phase: Option<String>,
}

/// The CRD of `plural`/`kind`: versions `v1` (stored) and `v2` served
/// with the same schema, with the status subresource or without.
fn crd(plural: &str, kind: &str, status: bool) -> anyhow::Result<CustomResourceDefinition> {
    let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": open, "status": open,
    }}});
    let subresources = if status {
        json!({"status": {}})
    } else {
        json!({})
    };
    let version = |name: &str, storage: bool| {
        json!({"name": name, "served": true, "storage": storage,
            "subresources": subresources, "schema": schema})
    };
    Ok(serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
            "versions": [version("v1", true), version("v2", false)],
        },
    }))?)
}

/// The resource `plural`/`kind` of [`GROUP`] in `version`.
fn resource(plural: &str, kind: &str, version: &str) -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: version.into(),
        api_version: format!("{GROUP}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// A widget of size 1 without `tags`, created raw.
async fn create_widget(
    api: &Api<DynamicObject>,
    resource: &ApiResource,
    name: &str,
) -> anyhow::Result<DynamicObject> {
    let mut widget = DynamicObject::new(name, resource);
    widget.data = json!({"spec": {"size": 1}});
    Ok(api.create(&PostParams::default(), &widget).await?)
}

/// Every character whose encoding Go decides: the C0 controls, `"`, `\`,
/// `/`, the HTML-escaped `&<>`, DEL, C1 controls, U+2028/9, non-ASCII,
/// a character outside the BMP, a BOM, and text that looks like an escape.
fn go_encoded_samples() -> Vec<String> {
    let mut samples: Vec<String> = (0u32..0x20)
        .filter_map(char::from_u32)
        .map(|c| format!("a{c}b"))
        .collect();
    for c in [
        '"', '\\', '/', '&', '<', '>', '\u{7f}', '\u{80}', '\u{9f}', 'é', '\u{2028}', '\u{2029}',
        '\u{fffd}', '😀', '\u{feff}',
    ] {
        samples.push(format!("a{c}b"));
    }
    samples.push(r"\u0008 \b \\ \u00".to_owned());
    samples
}

/// The server's rule, probed: a JSON-patch `test` value is compared byte
/// for byte with Go's encoding of the stored string, which writes
/// backspace and form feed as `\b` and `\f` (not `\u0008`, `\u000c`), the
/// other C0 controls as `\u00XX`, and `&<>` HTML-escaped.
#[tokio::test]
async fn the_server_tests_values_against_gos_encoding() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let stored = |value: &str| -> anyhow::Result<ConfigMap> {
        Ok(serde_json::from_value(json!({
            "metadata": {"name": "probe"}, "data": {"v": value},
        }))?)
    };
    // (stored string, its `test` value as raw JSON, whether it passes)
    let cases = [
        ("a\u{8}b", r#""a\bb""#, true),
        ("a\u{8}b", r#""a\u0008b""#, false),
        ("a\u{c}b", r#""a\fb""#, true),
        ("a\u{c}b", r#""a\u000cb""#, false),
        ("a\u{1}b", r#""a\u0001b""#, true),
        ("a&b", r#""a\u0026b""#, true),
        ("a&b", r#""a&b""#, false),
        ("a\u{7f}b", "\"a\u{7f}b\"", true),
        ("a\u{7f}b", r#""a\u007fb""#, false),
        ("a\u{2028}b", r#""a\u2028b""#, true),
        ("aéb", "\"aéb\"", true),
        ("aéb", r#""a\u00e9b""#, false),
    ];
    for (value, test, passes) in cases {
        let _ = cms.delete("probe", &Default::default()).await;
        while cms.get_opt("probe").await?.is_some() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        cms.create(&PostParams::default(), &stored(value)?).await?;
        let body = format!(
            r#"[{{"op":"test","path":"/data/v","value":{test}}},{{"op":"add","path":"/data/w","value":"x"}}]"#
        );
        let request =
            http::Request::patch(format!("/api/v1/namespaces/{}/configmaps/probe", ns.name()))
                .header("Content-Type", "application/json-patch+json")
                .body(body.into_bytes())?;
        let answer = env.client()?.request::<Value>(request).await;
        assert_eq!(
            answer.is_ok(),
            passes,
            "test {test} of stored {value:?}: {answer:?}"
        );
    }
    Ok(())
}

/// Finding 5: `guarded` replaces and removes a value holding any character
/// Go escapes its own way (backspace and form feed among them).
#[tokio::test]
async fn guarded_writes_values_with_every_go_escaped_character() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let cms: Api<DynamicObject> = Api::namespaced_with(
        ns.client(),
        ns.name(),
        &ApiResource::erase::<ConfigMap>(&()),
    );
    let writer = Writer::<DynamicObject>::new_with(
        env.client()?,
        strategy_for(StrategyName::Guarded, policy()),
        &ApiResource::erase::<ConfigMap>(&()),
    );
    let mut refused = Vec::new();
    for (index, sample) in go_encoded_samples().into_iter().enumerate() {
        let name = format!("chars-{index}");
        let mut cm = DynamicObject::new(&name, &ApiResource::erase::<ConfigMap>(&()));
        cm.data = json!({"data": {"replaced": sample, "removed": sample}});
        let observed = cms.create(&PostParams::default(), &cm).await?;
        let change = Mutation::custom(|cm: &mut Value| {
            cm["data"]["replaced"] = json!("new");
            if let Some(data) = cm["data"].as_object_mut() {
                data.remove("removed");
            }
        });
        if let Err(err) = writer.write(&observed, &change).await {
            refused.push(format!("{sample:?}: {err}"));
            continue;
        }
        let stored = cms.get(&name).await?;
        assert_eq!(
            stored.data["data"],
            json!({"replaced": "new"}),
            "{sample:?}"
        );
    }
    assert!(refused.is_empty(), "refused: {refused:#?}");
    Ok(())
}

/// Finding 9: `create` of an object with `generateName` and no name lands
/// under every strategy that serves `create`, and hands back the stored
/// object with the name the server generated.
#[tokio::test]
async fn create_with_generate_name_lands_under_every_strategy() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    for name in [
        StrategyName::Lax,
        StrategyName::Strict,
        StrategyName::Update,
        StrategyName::Guarded,
    ] {
        let writer = Writer::<ConfigMap>::new(env.client()?, strategy_for(name, policy()));
        let object = ConfigMap {
            metadata: ObjectMeta {
                generate_name: Some(format!("gen-{name}-")),
                namespace: Some(ns.name().to_owned()),
                ..ObjectMeta::default()
            },
            data: Some([("k".to_owned(), "v".to_owned())].into()),
            ..ConfigMap::default()
        };
        let written = writer
            .create(&object)
            .await
            .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        let created = written.object.expect("the stored object");
        let generated = created.name_any();
        assert!(
            generated.starts_with(&format!("gen-{name}-"))
                && generated.len() > 5 + name.as_str().len(),
            "{name}: {generated}"
        );
        let stored = cms.get(&generated).await?;
        assert_eq!(stored.uid(), created.uid(), "{name}");
        assert_eq!(stored.data, object.data, "{name}");
    }
    Ok(())
}

/// Finding 6: on a CRD without the status subresource, status intents,
/// status closures and a main-resource closure that touches `status` are
/// written through the main resource, under every strategy that runs them.
#[tokio::test]
async fn status_lands_on_a_crd_without_the_status_subresource() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    env.install_crd(crd("plainwidgets", "PlainWidget", false)?)
        .await?;
    let ns = env.namespace().await?;
    let plain = resource("plainwidgets", "PlainWidget", "v1");
    let raw: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &plain);
    let ready = Mutation::from(Intent::SetCondition(Condition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: "Reconciled".into(),
        message: "set by concord".into(),
    }));
    let phase = Mutation::typed_status(|w: &mut Widget| {
        w.status.get_or_insert_default().phase = Some("Running".into());
    });
    let both = Mutation::typed(|w: &mut Widget| {
        w.spec.size = 7;
        w.status.get_or_insert_default().phase = Some("Resized".into());
    });
    let mut failed = Vec::new();
    for name in StrategyName::ALL {
        let object = format!("plain-{name}");
        create_widget(&raw, &plain, &object).await?;
        let writer =
            Writer::<DynamicObject>::new_with(env.client()?, strategy_for(name, policy()), &plain);
        let closures = name != StrategyName::Apply;
        let mut steps = vec![("condition", &ready)];
        if closures {
            steps.extend([("status closure", &phase), ("main closure", &both)]);
        }
        for (what, mutation) in steps {
            let observed = raw.get(&object).await?;
            if let Err(err) = writer.write(&observed, mutation).await {
                failed.push(format!("{name} {what}: {err}"));
            }
        }
        let stored = raw.get(&object).await?;
        let conditions = &stored.data["status"]["conditions"];
        if conditions[0]["status"] != "True" {
            failed.push(format!("{name}: no condition stored: {}", stored.data));
        }
        if closures
            && (stored.data["status"]["phase"] != "Resized" || stored.data["spec"]["size"] != 7)
        {
            failed.push(format!("{name}: closures not stored: {}", stored.data));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
    Ok(())
}

/// Finding 6, the other way round: a writer that learnt a CRD had no
/// status subresource, after the CRD gains one, writes status through
/// `/status` (the main resource would drop it) and refuses a
/// main-resource change to `status` — never reports a dropped change as
/// written.
#[tokio::test]
async fn status_follows_a_crd_that_gains_the_status_subresource() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    env.install_crd(crd("flipwidgets", "FlipWidget", false)?)
        .await?;
    let ns = env.namespace().await?;
    let flip = resource("flipwidgets", "FlipWidget", "v1");
    let raw: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &flip);
    create_widget(&raw, &flip, "flip").await?;
    let writer = Writer::<DynamicObject>::new_with(
        env.client()?,
        strategy_for(StrategyName::Strict, policy()),
        &flip,
    );
    let phase = |to: &'static str| {
        Mutation::typed_status(move |w: &mut Widget| {
            w.status.get_or_insert_default().phase = Some(to.into());
        })
    };
    writer.write(&raw.get("flip").await?, &phase("One")).await?;
    assert_eq!(raw.get("flip").await?.data["status"]["phase"], "One");

    env.install_crd(crd("flipwidgets", "FlipWidget", true)?)
        .await?;
    let client = env.client()?;
    for _ in 0..200 {
        let list = client
            .list_api_group_resources(&format!("{GROUP}/v1"))
            .await?;
        if list
            .resources
            .iter()
            .any(|r| r.name == "flipwidgets/status")
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let written = writer.write(&raw.get("flip").await?, &phase("Two")).await?;
    assert_eq!(
        raw.get("flip").await?.data["status"]["phase"],
        "Two",
        "{:?}",
        written.outcome
    );
    let main = Mutation::typed(|w: &mut Widget| {
        w.status.get_or_insert_default().phase = Some("Three".into());
    });
    let refused = writer.write(&raw.get("flip").await?, &main).await;
    assert!(
        matches!(
            refused,
            Err(concord_strategies::Error::UnsupportedMutation { .. })
        ),
        "{refused:?}"
    );
    assert_eq!(raw.get("flip").await?.data["status"]["phase"], "Two");
    Ok(())
}

/// Finding 7: `guarded` under `requeue`, from a typed copy that shows an
/// empty `tags` map the server does not store, lands a new tag (every
/// requeue starts from the same copy, so a refusal would be for ever).
#[tokio::test]
async fn guarded_requeue_lands_under_a_map_only_the_type_shows() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    env.install_crd(crd("widgets", "Widget", true)?).await?;
    let ns = env.namespace().await?;
    let v1 = resource("widgets", "Widget", "v1");
    let raw: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &v1);
    let typed: Api<Widget> = Api::namespaced(ns.client(), ns.name());
    create_widget(&raw, &v1, "defaulted").await?;
    let writer = Writer::<Widget>::new(
        env.client()?,
        strategy_for(StrategyName::Guarded, ConflictPolicy::Requeue),
    );
    let tag = Mutation::typed(|w: &mut Widget| {
        w.spec.tags.insert("team".into(), "blue".into());
    });
    let observed = typed.get("defaulted").await?;
    assert!(observed.spec.tags.is_empty());
    writer.write(&observed, &tag).await?;
    let stored = raw.get("defaulted").await?;
    assert_eq!(stored.data["spec"]["tags"], json!({"team": "blue"}));
    assert_eq!(stored.data["spec"]["size"], 1);
    Ok(())
}

/// Finding 8: a `guarded` patch over the server's 10,000-operation limit
/// falls back to the `resourceVersion`-preconditioned patch, lands, and is
/// counted as a fallback.
#[tokio::test]
async fn guarded_past_the_operation_limit_falls_back_and_lands() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let resource = ApiResource::erase::<ConfigMap>(&());
    let cms: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &resource);
    let mut cm = DynamicObject::new("many", &resource);
    cm.data = json!({"data": {"kept": "yes"}});
    let observed = cms.create(&PostParams::default(), &cm).await?;
    let metrics = Arc::new(WriteMetrics::default());
    let writer = Writer::<DynamicObject>::from_target(
        Target::new(env.client()?, resource.clone()).with_metrics(metrics.clone()),
        strategy_for(StrategyName::Guarded, policy()),
    );
    // 5,001 keys: a `test` and an `add` each, past 10,000 operations.
    let many = Mutation::custom(|cm: &mut Value| {
        for i in 0..5001 {
            cm["data"][format!("k{i}")] = json!("v");
        }
    });
    let written = writer.write(&observed, &many).await?;
    assert!(written.outcome.fell_back, "{:?}", written.outcome);
    assert_eq!(
        written.outcome.fallback,
        Some(concord_strategies::Fallback::OperationLimit)
    );
    assert_eq!(metrics.snapshot().fell_back, 1);
    assert_eq!(
        metrics
            .snapshot()
            .fallbacks(concord_strategies::Fallback::OperationLimit),
        1
    );
    let stored = cms.get("many").await?;
    let data = stored.data["data"].as_object().expect("data");
    assert_eq!(data.len(), 5002);
    assert_eq!(data["kept"], "yes");
    Ok(())
}

/// Finding 10: `update` (and every other strategy) from a copy read in
/// another served version than the writer's lands.
#[tokio::test]
async fn a_copy_read_in_another_served_version_is_written() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    env.install_crd(crd("widgets", "Widget", true)?).await?;
    let ns = env.namespace().await?;
    let v1 = resource("widgets", "Widget", "v1");
    let v2 = resource("widgets", "Widget", "v2");
    let raw_v1: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &v1);
    let raw_v2: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &v2);
    let mut failed = Vec::new();
    for name in StrategyName::ALL {
        let object = format!("versions-{name}");
        create_widget(&raw_v1, &v1, &object).await?;
        let observed = raw_v2.get(&object).await?;
        assert_eq!(
            observed.types.as_ref().map(|t| t.api_version.as_str()),
            Some("refusals.concord.example/v2")
        );
        let writer =
            Writer::<DynamicObject>::new_with(env.client()?, strategy_for(name, policy()), &v1);
        let label = Mutation::from(Intent::set_label("seen", "v2"));
        if let Err(err) = writer.write(&observed, &label).await {
            failed.push(format!("{name}: {err}"));
            continue;
        }
        let stored = raw_v1.get(&object).await?;
        assert_eq!(
            stored.labels().get("seen").map(String::as_str),
            Some("v2"),
            "{name}"
        );
        assert_eq!(stored.data["spec"]["size"], 1, "{name}");
        // A stale copy in v2 after another writer's change: the re-read
        // after the conflict is in v2 too.
        let stale = raw_v2.get(&object).await?;
        let other = json!({"metadata": {"labels": {"other": "1"}}});
        raw_v1
            .patch(&object, &PatchParams::default(), &Patch::Merge(other))
            .await?;
        let again = Mutation::from(Intent::set_label("seen", "again"));
        if let Err(err) = writer.write(&stale, &again).await {
            failed.push(format!("{name} after a conflict: {err}"));
            continue;
        }
        let stored = raw_v1.get(&object).await?;
        assert_eq!(
            stored.labels().get("seen").map(String::as_str),
            Some("again"),
            "{name}"
        );
        assert_eq!(
            stored.labels().get("other").map(String::as_str),
            Some("1"),
            "{name}"
        );
    }
    assert!(failed.is_empty(), "{failed:#?}");
    Ok(())
}
