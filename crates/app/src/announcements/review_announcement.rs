use mailroom_domain::{
    announcement::{AnnouncementInput, AnnouncementStatus},
    condition::AudienceDefinition,
    contact::Contact,
    paging::PageRequest,
    saved_segment::SavedSegment,
    template::Template,
    Timestamp,
};

use super::create_announcement::{resolve, Resolved};
use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// What an announcement would be, before it is created and started: the review step of
/// the console's announcement flow.
#[derive(Debug, Clone)]
pub struct AnnouncementReview {
    /// The template it would send.
    pub template: Template,
    /// Its audience: the segment's definition, or the one given.
    pub definition: AudienceDefinition,
    /// The saved segment it would be made from.
    pub segment: Option<SavedSegment>,
    /// The contacts the audience selects now (at send time, suppressed, bounced and
    /// complained addresses among them are skipped, counted as skipped).
    pub audience: u64,
    /// The first contact of the audience, to preview the mail for: `None` for an empty
    /// audience.
    pub sample: Option<Contact>,
    /// When it would start, when that is not at once.
    pub send_at: Option<Timestamp>,
}

/// Checks `input` exactly as [`super::create_announcement`] would, and says what it would
/// send and to how many contacts, without creating anything.
///
/// # Errors
/// As [`super::create_announcement`].
pub fn review_announcement(
    services: &Services,
    member: &Member,
    input: AnnouncementInput,
) -> Result<AnnouncementReview, AppError> {
    let account = member.account();
    let new = input.parse()?;
    let now = services.clock.now();
    let send_at = match new.starting_status(now)? {
        AnnouncementStatus::Scheduled => new.send_at,
        _ => None,
    };
    in_transaction(services.db.as_ref(), |tx| {
        let Resolved {
            template,
            definition,
            segment,
            search,
        } = resolve(tx, account, &new, now)?;
        let audience = tx.count_segment(account, &search)?;
        let first =
            tx.search_segment(account, &search, PageRequest { start: 0, limit: 1 }, None)?;
        let sample = tx.find_contacts(account, &first)?.into_iter().next();
        Ok(AnnouncementReview {
            template,
            definition,
            segment,
            audience,
            sample,
            send_at,
        })
    })
}
