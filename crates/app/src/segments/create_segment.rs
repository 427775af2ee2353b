use mailroom_domain::{
    condition::AudienceDefinition,
    saved_segment::{parse_segment_name, SavedSegment, MAX_SEGMENTS},
    SegmentId,
};

use super::refused_write;
use crate::{
    auth::Member,
    contacts::{audience_segment, SearchRequest},
    ports::in_transaction,
    AppError, Services,
};

/// Saves a segment: `name` (1–200 characters, unused in the account case-insensitively)
/// and a definition checked as `POST …/contacts/search` checks its body.
///
/// # Errors
/// [`AppError::Invalid`] naming each bad field; [`AppError::BadRequest`] when the account
/// holds [`MAX_SEGMENTS`] already.
pub fn create_segment(
    services: &Services,
    member: &Member,
    name: Option<&str>,
    definition: AudienceDefinition,
) -> Result<SavedSegment, AppError> {
    let account = member.account();
    let name = parse_segment_name(name)?;
    let now = services.clock.now();
    let segment = SavedSegment {
        id: SegmentId::from_uuid(services.ids.next_uuid()),
        name,
        definition,
        created_at: now,
        updated_at: now,
    };
    in_transaction(services.db.as_ref(), |tx| {
        audience_segment(tx, account, &SearchRequest::of(&segment.definition), now)?;
        let held = tx.lock_and_count_saved_segments(account)?;
        if held >= MAX_SEGMENTS {
            return Err(AppError::BadRequest(format!(
                "an account may have at most {MAX_SEGMENTS} segments; it has {held}: \
                 delete one first"
            )));
        }
        tx.insert_saved_segment(account, &segment)
            .map_err(refused_write)?;
        Ok(segment)
    })
}
