use mailroom_domain::{saved_segment::SavedSegment, SegmentId};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// Deletes a segment and returns it. Announcements made from it keep their copy of its
/// definition and its id.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown segment.
pub fn delete_segment(
    services: &Services,
    member: &Member,
    id: SegmentId,
) -> Result<SavedSegment, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        let segment = tx
            .find_saved_segment(account, id)?
            .ok_or(AppError::NotFound)?;
        tx.delete_saved_segment(account, id)?;
        Ok(segment)
    })
}
