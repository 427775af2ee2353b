use mailroom_domain::{saved_segment::SavedSegment, SegmentId};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// One segment of the account, with its definition.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown segment.
pub fn get_segment(
    services: &Services,
    member: &Member,
    id: SegmentId,
) -> Result<SavedSegment, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        tx.find_saved_segment(account, id)?
            .ok_or(AppError::NotFound)
    })
}
