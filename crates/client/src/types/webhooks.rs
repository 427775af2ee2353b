//! An account's webhook configuration and its event log.

use mailroom_domain::{AccountId, Timestamp, UserId, WebhookEventId};
use serde::{Deserialize, Serialize};

use super::Secret;

/// An account's webhook configuration. The signing secret is whole only in the answer to
/// `set_webhooks`; elsewhere it and the receiver credential read masked.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Webhooks {
    /// The receiver's URL.
    pub url: String,
    /// `none`, `basic` or `bearer`.
    pub auth_type: String,
    /// The event types delivered.
    pub events: Vec<String>,
    /// The signing secret (`whsec_…`) to verify deliveries with; masked except in the
    /// answer to `set_webhooks`.
    pub signing_secret: Secret,
    /// The username for `basic`.
    #[serde(default)]
    pub username: Option<String>,
    /// The password or bearer token, masked.
    #[serde(default)]
    pub password_or_token: Option<Secret>,
}

/// The body of `set_webhooks`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookSettings {
    /// The receiver's URL (HTTPS).
    pub url: String,
    /// `none`, `basic` or `bearer`.
    pub auth_type: String,
    /// At least one of `contact.bounced`, `contact.complained`, `contact.deleted`,
    /// `contact.unsubscribed`, `contact.subscribed`.
    pub events: Vec<String>,
    /// The username for `basic`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// The password for `basic`, the token for `bearer`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_or_token: Option<Secret>,
    /// A signing secret to rotate to (`whsec_…`); the server keeps or makes one otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<Secret>,
}

/// One queued or attempted webhook delivery.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookEvent {
    /// The event's id (also the `webhook-id` header of its deliveries).
    #[serde(rename = "_id")]
    pub id: WebhookEventId,
    /// The account.
    pub account_id: AccountId,
    /// The event type, e.g. `contact.deleted`.
    pub event: String,
    /// `queued`, `retrying`, `delivered` or `failed`.
    pub status: String,
    /// What is delivered as `data`.
    pub payload: serde_json::Value,
    /// Where it goes.
    pub target: WebhookTarget,
    /// Attempts made.
    pub try_count: u32,
    /// When it was queued.
    pub create_date: Timestamp,
    /// When the receiver accepted it.
    #[serde(default)]
    pub delivered_at: Option<Timestamp>,
    /// The last attempt.
    #[serde(default)]
    pub last_attempt_at: Option<Timestamp>,
    /// Why the last attempt failed.
    #[serde(default)]
    pub last_error: Option<String>,
    /// The receiver's last status code.
    #[serde(default)]
    pub last_status_code: Option<u16>,
    /// When the next attempt is due.
    #[serde(default)]
    pub next_attempt_at: Option<Timestamp>,
    /// The failed event a manual retry copied.
    #[serde(default)]
    pub parent_event_id: Option<WebhookEventId>,
    /// Who asked for the manual retry.
    #[serde(default)]
    pub retried_by_user_id: Option<UserId>,
}

/// Where a webhook event is delivered, as configured when it was queued (masked).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookTarget {
    /// The receiver's URL.
    pub url: String,
    /// `none`, `basic` or `bearer`.
    pub auth_type: String,
    /// The last characters of the signing secret.
    pub signing_secret_suffix: String,
    /// The username for `basic`.
    #[serde(default)]
    pub username: Option<String>,
    /// The last characters of the credential.
    #[serde(default)]
    pub password_or_token_suffix: Option<String>,
}

/// Filters of `list_webhook_events` and `count_webhook_events`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebhookEventFilter {
    /// `queued`, `retrying`, `delivered` or `failed`.
    pub status: Option<String>,
    /// An event type, e.g. `contact.bounced`.
    pub event: Option<String>,
}

impl WebhookEventFilter {
    pub(crate) fn query(&self) -> Vec<(&'static str, String)> {
        let mut query = Vec::new();
        if let Some(status) = &self.status {
            query.push(("status", status.clone()));
        }
        if let Some(event) = &self.event {
            query.push(("event", event.clone()));
        }
        query
    }
}
