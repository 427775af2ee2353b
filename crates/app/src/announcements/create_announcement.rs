use mailroom_domain::{
    announcement::{Announcement, AnnouncementInput, AnnouncementStatus},
    condition::parse_conditions,
    AnnouncementId,
};

use crate::{
    auth::Member, contacts::AccountAttributeTypes, ports::in_transaction, AppError, Services,
};

/// Creates an announcement and starts it: it is `running` at once, and the workers expand
/// its audience (contacts created until now) and send. The answer does not wait for any
/// of that, whatever the audience's size.
///
/// # Errors
/// [`AppError::Invalid`] naming each bad field: a `templateId` or `topicId` the account
/// does not have, or a condition that does not fit the account's attributes;
/// [`AppError`] when the store fails.
pub fn create_announcement(
    services: &Services,
    member: &Member,
    input: AnnouncementInput,
) -> Result<Announcement, AppError> {
    let account = member.account();
    let new = input.parse()?;
    let now = services.clock.now();
    let id = AnnouncementId::from_uuid(services.ids.next_uuid());
    in_transaction(services.db.as_ref(), |tx| {
        let template = tx.find_template(account, new.template_id)?.ok_or_else(|| {
            AppError::invalid("templateId", "must be the id of a template of this account")
        })?;
        if let Some(topic) = new.topic_id {
            if tx.find_topic(account, topic)?.is_none() {
                return Err(AppError::invalid(
                    "topicId",
                    "must be the id of a topic of this account",
                ));
            }
        }
        let types = AccountAttributeTypes::load(tx, account)?;
        parse_conditions(&new.attributes, &types)?;
        let announcement = Announcement {
            id,
            name: new.name.clone(),
            template_id: template.id,
            subject: template.subject,
            topic_id: new.topic_id,
            include_unsubscribed: new.include_unsubscribed,
            attributes: new.attributes.clone(),
            status: AnnouncementStatus::Running,
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
