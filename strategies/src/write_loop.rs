//! The one write loop every strategy runs: mutate the freshest copy, skip
//! when nothing changes, send, classify the answer, and on a conflict back
//! off and re-read — the one place a conflict is handled.

use concord_featuregates::ConflictPolicy;
use serde_json::Value;

use crate::Error;
use crate::Mutation;
use crate::request::Request;
use crate::retry::delay;
use crate::session::{Answer, Session};

/// What a strategy does on `409 Conflict` (or a tripped guard).
#[derive(Clone, Copy, Debug)]
pub(crate) enum OnConflict<'p> {
    /// Hand it back as [`Error::Conflict`]: the strategy has no version to
    /// re-read against (`lax`, `locked`) or its policy says requeue.
    Fail,
    /// Re-read and try again within the policy.
    Reread(&'p ConflictPolicy),
}

impl Session<'_> {
    /// Write `mutation` of `current` with requests shaped by `request`.
    /// `None` when the object is gone and that counts as done.
    pub(crate) async fn drive(
        &mut self,
        mut current: Value,
        mutation: &Mutation,
        request: Request<'_>,
        on_conflict: OnConflict<'_>,
    ) -> Result<Option<Value>, Error> {
        let mut attempts = 0;
        loop {
            let Some(next) = self.mutate(mutation, &current)? else {
                return Ok(Some(current));
            };
            let Some(body) = request.build(&self.key, &current, next)? else {
                return Ok(Some(current));
            };
            attempts += 1;
            let tripped = match self.send(&body).await? {
                Answer::Stored(stored) => return Ok(Some(stored)),
                Answer::NotFound => return self.gone().map(|()| None),
                Answer::Invalid(err) if request.invalid_means_conflict() => Some(err),
                Answer::Invalid(err) if request.carries_uid() => return self.invalid(err).await,
                Answer::Invalid(err) => {
                    return Err(Error::Rejected {
                        object: self.key.clone(),
                        source: err,
                    });
                }
                Answer::Conflict => None,
            };
            self.after_conflict(on_conflict, attempts).await?;
            let Some(fresh) = self.reread().await? else {
                return self.gone().map(|()| None);
            };
            // A guard that trips again on an unchanged object was not a
            // race: the body itself is wrong.
            if let Some(err) = tripped {
                let again = self.mutate(mutation, &fresh)?;
                let rebuilt = match again {
                    Some(next) => request.build(&self.key, &fresh, next)?,
                    None => None,
                };
                if rebuilt.as_ref() == Some(&body) {
                    return Err(Error::Rejected {
                        object: self.key.clone(),
                        source: err,
                    });
                }
            }
            current = fresh;
        }
    }

    /// The freshest copy after a conflict; `None` if the object is gone.
    async fn reread(&mut self) -> Result<Option<Value>, Error> {
        self.get().await
    }

    /// Count a conflict and decide whether another attempt is allowed:
    /// `attempts` made so far. Sleeps the backoff.
    async fn after_conflict(
        &mut self,
        on_conflict: OnConflict<'_>,
        attempts: u32,
    ) -> Result<(), Error> {
        self.outcome.conflicts += 1;
        let retry = match on_conflict {
            OnConflict::Reread(ConflictPolicy::Retry(retry)) => retry,
            _ => {
                return Err(Error::Conflict {
                    object: self.key.clone(),
                });
            }
        };
        if attempts >= retry.steps.max(1) {
            return Err(Error::ConflictRetriesExhausted {
                object: self.key.clone(),
                attempts,
            });
        }
        self.outcome.retries += 1;
        tokio::time::sleep(delay(retry, attempts - 1, None)).await;
        Ok(())
    }
}

/// A whole write through the loop: start, drive from `observed`, finish.
pub(crate) async fn write(
    strategy: concord_featuregates::StrategyName,
    target: &crate::Target,
    observed: Value,
    mutation: &Mutation,
    request: Request<'_>,
    on_conflict: OnConflict<'_>,
) -> Result<crate::Written<Value>, Error> {
    let mut session = Session::start(strategy, target, &observed, mutation)?;
    let result = session
        .drive(observed, mutation, request, on_conflict)
        .await;
    session.finish(result)
}
