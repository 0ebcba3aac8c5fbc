/// Why the webhook server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookError {
    /// `tls.crt` or `tls.key` is missing, unreadable, or the two do not fit.
    #[error("webhook certificate {path}: {message}")]
    Certificate {
        /// The file at fault (in `--webhook-cert-dir`).
        path: String,
        /// What is wrong with it.
        message: String,
    },
    /// A managed certificate (`--webhook-cert-managed`) could not be made,
    /// stored or trusted: the object named is missing, not the manager's,
    /// or refused the write.
    #[error("managed webhook certificate, {object}: {message}")]
    ManagedCertificate {
        /// The object at fault (`Secret ns/name`, `ValidatingWebhookConfiguration name`, …).
        object: String,
        /// What is wrong with it.
        message: String,
    },
    /// The settings of managed certificates do not make sense; every
    /// problem is listed.
    #[error("invalid managed webhook certificate settings: {}", .0.join("; "))]
    ManagedCertificateSettings(Vec<String>),
    /// The webhooks registered do not make sense together; every problem is listed.
    #[error("invalid webhook registration: {}", .0.join("; "))]
    Registration(Vec<String>),
    /// The limits given to the webhook server are out of range; every
    /// limit at fault is named ([`WebhookLimits`](super::WebhookLimits)).
    #[error("invalid webhook server limits: {}", .0.join("; "))]
    Limits(Vec<String>),
    /// The listener could not be bound.
    #[error("cannot listen on {address} for webhooks")]
    Bind {
        /// The `--webhook-bind-address` value.
        address: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}
