use mailroom_domain::{paging::PageRequest, saved_segment::SavedSegment};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// One page of the account's segments, oldest first.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn list_segments(
    services: &Services,
    member: &Member,
    page: PageRequest,
) -> Result<Vec<SavedSegment>, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.list_saved_segments(account, page)?)
    })
}

/// How many segments the account holds.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn count_segments(services: &Services, member: &Member) -> Result<u64, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.count_saved_segments(account)?)
    })
}
