use mailroom_domain::token::RawToken;
use time::Duration;

use crate::{ports::in_transaction, Actor, AppError, Services};

/// `lastUsedAt` is written at most this often per token, so authentication stays a read.
pub const LAST_USED_WRITE_INTERVAL: Duration = Duration::minutes(1);

/// Resolves a presented token to its user. The token is looked up by its SHA-256 only.
///
/// # Errors
/// [`AppError::Unauthorized`] for an unknown, revoked or expired token.
pub fn authenticate(services: &Services, raw: &RawToken) -> Result<Actor, AppError> {
    let hash = raw.hash();
    let now = services.clock.now();
    in_transaction(services.db.as_ref(), |tx| {
        let token = tx
            .find_token_by_hash(&hash)?
            .ok_or(AppError::Unauthorized)?;
        if token.revoked_at.is_some() || token.expires_at.is_some_and(|at| at <= now) {
            return Err(AppError::Unauthorized);
        }
        let stale = token
            .last_used_at
            .is_none_or(|at| at.plus(LAST_USED_WRITE_INTERVAL) <= now);
        if stale {
            tx.touch_token(token.id, now, now.plus(-LAST_USED_WRITE_INTERVAL))?;
        }
        Ok(Actor {
            user_id: token.user_id,
            token_id: Some(token.id),
            scope: token.scope,
            account_ids: token.account_ids,
        })
    })
}
