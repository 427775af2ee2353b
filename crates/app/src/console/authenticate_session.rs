use mailroom_domain::console::ConsoleSecret;

use crate::{
    ports::{in_transaction, ConsoleSessionRecord},
    Actor, AppError, Services,
};

/// A browser whose session cookie is live: who it acts as, and its session.
#[derive(Debug, Clone)]
pub struct SignedIn {
    /// The caller, for the use cases (with the session's scope and pins).
    pub actor: Actor,
    /// The session, whose `csrf_token` every state-changing form must carry.
    pub session: ConsoleSessionRecord,
}

/// Resolves a session cookie: live (not revoked, not expired) and, when opened with a
/// token, that token still live too. Looked up by SHA-256 only.
///
/// # Errors
/// [`AppError::Unauthorized`] for anything else.
pub fn authenticate_session(services: &Services, cookie: &str) -> Result<SignedIn, AppError> {
    let secret = ConsoleSecret::parse(cookie).map_err(|_| AppError::Unauthorized)?;
    let now = services.clock.now();
    let session = in_transaction(services.db.as_ref(), |tx| {
        tx.find_live_console_session(&secret.hash(), now)?
            .ok_or(AppError::Unauthorized)
    })?;
    Ok(SignedIn {
        actor: Actor {
            user_id: session.user_id,
            token_id: session.token_id,
            scope: session.scope,
            account_ids: session.account_ids.clone(),
        },
        session,
    })
}
