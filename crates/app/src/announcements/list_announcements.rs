use mailroom_domain::{announcement::Announcement, paging::PageRequest};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// One page of the account's announcements, oldest first.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn list_announcements(
    services: &Services,
    member: &Member,
    page: PageRequest,
) -> Result<Vec<Announcement>, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.list_announcements(account, page)?)
    })
}

/// How many announcements the account holds.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn count_announcements(services: &Services, member: &Member) -> Result<u64, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.count_announcements(account)?)
    })
}
