use mailroom_domain::{announcement::Announcement, AccountId, AnnouncementId};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// One announcement with its audience settings and delivery status.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown announcement; [`AppError::Unauthorized`] for a
/// non-member.
pub fn get_announcement(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    id: AnnouncementId,
) -> Result<Announcement, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        tx.find_announcement(account, id)?.ok_or(AppError::NotFound)
    })
}
