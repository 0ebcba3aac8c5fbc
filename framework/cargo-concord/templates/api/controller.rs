
// The controller: what `cargo concord create api --controller` adds.

use std::sync::Arc;

use concord::featuregates::Operation;
use concord::finalizer::{FinalizerError, Lifecycle};
use concord::{
    Action, Condition, Context, Intent, Manager, Mutation, Reconciler, WriteError, finalizer,
};
use kube::{Api, ResourceExt};
use serde_json::json;

/// Holds a {{kind}} until its cleanup ran.
pub const FINALIZER: &str = "{{plural}}.{{group}}/finalizer";

/// What the reconciler writes to {{kind}}s. Each write goes through the
/// strategy `config/concord.yaml` chose for it, and `--print-rbac` grants
/// the verbs that strategy sends.
pub const WRITES: &[Operation] = &[
    Operation::AddFinalizer,
    Operation::RemoveFinalizer,
    Operation::Status,
];

/// Reconciles {{kind}}s: holds each with a finalizer, makes the world
/// match its spec, and reports a `Ready` condition.
///
/// The copy a controller reconciles from is the copy its cache holds, so
/// choose the smallest that serves it: the whole `{{kind}}` when it reads
/// the spec (as here); `kube::core::PartialObjectMeta<{{kind}}>` when it
/// reads only labels, annotations, finalizers and owners; a
/// `concord::view!` struct with `metadata` and the few fields it reads
/// otherwise (the Kueue example's `PodPhase`). Every strategy writes
/// exactly from each of them. Whichever it is, the cache holds it as
/// compact JSON and decodes a copy per reconcile (`concord::cache::CacheLayout`,
/// the default); `with_cache_layout(CacheLayout::Decoded)` on the manager
/// builder keeps typed copies, for a reconciler that scans the store.
#[derive(Debug, Default)]
pub struct {{kind}}Reconciler;

#[concord::async_trait]
impl Reconciler<{{kind}}> for {{kind}}Reconciler {
    type Error = FinalizerError<WriteError>;

    async fn reconcile(
        &self,
        object: Arc<{{kind}}>,
        ctx: &Context<{{kind}}>,
    ) -> Result<Action, Self::Error> {
        finalizer(ctx, FINALIZER, object, |event| async move {
            match event {
                Lifecycle::Apply(object) => {
                    // Make the world match `object.spec` here, then say so.
                    let generation = object.metadata.generation;
                    let ready = Condition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        reason: "Reconciled".into(),
                        message: format!("size {} is in place", object.spec.size),
                    };
                    let status = Mutation::new()
                        .with(Intent::MergeStatus(json!({ "observedGeneration": generation })))
                        .with(Intent::SetCondition(ready));
                    ctx.write(&object, status).await?;
                }
                Lifecycle::Cleanup(object) => {
                    // Undo what Apply did outside this object; the
                    // finalizer is removed once this returns Ok.
                    tracing::info!(name = %object.name_any(), "cleaning up");
                }
            }
            Ok(Action::await_change())
        })
        .await
    }
}

/// Registers the {{kind}} controller{{namespace_note}}.
///
/// # Errors
///
/// When the controller's options are invalid (a selector that does not
/// parse, say), naming every problem.
pub fn add_controller(manager: &mut Manager, namespace: Option<&str>) -> Result<(), concord::Error> {
    let client = manager.client().clone();
{{api}}
    // Selectors, predicates, a backoff, watches of other kinds: see the
    // book's "Reconcilers and context".
    manager.controller("{{plural}}", api, {{kind}}Reconciler).add()
}
