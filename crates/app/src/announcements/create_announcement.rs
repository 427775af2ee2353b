use mailroom_domain::{
    announcement::{Announcement, AnnouncementAudience, AnnouncementInput, NewAnnouncement},
    condition::{AudienceDefinition, Segment},
    saved_segment::SavedSegment,
    template::Template,
    AccountId, AnnouncementId, Timestamp,
};

use crate::{
    auth::Member,
    contacts::{audience_segment, SearchRequest},
    ports::{in_transaction, UnitOfWork},
    AppError, Services,
};

/// Creates an announcement and starts it: it is `running` at once, and the workers expand
/// its audience (contacts created until now) and send; with a `sendAt` in the future it is
/// `scheduled`, and the workers start it then (its audience: contacts created until the
/// start). The answer does not wait for any
/// of that, whatever the audience's size. An announcement made from a saved segment
/// (`segmentId`) copies the segment's definition now: a later change of the segment does
/// not change it.
///
/// # Errors
/// [`AppError::Invalid`] naming each bad field: a `templateId`, `topicId` or `segmentId`
/// the account does not have, or a condition that does not fit the account's attributes;
/// [`AppError`] when the store fails.
pub fn create_announcement(
    services: &Services,
    member: &Member,
    input: AnnouncementInput,
) -> Result<Announcement, AppError> {
    let account = member.account();
    let new = input.parse()?;
    let now = services.clock.now();
    let status = new.starting_status(now)?;
    let id = AnnouncementId::from_uuid(services.ids.next_uuid());
    in_transaction(services.db.as_ref(), |tx| {
        let Resolved {
            template,
            definition,
            segment,
            ..
        } = resolve(tx, account, &new, now)?;
        let segment_id = segment.map(|saved| saved.id);
        let announcement = Announcement {
            id,
            name: new.name.clone(),
            template_id: template.id,
            subject: template.subject,
            topic_id: definition.topic,
            include_unsubscribed: definition.include_unsubscribed,
            attributes: definition.attributes,
            segment_id,
            status,
            send_at: new.send_at,
            last_sampled_contact_id: None,
            audience_size: 0,
            expanded_at: None,
            process_date: None,
            failure_reason: None,
            created_at: now,
        };
        tx.insert_announcement(account, &announcement)?;
        Ok(announcement)
    })
}

/// What an announcement's fields name, checked: its template, its audience (a segment's
/// definition copied, or the one given) and the segment, and the audience as the search
/// that selects it.
pub(super) struct Resolved {
    pub(super) template: Template,
    pub(super) definition: AudienceDefinition,
    pub(super) segment: Option<SavedSegment>,
    pub(super) search: Segment,
}

/// The checks a create makes of `new`, shared with the review of a draft.
///
/// # Errors
/// [`AppError::Invalid`] naming a `templateId`, `topicId` or `segmentId` the account does
/// not have, or a condition that does not fit the account's attributes.
pub(super) fn resolve(
    tx: &mut dyn UnitOfWork,
    account: AccountId,
    new: &NewAnnouncement,
    now: Timestamp,
) -> Result<Resolved, AppError> {
    let template = tx.find_template(account, new.template_id)?.ok_or_else(|| {
        AppError::invalid("templateId", "must be the id of a template of this account")
    })?;
    let (definition, segment) = match &new.audience {
        AnnouncementAudience::Given(definition) => (definition.clone(), None),
        AnnouncementAudience::Segment(segment) => {
            let saved = tx.find_saved_segment(account, *segment)?.ok_or_else(|| {
                AppError::invalid("segmentId", "must be the id of a segment of this account")
            })?;
            (saved.definition.clone(), Some(saved))
        }
    };
    // The same check as a search's: the topic is the account's, the conditions fit.
    let search = audience_segment(tx, account, &SearchRequest::of(&definition), now)?;
    Ok(Resolved {
        template,
        definition,
        segment,
        search,
    })
}
