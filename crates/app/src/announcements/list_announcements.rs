use mailroom_domain::{announcement::Announcement, paging::PageRequest, AccountId};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// One page of the account's announcements, oldest first.
///
/// # Errors
/// [`AppError::Unauthorized`] for a non-member.
pub fn list_announcements(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    page: PageRequest,
) -> Result<Vec<Announcement>, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        Ok(tx.list_announcements(account, page)?)
    })
}

/// How many announcements the account holds.
///
/// # Errors
/// [`AppError::Unauthorized`] for a non-member.
pub fn count_announcements(
    services: &Services,
    actor: &Actor,
    account: AccountId,
) -> Result<u64, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        Ok(tx.count_announcements(account)?)
    })
}
