use std::{future::Future, pin::Pin, time::Duration};

use mailroom_domain::{
    secret::SecretString,
    webhook::{SigningSecret, WebhookUrl},
    Timestamp, WebhookEventId,
};

/// How a delivery authenticates against the customer's endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookAuth {
    /// No `Authorization` header.
    None,
    /// `Authorization: Basic base64(username:password)`.
    Basic {
        /// The username.
        username: String,
        /// The password.
        password: SecretString,
    },
    /// `Authorization: Bearer <token>`.
    Bearer {
        /// The token.
        token: SecretString,
    },
}

/// One delivery attempt, everything the sender needs.
#[derive(Debug, Clone)]
pub struct WebhookRequest {
    /// Where to POST.
    pub url: WebhookUrl,
    /// The `webhook-id` header (the event's id).
    pub event_id: WebhookEventId,
    /// The attempt time, sent as `webhook-timestamp` (whole seconds).
    pub timestamp: Timestamp,
    /// The JSON body, byte for byte as signed.
    pub body: Vec<u8>,
    /// The key of the `webhook-signature`.
    pub signing_secret: SigningSecret,
    /// The `Authorization` header to send.
    pub auth: WebhookAuth,
}

/// The endpoint's answer (any status; judging it is the caller's business).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookAnswer {
    /// The HTTP status.
    pub status: u16,
    /// `Retry-After`, read as seconds or as an HTTP date, when present and valid.
    pub retry_after: Option<Duration>,
    /// The start of the response body (a few hundred characters at most), for the record.
    pub body_excerpt: String,
}

/// Why no answer was had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The target may not be reached: the egress guard refused its address, or the URL is
    /// plain `http` without private egress. Retrying cannot help.
    #[error("the webhook URL is not allowed: {0}")]
    Refused(String),
    /// The host name did not resolve.
    #[error("the webhook host could not be resolved: {0}")]
    Resolve(String),
    /// TCP connection failed or was reset.
    #[error("could not connect to the webhook endpoint: {0}")]
    Connect(String),
    /// The TLS handshake or the certificate check failed.
    #[error("TLS with the webhook endpoint failed: {0}")]
    Tls(String),
    /// The endpoint broke the HTTP exchange (closed early, sent garbage).
    #[error("the webhook endpoint broke the HTTP exchange: {0}")]
    Protocol(String),
    /// No complete answer within the total timeout.
    #[error("the webhook endpoint did not answer in time: {0}")]
    Timeout(String),
}

impl SendError {
    /// Whether retrying cannot change the outcome.
    pub fn is_permanent(&self) -> bool {
        matches!(self, Self::Refused(_))
    }
}

/// The future a [`WebhookSender`] returns.
pub type SendFuture<'a> =
    Pin<Box<dyn Future<Output = Result<WebhookAnswer, SendError>> + Send + 'a>>;

/// Delivers webhook requests over HTTP(S). Async: it runs on the workers' runtime, never
/// inside a database transaction.
pub trait WebhookSender: Send + Sync {
    /// POSTs the body with `Content-Type: application/json`, the Standard Webhooks headers
    /// (`webhook-id`, `webhook-timestamp`, `webhook-signature`) and the `Authorization` the
    /// request names. The host is resolved once through the egress guard and the
    /// connection goes to the checked address (TLS still verifies the host name).
    /// Redirects are not followed: a 3xx is returned like any other answer. The whole
    /// exchange is bounded by the sender's timeout.
    ///
    /// # Errors
    /// [`SendError`] when no answer was had; [`SendError::Refused`] when the target may not
    /// be reached at all.
    fn send<'a>(&'a self, request: &'a WebhookRequest) -> SendFuture<'a>;
}

/// Why a webhook URL was refused at save time. Each is the client's to fix (a 400 on
/// `url`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlRefusal {
    /// Plain `http://` while private egress is off.
    #[error("must be an https:// URL")]
    NotHttps,
    /// The egress guard refused an address of the host.
    #[error("is not allowed: {0}")]
    Egress(String),
    /// The host did not resolve (or not in time).
    #[error("host could not be resolved: {0}")]
    Resolve(String),
}

/// Checks a webhook URL against the egress policy before it is saved.
pub trait WebhookUrlGuard: Send + Sync {
    /// Requires `https` and resolves the host, checking every address with the egress
    /// guard; with private egress allowed (development, tests), any scheme and host pass
    /// without a lookup. Blocking, with a bounded timeout; never call it inside a database
    /// transaction.
    ///
    /// # Errors
    /// [`UrlRefusal`] naming the reason.
    fn check_url(&self, url: &WebhookUrl) -> Result<(), UrlRefusal>;
}
