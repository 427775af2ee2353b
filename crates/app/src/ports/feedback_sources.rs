//! Feedback sources (provider event webhooks bound to an account), and the one outbound
//! call their SNS messages need.

use mailroom_domain::{feedback_source::Provider, AccountId, FeedbackSourceId, Timestamp};

use super::SealedSecret;
use crate::StoreError;

/// A stored feedback source. Only the fields of its provider are set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedbackSourceRecord {
    /// The owning account.
    pub account_id: AccountId,
    /// Id.
    pub id: FeedbackSourceId,
    /// Whose events it receives.
    pub provider: Provider,
    /// SES: the SNS topics accepted.
    pub topic_arns: Vec<String>,
    /// Mailgun: the webhook signing key, sealed.
    pub signing_key: Option<SealedSecret>,
    /// SendGrid: the verification key, base64 DER.
    pub public_key: Option<String>,
    /// Postmark: SHA-256 of the generated secret.
    pub secret_hash: Option<[u8; 32]>,
    /// Creation time.
    pub created_at: Timestamp,
    /// When an authenticated request last arrived.
    pub last_event_at: Option<Timestamp>,
    /// Events that changed a contact or message.
    pub events_recorded: i64,
    /// Events accepted that changed nothing (temporary failures, repeats, unknown
    /// recipients).
    pub events_ignored: i64,
}

/// Feedback sources and the Mailgun tokens already seen.
pub trait FeedbackSourceRepository {
    /// Stores a new source.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn insert_feedback_source(&mut self, source: &FeedbackSourceRecord) -> Result<(), StoreError>;

    /// The account's source, if it exists.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_feedback_source(
        &mut self,
        account: AccountId,
        id: FeedbackSourceId,
    ) -> Result<Option<FeedbackSourceRecord>, StoreError>;

    /// The account's sources, oldest first (at most [`crate::feedback_sources::MAX_SOURCES`]
    /// exist).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn list_feedback_sources(
        &mut self,
        account: AccountId,
    ) -> Result<Vec<FeedbackSourceRecord>, StoreError>;

    /// Deletes the source; `false` when there was none.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn delete_feedback_source(
        &mut self,
        account: AccountId,
        id: FeedbackSourceId,
    ) -> Result<bool, StoreError>;

    /// Adds to the source's counters and sets its `last_event_at`.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn count_feedback_source_events(
        &mut self,
        account: AccountId,
        id: FeedbackSourceId,
        recorded: i64,
        ignored: i64,
        at: Timestamp,
    ) -> Result<(), StoreError>;

    /// Whether `token` was already remembered for the source.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn feedback_token_seen(
        &mut self,
        account: AccountId,
        id: FeedbackSourceId,
        token: &str,
    ) -> Result<bool, StoreError>;

    /// Remembers `token` (a repeat changes nothing) and forgets the source's tokens seen
    /// before `forget_before`.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn remember_feedback_token(
        &mut self,
        account: AccountId,
        id: FeedbackSourceId,
        token: &str,
        at: Timestamp,
        forget_before: Timestamp,
    ) -> Result<(), StoreError>;
}

/// An answer of an SNS endpoint: the status and the body, read up to the bound asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnsAnswer {
    /// The HTTP status.
    pub status: u16,
    /// The body, at most the bound asked for.
    pub body: Vec<u8>,
}

/// Fetches from SNS: the signing certificate of a message, and the confirmation of a
/// subscription. Blocking network I/O, called between transactions only. The caller has
/// already checked the URL's host ([`crate::feedback_sources`]); the adapter still
/// resolves it through the egress guard and dials only checked addresses, follows no
/// redirect, and reads at most `max_body` bytes within its timeout.
pub trait SnsClient: Send + Sync {
    /// `GET url`.
    ///
    /// # Errors
    /// Why no answer came (refused by the egress guard, unreachable, timed out), as text.
    fn get(&self, url: &str, max_body: usize) -> Result<SnsAnswer, String>;
}
