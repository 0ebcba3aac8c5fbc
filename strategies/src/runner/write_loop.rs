//! The one write loop every strategy runs: mutate the freshest copy, skip
//! when nothing changes, send, classify the answer, and on a conflict back
//! off and re-read — the one place a conflict is handled.
//!
//! A re-read first asks the target's [fresh copies](crate::FreshCopies)
//! (the watch cache) for a copy newer than the one that conflicted, waiting
//! a bounded time for the watch to catch up, and sends a `GET` only when
//! none arrives. A stale copy cannot lose a write: the request built from
//! it still carries `resourceVersion` (and uid) and meets another `409`.

use concord_featuregates::ConflictPolicy;
use serde_json::Value;

use crate::model::observed::meta;
use crate::target::fresh::is_newer;
use concord_featuregates::Reads;

use crate::body::request::{Body, Request};
use crate::runner::plan::{How, OnConflict, Plan};
use crate::runner::session::{Answer, Sent, Session};
use crate::runner::subresource::holds_change;
use crate::target::turns;
use crate::wire::retry::delay;
use crate::{Error, Fallback, Mutation, Observed, Target, Written};

impl Session<'_> {
    /// Write `mutation` of `current` with requests shaped by `request`.
    /// `None` when the object is gone and that counts as done.
    ///
    /// A write that may re-read takes its turn among this process's writes
    /// of the object for each request it sends, and, under a retry policy,
    /// starts from the copy the previous turn stored when that is newer
    /// (`target/turns.rs`). It never holds a turn while it sleeps (backoff after a
    /// conflict, a transient failure's wait) or re-reads.
    pub(crate) async fn drive(
        &mut self,
        mut current: Value,
        mutation: &Mutation,
        mut request: Request,
        on_conflict: OnConflict<'_>,
    ) -> Result<Option<Value>, Error> {
        let takes_turns = matches!(on_conflict, OnConflict::Reread(_));
        // Under `requeue` a write from a stale copy must conflict: it is
        // never moved onto a sibling's newer answer.
        let rebases = matches!(on_conflict, OnConflict::Reread(ConflictPolicy::Retry(_)));
        let mut attempts = 0;
        let mut transient = 0;
        let mut retry = false;
        // What the mutation's decision was taken from.
        let decided = decided_from(mutation, &current);
        loop {
            let mut turn = match takes_turns {
                true => Some(turns::take(self.key.clone(), &self.target.turns).await),
                false => None,
            };
            if rebases
                && let Some(copy) = turn
                    .as_ref()
                    .and_then(|t| t.newer_than(&current, &self.resource.api_version))
            {
                self.outcome.rebased_on_own_write = true;
                current = copy;
            }
            let Some(next) = self.mutate_learning(mutation, &current).await? else {
                return Ok(Some(current));
            };
            // A status change sent through the main resource is checked in
            // the answer: a status subresource would have dropped it.
            let status_change = self
                .status_on_main
                .then(|| (current.get("status").cloned(), next.get("status").cloned()));
            let Some(body) = request.build(&self.writing(mutation), &current, next)? else {
                return Ok(Some(current));
            };
            // A guarded patch the server would refuse for its size goes as
            // `strict`'s patch instead: the observed `resourceVersion`
            // guards every field, the written ones included.
            if matches!(request, Request::Guarded) && body.exceeds_operation_limit() {
                self.outcome.fall_back(Fallback::OperationLimit);
                request = Request::MergeWithVersion;
                continue;
            }
            // A list sent whole carries each entry as the copy holds it: from
            // a copy that may lack fields (a typed object, a view) the
            // entries are taken from the server's own copy instead.
            if !self.complete && body.sets_a_list_whole() {
                drop(turn);
                self.outcome.rereads_by_get += 1;
                let Some(fresh) = self.get().await? else {
                    return self.gone().map(|()| None);
                };
                if decided_from(mutation, &fresh) != decided {
                    return Err(Error::Conflict {
                        object: self.key.clone(),
                    });
                }
                self.complete = true;
                current = fresh;
                continue;
            }
            let sent = match self.send_once(&body, retry).await {
                // Refused for its size all the same (a server counting
                // otherwise, a body past the byte limit): the same fallback.
                Err(Error::Rejected { source, .. })
                    if matches!(request, Request::Guarded) && too_large(&source) =>
                {
                    self.outcome.fall_back(Fallback::OperationLimit);
                    request = Request::MergeWithVersion;
                    retry = false;
                    continue;
                }
                other => other?,
            };
            let answer = match sent {
                Sent::Answer(answer) => answer,
                Sent::Transient { error, after } => {
                    drop(turn);
                    self.wait_transient(&mut transient, after, error).await?;
                    retry = true;
                    continue;
                }
            };
            retry = false;
            let tripped = match answer {
                Answer::Stored(stored) => {
                    if let Some(turn) = &mut turn {
                        turn.leave(&stored);
                    }
                    if let Some((before, after)) = &status_change
                        && !holds_change(before.as_ref(), after.as_ref(), stored.get("status"))
                    {
                        drop(turn);
                        self.status_not_held().await?;
                        self.complete = true;
                        current = stored;
                        continue;
                    }
                    return Ok(Some(stored));
                }
                Answer::NotFound => {
                    drop(turn);
                    if self.reroute_status().await? {
                        continue;
                    }
                    return self.gone().map(|()| None);
                }
                Answer::Invalid(err) if body.invalid_means_conflict() => Some(err),
                Answer::Invalid(err) if request.carries_uid() => return self.invalid(err).await,
                Answer::Invalid(err) => {
                    return Err(Error::Rejected {
                        object: self.key.clone(),
                        source: err,
                    });
                }
                Answer::Conflict => None,
            };
            drop(turn);
            // A guard built from a copy that may show what the server does
            // not store (a typed copy shows a type's defaults: an empty map
            // the server never stored, whose members' `test`s fail) trips
            // on the copy, not on a race, while the object is still the
            // version the copy was read at: that version's own stored form
            // decides, no conflict. Under `requeue` every retry would
            // otherwise start from the same copy and trip the same way.
            let mut read_after_trip = None;
            if tripped.is_some() && !self.complete {
                self.outcome.rereads_by_get += 1;
                let Some(fresh) = self.get().await? else {
                    return self.gone().map(|()| None);
                };
                let version = meta(&current, "resourceVersion");
                if version.is_some() && meta(&fresh, "resourceVersion") == version {
                    self.complete = true;
                    current = fresh;
                    continue;
                }
                read_after_trip = Some(fresh);
            }
            attempts += 1;
            self.after_conflict(on_conflict, attempts).await?;
            let reread = match read_after_trip {
                Some(fresh) => Some((fresh, false)),
                None => self.reread(&current, request).await?,
            };
            let Some((mut fresh, from_cache)) = reread else {
                return self.gone().map(|()| None);
            };
            // A dependency that moved means the decision is stale: it goes
            // back to the reconciler, never onto the fresh object.
            if decided_from(mutation, &fresh) != decided {
                return Err(Error::Conflict {
                    object: self.key.clone(),
                });
            }
            // A guard that trips again on an unchanged object was not a
            // race: the body itself is wrong — unless the copy came from a
            // typed cache, whose view may hold what the server does not
            // (a type's defaults): then the server's own copy decides.
            if let Some(err) = tripped {
                let mut same = self.rebuilds(mutation, request, &fresh, &body)?;
                if same && from_cache {
                    self.outcome.rereads_by_get += 1;
                    let Some(read) = self.get().await? else {
                        return self.gone().map(|()| None);
                    };
                    fresh = read;
                    same = self.rebuilds(mutation, request, &fresh, &body)?;
                }
                if same {
                    return Err(Error::Rejected {
                        object: self.key.clone(),
                        source: err,
                    });
                }
            }
            // A re-read by `GET` is the server's whole object.
            if !from_cache {
                self.complete = true;
            }
            current = fresh;
        }
    }

    /// Whether `mutation` of `fresh` builds exactly `body` again.
    fn rebuilds(
        &self,
        mutation: &Mutation,
        request: Request,
        fresh: &Value,
        body: &Body,
    ) -> Result<bool, Error> {
        let rebuilt = match self.mutate(mutation, fresh)? {
            Some(next) => request.build(&self.writing(mutation), fresh, next)?,
            None => None,
        };
        Ok(rebuilt.as_ref() == Some(body))
    }

    /// The freshest copy after `conflicted` met a conflict, and whether it
    /// came from the cache; `None` if the object is gone. From the target's
    /// fresh copies when they hold a newer version in time (and, for a
    /// `PUT`, a complete one), else by `GET`.
    async fn reread(
        &mut self,
        conflicted: &Value,
        request: Request,
    ) -> Result<Option<(Value, bool)>, Error> {
        if let Some(copy) = self.cached_copy(conflicted, request).await? {
            self.outcome.rereads_from_cache += 1;
            return Ok(Some((copy, true)));
        }
        self.outcome.rereads_by_get += 1;
        Ok(self.get().await?.map(|fresh| (fresh, false)))
    }

    /// A usable copy newer than `conflicted` from the fresh copies, if any.
    async fn cached_copy(
        &self,
        conflicted: &Value,
        request: Request,
    ) -> Result<Option<Value>, Error> {
        let (Some(fresh), Some(than)) = (
            self.target.fresh.as_deref(),
            meta(conflicted, "resourceVersion"),
        ) else {
            return Ok(None);
        };
        let namespace = self.namespace.as_deref();
        let wait = self.target.fresh_wait;
        let Some(copy) = fresh.newer(namespace, &self.name, than, wait).await else {
            return Ok(None);
        };
        // A PUT sends the whole object: never build one from a copy that
        // may lack stored fields.
        if matches!(request, Request::Put) && !copy.is_complete() {
            return Ok(None);
        }
        let copy = copy.into_json();
        // The cache holds the target's version (a listed copy names none):
        // a write through another version reads its own by `GET`.
        let version = copy.get("apiVersion").and_then(Value::as_str);
        if version.unwrap_or(&self.target.resource.api_version) != self.resource.api_version {
            return Ok(None);
        }
        let newer = meta(&copy, "resourceVersion").and_then(|rv| is_newer(rv, than));
        if newer != Some(true) {
            return Ok(None);
        }
        self.check_uid(&copy)?;
        Ok(Some(copy))
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

/// Whether the API server refused a request for its size (`413`).
fn too_large(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 413)
}

/// The values of the fields `mutation` depends on, in `object`.
fn decided_from(mutation: &Mutation, object: &Value) -> Vec<Option<Value>> {
    let paths = mutation.dependencies();
    paths.iter().map(|p| object.pointer(p).cloned()).collect()
}

/// Carry out `plan`: the one way every strategy's write starts, reads,
/// runs the loop and finishes.
pub(crate) async fn run(
    plan: Plan<'_>,
    target: &Target,
    observed: Observed,
    mutation: &Mutation,
) -> Result<Written<Value>, Error> {
    let requeues = plan.requeues();
    let (request, read, lock, on_conflict) = match plan.how {
        How::Loop {
            request,
            read,
            lock,
            on_conflict,
        } => (request, read, lock, on_conflict),
        How::Apply(retry) => {
            return crate::runner::apply::write(target, observed.into_json(), mutation, retry)
                .await;
        }
        How::Refused { policy, reason } => {
            return Err(Error::UnsupportedStrategy {
                strategy: plan.name,
                policy,
                reason,
            });
        }
    };
    let mut session = Session::start(plan.name, target, observed.json(), mutation)?;
    session.complete = observed.is_complete();
    let result = async {
        let _held = match lock {
            Some(table) => Some(table.lock(session.key.clone()).await),
            None => None,
        };
        // `locked` also holds the object's turn from its read to its
        // request, so no other write of this process lands in between.
        let _turn = match read {
            Reads::Always => Some(turns::take(session.key.clone(), &target.turns).await),
            _ => None,
        };
        let reads = match read {
            Reads::Never => false,
            Reads::WhenIncomplete => !observed.is_complete(),
            Reads::Always => true,
        };
        if !reads {
            let current = observed.into_json();
            return session.drive(current, mutation, request, on_conflict).await;
        }
        let Some(fresh) = session.get().await? else {
            return session.gone().map(|()| None);
        };
        // A read that stands in for an incomplete observed copy is that
        // copy only if nothing changed since: under `requeue` a change is
        // the conflict handed back.
        if decided_from(mutation, &fresh) != decided_from(mutation, observed.json()) {
            session.outcome.conflicts += 1;
            return Err(Error::Conflict {
                object: session.key.clone(),
            });
        }
        let version = |object| meta(object, "resourceVersion");
        if requeues && read == Reads::WhenIncomplete && version(&fresh) != version(observed.json())
        {
            session.outcome.conflicts += 1;
            return Err(Error::Conflict {
                object: session.key.clone(),
            });
        }
        session.drive(fresh, mutation, request, on_conflict).await
    }
    .await;
    session.finish(result)
}

#[cfg(test)]
#[path = "write_loop_tests.rs"]
mod tests;
