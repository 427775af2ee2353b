use mailroom_domain::{announcement::Announcement, AnnouncementId};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// One announcement with its audience settings and delivery status.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown announcement.
pub fn get_announcement(
    services: &Services,
    member: &Member,
    id: AnnouncementId,
) -> Result<Announcement, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        tx.find_announcement(account, id)?.ok_or(AppError::NotFound)
    })
}
