//! The state of one write: the requests it sends, what they cost, and the
//! checks every strategy shares (uid, gone objects, transient retries).

use std::time::Instant;

use concord_featuregates::StrategyName;
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use serde_json::Value;

use crate::retry::{Class, classify, delay};
use crate::{Error, Mutation, ObjectKey, Outcome, Target, Verb, Written};

/// How the API server answered a write, for the cases strategies handle
/// differently; every other answer is already an [`Error`].
#[derive(Debug)]
pub(crate) enum Answer {
    Stored(Box<DynamicObject>),
    Conflict,
    NotFound,
    Invalid(Box<kube::Error>),
}

/// One call of `WriteStrategy::write`.
pub(crate) struct Session<'a> {
    pub(crate) target: &'a Target,
    pub(crate) key: ObjectKey,
    pub(crate) namespace: Option<String>,
    pub(crate) name: String,
    pub(crate) observed_uid: Option<String>,
    pub(crate) status: bool,
    pub(crate) only_removes_finalizers: bool,
    pub(crate) outcome: Outcome,
    start: Instant,
    writes: u32,
}

impl<'a> Session<'a> {
    /// Start a write of `mutation` to `observed`.
    pub(crate) fn start(
        strategy: StrategyName,
        target: &'a Target,
        observed: &DynamicObject,
        mutation: &Mutation,
    ) -> Result<Self, Error> {
        let key = ObjectKey::of(&target.resource, observed);
        let Some(name) = observed.metadata.name.clone() else {
            return Err(Error::MissingField {
                object: key,
                field: "metadata.name",
            });
        };
        let Some(status) = mutation.is_status() else {
            return Err(Error::MixedSubresources { object: key });
        };
        Ok(Session {
            target,
            namespace: observed.metadata.namespace.clone(),
            name,
            observed_uid: observed.metadata.uid.clone(),
            status,
            only_removes_finalizers: mutation.only_removes_finalizers(),
            outcome: Outcome::new(strategy),
            start: Instant::now(),
            writes: 0,
            key,
        })
    }

    /// The object as JSON.
    pub(crate) fn to_json(&self, object: &DynamicObject) -> Result<Value, Error> {
        serde_json::to_value(object).map_err(|source| self.convert(source))
    }

    /// JSON back to an object.
    pub(crate) fn json_to_object(&self, value: Value) -> Result<DynamicObject, Error> {
        serde_json::from_value(value).map_err(|source| self.convert(source))
    }

    /// `mutation` applied to `object`, `None` if it changes nothing.
    pub(crate) fn mutate(
        &self,
        mutation: &Mutation,
        object: &Value,
    ) -> Result<Option<Value>, Error> {
        mutation
            .apply(object)
            .map_err(|source| self.convert(source))
    }

    pub(crate) fn convert(&self, source: serde_json::Error) -> Error {
        Error::Convert {
            object: self.key.clone(),
            source,
        }
    }

    /// `GET` the object; `None` if it is gone. Fails with
    /// [`Error::ObjectRecreated`] if its uid is not the observed one.
    pub(crate) async fn get(&mut self) -> Result<Option<DynamicObject>, Error> {
        let api = self.target.api(self.namespace.as_deref());
        let mut transient = 0;
        loop {
            self.outcome.requests[Verb::Get.index()] += 1;
            let err = match api.get(&self.name).await {
                Ok(fresh) => {
                    self.check_uid(&fresh)?;
                    return Ok(Some(fresh));
                }
                Err(err) => err,
            };
            match classify(&err) {
                Class::NotFound => return Ok(None),
                Class::Transient(after) => self.wait_transient(&mut transient, after, err).await?,
                Class::Transport => {
                    return Err(Error::Request {
                        object: self.key.clone(),
                        source: Box::new(err),
                    });
                }
                _ => {
                    return Err(Error::Rejected {
                        object: self.key.clone(),
                        source: Box::new(err),
                    });
                }
            }
        }
    }

    fn check_uid(&self, fresh: &DynamicObject) -> Result<(), Error> {
        match (&self.observed_uid, &fresh.metadata.uid) {
            (Some(observed), Some(found)) if observed != found => Err(Error::ObjectRecreated {
                object: self.key.clone(),
                observed: observed.clone(),
                found: found.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// `PATCH` the object (or its status) under the target's field manager.
    pub(crate) async fn patch(&mut self, patch: &Patch<Value>) -> Result<Answer, Error> {
        let manager = self.target.field_manager.clone();
        self.send_patch(patch, &manager, false).await
    }

    /// `PATCH` with a server-side apply configuration under `manager`.
    pub(crate) async fn apply(&mut self, body: Value, manager: &str) -> Result<Answer, Error> {
        self.send_patch(&Patch::Apply(body), manager, true).await
    }

    async fn send_patch(
        &mut self,
        patch: &Patch<Value>,
        manager: &str,
        force: bool,
    ) -> Result<Answer, Error> {
        let api = self.target.api(self.namespace.as_deref());
        let mut params = PatchParams::apply(manager);
        params.force = force;
        let verb = if matches!(patch, Patch::Apply(_)) {
            Verb::Apply
        } else {
            Verb::Patch
        };
        self.before_write().await;
        let mut transient = 0;
        loop {
            self.outcome.requests[verb.index()] += 1;
            let sent = if self.status {
                api.patch_status(&self.name, &params, patch).await
            } else {
                api.patch(&self.name, &params, patch).await
            };
            match self.answer(sent, &mut transient).await? {
                Some(answer) => return Ok(answer),
                None => continue,
            }
        }
    }

    /// `PUT` the object (or its status).
    pub(crate) async fn replace(&mut self, object: &DynamicObject) -> Result<Answer, Error> {
        let api = self.target.api(self.namespace.as_deref());
        let params = PostParams {
            dry_run: false,
            field_manager: Some(self.target.field_manager.clone()),
        };
        self.before_write().await;
        let mut transient = 0;
        loop {
            self.outcome.requests[Verb::Update.index()] += 1;
            let sent = if self.status {
                api.replace_status(&self.name, &params, object).await
            } else {
                api.replace(&self.name, &params, object).await
            };
            match self.answer(sent, &mut transient).await? {
                Some(answer) => return Ok(answer),
                None => continue,
            }
        }
    }

    async fn before_write(&mut self) {
        if let Some(hook) = &self.target.before_write {
            hook.before_write(&self.key, self.writes).await;
        }
        self.writes += 1;
    }

    /// Turn a write's result into an answer; `None` means send it again.
    async fn answer(
        &mut self,
        sent: Result<DynamicObject, kube::Error>,
        transient: &mut u32,
    ) -> Result<Option<Answer>, Error> {
        let err = match sent {
            Ok(stored) => return Ok(Some(Answer::Stored(Box::new(stored)))),
            Err(err) => err,
        };
        match classify(&err) {
            Class::Conflict => Ok(Some(Answer::Conflict)),
            Class::NotFound => Ok(Some(Answer::NotFound)),
            Class::Invalid => Ok(Some(Answer::Invalid(Box::new(err)))),
            Class::Transient(after) => {
                self.wait_transient(transient, after, err).await?;
                Ok(None)
            }
            Class::Permanent => Err(Error::Rejected {
                object: self.key.clone(),
                source: Box::new(err),
            }),
            Class::Transport => Err(Error::Request {
                object: self.key.clone(),
                source: Box::new(err),
            }),
        }
    }

    async fn wait_transient(
        &mut self,
        transient: &mut u32,
        after: Option<std::time::Duration>,
        err: kube::Error,
    ) -> Result<(), Error> {
        if matches!(&err, kube::Error::Api(s) if s.code == 429) {
            self.outcome.throttled += 1;
        }
        *transient += 1;
        if *transient >= self.target.transient.steps.max(1) {
            return Err(Error::TransientRetriesExhausted {
                object: self.key.clone(),
                attempts: *transient,
                source: Box::new(err),
            });
        }
        self.outcome.retries += 1;
        tokio::time::sleep(delay(&self.target.transient, *transient - 1, after)).await;
        Ok(())
    }

    /// A 422 to a write that carried the observed uid: report a recreated
    /// or vanished object as such, anything else as a rejection.
    pub(crate) async fn invalid(
        &mut self,
        err: Box<kube::Error>,
    ) -> Result<Option<DynamicObject>, Error> {
        if self.observed_uid.is_some() && self.get().await?.is_none() {
            return self.gone().map(|()| None);
        }
        Err(Error::Rejected {
            object: self.key.clone(),
            source: err,
        })
    }

    /// The object vanished: done for finalizer removal, an error otherwise.
    pub(crate) fn gone(&mut self) -> Result<(), Error> {
        if self.only_removes_finalizers {
            self.outcome.gone = true;
            Ok(())
        } else {
            Err(Error::NotFound {
                object: self.key.clone(),
            })
        }
    }

    /// Count a conflict and decide whether another attempt is allowed:
    /// `attempts` made so far, `steps` allowed in all. Sleeps the backoff.
    pub(crate) async fn after_conflict(
        &mut self,
        policy: &concord_featuregates::ConflictPolicy,
        attempts: u32,
    ) -> Result<(), Error> {
        self.outcome.conflicts += 1;
        let retry = match policy {
            concord_featuregates::ConflictPolicy::Retry(retry) => retry,
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

    /// Record the write and hand its result back.
    pub(crate) fn finish(
        mut self,
        result: Result<Option<DynamicObject>, Error>,
    ) -> Result<Written<DynamicObject>, Error> {
        self.outcome.elapsed = self.start.elapsed();
        if let Some(metrics) = &self.target.metrics {
            metrics.record(&self.outcome, result.is_err());
        }
        match result {
            Ok(object) => {
                tracing::debug!(object = %self.key, outcome = ?self.outcome, "write done");
                Ok(Written::new(object, self.outcome))
            }
            Err(err) => {
                tracing::debug!(object = %self.key, outcome = ?self.outcome, error = %err, "write failed");
                Err(err)
            }
        }
    }
}
