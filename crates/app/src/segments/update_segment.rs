use mailroom_domain::{
    saved_segment::{SavedSegment, SegmentPatchInput},
    SegmentId,
};

use super::refused_write;
use crate::{
    auth::Member,
    contacts::{audience_segment, SearchRequest},
    ports::in_transaction,
    AppError, Services,
};

/// Partially updates a segment: each field given replaces the stored one, and a changed
/// definition is checked as a whole, as `POST …/contacts/search` checks its body.
/// Announcements already made from the segment keep the definition they copied.
///
/// # Errors
/// [`AppError::Invalid`] for bad fields or an empty body; [`AppError::NotFound`] for an
/// unknown segment.
pub fn update_segment(
    services: &Services,
    member: &Member,
    id: SegmentId,
    input: SegmentPatchInput,
) -> Result<SavedSegment, AppError> {
    let account = member.account();
    let patch = input.parse()?;
    let now = services.clock.now();
    in_transaction(services.db.as_ref(), |tx| {
        let mut segment = tx
            .find_saved_segment(account, id)?
            .ok_or(AppError::NotFound)?;
        let check = patch.changes_definition();
        patch.apply(&mut segment, now);
        if check {
            audience_segment(tx, account, &SearchRequest::of(&segment.definition), now)?;
        }
        tx.update_saved_segment(account, &segment)
            .map_err(refused_write)?;
        Ok(segment)
    })
}
