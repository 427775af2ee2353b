use mailroom_domain::SegmentId;

use super::get_segment;
use crate::{
    auth::Member,
    contacts::{count_search, SearchRequest},
    AppError, Services,
};

/// How many contacts are in the segment now: its definition counted by the use case of
/// `POST …/contacts/search/count`, so the two answer alike for the same definition.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown segment; as [`count_search`] otherwise.
pub fn count_segment_contacts(
    services: &Services,
    member: &Member,
    id: SegmentId,
) -> Result<u64, AppError> {
    let segment = get_segment(services, member, id)?;
    count_search(services, member, &SearchRequest::of(&segment.definition))
}
