use mailroom_domain::{
    announcement::{Announcement, AnnouncementControl, AnnouncementCounters, AnnouncementStatus},
    AnnouncementId,
};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// Pauses, resumes or cancels an announcement, in one transaction, and answers it with
/// its counters as they are after the change.
///
/// - Pause (`running` → `paused`): the expansion stops at the batch it is in, and every
///   message waiting for a worker is held; a message a worker holds finishes, and one that
///   falls due later (a retry) waits for the resume when it is claimed.
/// - Resume (`paused` → `running`): the held messages wait for the workers again, each
///   due when it was, and the expansion goes on where it stopped.
/// - Cancel (`scheduled`, `running` or `paused` → `cancelled`): nothing more is expanded,
///   and every message not in a worker's hands is `skipped` with reason `cancelled`; one
///   in flight finishes, one that falls due later is skipped when it is claimed.
///
/// The status change waits for a worker's expansion batch of the announcement (which holds
/// its row) to commit, so the messages that batch queued are held or skipped too.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown announcement; [`AppError::BadRequest`] (400, as every conflict with a record) when its
/// status does not allow the control (a final one, a pause of a scheduled one).
pub fn control_announcement(
    services: &Services,
    member: &Member,
    id: AnnouncementId,
    control: AnnouncementControl,
) -> Result<(Announcement, AnnouncementCounters), AppError> {
    let account = member.account();
    let now = services.clock.now();
    let controlled = in_transaction(services.db.as_ref(), |tx| {
        let found = tx
            .find_announcement(account, id)?
            .ok_or(AppError::NotFound)?;
        let to = control.apply(found.status).map_err(AppError::BadRequest)?;
        if !tx.change_announcement_status(account, id, found.status, to, now)? {
            return Err(AppError::BadRequest(
                "the announcement changed at the same time; read it and try again".into(),
            ));
        }
        match to {
            AnnouncementStatus::Paused => {
                tx.hold_announcement_messages(account, id)?;
            }
            AnnouncementStatus::Running => {
                tx.release_announcement_messages(account, id, now)?;
            }
            AnnouncementStatus::Cancelled => {
                tx.skip_announcement_messages(account, id, now)?;
            }
            _ => {}
        }
        let announcement = tx
            .find_announcement(account, id)?
            .ok_or(AppError::NotFound)?;
        let counters = tx.announcement_counters(account, id)?;
        Ok((announcement, counters))
    })?;
    if control == AnnouncementControl::Resume {
        services.queue_wakeup.messages_queued();
    }
    Ok(controlled)
}
