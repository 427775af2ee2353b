use mailroom_domain::{token::pins_within, TokenId};

use crate::{
    ports::{in_transaction, TokenRecord},
    Actor, AppError, Services,
};

/// Revokes one of the caller's tokens (the one in use included) and returns it. A token
/// acts only on tokens within its own scope and pins (the ones it could have minted), so
/// a `sending` token can retire itself or its successors but not its user's full tokens.
///
/// The revoked token leaves this process's token cache at once; other processes stop
/// accepting it within [`super::TOKEN_CACHE_TTL`].
///
/// # Errors
/// [`AppError::NotFound`] when the caller has no such unrevoked token;
/// [`AppError::Forbidden`] when that token reaches beyond the caller's scope or pins.
pub fn revoke_token(
    services: &Services,
    actor: &Actor,
    token: TokenId,
) -> Result<TokenRecord, AppError> {
    let now = services.clock.now();
    let revoked = in_transaction(services.db.as_ref(), |tx| {
        let target = tx
            .list_active_tokens(actor.user_id)?
            .into_iter()
            .find(|record| record.id == token)
            .ok_or(AppError::NotFound)?;
        let within = actor.scope.covers(target.scope)
            && pins_within(target.account_ids.as_deref(), actor.account_ids.as_deref());
        if !within {
            return Err(AppError::Forbidden(format!(
                "a token of scope {}{} may only revoke tokens within its scope and accounts",
                actor.scope.as_str(),
                if actor.account_ids.is_some() {
                    " pinned to accounts"
                } else {
                    ""
                }
            )));
        }
        tx.revoke_token(actor.user_id, token, now)?
            .ok_or(AppError::NotFound)
    })?;
    services.token_cache.evict_token(revoked.id);
    Ok(revoked)
}
