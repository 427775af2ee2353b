//! Every stored sealed secret, for re-sealing under a new key (`mailroom rotate-secrets`).

use mailroom_domain::{AccountId, Uuid};

use super::SealedSecret;
use crate::StoreError;

/// A column that stores sealed secrets. Adding a sealed column means adding it here, or
/// key rotation leaves it behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SealedColumn {
    /// `mail_servers.password`, one per mail server.
    MailServerPassword,
    /// `webhook_configs.signing_secret`, one per account with webhooks.
    WebhookSigningSecret,
    /// `webhook_configs.password_or_token` (nullable), the receiver's credential.
    WebhookCredential,
    /// `sending_domain_keys.private_key`, one per DKIM key of a sending domain.
    DkimPrivateKey,
    /// `feedback_sources.signing_key` (nullable), a Mailgun source's signing key.
    FeedbackSourceSigningKey,
    /// `suppression_keys.sealed_key`, one per account with a suppression list.
    SuppressionKey,
}

impl SealedColumn {
    /// Every sealed column.
    pub const ALL: [Self; 6] = [
        Self::MailServerPassword,
        Self::WebhookSigningSecret,
        Self::WebhookCredential,
        Self::DkimPrivateKey,
        Self::FeedbackSourceSigningKey,
        Self::SuppressionKey,
    ];

    /// `table.column`, as operators read it.
    pub fn name(self) -> &'static str {
        match self {
            Self::MailServerPassword => "mail_servers.password",
            Self::WebhookSigningSecret => "webhook_configs.signing_secret",
            Self::WebhookCredential => "webhook_configs.password_or_token",
            Self::DkimPrivateKey => "sending_domain_keys.private_key",
            Self::FeedbackSourceSigningKey => "feedback_sources.signing_key",
            Self::SuppressionKey => "suppression_keys.sealed_key",
        }
    }
}

/// Where a sealed value lives: the account, and the record id for tables keyed by one
/// (`mail_servers`, `sending_domain_keys`); `None` for one-row-per-account tables (`webhook_configs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SealedRowKey {
    /// The owning account.
    pub account_id: AccountId,
    /// The record id, when the table has one.
    pub record_id: Option<Uuid>,
}

/// One stored sealed value.
#[derive(Debug, Clone)]
pub struct SealedRow {
    /// Where it lives.
    pub key: SealedRowKey,
    /// The stored bytes.
    pub sealed: SealedSecret,
}

/// Reads and rewrites sealed columns in key order, a batch at a time.
pub trait SealedSecretRepository {
    /// Up to `limit` non-null values of `column` after `after` (exclusive), in key order.
    ///
    /// # Errors
    /// [`StoreError`] from the store.
    fn sealed_secrets_after(
        &mut self,
        column: SealedColumn,
        after: Option<SealedRowKey>,
        limit: u32,
    ) -> Result<Vec<SealedRow>, StoreError>;

    /// Replaces the value at `key` with `replacement` only if it still is `expected`, so
    /// a secret changed meanwhile through the API is kept. Returns whether it replaced.
    ///
    /// # Errors
    /// [`StoreError`] from the store.
    fn replace_sealed_secret(
        &mut self,
        column: SealedColumn,
        key: SealedRowKey,
        expected: &SealedSecret,
        replacement: &SealedSecret,
    ) -> Result<bool, StoreError>;
}
