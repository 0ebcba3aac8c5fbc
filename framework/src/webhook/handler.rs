//! What the server asks of every webhook, whatever its kind.

use async_trait::async_trait;

/// How a request ended, for the metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Admitted unchanged, or converted.
    Allowed,
    /// Admitted with a patch.
    Patched,
    /// Denied by the author's code.
    Denied,
    /// The author's code did not answer in time.
    TimedOut,
    /// The request was malformed or for another kind.
    Invalid,
    /// The author's code panicked or its result could not be encoded.
    Error,
}

impl Outcome {
    pub(crate) const ALL: [Outcome; 6] = [
        Outcome::Allowed,
        Outcome::Patched,
        Outcome::Denied,
        Outcome::TimedOut,
        Outcome::Invalid,
        Outcome::Error,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Outcome::Allowed => "allowed",
            Outcome::Patched => "patched",
            Outcome::Denied => "denied",
            Outcome::TimedOut => "timed_out",
            Outcome::Invalid => "invalid",
            Outcome::Error => "error",
        }
    }

    pub(crate) fn index(self) -> usize {
        match self {
            Outcome::Allowed => 0,
            Outcome::Patched => 1,
            Outcome::Denied => 2,
            Outcome::TimedOut => 3,
            Outcome::Invalid => 4,
            Outcome::Error => 5,
        }
    }
}

/// An HTTP answer: status, JSON body, outcome.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: Vec<u8>,
    pub(crate) outcome: Outcome,
}

impl Answer {
    pub(crate) fn ok(body: Vec<u8>, outcome: Outcome) -> Self {
        Answer {
            status: 200,
            body,
            outcome,
        }
    }

    /// A body that is not a review at all: 400 with a Status naming why.
    pub(crate) fn bad_request(message: String) -> Self {
        Answer::status(400, "BadRequest", message, Outcome::Invalid)
    }

    pub(crate) fn internal(message: String) -> Self {
        Answer::status(500, "InternalError", message, Outcome::Error)
    }

    pub(crate) fn status(code: u16, reason: &str, message: String, outcome: Outcome) -> Self {
        let status = kube::core::Status::failure(&message, reason).with_code(code);
        Answer {
            status: code,
            body: serde_json::to_vec(&status).unwrap_or_else(|_| message.into_bytes()),
            outcome,
        }
    }
}

/// Refuses a review that is not `kind` of `api_version`: a 400 naming what
/// this endpoint takes and what came instead. The body's shape alone
/// proves nothing: fields of a review of another version may parse.
pub(crate) fn expect_review(
    types: &kube::core::TypeMeta,
    api_version: &str,
    kind: &str,
) -> Result<(), Answer> {
    if types.api_version == api_version && types.kind == kind {
        return Ok(());
    }
    let got = |s: &str| {
        if s.is_empty() {
            "nothing".to_owned()
        } else {
            format!("`{s}`")
        }
    };
    Err(Answer::bad_request(format!(
        "expected apiVersion `{api_version}` and kind `{kind}`, got apiVersion {} and kind {}",
        got(&types.api_version),
        got(&types.kind)
    )))
}

/// One webhook endpoint: a body in, an answer out. Never panics on input.
#[async_trait]
pub(crate) trait Handler: Send + Sync + 'static {
    async fn handle(&self, body: &[u8]) -> Answer;
}
