use mailroom_domain::{message::Message, AccountId, MessageId};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// One message of the account.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown message (or another account's);
/// [`AppError::Unauthorized`] for a non-member.
pub fn get_message(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    id: MessageId,
) -> Result<Message, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        tx.find_message(account, id)?.ok_or(AppError::NotFound)
    })
}
