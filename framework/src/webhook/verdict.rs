/// What a [`Validator`](super::Validator) decided about one request: admit
/// it, or deny it with a message the API client sees; either way with
/// warnings the API client prints (`kubectl` shows them as `Warning: ...`).
///
/// ```
/// use concord::webhook::Verdict;
/// let verdict = Verdict::allow().with_warning("spec.shards above 10 is slow");
/// assert!(verdict.is_allowed());
/// let verdict = Verdict::deny("spec.shards must be at most 20");
/// assert_eq!(verdict.message(), Some("spec.shards must be at most 20"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct Verdict {
    denial: Option<String>,
    warnings: Vec<String>,
}

impl Verdict {
    /// Admit the request.
    pub fn allow() -> Self {
        Verdict {
            denial: None,
            warnings: Vec::new(),
        }
    }

    /// Deny the request; `message` reaches the API client as
    /// `admission webhook "<name>" denied the request: <message>`.
    pub fn deny(message: impl Into<String>) -> Self {
        Verdict {
            denial: Some(message.into()),
            warnings: Vec::new(),
        }
    }

    /// Adds a warning (keep it under 120 characters; the API server may
    /// truncate long or many warnings).
    pub fn with_warning(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }

    /// Whether the request is admitted.
    pub fn is_allowed(&self) -> bool {
        self.denial.is_none()
    }

    /// The denial message, if denied.
    pub fn message(&self) -> Option<&str> {
        self.denial.as_deref()
    }

    /// The warnings.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    pub(crate) fn into_parts(self) -> (Option<String>, Vec<String>) {
        (self.denial, self.warnings)
    }
}

impl Default for Verdict {
    fn default() -> Self {
        Verdict::allow()
    }
}
