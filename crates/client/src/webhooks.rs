//! Verifying the webhooks Mailroom delivers, with the service's own code
//! ([`mailroom_domain::webhook_signature`], re-exported here), so a receiver needs this
//! crate only.
//!
//! Each delivery is signed the Standard Webhooks way: `webhook-id`, `webhook-timestamp`
//! and `webhook-signature` headers, an HMAC-SHA256 over `id.timestamp.body` keyed with the
//! signing secret that `set_webhooks` returned. Verify the raw body bytes as they arrived,
//! before parsing them: re-serialised JSON does not match the signature.

use std::time::SystemTime;

/// The signing secret type, for tests that sign deliveries with [`sign`].
pub use mailroom_domain::webhook::SigningSecret;
pub use mailroom_domain::webhook_signature::{
    sign, verify, VerifyError, DEFAULT_TOLERANCE, ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER,
};
use mailroom_domain::Timestamp;
use serde::Deserialize;

/// The three signature headers of one delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebhookHeaders<'a> {
    /// `webhook-id`: the event's id, the same on every retry of it.
    pub id: &'a str,
    /// `webhook-timestamp`: the attempt time, Unix seconds.
    pub timestamp: &'a str,
    /// `webhook-signature`: `v1,<base64>`, possibly several, space-separated.
    pub signature: &'a str,
}

impl<'a> WebhookHeaders<'a> {
    /// Reads the headers with `header`, a lookup by lower-case name into whatever request
    /// type the receiver's web framework has.
    ///
    /// # Errors
    /// [`WebhookError::MissingHeader`] naming the first header that is absent.
    pub fn from_lookup(
        header: impl Fn(&'static str) -> Option<&'a str>,
    ) -> Result<Self, WebhookError> {
        let read = |name| header(name).ok_or(WebhookError::MissingHeader(name));
        Ok(Self {
            id: read(ID_HEADER)?,
            timestamp: read(TIMESTAMP_HEADER)?,
            signature: read(SIGNATURE_HEADER)?,
        })
    }

    /// Reads the headers from an `http` header map (axum, hyper, reqwest).
    ///
    /// # Errors
    /// As [`WebhookHeaders::from_lookup`].
    pub fn from_http(headers: &'a reqwest::header::HeaderMap) -> Result<Self, WebhookError> {
        Self::from_lookup(|name| headers.get(name).and_then(|value| value.to_str().ok()))
    }
}

/// A verified delivery's body.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct WebhookDelivery {
    /// The event type, e.g. `contact.bounced`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The event's data (`email`, `contactId`, `accountId`, `occurredAt`, …).
    pub data: serde_json::Value,
    /// When the event happened.
    pub timestamp: Timestamp,
}

/// Why a delivery was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookError {
    /// A signature header is missing.
    #[error("the {0} header is missing")]
    MissingHeader(&'static str),
    /// The signature, timestamp or secret does not check out.
    #[error(transparent)]
    Signature(#[from] VerifyError),
    /// The body is signed but is not a Mailroom delivery.
    #[error("the body is not a webhook delivery: {0}")]
    Body(String),
}

/// Verifies a delivery against `secret` (`whsec_…`) with the receiver's clock and the
/// standard five-minute tolerance, then reads its body.
///
/// # Errors
/// [`WebhookError`] saying what did not check out; answer the delivery with a 4xx then.
pub fn verify_delivery(
    headers: WebhookHeaders<'_>,
    body: &[u8],
    secret: &str,
) -> Result<WebhookDelivery, WebhookError> {
    verify(
        headers.id,
        headers.timestamp,
        body,
        headers.signature,
        secret,
        DEFAULT_TOLERANCE,
        SystemTime::now(),
    )?;
    serde_json::from_slice(body).map_err(|error| WebhookError::Body(error.to_string()))
}
