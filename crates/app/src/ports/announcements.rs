use mailroom_domain::{
    announcement::Announcement, condition::Segment, message::Message, paging::PageRequest,
    AccountId, AnnouncementId, ContactId, Timestamp,
};

use crate::StoreError;

/// One contact of an audience batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AudienceMember {
    /// The contact.
    pub id: ContactId,
    /// Its address now.
    pub email: String,
}

/// Announcements and the expansion of their audiences.
pub trait AnnouncementRepository {
    /// Stores a new announcement.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn insert_announcement(
        &mut self,
        account: AccountId,
        announcement: &Announcement,
    ) -> Result<(), StoreError>;

    /// The announcement, if it is the account's.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_announcement(
        &mut self,
        account: AccountId,
        id: AnnouncementId,
    ) -> Result<Option<Announcement>, StoreError>;

    /// One page of the account's announcements, oldest first.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn list_announcements(
        &mut self,
        account: AccountId,
        page: PageRequest,
    ) -> Result<Vec<Announcement>, StoreError>;

    /// How many announcements the account holds.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn count_announcements(&mut self, account: AccountId) -> Result<u64, StoreError>;

    /// Locks the oldest `running` announcement of any account whose audience is not fully
    /// expanded, skipping those another transaction holds (so two workers expand two
    /// announcements, or one waits for nothing). The lock lasts until the transaction
    /// ends.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn lock_next_expansion(&mut self) -> Result<Option<(AccountId, Announcement)>, StoreError>;

    /// Up to `limit` contacts of the segment created at or before `created_until`, with
    /// ids greater than `after`, in id order.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn audience_batch(
        &mut self,
        account: AccountId,
        segment: &Segment,
        created_until: Timestamp,
        after: Option<ContactId>,
        limit: u32,
    ) -> Result<Vec<AudienceMember>, StoreError>;

    /// Inserts the messages of one batch, skipping any contact that already has a
    /// message of the announcement (a batch repeated after a crash), and returns how many
    /// were new.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn insert_audience_messages(&mut self, messages: &[Message]) -> Result<u64, StoreError>;

    /// Writes the expansion's progress: the last contact reached, the messages added, and
    /// `expanded_at` when the end of the audience was reached.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn record_expansion(
        &mut self,
        account: AccountId,
        id: AnnouncementId,
        last_contact: Option<ContactId>,
        added: u64,
        expanded_at: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<(), StoreError>;

    /// Ends an announcement as `failed` with `reason`.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn fail_announcement(
        &mut self,
        account: AccountId,
        id: AnnouncementId,
        reason: &str,
        now: Timestamp,
    ) -> Result<(), StoreError>;

    /// Marks `completed` (with `process_date = now`) every running announcement whose
    /// audience is expanded and none of whose messages is still queued or sending, and
    /// returns how many it marked.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn complete_finished_announcements(&mut self, now: Timestamp) -> Result<u64, StoreError>;
}
