use mailroom_domain::{topic::Topic, TopicId};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// One topic of the account.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown topic.
pub fn get_topic(services: &Services, member: &Member, id: TopicId) -> Result<Topic, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        tx.find_topic(account, id)?.ok_or(AppError::NotFound)
    })
}
