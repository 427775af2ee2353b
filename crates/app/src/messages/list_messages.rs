use mailroom_domain::{
    message::{Message, MessageFilter, MessageOrder},
    paging::PageRequest,
};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// One page of the account's message log in `order` of creation, under `filter`.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn list_messages(
    services: &Services,
    member: &Member,
    filter: &MessageFilter,
    order: MessageOrder,
    page: PageRequest,
) -> Result<Vec<Message>, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.list_messages(account, filter, order, page)?)
    })
}

/// How many messages the log shows under the same filters.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn count_messages(
    services: &Services,
    member: &Member,
    filter: &MessageFilter,
) -> Result<u64, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.count_messages(account, filter)?)
    })
}
