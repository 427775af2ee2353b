use mailroom_domain::{
    message::{Message, SkipReason},
    MessageId,
};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// Which message a cancel names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageToCancel {
    /// By its id.
    Id(MessageId),
    /// By the `Idempotency-Key` its send carried (while the key is the account's).
    IdempotencyKey(String),
}

/// Cancels a message that waits for a worker (a scheduled send, a delayed automation
/// message, a retry): it is `skipped` with reason `cancelled` and never sent. A message a
/// worker holds cannot be cancelled any more (the cancel says so), nor can a final one.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown message or key; [`AppError::BadRequest`] (400, as
/// every conflict with a record) for a message that no longer waits.
pub fn cancel_message(
    services: &Services,
    member: &Member,
    target: &MessageToCancel,
) -> Result<Message, AppError> {
    let account = member.account();
    let now = services.clock.now();
    in_transaction(services.db.as_ref(), |tx| {
        let found = match target {
            MessageToCancel::Id(id) => tx.find_message(account, *id)?,
            MessageToCancel::IdempotencyKey(key) => tx
                .find_message_by_idempotency_key(account, key)?
                .map(|keyed| keyed.message),
        }
        .ok_or(AppError::NotFound)?;
        found.check_cancellable().map_err(AppError::BadRequest)?;
        // The store skips it only if no worker claimed it since it was read.
        if !tx.skip_waiting_message(account, found.id, SkipReason::Cancelled, now)? {
            let now_is = tx
                .find_message(account, found.id)?
                .ok_or(AppError::NotFound)?;
            return Err(AppError::BadRequest(
                now_is
                    .check_cancellable()
                    .err()
                    .unwrap_or_else(|| "the message changed meanwhile; try again".into()),
            ));
        }
        tx.find_message(account, found.id)?
            .ok_or(AppError::NotFound)
    })
}
