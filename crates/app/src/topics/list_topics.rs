use mailroom_domain::{paging::PageRequest, topic::Topic};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// One page of the account's topics, oldest first.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn list_topics(
    services: &Services,
    member: &Member,
    page: PageRequest,
) -> Result<Vec<Topic>, AppError> {
    let account = member.account();
    in_transaction(
        services.db.as_ref(),
        |tx| Ok(tx.list_topics(account, page)?),
    )
}
