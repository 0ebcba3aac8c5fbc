//! The state of one write and everything about sending its requests: the
//! wire call, transient retries (`429`, `5xx`: the one place a write's are
//! retried and counted; the layering is described in `wire/retry.rs`), uid
//! checks, gone objects, metrics. How a conflict is handled is in
//! `write_loop.rs`.

use std::time::Instant;

use concord_featuregates::{Operation, StrategyName};
use kube::api::{DeleteParams, GetParams, Patch, PatchParams, PostParams, Preconditions};
use kube::core::{ApiResource, DynamicObject, Resource};
use serde_json::Value;

use crate::body::guarded_patch::strategic_merges;
use crate::body::request::{Body, Writing};
use crate::model::change::Holds;
use crate::model::observed::meta;
use crate::wire::retry::{Class, call, classify, delay};
use crate::{Error, Mutation, ObjectKey, Outcome, Target, Verb, Written};

/// How the API server answered a write, for the cases the loop handles
/// differently; every other answer is already an [`Error`].
#[derive(Debug)]
pub(crate) enum Answer {
    Stored(Value),
    Conflict,
    NotFound,
    Invalid(Box<kube::Error>),
}

/// One sending of a body: the answer, or a transient failure to wait out.
#[derive(Debug)]
pub(crate) enum Sent {
    Answer(Answer),
    Transient {
        error: kube::Error,
        after: Option<std::time::Duration>,
    },
}

/// One call of `WriteStrategy::write_json`.
pub(crate) struct Session<'a> {
    pub(crate) target: &'a Target,
    pub(crate) key: ObjectKey,
    pub(crate) namespace: Option<String>,
    pub(crate) name: String,
    url: String,
    /// The resource in the version the write goes through: the observed
    /// copy's own (`in_version_of`).
    pub(crate) resource: ApiResource,
    observed_uid: Option<String>,
    /// Whether requests go to the status subresource.
    pub(crate) status: bool,
    /// Whether status changes go through the main resource: the resource
    /// has no status subresource (`runner/subresource.rs`).
    pub(crate) status_on_main: bool,
    /// Whether this status write was sent to the main resource instead.
    pub(crate) rerouted: bool,
    only_removes_finalizers: bool,
    pub(crate) outcome: Outcome,
    start: Instant,
    pub(crate) writes: u32,
    /// Whether the copy the write works from holds every stored field.
    pub(crate) complete: bool,
    /// What the last `404 NotFound` said was missing, when it was the
    /// object's namespace rather than the object.
    pub(crate) missing_namespace: Option<String>,
}

impl<'a> Session<'a> {
    /// Start a write of `mutation` to `observed`.
    pub(crate) fn start(
        strategy: StrategyName,
        target: &'a Target,
        observed: &Value,
        mutation: &Mutation,
    ) -> Result<Self, Error> {
        let name = meta(observed, "name").map(str::to_owned);
        Session::start_named(strategy, target, observed, mutation, name)
    }

    /// [`start`](Self::start) with the object's name given: a create with
    /// `generateName` has none yet, and is named after its prefix.
    pub(crate) fn start_named(
        strategy: StrategyName,
        target: &'a Target,
        observed: &Value,
        mutation: &Mutation,
        name: Option<String>,
    ) -> Result<Self, Error> {
        let namespace = meta(observed, "namespace").map(str::to_owned);
        let key = ObjectKey::new(
            crate::object_key::qualified_plural(&target.resource),
            namespace.as_deref(),
            name.clone().unwrap_or_default(),
        );
        let Some(name) = name else {
            return Err(Error::MissingField {
                object: key,
                field: "metadata.name",
            });
        };
        let Some(status) = mutation.is_status() else {
            return Err(Error::MixedSubresources { object: key });
        };
        let description = strategy.description();
        if !mutation.dependencies().is_empty() && !description.tests_dependencies {
            return Err(Error::UnsupportedMutation {
                strategy,
                what: "a dependency on a field it does not write (`Mutation::depending_on`)",
                object: key,
            });
        }
        if mutation.operation() == Operation::ApplyOwned
            && !description.serves(Operation::ApplyOwned)
        {
            return Err(Error::UnsupportedMutation {
                strategy,
                what: "applying a whole owned object (`apply-owned`)",
                object: key,
            });
        }
        let resource = crate::target::settings::in_version_of(&target.resource, observed);
        // Without a status subresource, status is the main resource's.
        let status_on_main = target.status_subresource.known() == Some(false);
        Ok(Session {
            status: status && !status_on_main,
            status_on_main,
            rerouted: status && status_on_main,
            target,
            url: DynamicObject::url_path(&resource, namespace.as_deref()),
            resource,
            namespace,
            name,
            observed_uid: meta(observed, "uid").map(str::to_owned),
            only_removes_finalizers: mutation.only_removes_finalizers(),
            outcome: Outcome::new(strategy),
            start: Instant::now(),
            writes: 0,
            complete: true,
            missing_namespace: None,
            key,
        })
    }

    /// What requests of this write are built for.
    pub(crate) fn writing<'m>(&'m self, mutation: &'m Mutation) -> Writing<'m> {
        Writing {
            key: &self.key,
            strategic: strategic_merges(&self.target.resource.group),
            depends: mutation.dependencies(),
            holds: match self.complete {
                true => Holds::Whole,
                false => Holds::Part,
            },
            status: self.status,
        }
    }

    /// `mutation` applied to `object`, `None` if it changes nothing.
    pub(crate) fn mutate(
        &self,
        mutation: &Mutation,
        object: &Value,
    ) -> Result<Option<Value>, Error> {
        let next = mutation
            .apply(object)
            .map_err(|source| self.convert(source))?;
        // A main-resource write that changes `status` would be stored
        // without that change where the resource has a status subresource:
        // refused, never reported as written.
        if let Some(next) = &next
            && !self.status
            && !self.status_on_main
            && next.get("status") != object.get("status")
        {
            return Err(self.status_refused());
        }
        Ok(next)
    }

    pub(crate) fn convert(&self, source: serde_json::Error) -> Error {
        Error::Convert {
            object: self.key.clone(),
            source,
        }
    }

    fn request(&self) -> kube::core::Request {
        kube::core::Request::new(self.url.clone())
    }

    fn build_failed(&self, err: kube::core::request::Error) -> Error {
        Error::Request {
            object: self.key.clone(),
            source: Box::new(kube::Error::BuildRequest(err)),
        }
    }

    /// `GET` the object; `None` if it is gone. Fails with
    /// [`Error::ObjectRecreated`] if its uid is not the observed one.
    pub(crate) async fn get(&mut self) -> Result<Option<Value>, Error> {
        let request = self
            .request()
            .get(&self.name, &GetParams::default())
            .map_err(|e| self.build_failed(e))?;
        let mut transient = 0;
        loop {
            self.outcome.requests[Verb::Get.index()] += 1;
            let (err, header) = match call(&self.target.client, request.clone()).await {
                Ok(fresh) => {
                    self.check_uid(&fresh)?;
                    return Ok(Some(fresh));
                }
                Err(failed) => failed,
            };
            match classify(&err) {
                Class::NotFound => return Ok(None),
                Class::Transient(after) => {
                    self.wait_transient(&mut transient, after.max(header), err)
                        .await?;
                }
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

    pub(crate) fn check_uid(&self, fresh: &Value) -> Result<(), Error> {
        match (&self.observed_uid, meta(fresh, "uid")) {
            (Some(observed), Some(found)) if observed != found => Err(Error::ObjectRecreated {
                object: self.key.clone(),
                observed: observed.clone(),
                found: found.to_owned(),
            }),
            _ => Ok(()),
        }
    }

    /// Send `body` (to the status subresource for a status mutation),
    /// retrying transient failures within the target's policy.
    pub(crate) async fn send(&mut self, body: &Body) -> Result<Answer, Error> {
        let mut transient = 0;
        let mut retry = false;
        loop {
            match self.send_once(body, retry).await? {
                Sent::Answer(answer) => return Ok(answer),
                Sent::Transient { error, after } => {
                    self.wait_transient(&mut transient, after, error).await?;
                    retry = true;
                }
            }
        }
    }

    /// Send `body` once; a transient failure comes back for the caller to
    /// wait out (the write loop does so without holding its turn). `retry`
    /// says this is the same write sent again after such a failure.
    pub(crate) async fn send_once(&mut self, body: &Body, retry: bool) -> Result<Sent, Error> {
        let (verb, request) = self.http(body)?;
        if !retry {
            #[cfg(feature = "testing")]
            if let Some(hook) = &self.target.before_write {
                hook.before_write(&self.key, self.writes).await;
            }
            self.writes += 1;
        }
        self.outcome.requests[verb.index()] += 1;
        let (err, header) = match call(&self.target.client, request).await {
            Ok(stored) => return Ok(Sent::Answer(Answer::Stored(stored))),
            Err(failed) => failed,
        };
        Ok(Sent::Answer(match classify(&err) {
            Class::Conflict => Answer::Conflict,
            Class::NotFound => {
                self.missing_namespace = missing_namespace(&err);
                Answer::NotFound
            }
            Class::Invalid => Answer::Invalid(Box::new(err)),
            Class::Transient(after) => {
                return Ok(Sent::Transient {
                    error: err,
                    after: after.max(header),
                });
            }
            Class::Permanent => {
                return Err(Error::Rejected {
                    object: self.key.clone(),
                    source: Box::new(err),
                });
            }
            Class::Transport => {
                return Err(Error::Request {
                    object: self.key.clone(),
                    source: Box::new(err),
                });
            }
        }))
    }

    /// The HTTP request carrying `body`, and the verb it counts as.
    fn http(&self, body: &Body) -> Result<(Verb, http::Request<Vec<u8>>), Error> {
        let request = self.request();
        let manager = &self.target.field_manager;
        let patch = |params: &PatchParams, patch: &Patch<&Value>| {
            if self.status {
                request.patch_subresource("status", &self.name, params, patch)
            } else {
                request.patch(&self.name, params, patch)
            }
        };
        let built = match body {
            Body::Merge(value) => (
                Verb::Patch,
                patch(&PatchParams::apply(manager), &Patch::Merge(value)),
            ),
            Body::Strategic(value) => (
                Verb::Patch,
                patch(&PatchParams::apply(manager), &Patch::Strategic(value)),
            ),
            Body::Json(body) => {
                let ops: json_patch::Patch =
                    serde_json::from_value(body.clone()).map_err(|e| self.convert(e))?;
                let params = PatchParams::apply(manager);
                let request = if self.status {
                    request.patch_subresource(
                        "status",
                        &self.name,
                        &params,
                        &Patch::Json::<()>(ops),
                    )
                } else {
                    request.patch(&self.name, &params, &Patch::Json::<()>(ops))
                };
                // The server compares `test` values with its Go encoding
                // of the stored ones (`body/go_json.rs`).
                let go = crate::body::go_json::to_vec(body).map_err(|e| self.convert(e))?;
                let request = request.map(|mut r| {
                    *r.body_mut() = go;
                    r
                });
                (Verb::Patch, request)
            }
            Body::Apply { config, manager } => {
                let request = patch(&PatchParams::apply(manager).force(), &Patch::Apply(config));
                // Read by the server as YAML (`body/go_json.rs`).
                let ascii =
                    crate::body::go_json::to_ascii_vec(config).map_err(|e| self.convert(e))?;
                let request = request.map(|mut r| {
                    *r.body_mut() = ascii;
                    r
                });
                (Verb::Apply, request)
            }
            Body::Create(object) => {
                let params = PostParams {
                    dry_run: false,
                    field_manager: Some(manager.clone()),
                };
                let bytes = serde_json::to_vec(object).map_err(|e| self.convert(e))?;
                (Verb::Create, request.create(&params, bytes))
            }
            Body::Delete {
                uid,
                resource_version,
            } => {
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: uid.clone(),
                        resource_version: resource_version.clone(),
                    }),
                    ..DeleteParams::default()
                };
                (Verb::Delete, request.delete(&self.name, &params))
            }
            Body::Put(object) => {
                let params = PostParams {
                    dry_run: false,
                    field_manager: Some(manager.clone()),
                };
                let bytes = serde_json::to_vec(object).map_err(|e| self.convert(e))?;
                let request = if self.status {
                    request.replace_subresource("status", &self.name, &params, bytes)
                } else {
                    request.replace(&self.name, &params, bytes)
                };
                (Verb::Update, request)
            }
        };
        let (verb, request) = built;
        Ok((verb, request.map_err(|e| self.build_failed(e))?))
    }

    pub(crate) async fn wait_transient(
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
    pub(crate) async fn invalid(&mut self, err: Box<kube::Error>) -> Result<Option<Value>, Error> {
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

    /// Record the write and hand its result back.
    pub(crate) fn finish(
        mut self,
        result: Result<Option<Value>, Error>,
    ) -> Result<Written<Value>, Error> {
        self.outcome.elapsed = self.start.elapsed();
        self.outcome.unchanged = result.is_ok() && self.writes == 0 && !self.outcome.gone;
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

/// The namespace a `404 NotFound` names as missing (the API server's
/// `details.kind` is `namespaces` when a write's namespace does not exist).
fn missing_namespace(err: &kube::Error) -> Option<String> {
    match err {
        kube::Error::Api(status) => status
            .details
            .as_ref()
            .filter(|d| d.kind == "namespaces")
            .map(|d| d.name.clone()),
        _ => None,
    }
}
