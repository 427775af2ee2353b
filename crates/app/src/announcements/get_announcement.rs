use mailroom_domain::{
    announcement::{Announcement, AnnouncementCounters},
    AnnouncementId,
};

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

/// One announcement with its message counters, read in one transaction so the counters
/// and the status agree.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown announcement.
pub fn get_announcement_progress(
    services: &Services,
    member: &Member,
    id: AnnouncementId,
) -> Result<(Announcement, AnnouncementCounters), AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        let announcement = tx
            .find_announcement(account, id)?
            .ok_or(AppError::NotFound)?;
        let counters = tx.announcement_counters(account, id)?;
        Ok((announcement, counters))
    })
}
