use mailroom_domain::{
    paging::PageRequest, saved_segment::SavedSegment, AccountId, SegmentId, TopicId,
};

use crate::StoreError;

/// Saved segments: named audience definitions of an account.
pub trait SavedSegmentRepository {
    /// One page of the account's segments, oldest first.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn list_saved_segments(
        &mut self,
        account: AccountId,
        page: PageRequest,
    ) -> Result<Vec<SavedSegment>, StoreError>;

    /// How many segments the account holds.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn count_saved_segments(&mut self, account: AccountId) -> Result<u64, StoreError>;

    /// Waits for the account's other segment creations to end (a lock held to the end of
    /// the transaction), then counts its segments: two creations cannot pass the bound
    /// together.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn lock_and_count_saved_segments(&mut self, account: AccountId) -> Result<u64, StoreError>;

    /// The segment, if it is the account's.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn find_saved_segment(
        &mut self,
        account: AccountId,
        id: SegmentId,
    ) -> Result<Option<SavedSegment>, StoreError>;

    /// Stores a new segment.
    ///
    /// # Errors
    /// [`StoreError::Duplicate`] ([`Duplicate::SegmentName`](crate::Duplicate)) when another
    /// segment of the account has the name, case-insensitively;
    /// [`StoreError::BrokenReference`] ([`BrokenReference::SegmentTopic`](crate::BrokenReference))
    /// when the topic is not
    /// the account's (deleted meanwhile); [`StoreError`] on store failure.
    fn insert_saved_segment(
        &mut self,
        account: AccountId,
        segment: &SavedSegment,
    ) -> Result<(), StoreError>;

    /// Writes name, definition and `updated_at` back.
    ///
    /// # Errors
    /// As [`SavedSegmentRepository::insert_saved_segment`].
    fn update_saved_segment(
        &mut self,
        account: AccountId,
        segment: &SavedSegment,
    ) -> Result<(), StoreError>;

    /// Names of at most `limit` segments of the account that name `topic`, by name.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn saved_segments_naming_topic(
        &mut self,
        account: AccountId,
        topic: TopicId,
        limit: u32,
    ) -> Result<Vec<String>, StoreError>;

    /// Deletes the segment; `false` when there was none.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn delete_saved_segment(
        &mut self,
        account: AccountId,
        id: SegmentId,
    ) -> Result<bool, StoreError>;
}
