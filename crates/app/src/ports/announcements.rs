use mailroom_domain::{
    announcement::{Announcement, AnnouncementCounters, AnnouncementStatus},
    condition::Segment,
    paging::PageRequest,
    AccountId, AnnouncementId, ContactId, MessageId, TemplateId, Timestamp,
};

use crate::StoreError;

/// One batch of an announcement's expansion, for the store to queue in one statement.
#[derive(Debug, Clone, Copy)]
pub struct AudienceBatch<'a> {
    /// The account.
    pub account: AccountId,
    /// The announcement whose messages these are.
    pub announcement: AnnouncementId,
    /// Its audience: conditions and suppression.
    pub segment: &'a Segment,
    /// Contacts created after this (the announcement's creation) are not in it.
    pub created_until: Timestamp,
    /// Where the previous batch stopped (`lastSampledContactId`).
    pub after: Option<ContactId>,
    /// The new messages' ids, one per contact the batch may take: its length is the
    /// batch size.
    pub message_ids: &'a [MessageId],
    /// The announcement's template.
    pub template: TemplateId,
    /// The domain of the messages' `Message-ID` (see
    /// [`message_id_domain`](mailroom_domain::message::message_id_domain)).
    pub message_id_domain: &'a str,
    /// When the messages are queued and due.
    pub now: Timestamp,
}

/// What one audience batch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuedAudience {
    /// Contacts of the audience the batch reached.
    pub contacts: u64,
    /// Messages it queued (fewer than `contacts` only for a repeated batch).
    pub queued: u64,
    /// The last contact it reached, in id order.
    pub last: Option<ContactId>,
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

    /// The announcement's message counters (all zero before its first batch).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn announcement_counters(
        &mut self,
        account: AccountId,
        id: AnnouncementId,
    ) -> Result<AnnouncementCounters, StoreError>;

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
    /// expanded, or else a `scheduled` one whose `send_at` is at or before `now`, which it
    /// makes `running`; it skips those another transaction holds (so two workers expand
    /// two announcements, or one waits for nothing). The lock lasts until the transaction
    /// ends.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn lock_next_expansion(
        &mut self,
        now: Timestamp,
    ) -> Result<Option<(AccountId, Announcement)>, StoreError>;

    /// Moves the announcement from `from` to `to` (with `process_date = now` when `to` is
    /// final); `false` when it is not in `from` any more (or not the account's).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn change_announcement_status(
        &mut self,
        account: AccountId,
        id: AnnouncementId,
        from: AnnouncementStatus,
        to: AnnouncementStatus,
        now: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Holds the announcement's messages that wait for a worker (no lease): no claim takes
    /// them until [`AnnouncementRepository::release_announcement_messages`]; their due
    /// times stay. Returns how many.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn hold_announcement_messages(
        &mut self,
        account: AccountId,
        id: AnnouncementId,
    ) -> Result<u64, StoreError>;

    /// Gives the announcement's held messages back to the claims, each due when it was
    /// (a time passed means now), and brings the account's lane forward. Returns how many.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn release_announcement_messages(
        &mut self,
        account: AccountId,
        id: AnnouncementId,
        now: Timestamp,
    ) -> Result<u64, StoreError>;

    /// Settles as `skipped` with reason `cancelled` every message of the announcement that
    /// waits for a worker or is held (none in flight: a worker holds those), counters
    /// moved. Returns how many.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn skip_announcement_messages(
        &mut self,
        account: AccountId,
        id: AnnouncementId,
        now: Timestamp,
    ) -> Result<u64, StoreError>;

    /// Queues one batch of an announcement's audience in one statement: the contacts of
    /// `batch.segment` (suppression included) created at or before
    /// `batch.created_until`, with ids greater than `batch.after`, in id order, at most
    /// one per id in `batch.message_ids`; each gets a `queued` announcement message due at
    /// `batch.now` with the next unused id, except a contact that already has a message
    /// of the announcement (a batch repeated after a crash).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn queue_audience_batch(
        &mut self,
        batch: &AudienceBatch<'_>,
    ) -> Result<QueuedAudience, StoreError>;

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
