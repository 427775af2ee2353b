use mailroom_domain::{topic::Topic, TopicId};

use crate::{auth::Member, ports::in_transaction, AppError, BrokenReference, Services, StoreError};

/// Segment names a refusal lists; past them it says there are more.
const NAMED_SEGMENTS: u32 = 10;

/// Deletes a topic and returns it. Refused while a saved segment names it (naming the
/// segments), as a template an automation sends is: deleting it would widen each such
/// segment silently to the topic's unsubscribers.
///
/// # Errors
/// [`AppError::BadRequest`] while a segment names it; [`AppError::NotFound`] for an
/// unknown topic.
pub fn delete_topic(services: &Services, member: &Member, id: TopicId) -> Result<Topic, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        let topic = tx.find_topic(account, id)?.ok_or(AppError::NotFound)?;
        let mut naming = tx.saved_segments_naming_topic(account, id, NAMED_SEGMENTS + 1)?;
        if !naming.is_empty() {
            if naming.len() > NAMED_SEGMENTS as usize {
                naming.truncate(NAMED_SEGMENTS as usize);
                naming.push("…".to_owned());
            }
            return Err(in_use(&format!("saved segments ({})", naming.join(", "))));
        }
        // The foreign key refuses a segment that named the topic since the look-up.
        tx.delete_topic(account, id).map_err(|error| match error {
            StoreError::BrokenReference(BrokenReference::SegmentTopic) => in_use("a saved segment"),
            other => other.into(),
        })?;
        Ok(topic)
    })
}

fn in_use(segments: &str) -> AppError {
    AppError::BadRequest(format!(
        "the topic is named by {segments}: change their topicId or delete them first"
    ))
}
