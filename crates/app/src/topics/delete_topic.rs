use mailroom_domain::{topic::Topic, TopicId};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// Deletes a topic and returns it.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown topic.
pub fn delete_topic(services: &Services, member: &Member, id: TopicId) -> Result<Topic, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        let topic = tx.find_topic(account, id)?.ok_or(AppError::NotFound)?;
        tx.delete_topic(account, id)?;
        Ok(topic)
    })
}
