use mailroom_domain::{
    token::{
        pins_within, within_minter, RawToken, TokenLifetime, TokenName, TokenScope,
        TOKEN_RANDOM_BYTES,
    },
    AccountId, TokenId, UserId, ValidationErrors,
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
    /// `scope`: `full` (absent) or `sending`.
    pub scope: Option<String>,
    /// `accountIds`: the accounts to pin the token to; absent or null for every account.
    pub account_ids: Option<Vec<String>>,
}

/// The most accounts one token may be pinned to.
pub const MAX_PINNED_ACCOUNTS: usize = 100;

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
/// [`AppError::Invalid`] for a missing or bad name, a lifetime other than 30/60/90/null, a
/// scope other than `full`/`sending`, or an `accountIds` entry that is not an account the
/// user is a member of.
pub fn issue_token(
    services: &Services,
    user: UserId,
    request: IssueTokenRequest,
) -> Result<IssuedToken, AppError> {
    issue(services, user, None, request)
}

/// Issues a token for the caller, minted by the token the caller presented (or opened
/// their console session with): the new token may not outlive that one (see
/// [`within_minter`]), nor reach beyond its scope or pins. A console session opened with a
/// login link has no token behind it and mints as the operator's bootstrap does.
///
/// # Errors
/// As [`issue_token`], and [`AppError::Invalid`] naming `expiresInDays` when the new
/// token would expire after the caller's token, `scope` when it asks for more than the
/// caller's scope, `accountIds` when it is pinned to an account outside the caller's pins
/// (or not pinned while the caller is).
pub fn issue_token_as(
    services: &Services,
    actor: &Actor,
    request: IssueTokenRequest,
) -> Result<IssuedToken, AppError> {
    issue(services, actor.user_id, actor.token_id, request)
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
    let scope = errors.collect("scope", TokenScope::parse(request.scope.as_deref()));
    let account_ids = parse_account_ids(&mut errors, request.account_ids.as_deref());
    errors.into_result()?;
    let (Some(name), Some(lifetime), Some(scope), Some(account_ids)) =
        (name, lifetime, scope, account_ids)
    else {
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
        scope,
        account_ids,
    };
    let new = NewTokenRecord {
        record: record.clone(),
        hash: raw.hash(),
    };
    in_transaction(services.db.as_ref(), |tx| {
        if let Some(minter) = minter {
            // The presented token was authenticated just before; one revoked since then
            // mints nothing, as if it had been revoked first.
            let minter = tx
                .list_active_tokens(user)?
                .into_iter()
                .find(|token| token.id == minter)
                .ok_or(AppError::Unauthorized)?;
            within_minter(new.record.expires_at, minter.expires_at).map_err(|refusal| {
                ValidationErrors::single("expiresInDays", refusal.to_string())
            })?;
            if !minter.scope.covers(new.record.scope) {
                return Err(AppError::invalid(
                    "scope",
                    format!(
                        "a token of scope {} may only create tokens of scope {}",
                        minter.scope.as_str(),
                        minter.scope.as_str()
                    ),
                ));
            }
            if !pins_within(
                new.record.account_ids.as_deref(),
                minter.account_ids.as_deref(),
            ) {
                return Err(AppError::invalid(
                    "accountIds",
                    "a token pinned to accounts may only create tokens pinned to some of \
                     those accounts",
                ));
            }
        }
        if let Some(pins) = &new.record.account_ids {
            for account in pins {
                if tx.member_role(*account, user)?.is_none() {
                    return Err(AppError::invalid(
                        "accountIds",
                        format!("{account} is not an account you are a member of"),
                    ));
                }
            }
        }
        Ok(tx.insert_token(&new)?)
    })?;
    Ok(IssuedToken { record, raw })
}

/// Reads `accountIds`: absent or null pins nothing (`Some(None)`); otherwise 1 to
/// [`MAX_PINNED_ACCOUNTS`] account ids, duplicates dropped. `None` when an error was
/// pushed.
fn parse_account_ids(
    errors: &mut ValidationErrors,
    ids: Option<&[String]>,
) -> Option<Option<Vec<AccountId>>> {
    let Some(ids) = ids else {
        return Some(None);
    };
    if ids.is_empty() || ids.len() > MAX_PINNED_ACCOUNTS {
        errors.push(
            "accountIds",
            format!("must hold 1 to {MAX_PINNED_ACCOUNTS} account ids, or be omitted"),
        );
        return None;
    }
    let mut pins: Vec<AccountId> = Vec::with_capacity(ids.len());
    for id in ids {
        match AccountId::parse(id) {
            Ok(id) if !pins.contains(&id) => pins.push(id),
            Ok(_) => {}
            Err(_) => {
                errors.push("accountIds", format!("{id:?} is not an account id"));
                return None;
            }
        }
    }
    Some(Some(pins))
}
