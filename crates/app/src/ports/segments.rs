use mailroom_domain::{condition::Segment, paging::PageRequest, AccountId, ContactId};

use crate::StoreError;

/// Audience queries: which contacts belong to a [`Segment`].
pub trait SegmentRepository {
    /// One page of the ids of the segment's contacts, in id order (stable for paging and
    /// for resumable expansion). With `after`, only ids greater than it count (keyset
    /// paging: a deep page costs what the first does), and `page.start` skips from there.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn search_segment(
        &mut self,
        account: AccountId,
        segment: &Segment,
        page: PageRequest,
        after: Option<ContactId>,
    ) -> Result<Vec<ContactId>, StoreError>;

    /// How many contacts belong to the segment.
    ///
    /// # Errors
    /// [`StoreError`] on store failure.
    fn count_segment(&mut self, account: AccountId, segment: &Segment) -> Result<u64, StoreError>;
}
