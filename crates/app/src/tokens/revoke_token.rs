use mailroom_domain::TokenId;

use crate::{
    ports::{in_transaction, TokenRecord},
    Actor, AppError, Services,
};

/// Revokes one of the caller's tokens (the one in use included) and returns it.
///
/// # Errors
/// [`AppError::NotFound`] when the caller has no such unrevoked token.
pub fn revoke_token(
    services: &Services,
    actor: &Actor,
    token: TokenId,
) -> Result<TokenRecord, AppError> {
    let now = services.clock.now();
    in_transaction(services.db.as_ref(), |tx| {
        tx.revoke_token(actor.user_id, token, now)?
            .ok_or(AppError::NotFound)
    })
}
