use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::time::Instant;

use super::cache::Decisions;

/// What a request to the secure metrics endpoint gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Served.
    Allowed,
    /// 401: no bearer token, or one the API server does not accept.
    Unauthenticated(String),
    /// 403: the token's user may not `get` the path.
    Forbidden(String),
    /// Refused (503) because it could not be reviewed; never cached.
    Unreviewable(String),
}

/// Reviews requests through the API server, caching the decisions.
pub(crate) struct Reviewer {
    client: Client,
    decisions: Decisions<Verdict>,
}

impl std::fmt::Debug for Reviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reviewer").finish_non_exhaustive()
    }
}

impl Reviewer {
    /// Reviews with `client` (the operator's identity, which needs
    /// `create` on `tokenreviews` and `subjectaccessreviews`), keeping
    /// each decision for `ttl`, at most `entries` of them.
    pub(crate) fn new(client: Client, ttl: Duration, entries: usize) -> Self {
        Reviewer {
            client,
            decisions: Decisions::new(ttl, entries),
        }
    }

    /// The verdict on a request for `path` whose `Authorization` header is
    /// `authorization`.
    pub(crate) async fn review(&self, authorization: Option<&str>, path: &str) -> Verdict {
        let Some(token) = authorization.and_then(bearer) else {
            return Verdict::Unauthenticated("a bearer token is required".into());
        };
        if let Some(cached) = self.decisions.get(token, path, Instant::now()) {
            return cached;
        }
        let verdict = self.ask(token, path).await;
        if !matches!(verdict, Verdict::Unreviewable(_)) {
            self.decisions
                .put(token, path, verdict.clone(), Instant::now());
        }
        verdict
    }

    async fn ask(&self, token: &str, path: &str) -> Verdict {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                ..Default::default()
            },
            ..Default::default()
        };
        let reviewed = match Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
        {
            Ok(reviewed) => reviewed,
            Err(error) => {
                return Verdict::Unreviewable(format!("the token review failed: {error}"));
            }
        };
        let status = reviewed.status.unwrap_or_default();
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => user,
            _ => {
                let why = status
                    .error
                    .filter(|e| !e.is_empty())
                    .unwrap_or_else(|| "the token is not valid".into());
                return Verdict::Unauthenticated(why);
            }
        };
        let name = user.username.clone().unwrap_or_default();
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_owned()),
                    verb: Some("get".into()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let decided = match Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access)
            .await
        {
            Ok(decided) => decided,
            Err(error) => {
                return Verdict::Unreviewable(format!("the access review failed: {error}"));
            }
        };
        match decided.status {
            Some(status) if status.allowed && status.denied != Some(true) => Verdict::Allowed,
            _ => Verdict::Forbidden(format!("user `{name}` may not get {path}")),
        }
    }
}

/// The token of a `Bearer` authorization (the scheme in any case).
fn bearer(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_reads_the_token() {
        for (header, token) in [
            ("Bearer abc", Some("abc")),
            ("bearer  abc ", Some("abc")),
            ("Basic abc", None),
            ("Bearer ", None),
            ("Bearer", None),
            ("", None),
        ] {
            assert_eq!(bearer(header), token, "{header:?}");
        }
    }
}
