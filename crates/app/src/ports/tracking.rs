use mailroom_domain::{AccountId, ContactId, MessageId, Timestamp, TopicId};

use crate::StoreError;

/// What the public link endpoints record: the links a message's clicks lead to, its
/// first open and first click.
pub trait TrackingRepository {
    /// Stores the links of the message's HTML body, in the order their click tokens
    /// number them, replacing what an earlier attempt stored.
    ///
    /// # Errors
    /// [`StoreError`] on store failure (also when the message does not exist).
    fn store_message_links(
        &mut self,
        account: AccountId,
        message: MessageId,
        links: &[String],
    ) -> Result<(), StoreError>;

    /// The link stored at `position` for the message; `None` when the message or the
    /// position is unknown.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn message_link(
        &mut self,
        account: AccountId,
        message: MessageId,
        position: u16,
    ) -> Result<Option<String>, StoreError>;

    /// Records the message's first open at `now`; `true` only when this call set it
    /// (`false` for a repeat or an unknown message). Atomic under concurrent calls.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn mark_message_opened(
        &mut self,
        account: AccountId,
        message: MessageId,
        now: Timestamp,
    ) -> Result<bool, StoreError>;

    /// As [`TrackingRepository::mark_message_opened`], for the first click.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn mark_message_clicked(
        &mut self,
        account: AccountId,
        message: MessageId,
        now: Timestamp,
    ) -> Result<bool, StoreError>;

    /// When the message was first opened and first clicked, `(None, None)` when never
    /// (or when the message is unknown).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn message_engagement(
        &mut self,
        account: AccountId,
        message: MessageId,
    ) -> Result<(Option<Timestamp>, Option<Timestamp>), StoreError>;
}

/// A contact's own unsubscriptions, from the unsubscribe page and the one-click post.
pub trait SubscriptionRepository {
    /// Sets the contact's `unsubscribed_at` to `now` unless it is already set; `true`
    /// only when this call set it (`false` also for an unknown contact).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn unsubscribe_contact(
        &mut self,
        account: AccountId,
        contact: ContactId,
        now: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Records the contact's unsubscription from each of the topics, in one statement;
    /// answers the topics this call added (those already unsubscribed are left out).
    ///
    /// # Errors
    /// [`StoreError`] on store failure, including an unknown contact or topic.
    fn unsubscribe_contact_from_topics(
        &mut self,
        account: AccountId,
        contact: ContactId,
        topics: &[TopicId],
        now: Timestamp,
    ) -> Result<Vec<TopicId>, StoreError>;
}
