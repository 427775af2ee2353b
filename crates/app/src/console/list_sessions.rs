use crate::{
    ports::{in_transaction, ConsoleSessionRecord},
    Actor, AppError, Services,
};

/// The caller's live console sessions, newest first (at most 200).
///
/// # Errors
/// [`AppError::Unavailable`] when the store is down.
pub fn list_sessions(
    services: &Services,
    actor: &Actor,
) -> Result<Vec<ConsoleSessionRecord>, AppError> {
    let now = services.clock.now();
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.list_live_console_sessions(actor.user_id, now)?)
    })
}
