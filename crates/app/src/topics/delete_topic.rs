use mailroom_domain::{topic::Topic, TopicId};

use crate::{auth::Member, ports::in_transaction, AppError, Services, StoreError};

/// Deletes a topic and returns it.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown topic; [`AppError::Conflict`] while a saved
/// segment leaves out the topic's unsubscribers (deleting it would widen the segment
/// silently).
pub fn delete_topic(services: &Services, member: &Member, id: TopicId) -> Result<Topic, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        let topic = tx.find_topic(account, id)?.ok_or(AppError::NotFound)?;
        tx.delete_topic(account, id).map_err(|error| match error {
            StoreError::ForeignKeyViolation(constraint) if constraint == "segments_topic_fkey" => {
                AppError::Conflict(
                    "a saved segment leaves out this topic's unsubscribers; change or delete \
                     the segments that name it (topicId) first"
                        .to_owned(),
                )
            }
            other => other.into(),
        })?;
        Ok(topic)
    })
}
