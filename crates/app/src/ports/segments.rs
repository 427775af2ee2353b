use mailroom_domain::{condition::Segment, paging::PageRequest, AccountId, ContactId};

use crate::StoreError;

/// Audience queries: which contacts belong to a [`Segment`].
pub trait SegmentRepository {
    /// One page of the ids of the segment's contacts, in id order (stable for paging and
    /// for resumable expansion).
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn search_segment(
        &mut self,
        account: AccountId,
        segment: &Segment,
        page: PageRequest,
    ) -> Result<Vec<ContactId>, StoreError>;

    /// How many contacts belong to the segment.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn count_segment(&mut self, account: AccountId, segment: &Segment) -> Result<u64, StoreError>;
}
