//! JSON shapes of the webhook event log, and their conversion from domain values. Field
//! names follow the API specification (camelCase, `_id`).

use mailroom_domain::Timestamp;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Where a webhook event was (or will be) delivered; secrets only as their last four
/// characters.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookTargetDto {
    /// Endpoint.
    pub url: String,
    /// `basic`, `bearer` or `none`.
    pub auth_type: String,
    /// Last four characters of the signing secret.
    pub signing_secret_suffix: String,
    /// Username for basic, omitted otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// Last four characters of the password or token, omitted when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_or_token_suffix: Option<String>,
}

/// A webhook event: one queued or attempted delivery. Optional fields are omitted while
/// unset.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookEventDto {
    /// Id (also the `webhook-id` header of its deliveries).
    #[serde(rename = "_id")]
    pub id: String,
    /// Account.
    pub account_id: String,
    /// `contact.bounced`, `contact.complained`, `contact.deleted`, `contact.unsubscribed` or
    /// `contact.subscribed`.
    pub event: String,
    /// `queued`, `retrying`, `delivered` or `failed`.
    pub status: String,
    /// The delivered `data`.
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
    /// Target of the latest attempt.
    pub target: WebhookTargetDto,
    /// Attempts made.
    pub try_count: u32,
    /// When it was queued.
    #[schema(value_type = String, format = DateTime)]
    pub create_date: Timestamp,
    /// The event this one re-queues.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_event_id: Option<String>,
    /// Who asked for the retry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retried_by_user_id: Option<String>,
    /// When the next attempt is due (queued and retrying only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub next_attempt_at: Option<Timestamp>,
    /// When the latest attempt was made.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_attempt_at: Option<Timestamp>,
    /// HTTP status of the latest attempt, when the endpoint answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_status_code: Option<u16>,
    /// Why the latest attempt failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When it was delivered.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub delivered_at: Option<Timestamp>,
}

impl From<mailroom_domain::webhook_event::WebhookEvent> for WebhookEventDto {
    fn from(event: mailroom_domain::webhook_event::WebhookEvent) -> Self {
        let target = event.target;
        Self {
            id: event.id.to_string(),
            account_id: event.account_id.to_string(),
            event: event.event_type.as_str().to_owned(),
            status: event.status.as_str().to_owned(),
            payload: event.payload,
            target: WebhookTargetDto {
                url: target.url,
                auth_type: target.auth_type.as_str().to_owned(),
                signing_secret_suffix: target.signing_secret_suffix,
                username: target.username,
                password_or_token_suffix: target.password_or_token_suffix,
            },
            try_count: event.try_count,
            create_date: event.created_at,
            parent_event_id: event.parent_event_id.map(|id| id.to_string()),
            retried_by_user_id: event.retried_by_user_id.map(|id| id.to_string()),
            next_attempt_at: event.next_attempt_at,
            last_attempt_at: event.last_attempt_at,
            last_status_code: event.last_status_code,
            last_error: event.last_error,
            delivered_at: event.delivered_at,
        }
    }
}

/// Query parameters of the webhook event list and its count (besides `start` and `limit`).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
pub struct WebhookEventListParams {
    /// `queued`, `retrying`, `delivered` or `failed`.
    pub status: Option<String>,
    /// A webhook event type, e.g. `contact.bounced`.
    pub event: Option<String>,
}
