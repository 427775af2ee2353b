use mailroom_domain::{
    token::{within_minter, RawToken, TokenLifetime, TokenName, TOKEN_RANDOM_BYTES},
    TokenId, UserId, ValidationErrors,
};
use time::Duration;

use crate::{
    ports::{in_transaction, NewTokenRecord, TokenRecord},
    Actor, AppError, Services,
};

/// The raw body of a token request.
#[derive(Debug, Clone, Default)]
pub struct IssueTokenRequest {
    /// `name`.
    pub name: Option<String>,
    /// `expiresInDays`: 30, 60, 90 or absent/null.
    pub expires_in_days: Option<i64>,
}

/// A freshly issued token: the record and the raw value, shown this once.
#[derive(Debug, Clone)]
pub struct IssuedToken {
    /// The stored record.
    pub record: TokenRecord,
    /// The raw value.
    pub raw: RawToken,
}

/// Issues a token for `user` with no token behind the request (the operator's bootstrap).
/// Only the hash of the raw value is stored.
///
/// # Errors
/// [`AppError::Invalid`] for a missing or bad name or a lifetime other than 30/60/90/null.
pub fn issue_token(
    services: &Services,
    user: UserId,
    request: IssueTokenRequest,
) -> Result<IssuedToken, AppError> {
    issue(services, user, None, request)
}

/// Issues a token for the caller, minted by the token the caller presented: the new token
/// may not outlive that one (see [`within_minter`]).
///
/// # Errors
/// As [`issue_token`], and [`AppError::Invalid`] naming `expiresInDays` when the new
/// token would expire after the caller's token.
pub fn issue_token_as(
    services: &Services,
    actor: &Actor,
    request: IssueTokenRequest,
) -> Result<IssuedToken, AppError> {
    issue(services, actor.user_id, Some(actor.token_id), request)
}

fn issue(
    services: &Services,
    user: UserId,
    minter: Option<TokenId>,
    request: IssueTokenRequest,
) -> Result<IssuedToken, AppError> {
    let mut errors = ValidationErrors::new();
    let name = match request.name.as_deref() {
        None => {
            errors.push("name", "is required");
            None
        }
        Some(name) => errors.collect("name", TokenName::parse(name)),
    };
    let lifetime = errors.collect(
        "expiresInDays",
        TokenLifetime::from_days(request.expires_in_days),
    );
    errors.into_result()?;
    let (Some(name), Some(lifetime)) = (name, lifetime) else {
        return Err(AppError::Internal(
            "validated token request lost a field".into(),
        ));
    };

    let mut random = [0u8; TOKEN_RANDOM_BYTES];
    services.secrets.fill_random(&mut random);
    let raw = RawToken::from_random(random);
    let now = services.clock.now();
    let record = TokenRecord {
        id: TokenId::from_uuid(services.ids.next_uuid()),
        user_id: user,
        name: name.as_str().to_owned(),
        created_at: now,
        expires_at: lifetime.days().map(|days| now.plus(Duration::days(days))),
        last_used_at: None,
        revoked_at: None,
    };
    let new = NewTokenRecord {
        record: record.clone(),
        hash: raw.hash(),
    };
    in_transaction(services.db.as_ref(), |tx| {
        if let Some(minter) = minter {
            // The presented token was authenticated just before; one revoked since then
            // mints nothing, as if it had been revoked first.
            let minter_expires_at = tx
                .list_active_tokens(user)?
                .into_iter()
                .find(|token| token.id == minter)
                .ok_or(AppError::Unauthorized)?
                .expires_at;
            within_minter(new.record.expires_at, minter_expires_at).map_err(|refusal| {
                ValidationErrors::single("expiresInDays", refusal.to_string())
            })?;
        }
        Ok(tx.insert_token(&new)?)
    })?;
    Ok(IssuedToken { record, raw })
}
