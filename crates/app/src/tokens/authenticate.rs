use mailroom_domain::{token::RawToken, Timestamp};
use time::Duration;

use crate::{
    ports::{in_transaction, TokenRecord},
    Actor, AppError, Services,
};

/// `lastUsedAt` is written at most this often per token, so authentication stays a read.
pub const LAST_USED_WRITE_INTERVAL: Duration = Duration::minutes(1);

/// Resolves a presented token to its user. The token is looked up by its SHA-256 only.
///
/// A token seen in the last few seconds ([`super::TOKEN_CACHE_TTL`]) is served from
/// `services.token_cache` without a transaction, unless its `lastUsedAt` is due to be
/// written; expiry is still checked against the clock on every call.
///
/// # Errors
/// [`AppError::Unauthorized`] for an unknown, revoked or expired token.
pub fn authenticate(services: &Services, raw: &RawToken) -> Result<Actor, AppError> {
    let hash = raw.hash();
    let now = services.clock.now();
    if let Some(token) = services.token_cache.get(&hash, now) {
        if !is_expired(&token, now) && !last_used_is_stale(&token, now) {
            return Ok(actor_of(token));
        }
    }
    let mut token = in_transaction(services.db.as_ref(), |tx| {
        let token = tx
            .find_token_by_hash(&hash)?
            .ok_or(AppError::Unauthorized)?;
        if token.revoked_at.is_some() || is_expired(&token, now) {
            return Err(AppError::Unauthorized);
        }
        Ok(token)
    })?;
    if last_used_is_stale(&token, now) {
        // `lastUsedAt` is a hint for the token's owner, not part of the proof: a write
        // that fails must not refuse the request. On Citus `tokens` is a reference table,
        // written on every node, so while any node is away the write fails and only the
        // tenants on that node may be refused.
        let touched = in_transaction(services.db.as_ref(), |tx| {
            Ok(tx.touch_token(token.id, now, now.plus(-LAST_USED_WRITE_INTERVAL))?)
        });
        if let Err(error) = touched {
            tracing::warn!(token = %token.id, %error, "recording when the token was last used failed");
        }
        token.last_used_at = Some(now);
    }
    services.token_cache.put(hash, token.clone(), now);
    Ok(actor_of(token))
}

fn is_expired(token: &TokenRecord, now: Timestamp) -> bool {
    token.expires_at.is_some_and(|at| at <= now)
}

fn last_used_is_stale(token: &TokenRecord, now: Timestamp) -> bool {
    token
        .last_used_at
        .is_none_or(|at| at.plus(LAST_USED_WRITE_INTERVAL) <= now)
}

fn actor_of(token: TokenRecord) -> Actor {
    Actor {
        user_id: token.user_id,
        token_id: Some(token.id),
        scope: token.scope,
        account_ids: token.account_ids,
    }
}
