use mailroom_domain::ConsoleSessionId;

use crate::{ports::in_transaction, Actor, AppError, Services};

/// Ends one of the caller's live console sessions (signing out is revoking one's own).
///
/// # Errors
/// [`AppError::NotFound`] when the caller has no such live session.
pub fn revoke_session(
    services: &Services,
    actor: &Actor,
    session: ConsoleSessionId,
) -> Result<(), AppError> {
    let now = services.clock.now();
    in_transaction(services.db.as_ref(), |tx| {
        if tx.revoke_console_session(actor.user_id, session, now)? {
            Ok(())
        } else {
            Err(AppError::NotFound)
        }
    })
}
