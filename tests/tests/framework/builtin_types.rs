//! Whether a typed copy holds every stored field is the author's statement
//! (`ManagerBuilder::with_builtin_type`), never a guess from the type's
//! name: through a manager that was not told, `update` reads a typed
//! ConfigMap before its `PUT`; through one told, it puts at once on this
//! API server, which is not newer than the compiled `k8s-openapi`.
//!
//! ```text
//! cargo test -p concord-tests --test framework builtin_types::
//! ```

use std::path::PathBuf;

use anyhow::Result;
use concord::strategies::Verb;
use concord::{Intent, Manager, ManagerArgs};
use concord_testenv::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::json;

fn update_everywhere() -> Result<PathBuf> {
    let path =
        std::env::temp_dir().join(format!("concord-builtin-types-{}.yaml", std::process::id()));
    std::fs::write(&path, "strategies:\n  default: update\n")?;
    Ok(path)
}

#[tokio::test]
async fn update_puts_a_typed_built_in_without_a_read_only_when_the_author_states_it() -> Result<()>
{
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let config = update_everywhere()?;
    for stated in [false, true] {
        let name = if stated { "stated" } else { "not-stated" };
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name}, "data": {"k": "v"},
        }))?;
        let observed = maps.create(&PostParams::default(), &cm).await?;
        let builder = Manager::builder("builtin-types-test")
            .with_client(ns.client())
            .with_args(ManagerArgs::new().with_config(&config))
            .with_signal_handling(false);
        let builder = if stated {
            builder.with_builtin_type::<ConfigMap>()
        } else {
            builder
        };
        let manager = builder.build().await?;
        let ctx = manager.context::<ConfigMap>();
        let written = ctx
            .write(&observed, Intent::set_label("tier", "gold").into())
            .await?;
        let outcome = &written.outcome;
        assert_eq!(
            (outcome.requests(Verb::Get), outcome.requests(Verb::Update)),
            (u32::from(!stated), 1),
            "stated a built-in type: {stated}; {outcome:?}"
        );
        let stored = maps.get(name).await?;
        assert_eq!(
            stored.labels().get("tier").map(String::as_str),
            Some("gold"),
            "{stored:?}"
        );
        assert_eq!(
            stored.data.unwrap_or_default().get("k").map(String::as_str),
            Some("v")
        );
    }
    std::fs::remove_file(&config)?;
    Ok(())
}
