use mailroom_domain::{
    console::{ConsoleSecret, CONSOLE_SECRET_BYTES, SESSION_LIFETIME},
    token::{RawToken, TokenScope},
    ConsoleSessionId,
};

use crate::{
    ports::{in_transaction, ConsoleSessionRecord},
    tokens::authenticate,
    Actor, AppError, Services,
};

/// The most characters of a `User-Agent` kept with a session.
pub const MAX_USER_AGENT_CHARS: usize = 200;

/// A session just opened: the cookie value (stored only as its hash) and the record,
/// which holds the CSRF token of its forms.
#[derive(Debug, Clone)]
pub struct NewSession {
    /// The cookie value.
    pub secret: ConsoleSecret,
    /// The stored session.
    pub record: ConsoleSessionRecord,
}

/// Opens a session with a pasted personal access token. The session acts with the token's
/// scope and pins and ends when the token is revoked or expires, or after
/// [`SESSION_LIFETIME`], whichever is first. Only a `full` token signs in: a `sending`
/// token may call none of the routes the console's pages read.
///
/// # Errors
/// [`AppError::Invalid`] naming `token` when the text is not shaped like a token;
/// [`AppError::Unauthorized`] for an unknown, revoked or expired token;
/// [`AppError::Forbidden`] for a token of `sending` scope.
pub fn sign_in_with_token(
    services: &Services,
    token: &str,
    user_agent: &str,
) -> Result<NewSession, AppError> {
    let raw = RawToken::parse(token.trim())
        .map_err(|_| AppError::invalid("token", "is not a Mailroom personal access token"))?;
    let actor = authenticate(services, &raw)?;
    if actor.scope != TokenScope::Full {
        return Err(AppError::Forbidden(format!(
            "a token of scope {} cannot sign in to the console; use a full token",
            actor.scope.as_str()
        )));
    }
    open_session(services, &actor, user_agent)
}

/// Opens a session with a one-time login link: the link is used up and the session stored
/// in one transaction. The session has full scope and lasts [`SESSION_LIFETIME`].
///
/// # Errors
/// [`AppError::Unauthorized`] for a malformed, unknown, used or expired link.
pub fn sign_in_with_link(
    services: &Services,
    link: &str,
    user_agent: &str,
) -> Result<NewSession, AppError> {
    let secret = ConsoleSecret::parse(link).map_err(|_| AppError::Unauthorized)?;
    let now = services.clock.now();
    in_transaction(services.db.as_ref(), |tx| {
        let user_id = tx
            .use_login_link(&secret.hash(), now)?
            .ok_or(AppError::Unauthorized)?;
        let actor = Actor {
            user_id,
            token_id: None,
            scope: TokenScope::Full,
            account_ids: None,
        };
        let session = new_session(services, &actor, user_agent);
        tx.insert_console_session(&session.record, &session.secret.hash())?;
        Ok(session)
    })
}

fn open_session(
    services: &Services,
    actor: &Actor,
    user_agent: &str,
) -> Result<NewSession, AppError> {
    let session = new_session(services, actor, user_agent);
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.insert_console_session(&session.record, &session.secret.hash())?)
    })?;
    Ok(session)
}

/// A new session for `actor`: fresh cookie and CSRF values, not yet stored.
fn new_session(services: &Services, actor: &Actor, user_agent: &str) -> NewSession {
    let mut random = [0u8; CONSOLE_SECRET_BYTES];
    services.secrets.fill_random(&mut random);
    let secret = ConsoleSecret::from_random(random);
    services.secrets.fill_random(&mut random);
    let csrf = ConsoleSecret::from_random(random);
    let now = services.clock.now();
    let record = ConsoleSessionRecord {
        id: ConsoleSessionId::from_uuid(services.ids.next_uuid()),
        user_id: actor.user_id,
        csrf_token: csrf.expose().to_owned(),
        token_id: actor.token_id,
        scope: actor.scope,
        account_ids: actor.account_ids.clone(),
        user_agent: user_agent.chars().take(MAX_USER_AGENT_CHARS).collect(),
        created_at: now,
        expires_at: now.plus(SESSION_LIFETIME),
        revoked_at: None,
    };
    NewSession { secret, record }
}
