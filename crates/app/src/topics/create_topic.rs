use mailroom_domain::{
    topic::{Topic, TopicInput},
    TopicId,
};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// Creates a topic.
///
/// # Errors
/// [`AppError::Invalid`] naming each bad field, or `name` when another topic of the
/// account has it.
pub fn create_topic(
    services: &Services,
    member: &Member,
    input: TopicInput,
) -> Result<Topic, AppError> {
    let account = member.account();
    let new = input.parse_new()?;
    let topic = Topic {
        id: TopicId::from_uuid(services.ids.next_uuid()),
        name: new.name,
        description: new.description,
        created_at: services.clock.now(),
    };
    in_transaction(services.db.as_ref(), |tx| {
        tx.insert_topic(account, &topic)
            .map_err(super::name_taken)?;
        Ok(topic)
    })
}
