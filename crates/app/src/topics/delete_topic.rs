use mailroom_domain::{topic::Topic, AccountId, TopicId};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// Deletes a topic and returns it.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown topic; [`AppError::Unauthorized`] for a non-member.
pub fn delete_topic(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    id: TopicId,
) -> Result<Topic, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        let topic = tx.find_topic(account, id)?.ok_or(AppError::NotFound)?;
        tx.delete_topic(account, id)?;
        Ok(topic)
    })
}
