use mailroom_domain::{paging::PageRequest, topic::Topic, AccountId};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// One page of the account's topics, oldest first.
///
/// # Errors
/// [`AppError::Unauthorized`] for a non-member.
pub fn list_topics(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    page: PageRequest,
) -> Result<Vec<Topic>, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        Ok(tx.list_topics(account, page)?)
    })
}
