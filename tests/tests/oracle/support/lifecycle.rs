//! Creates (named and `generateName`) and deletes, judged on the real
//! API server: a create stores exactly the object sent; a delete removes
//! the object (or marks it for deletion while finalizers hold it), leaves
//! an object recreated under its name alone, and from a copy older than
//! the stored object is refused (`lax` aside) and removes nothing.

use concord_strategies::{
    BeforeWrite, ConflictPolicy, Error, ObjectKey, Target, Writer, strategy_for,
};
use kube::core::DynamicObject;
use serde_json::{Value, json};

use super::model::{Case, Copy, Mut, Race};
use super::objects::{create, get, normal, object, trim};
use super::oracle::Oracle;
use super::race::RaceHook;
use super::verdict::Verdict;

/// Whether `mutation` is a create or a delete.
pub(crate) fn is_lifecycle(mutation: &Mut) -> bool {
    matches!(mutation, Mut::Create | Mut::CreateGenerated | Mut::Delete)
}

fn strategy(case: &Case) -> std::sync::Arc<dyn concord_strategies::WriteStrategy> {
    let policy = if case.requeue {
        ConflictPolicy::Requeue
    } else {
        ConflictPolicy::default()
    };
    strategy_for(
        case.strategy.parse().unwrap_or_else(|_| unreachable!()),
        policy,
    )
}

/// `object` without what a delete adds (its timestamps).
fn undeleted(object: &Value) -> Value {
    let mut object = normal(object);
    if let Some(meta) = object["metadata"].as_object_mut() {
        meta.remove("deletionTimestamp");
        meta.remove("deletionGracePeriodSeconds");
    }
    object
}

/// Run a create case on `name`.
pub(crate) async fn create_case(
    oracle: &Oracle,
    name: &str,
    case: &Case,
) -> anyhow::Result<Verdict> {
    let raw = oracle.raw(case.kind);
    let mut body = object(case.kind, name, &case.initial);
    body["metadata"]["namespace"] = json!(oracle.ns.name());
    if case.mutation == Mut::CreateGenerated {
        let meta = body["metadata"]
            .as_object_mut()
            .unwrap_or_else(|| unreachable!());
        meta.remove("name");
        meta.insert("generateName".into(), json!(format!("{name}-")));
    }
    let target = Target::new(oracle.client.clone(), Oracle::resource(case.kind))
        .with_field_manager("oracle");
    let sent: DynamicObject = serde_json::from_value(body.clone())?;
    let written = Writer::<DynamicObject>::from_target(target, strategy(case))
        .create(&sent)
        .await;
    let created = match written {
        Ok(w) => w.object,
        Err(e) => {
            return Ok(Verdict::Violation(format!(
                "refused a create it could make: {e}"
            )));
        }
    };
    let Some(created) = created.and_then(|o| o.metadata.name) else {
        return Ok(Verdict::Violation(
            "created, but no object handed back".into(),
        ));
    };
    body["metadata"]["name"] = json!(created);
    let Some(stored) = get(&raw, &created).await? else {
        return Ok(Verdict::Violation(format!(
            "created {created}, but it is not stored"
        )));
    };
    let (wanted, stored) = (normal(&body), normal(&stored));
    Ok(if super::objects::matches(&wanted, &stored) {
        Verdict::Exact
    } else {
        Verdict::Violation(format!(
            "created something else:\n  wanted {wanted}\n  stored {stored}"
        ))
    })
}

/// Run a delete case on `name`: the race lands between the copy's read
/// and the `DELETE`.
pub(crate) async fn delete_case(
    oracle: &Oracle,
    name: &str,
    case: &Case,
) -> anyhow::Result<Verdict> {
    let raw = oracle.raw(case.kind);
    create(&raw, name, case).await?;
    let before = get(&raw, name).await?.unwrap_or_default();
    let target = Target::new(oracle.client.clone(), Oracle::resource(case.kind))
        .with_field_manager("oracle");
    let hook = RaceHook::new(raw.clone(), name, case);
    let key = ObjectKey::new("oracle", None, name);
    let result: Result<(), Error> = match case.copy {
        Copy::Meta => match raw.get_metadata(name).await {
            Ok(copy) => {
                hook.before_write(&key, 0).await;
                Writer::from_target(target, strategy(case))
                    .delete(&copy)
                    .await
                    .map(|_| ())
            }
            Err(e) => anyhow::bail!("reading {name}: {e}"),
        },
        _ => match raw.get(name).await {
            Ok(mut copy) => {
                if case.copy == Copy::Trimmed {
                    trim(&mut copy.metadata, &case.strategy);
                }
                hook.before_write(&key, 0).await;
                Writer::from_target(target, strategy(case))
                    .delete(&copy)
                    .await
                    .map(|_| ())
            }
            Err(e) => anyhow::bail!("reading {name}: {e}"),
        },
    };
    let after_race = hook.after_race.lock().await.clone();
    let stored = get(&raw, name).await?;
    let met = undeleted(after_race.as_ref().unwrap_or(&before));
    let recreated = case.race == Race::Recreate && after_race.is_some();
    let stale = after_race.is_some() && !recreated && case.strategy != "lax";
    let finalizers = met["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty());
    let marked = stored
        .as_ref()
        .is_some_and(|s| s["metadata"].get("deletionTimestamp").is_some());
    let same = stored
        .as_ref()
        .is_some_and(|s| super::objects::matches(&met, &undeleted(s)));
    let show = || format!("\n  met    {met}\n  stored {stored:?}");
    Ok(match result {
        Ok(()) if recreated && same && !marked => Verdict::Exact,
        Ok(()) if recreated => Verdict::Violation(format!(
            "the delete reached the object recreated under its name:{}",
            show()
        )),
        Ok(()) if stale => Verdict::Violation(format!(
            "deleted from a copy older than the stored object:{}",
            show()
        )),
        Ok(()) if finalizers && same && marked => Verdict::Exact,
        Ok(()) if !finalizers && stored.is_none() => Verdict::Exact,
        Ok(()) => Verdict::Violation(format!("deleted, but stored something else:{}", show())),
        Err(e) if stale && same && !marked => Verdict::Refused(e.to_string()),
        Err(e) => Verdict::Violation(format!("refused a delete it could make: {e}{}", show())),
    })
}
