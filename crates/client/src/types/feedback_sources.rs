//! Feedback sources: an email provider's bounce and complaint webhook bound to an
//! account (docs/operations.md, "Provider bounce and complaint events").

use mailroom_domain::{FeedbackSourceId, Timestamp};
use serde::{Deserialize, Serialize};

/// A feedback source.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackSource {
    /// The source's id.
    #[serde(rename = "_id")]
    pub id: FeedbackSourceId,
    /// `ses`, `postmark`, `mailgun` or `sendgrid`.
    pub provider: String,
    /// Where the provider posts its events.
    pub url: String,
    /// SES: the accepted SNS topic ARNs.
    #[serde(default)]
    pub topic_arns: Option<Vec<String>>,
    /// SendGrid: the verification key.
    #[serde(default)]
    pub public_key: Option<String>,
    /// Mailgun: whether a signing key is stored.
    #[serde(default)]
    pub has_signing_key: Option<bool>,
    /// Postmark, in the create answer only: the generated basic-auth password.
    #[serde(default)]
    pub secret: Option<String>,
    /// Postmark, in the create answer only: the URL with the credentials in it.
    #[serde(default)]
    pub url_with_credentials: Option<String>,
    /// Events recorded.
    pub events_recorded: i64,
    /// Events accepted that changed nothing.
    pub events_ignored: i64,
    /// When an authenticated request last arrived.
    #[serde(default)]
    pub last_event_date: Option<Timestamp>,
    /// When it was created.
    pub create_date: Timestamp,
}

/// The body of `create_feedback_source`: the provider and its one setting.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewFeedbackSource {
    /// `ses`, `postmark`, `mailgun` or `sendgrid`.
    pub provider: String,
    /// SES: the SNS topic ARNs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic_arns: Option<Vec<String>>,
    /// Mailgun: the webhook signing key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signing_key: Option<String>,
    /// SendGrid: the verification key (base64 DER).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
}

/// The account's feedback sources.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FeedbackSourceList {
    /// Oldest first.
    pub items: Vec<FeedbackSource>,
}

/// What a provider's request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderEvents {
    /// Events in the request.
    pub received: usize,
    /// Events that changed a contact or message.
    pub recorded: usize,
    /// Events that changed nothing.
    pub ignored: usize,
    /// Whether an SNS subscription was confirmed.
    pub confirmed: bool,
}
