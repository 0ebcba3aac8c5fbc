use concord_featuregates::{ConflictPolicy, StrategyName};

use crate::WriteStrategy;
use crate::runner::plan::Plan;

/// `strict`: the `lax` merge patch plus the observed
/// `metadata.resourceVersion` and `metadata.uid` — an optimistic lock.
///
/// On `409 Conflict` it re-reads the object, re-applies the mutation and
/// tries again within the [`ConflictPolicy`] (or, with
/// [`ConflictPolicy::Requeue`], returns [`Error::Conflict`](crate::Error::Conflict) at once).
///
/// # Guarantees
///
/// The patch lands only on the exact version it was computed from, so no
/// writer's change — in this process or any other — is lost. A conflict
/// costs one more `PATCH`, and a `GET` unless the target's
/// [fresh copies](crate::Target::with_fresh_copies) catch up first.
///
/// # Taking turns
///
/// Writes to the same object through one [`Target`](crate::Target) (its
/// clones, and every target sharing its [`WriteTurns`](crate::WriteTurns):
/// all of one manager's) take turns, and a write starts
/// from the copy the previous turn got back from the API server when that
/// is newer than its own (reported as
/// [`Outcome::rebased_on_own_write`](crate::Outcome::rebased_on_own_write)).
/// Two tasks writing one object at the same moment then cost two requests,
/// as with `lax`, instead of a `409` and a third. The request still carries
/// that copy's `resourceVersion` and uid, so a write from elsewhere in
/// between still meets a conflict. `update` and `apply`'s guarded requests
/// take the same turns.
///
/// ```no_run
/// # async fn demo(target: concord_strategies::Target, pod: kube::core::DynamicObject)
/// # -> Result<(), concord_strategies::Error> {
/// use concord_featuregates::ConflictPolicy;
/// use concord_strategies::{Intent, Strict, WriteStrategy};
/// let strict = Strict::new(ConflictPolicy::default());
/// strict.write(&target, &pod, &Intent::remove_finalizer("kueue.x-k8s.io/managed").into()).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct Strict {
    policy: ConflictPolicy,
}

impl Strict {
    /// A `strict` strategy handling conflicts by `policy`.
    pub fn new(policy: ConflictPolicy) -> Self {
        Strict { policy }
    }
}

impl crate::strategy::write_strategy::sealed::Sealed for Strict {
    fn plan(&self) -> Plan<'_> {
        Plan::of(StrategyName::Strict, &self.policy, None)
    }
}

impl WriteStrategy for Strict {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::{config_map, object, status, target};
    use crate::{Error, Intent, Mutation, Verb};
    use concord_featuregates::RetryPolicy;
    use serde_json::json;

    fn label() -> Mutation {
        Intent::set_label("a", "1").into()
    }

    #[tokio::test]
    async fn strict_retries_after_conflict_on_a_fresh_read() {
        let (target, seen) = target(vec![
            status(409, "Conflict", 0),
            (200, config_map("2", json!({"b": "2"}))),
            (200, config_map("3", json!({"a": "1", "b": "2"}))),
        ]);
        let observed = object(config_map("1", json!({})));
        let written = Strict::default()
            .write(&target, &observed, &label())
            .await
            .unwrap();
        assert_eq!((written.outcome.conflicts, written.outcome.retries), (1, 1));
        assert_eq!(written.outcome.requests(Verb::Get), 1);
        assert_eq!(written.outcome.requests(Verb::Patch), 2);
        assert_eq!(
            seen.lock().unwrap()[1],
            "GET /api/v1/namespaces/ns/configmaps/cm"
        );
    }

    #[tokio::test]
    async fn strict_gives_up_after_the_policy_steps() {
        let (target, seen) = target(vec![
            status(409, "Conflict", 0),
            (200, config_map("2", json!({}))),
        ]);
        let policy = ConflictPolicy::Retry(RetryPolicy::default().with_steps(1));
        let err = Strict::new(policy)
            .write(&target, &object(config_map("1", json!({}))), &label())
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::ConflictRetriesExhausted { attempts: 1, .. }),
            "{err:?}"
        );
        assert_eq!(
            seen.lock().unwrap().len(),
            1,
            "no read after the last allowed attempt"
        );
    }

    #[tokio::test]
    async fn requeue_policy_hands_the_conflict_back_without_reading() {
        let (target, seen) = target(vec![status(409, "Conflict", 0)]);
        let err = Strict::new(ConflictPolicy::Requeue)
            .write(&target, &object(config_map("1", json!({}))), &label())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
        assert_eq!(seen.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn throttled_write_waits_for_retry_after() {
        let (target, _) = target(vec![
            status(429, "TooManyRequests", 1),
            (200, config_map("2", json!({"a": "1"}))),
        ]);
        let written = Strict::default()
            .write(&target, &object(config_map("1", json!({}))), &label())
            .await
            .unwrap();
        assert_eq!((written.outcome.throttled, written.outcome.retries), (1, 1));
        assert!(written.outcome.elapsed >= std::time::Duration::from_secs(1));
    }

    #[tokio::test]
    async fn server_errors_are_retried_until_the_transient_policy_ends() {
        let (target, seen) = target(vec![status(503, "ServiceUnavailable", 0)]);
        let target = target.with_transient_retry(RetryPolicy::default().with_steps(3));
        let err = Strict::default()
            .write(&target, &object(config_map("1", json!({}))), &label())
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::TransientRetriesExhausted { attempts: 3, .. }),
            "{err:?}"
        );
        assert_eq!(seen.lock().unwrap().len(), 3);
    }

    #[tokio::test]
    async fn forbidden_and_invalid_are_never_retried() {
        for code in [400, 403] {
            let (target, seen) = target(vec![status(code, "Forbidden", 0)]);
            let err = Strict::default()
                .write(&target, &object(config_map("1", json!({}))), &label())
                .await
                .unwrap_err();
            assert!(matches!(err, Error::Rejected { .. }), "{code}: {err:?}");
            assert_eq!(seen.lock().unwrap().len(), 1, "{code}");
        }
        // 422 costs one read to rule out a recreated object, no retry.
        let (target, seen) = target(vec![
            status(422, "Invalid", 0),
            (200, config_map("1", json!({}))),
        ]);
        let err = Strict::default()
            .write(&target, &object(config_map("1", json!({}))), &label())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Rejected { .. }), "{err:?}");
        assert_eq!(
            seen.lock()
                .unwrap()
                .iter()
                .filter(|r| r.starts_with("PATCH"))
                .count(),
            1
        );
    }

    #[tokio::test]
    async fn unchanged_mutation_sends_nothing() {
        let (target, seen) = target(vec![status(500, "unused", 0)]);
        let observed = object(config_map("1", json!({"a": "1"})));
        let written = Strict::default()
            .write(&target, &observed, &label())
            .await
            .unwrap();
        assert!(written.outcome.unchanged);
        assert!(seen.lock().unwrap().is_empty());
    }
}
