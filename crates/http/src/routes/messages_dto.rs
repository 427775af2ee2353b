//! JSON shapes of messages: transactional sends, the log and daily stats, and their conversion from domain values. Field
//! names follow the API specification (camelCase, `_id`).

use mailroom_domain::Timestamp;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Body of `POST …/messages` (a transactional send).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SendMessageBody {
    /// The template's slug.
    pub slug: Option<String>,
    /// The recipient; the contact is created when unknown.
    pub email: Option<String>,
    /// Template variables, winning over the contact's attributes.
    #[schema(value_type = Option<Object>)]
    pub data: Option<serde_json::Map<String, serde_json::Value>>,
    /// Not before this time (RFC 3339, at most 30 days ahead): the message waits,
    /// `queued` with this `nextAttemptAt`, and can be cancelled until then. Omitted, or a
    /// time up to a minute past, sends now.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub send_at: Option<String>,
}

/// Body of `POST …/messages/cancel`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CancelByKeyBody {
    /// The `Idempotency-Key` the send carried.
    pub idempotency_key: Option<String>,
}

/// One message of the outbox. Optional fields are omitted while unset.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageDto {
    /// Id.
    #[serde(rename = "_id")]
    pub id: String,
    /// Account.
    pub account_id: String,
    /// Recipient contact.
    pub contact_id: String,
    /// Recipient address when queued.
    pub email: String,
    /// Template sent.
    pub template_id: String,
    /// `transactional`, `automation` or `announcement`.
    pub kind: String,
    /// `queued`, `sending`, `sent`, `failed`, `bounced` or `skipped`.
    pub status: String,
    /// Why it was skipped: `bounce_blocked`, `complaint_blocked`, `unsubscribed`,
    /// `free_limit_capped`, `no_mail_server`, `automation_disabled`, `contact_deleted`,
    /// `suppressed`, `pending_confirmation` or `cancelled` (its announcement was cancelled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    /// The automation that queued it (automation messages only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub automation_id: Option<String>,
    /// The announcement that queued it (announcement messages only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub announcement_id: Option<String>,
    /// `true` for a test send of a template (`POST …/templates/{templateId}/test-send`);
    /// omitted otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub test: bool,
    /// The form whose double opt-in confirmation this is; omitted otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub form_id: Option<String>,
    /// Template variables of the send.
    #[schema(value_type = Object)]
    pub data: serde_json::Map<String, serde_json::Value>,
    /// Delivery attempts made.
    pub attempts: u32,
    /// The last SMTP reply or connection fault.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_reply: Option<String>,
    /// The `Message-ID` header, stable over retries.
    pub message_id: String,
    /// When the next attempt is due (queued only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub next_attempt_at: Option<Timestamp>,
    /// When it was queued.
    #[schema(value_type = String, format = DateTime)]
    pub create_date: Timestamp,
    /// When its state last changed.
    #[schema(value_type = String, format = DateTime)]
    pub update_date: Timestamp,
    /// When the mail server accepted it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub sent_at: Option<Timestamp>,
    /// When it was first opened (open tracking); on `GET …/messages/{messageId}` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub opened_at: Option<Timestamp>,
    /// When a tracked link in it was first clicked; on `GET …/messages/{messageId}` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub clicked_at: Option<Timestamp>,
}

impl From<mailroom_domain::message::Message> for MessageDto {
    fn from(message: mailroom_domain::message::Message) -> Self {
        Self {
            id: message.id.to_string(),
            account_id: message.account_id.to_string(),
            contact_id: message.contact_id.to_string(),
            email: message.email,
            template_id: message.template_id.to_string(),
            kind: message.kind.as_str().to_owned(),
            status: message.status.as_str().to_owned(),
            skip_reason: message.skip_reason.map(|r| r.as_str().to_owned()),
            automation_id: message.automation_id.map(|id| id.to_string()),
            announcement_id: message.announcement_id.map(|id| id.to_string()),
            test: message.test,
            form_id: message.form_id.map(|id| id.to_string()),
            data: message.data,
            attempts: message.attempts,
            last_reply: message.last_reply,
            message_id: message.message_id_header,
            next_attempt_at: message.next_attempt_at,
            create_date: message.created_at,
            update_date: message.updated_at,
            sent_at: message.sent_at,
            opened_at: None,
            clicked_at: None,
        }
    }
}

/// Query parameters of the message log and its count (besides `start` and `limit`).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
pub struct MessageListParams {
    /// `queued`, `sending`, `sent`, `failed`, `bounced` or `skipped`.
    pub status: Option<String>,
    /// Only messages to this contact.
    pub contact_id: Option<String>,
    /// Only messages of this announcement.
    pub announcement_id: Option<String>,
    /// Only messages of this template.
    pub template_id: Option<String>,
    /// Only messages queued to this address (any letters' case).
    pub email: Option<String>,
}

/// The order of the message log: `oldest` first (the default) or `newest` first.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct MessageOrderParam {
    /// `oldest` (the default) or `newest`: by creation.
    pub order: Option<String>,
}

/// One UTC day of message counters.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DailyStatsDto {
    /// The start of the UTC day the counters cover, `2026-11-24T00:00:00.000Z`.
    #[schema(value_type = String, format = DateTime)]
    pub day: Timestamp,
    /// Skipped because the contact hard-bounced.
    pub bounce_blocked: u64,
    /// Complaints received.
    pub complained: u64,
    /// Skipped because the contact complained.
    pub complaint_blocked: u64,
    /// Skipped because of the monthly send limit.
    pub free_limit_capped: u64,
    /// Hard bounces.
    pub bounced: u64,
    /// First clicks.
    pub clicked: u64,
    /// Failed messages.
    pub failed: u64,
    /// First opens.
    pub opened: u64,
    /// Sent messages.
    pub sent: u64,
    /// Unsubscriptions.
    pub unsubscribed: u64,
}

impl From<mailroom_domain::message::DailyStats> for DailyStatsDto {
    fn from(stats: mailroom_domain::message::DailyStats) -> Self {
        use mailroom_domain::message::StatsCounter as C;
        Self {
            day: Timestamp::from_datetime(stats.day.midnight().assume_utc()),
            bounce_blocked: stats.get(C::BounceBlocked),
            complained: stats.get(C::Complained),
            complaint_blocked: stats.get(C::ComplaintBlocked),
            free_limit_capped: stats.get(C::FreeLimitCapped),
            bounced: stats.get(C::Bounced),
            clicked: stats.get(C::Clicked),
            failed: stats.get(C::Failed),
            opened: stats.get(C::Opened),
            sent: stats.get(C::Sent),
            unsubscribed: stats.get(C::Unsubscribed),
        }
    }
}
