use mailroom_domain::{topic::Topic, AccountId, TopicId};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// One topic of the account.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown topic; [`AppError::Unauthorized`] for a non-member.
pub fn get_topic(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    id: TopicId,
) -> Result<Topic, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        tx.find_topic(account, id)?.ok_or(AppError::NotFound)
    })
}
