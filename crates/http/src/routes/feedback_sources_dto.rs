//! JSON shapes of feedback sources and of the answer to a provider's events.

use mailroom_app::feedback_sources::{
    CreatedFeedbackSource, FeedbackSource, FeedbackSourceInput, ReceiveOutcome,
};
use mailroom_domain::{secret::SecretString, Timestamp};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Body of feedback source create. Set the one field of the provider.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FeedbackSourceBody {
    /// `ses`, `postmark`, `mailgun` or `sendgrid`.
    pub provider: String,
    /// SES: the SNS topic ARNs (1 to 10) whose signed messages are accepted.
    #[serde(default)]
    pub topic_arns: Option<Vec<String>>,
    /// Mailgun: the HTTP webhook signing key (stored sealed, never shown again).
    #[serde(default)]
    pub signing_key: Option<String>,
    /// SendGrid: the signed event webhook's verification key, base64 DER.
    #[serde(default)]
    pub public_key: Option<String>,
}

impl From<FeedbackSourceBody> for FeedbackSourceInput {
    fn from(body: FeedbackSourceBody) -> Self {
        Self {
            provider: body.provider,
            topic_arns: body.topic_arns,
            signing_key: body.signing_key.map(SecretString::new),
            public_key: body.public_key,
        }
    }
}

/// A feedback source. Secrets are never shown, except Postmark's on creation.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackSourceDto {
    /// Id.
    #[serde(rename = "_id")]
    pub id: String,
    /// `ses`, `postmark`, `mailgun` or `sendgrid`.
    pub provider: &'static str,
    /// Where the provider posts: `{public URL}/v2/feedback-sources/{accountId}/{_id}/events`.
    pub url: String,
    /// SES: the accepted SNS topic ARNs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic_arns: Option<Vec<String>>,
    /// SendGrid: the verification key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
    /// Mailgun: whether a signing key is stored (it is never shown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub has_signing_key: Option<bool>,
    /// Postmark, in the create answer only: the generated basic-auth password.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// Postmark, in the create answer only: `url` with `mailroom:{secret}@` in it, to paste
    /// into Postmark's webhook form.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url_with_credentials: Option<String>,
    /// Events recorded (a contact bounced or complained).
    pub events_recorded: i64,
    /// Events accepted that changed nothing.
    pub events_ignored: i64,
    /// When an authenticated request last arrived.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_event_date: Option<Timestamp>,
    /// Creation time.
    #[schema(value_type = String, format = DateTime)]
    pub create_date: Timestamp,
}

impl From<FeedbackSource> for FeedbackSourceDto {
    fn from(source: FeedbackSource) -> Self {
        let record = source.record;
        Self {
            id: record.id.to_string(),
            provider: record.provider.as_str(),
            url: source.url,
            topic_arns: (!record.topic_arns.is_empty()).then_some(record.topic_arns),
            public_key: record.public_key,
            has_signing_key: record.signing_key.as_ref().map(|_| true),
            secret: None,
            url_with_credentials: None,
            events_recorded: record.events_recorded,
            events_ignored: record.events_ignored,
            last_event_date: record.last_event_at,
            create_date: record.created_at,
        }
    }
}

impl From<CreatedFeedbackSource> for FeedbackSourceDto {
    fn from(created: CreatedFeedbackSource) -> Self {
        let mut dto = Self::from(created.source);
        dto.secret = created.secret.map(|secret| secret.expose().to_owned());
        dto.url_with_credentials = created
            .url_with_credentials
            .map(|url| url.expose().to_owned());
        dto
    }
}

/// The account's feedback sources.
#[derive(Debug, Serialize, ToSchema)]
pub struct FeedbackSourceList {
    /// Oldest first.
    pub items: Vec<FeedbackSourceDto>,
}

/// What a provider's request did.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderEventsDto {
    /// Events in the request.
    pub received: usize,
    /// Events that changed a contact or message.
    pub recorded: usize,
    /// Events that changed nothing (temporary failures, other event types, repeats,
    /// recipients the account does not know).
    pub ignored: usize,
    /// Whether an SNS subscription was confirmed.
    pub confirmed: bool,
}

impl From<ReceiveOutcome> for ProviderEventsDto {
    fn from(outcome: ReceiveOutcome) -> Self {
        Self {
            received: outcome.received,
            recorded: outcome.recorded,
            ignored: outcome.ignored,
            confirmed: outcome.confirmed,
        }
    }
}
