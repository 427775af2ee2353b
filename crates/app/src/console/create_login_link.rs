use mailroom_domain::{
    console::{ConsoleSecret, CONSOLE_SECRET_BYTES, LOGIN_LINK_LIFETIME},
    email::EmailAddress,
    Timestamp,
};

use crate::{ports::in_transaction, AppError, Services};

/// A login link's secret, shown once to the operator who asked for it.
#[derive(Debug, Clone)]
pub struct LoginLink {
    /// The value that goes at the end of `/console/login/`.
    pub secret: ConsoleSecret,
    /// When it stops working.
    pub expires_at: Timestamp,
}

/// Creates a one-time login link for the user with this email, valid for
/// [`LOGIN_LINK_LIFETIME`]; only its hash is stored. For the operator's CLI
/// (`mailroom user login-link`): there is no HTTP route to it.
///
/// # Errors
/// [`AppError::Invalid`] naming `email` for a malformed address; [`AppError::NotFound`]
/// when no user has it.
pub fn create_login_link(services: &Services, email: &str) -> Result<LoginLink, AppError> {
    let email =
        EmailAddress::parse(email).map_err(|e| AppError::invalid("email", e.to_string()))?;
    let mut random = [0u8; CONSOLE_SECRET_BYTES];
    services.secrets.fill_random(&mut random);
    let secret = ConsoleSecret::from_random(random);
    let now = services.clock.now();
    let expires_at = now.plus(LOGIN_LINK_LIFETIME);
    let id = services.ids.next_uuid();
    in_transaction(services.db.as_ref(), |tx| {
        let user = tx
            .find_user_by_email(email.as_str())?
            .ok_or(AppError::NotFound)?;
        tx.insert_login_link(id, user.id, &secret.hash(), now, expires_at)?;
        Ok(())
    })?;
    Ok(LoginLink { secret, expires_at })
}
