use mailroom_domain::{
    topic::{Topic, TopicInput},
    TopicId,
};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// Partially updates a topic. Contacts' unsubscriptions from it are untouched: they refer
/// to the topic's id, which never changes.
///
/// # Errors
/// [`AppError::Invalid`] for bad fields, an empty body or a name another topic of the
/// account has; [`AppError::NotFound`] for an
/// unknown topic.
pub fn update_topic(
    services: &Services,
    member: &Member,
    id: TopicId,
    input: TopicInput,
) -> Result<Topic, AppError> {
    let account = member.account();
    let patch = input.parse_patch()?;
    in_transaction(services.db.as_ref(), |tx| {
        let mut topic = tx.find_topic(account, id)?.ok_or(AppError::NotFound)?;
        patch.apply(&mut topic);
        tx.update_topic(account, &topic)
            .map_err(super::name_taken)?;
        Ok(topic)
    })
}
