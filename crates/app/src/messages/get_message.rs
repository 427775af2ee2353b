use mailroom_domain::{message::Message, MessageId};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// One message of the account.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown message (or another account's);
/// [`AppError`] when the store fails.
pub fn get_message(
    services: &Services,
    member: &Member,
    id: MessageId,
) -> Result<Message, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        tx.find_message(account, id)?.ok_or(AppError::NotFound)
    })
}
