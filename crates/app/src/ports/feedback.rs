use mailroom_domain::{
    email::EmailAddress, message::Message, AccountId, ContactId, MessageId, Timestamp,
};

use crate::StoreError;

/// What feedback intake reads and writes: finding the message a report is about, and the
/// guarded state changes a complaint or a late bounce makes.
pub trait FeedbackRepository {
    /// The account's most recent message to `email` (compared without case).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_latest_message_to(
        &mut self,
        account: AccountId,
        email: &EmailAddress,
    ) -> Result<Option<Message>, StoreError>;

    /// The id of the account's contact with address `email` (compared without case).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_contact_id_by_email(
        &mut self,
        account: AccountId,
        email: &EmailAddress,
    ) -> Result<Option<ContactId>, StoreError>;

    /// Sets the contact's complaint time to `now` unless it is already set; whether it
    /// was newly set (`false` also for an unknown contact). Concurrent calls for one
    /// contact set it once.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn mark_contact_complained(
        &mut self,
        account: AccountId,
        contact: ContactId,
        now: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Moves the message from `sent` to `bounced` with `reply` as its last reply; whether
    /// it moved (`false` when it is in any other state, or unknown).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn mark_sent_message_bounced(
        &mut self,
        account: AccountId,
        message: MessageId,
        reply: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Appends `note` (a late report about one of the message's copies) to the message's
    /// last reply, whatever its state, unless the last reply already holds it; whether
    /// it was appended (`false` for a repeat, or an unknown message).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn note_copy_refusal(
        &mut self,
        account: AccountId,
        message: MessageId,
        note: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError>;
}
