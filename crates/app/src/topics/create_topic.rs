use mailroom_domain::{
    topic::{Topic, TopicInput},
    AccountId, TopicId,
};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// Creates a topic.
///
/// # Errors
/// [`AppError::Invalid`] naming each bad field; [`AppError::Unauthorized`] for a non-member.
pub fn create_topic(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    input: TopicInput,
) -> Result<Topic, AppError> {
    let new = input.parse_new()?;
    let topic = Topic {
        id: TopicId::from_uuid(services.ids.next_uuid()),
        name: new.name,
        description: new.description,
        created_at: services.clock.now(),
    };
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        tx.insert_topic(account, &topic)?;
        Ok(topic)
    })
}
