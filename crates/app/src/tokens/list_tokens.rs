use crate::{
    ports::{in_transaction, TokenRecord},
    Actor, AppError, Services,
};

/// The caller's tokens that are not revoked, oldest first (expired ones included, so the
/// owner sees what stopped working).
///
/// # Errors
/// [`AppError::Unavailable`] when the store is down.
pub fn list_tokens(services: &Services, actor: &Actor) -> Result<Vec<TokenRecord>, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.list_active_tokens(actor.user_id)?)
    })
}
