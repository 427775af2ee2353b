//! Rows as repositories hand them over: domain values plus storage-only fields such as
//! sealed (encrypted) secrets.

use mailroom_domain::{
    account::AccountName,
    branding::Branding,
    token::{TokenHash, TokenScope},
    webhook::{WebhookAuthType, WebhookEventType, WebhookUrl},
    AccountId, Timestamp, TokenId, UserId,
};

use super::SealedSecret;

/// A user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRecord {
    /// Id.
    pub id: UserId,
    /// Email as first given.
    pub email: String,
    /// Creation time.
    pub created_at: Timestamp,
}

/// A personal access token, without its raw value (which is never stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    /// Id.
    pub id: TokenId,
    /// Owner.
    pub user_id: UserId,
    /// Label.
    pub name: String,
    /// Creation time.
    pub created_at: Timestamp,
    /// Expiry, or `None` for never.
    pub expires_at: Option<Timestamp>,
    /// Last authenticated use (written at most once a minute).
    pub last_used_at: Option<Timestamp>,
    /// Revocation time; a revoked token never authenticates again.
    pub revoked_at: Option<Timestamp>,
    /// What the token may call.
    pub scope: TokenScope,
    /// The accounts it is pinned to; `None` for every account of its user.
    pub account_ids: Option<Vec<AccountId>>,
}

/// A token to store, with the hash it is looked up by.
#[derive(Debug, Clone)]
pub struct NewTokenRecord {
    /// The record.
    pub record: TokenRecord,
    /// SHA-256 of the raw value.
    pub hash: TokenHash,
}

/// An account row (its webhook configuration is stored apart).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountRecord {
    /// Id.
    pub id: AccountId,
    /// Name.
    pub name: AccountName,
    /// Click-tracking default.
    pub click_tracking: bool,
    /// Open-tracking default.
    pub open_tracking: bool,
    /// Its mail servers never send a password over a connection without TLS: a server
    /// with a user needs STARTTLS, whatever its `requireTLS`.
    pub refuse_clear_text_auth: bool,
    /// Creation time.
    pub created_at: Timestamp,
    /// The branding of its public pages.
    pub branding: Branding,
}

/// A webhook configuration as stored: credentials sealed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredWebhookConfig {
    /// Target URL.
    pub url: WebhookUrl,
    /// Authentication type.
    pub auth_type: WebhookAuthType,
    /// Delivered event types.
    pub events: Vec<WebhookEventType>,
    /// Username for basic auth.
    pub username: Option<String>,
    /// Sealed password or bearer token.
    pub password_or_token: Option<SealedSecret>,
    /// Sealed signing secret.
    pub signing_secret: SealedSecret,
}
