// Placeholder until the segmentation adapter lands: answers an error, never a wrong audience.
use mailroom_app::{ports::SegmentRepository, StoreError};
use mailroom_domain::{condition::Segment, paging::PageRequest, AccountId, ContactId};

use super::PgUnitOfWork;

impl SegmentRepository for PgUnitOfWork<'_> {
    fn search_segment(&mut self, _account: AccountId, _segment: &Segment, _page: PageRequest) -> Result<Vec<ContactId>, StoreError> {
        Err(StoreError::Other("segment search is not built yet".into()))
    }

    fn count_segment(&mut self, _account: AccountId, _segment: &Segment) -> Result<u64, StoreError> {
        Err(StoreError::Other("segment count is not built yet".into()))
    }
}
