use mailroom_domain::{
    email::EmailAddress,
    token::{TokenLifetime, TokenName},
    UserId,
};

use crate::{
    ports::{in_transaction, UserRecord},
    tokens::{issue_token, IssueTokenRequest, IssuedToken},
    AppError, Duplicate, Services, StoreError,
};

/// What `mailroom user create` asks for.
#[derive(Debug, Clone)]
pub struct BootstrapRequest {
    /// The user's email.
    pub email: String,
    /// Label of the token to issue.
    pub token_name: String,
    /// Token lifetime in days (30, 60, 90) or `None` for never.
    pub expires_in_days: Option<i64>,
}

/// The user (new or existing) and the token just issued.
#[derive(Debug, Clone)]
pub struct Bootstrapped {
    /// The user.
    pub user_id: UserId,
    /// Whether the user was created by this call.
    pub created: bool,
    /// The new token.
    pub token: IssuedToken,
}

/// Creates the user if absent (emails compare case-insensitively) and issues a token.
///
/// # Errors
/// [`AppError::Invalid`] for a bad email, name or lifetime.
pub fn bootstrap_user(
    services: &Services,
    request: BootstrapRequest,
) -> Result<Bootstrapped, AppError> {
    let email = EmailAddress::parse(&request.email)
        .map_err(|e| AppError::invalid("email", e.to_string()))?;
    // Check the token fields before creating the user, so a bad name leaves nothing behind.
    TokenName::parse(&request.token_name)
        .map_err(|e| AppError::invalid("tokenName", e.to_string()))?;
    TokenLifetime::from_days(request.expires_in_days)
        .map_err(|e| AppError::invalid("expiresInDays", e.to_string()))?;
    let now = services.clock.now();
    let candidate = UserRecord {
        id: UserId::from_uuid(services.ids.next_uuid()),
        email: email.as_str().to_owned(),
        created_at: now,
    };
    let (user_id, created) = in_transaction(services.db.as_ref(), |tx| {
        if let Some(user) = tx.find_user_by_email(email.as_str())? {
            return Ok((user.id, false));
        }
        match tx.insert_user(&candidate) {
            Ok(()) => Ok((candidate.id, true)),
            // A concurrent bootstrap of the same email won; the caller retries and finds it.
            Err(StoreError::Duplicate(Duplicate::UserEmail)) => Err(AppError::BadRequest(
                "a user with this email was created concurrently; run the command again".into(),
            )),
            Err(other) => Err(other.into()),
        }
    })?;
    let token = issue_token(
        services,
        user_id,
        IssueTokenRequest {
            name: Some(request.token_name),
            expires_in_days: request.expires_in_days,
            ..IssueTokenRequest::default()
        },
    )?;
    Ok(Bootstrapped {
        user_id,
        created,
        token,
    })
}
