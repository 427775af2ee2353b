//! The ports a use case may use, bundled so the driving adapters hand over one value.

use std::sync::Arc;

use crate::auth::MembershipCache;
use crate::feedback_sources::SnsSettings;
use crate::ports::{
    Clock, Database, DkimKeyGenerator, DomainDns, Ids, MailServerProbe, Mailer, QueueWakeup,
    Secrets, TemplateRenderer, WebhookSender, WebhookUrlGuard,
};
use crate::suppressions::SuppressionKeyCache;
use crate::templates::{AccountSlots, PreviewSlots};
use crate::tokens::TokenCache;
use crate::tracking::LinkSettings;

/// Everything use cases depend on. Cheap to clone.
#[derive(Clone)]
pub struct Services {
    /// Transactions over the repositories.
    pub db: Arc<dyn Database>,
    /// The current time.
    pub clock: Arc<dyn Clock>,
    /// New record ids.
    pub ids: Arc<dyn Ids>,
    /// Randomness for credentials and encryption of stored secrets.
    pub secrets: Arc<dyn Secrets>,
    /// Checks mail server settings against the live server (blocking network I/O, used
    /// only between transactions).
    pub mail_server_probe: Arc<dyn MailServerProbe>,
    /// Checks webhook URLs against the egress policy (blocking network I/O, used only
    /// between transactions).
    pub webhook_url_guard: Arc<dyn WebhookUrlGuard>,
    /// Delivers webhook events (async; used by the delivery worker only).
    pub webhook_sender: Arc<dyn WebhookSender>,
    /// Sends email (async; used by the message worker only).
    pub mailer: Arc<dyn Mailer>,
    /// Wakes the message workers after a transaction queued messages that are due now.
    pub queue_wakeup: Arc<dyn QueueWakeup>,
    /// Where tracking and unsubscribe links point.
    pub links: LinkSettings,
    /// Makes the DKIM keys of sending domains (slow: used only between transactions).
    pub dkim_keys: Arc<dyn DkimKeyGenerator>,
    /// Looks up the records of sending domains (blocking network I/O, used only between
    /// transactions).
    pub domain_dns: Arc<dyn DomainDns>,
    /// The operator's inbound mail host (`MAILROOM_INBOUND_HOST`), the target of each
    /// sending domain's return-path MX; `None` lists no return-path record.
    pub inbound_host: Option<String>,
    /// The most accounts one user may own (`MAILROOM_MAX_ACCOUNTS_PER_USER`); `None` is no
    /// bound. Every per-account bound (the monthly send limit aside, which is kept per
    /// owner) multiplies with the accounts a user can make, so this bounds them all.
    pub max_accounts_per_user: Option<u64>,
    /// Recently authenticated tokens, shared by every request of this process.
    pub token_cache: Arc<TokenCache>,
    /// Recently proven memberships, shared by every request of this process.
    pub membership_cache: Arc<MembershipCache>,
    /// How SNS certificates and subscription confirmations are fetched (SES feedback
    /// sources).
    pub sns: SnsSettings,
    /// Renders template previews with the delivery path's bounds (blocking; used only
    /// between transactions).
    pub renderer: Arc<dyn TemplateRenderer>,
    /// The previews each account has rendering now, bounded per account.
    pub previews: Arc<PreviewSlots>,
    /// The contact imports each account has running now, bounded per account.
    pub imports: Arc<AccountSlots>,
    /// Opened suppression-list keys, shared by every request and worker of this process.
    pub suppression_keys: Arc<SuppressionKeyCache>,
}
