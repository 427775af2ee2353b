//! A short-lived, bounded cache of token lookups, so a busy token authenticates without a
//! database transaction per request.
//!
//! An entry lives [`TOKEN_CACHE_TTL`] by the services' clock. Within that window a token
//! revoked by *another* process still authenticates here; a revocation through this
//! process's API evicts the entry at once (see `docs/operations.md`, "Token cache"). The
//! cache holds at most its capacity of entries: expired entries go first, and when every
//! entry is fresh the whole map is dropped (a refill costs one lookup per token).

use std::{collections::HashMap, sync::Mutex};

use mailroom_domain::{token::TokenHash, Timestamp, TokenId};
use time::Duration;

use crate::ports::TokenRecord;

/// How long a looked-up token is trusted without reading it again.
pub const TOKEN_CACHE_TTL: Duration = Duration::seconds(5);
/// The default bound on cached tokens.
pub const TOKEN_CACHE_CAPACITY: usize = 10_000;

struct Entry {
    record: TokenRecord,
    cached_at: Timestamp,
}

/// Recently authenticated tokens by hash. Cheap to share (`Arc`); safe across threads.
pub struct TokenCache {
    ttl: Duration,
    capacity: usize,
    entries: Mutex<HashMap<TokenHash, Entry>>,
}

impl Default for TokenCache {
    fn default() -> Self {
        Self::new(TOKEN_CACHE_TTL, TOKEN_CACHE_CAPACITY)
    }
}

impl std::fmt::Debug for TokenCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCache")
            .field("ttl", &self.ttl)
            .field("capacity", &self.capacity)
            .field("len", &self.len())
            .finish()
    }
}

impl TokenCache {
    /// A cache trusting entries for `ttl`, holding at most `capacity` (at least 1) of them.
    /// A zero `ttl` disables caching.
    #[must_use]
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        Self {
            ttl,
            capacity: capacity.max(1),
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<TokenHash, Entry>> {
        // A panic while holding the lock leaves a map that is still consistent.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The record cached for `hash`, if it was cached less than the TTL before `now`.
    #[must_use]
    pub fn get(&self, hash: &TokenHash, now: Timestamp) -> Option<TokenRecord> {
        let mut entries = self.entries();
        let entry = entries.get(hash)?;
        // A clock moved backwards also invalidates: the entry's age is unknown.
        let fresh = entry.cached_at <= now && now < entry.cached_at.plus(self.ttl);
        if fresh {
            Some(entry.record.clone())
        } else {
            entries.remove(hash);
            None
        }
    }

    /// Remembers `record` (looked up at `now`) under `hash`.
    pub fn put(&self, hash: TokenHash, record: TokenRecord, now: Timestamp) {
        if self.ttl <= Duration::ZERO {
            return;
        }
        let mut entries = self.entries();
        if entries.len() >= self.capacity && !entries.contains_key(&hash) {
            let ttl = self.ttl;
            entries.retain(|_, entry| entry.cached_at <= now && now < entry.cached_at.plus(ttl));
            if entries.len() >= self.capacity {
                entries.clear();
            }
        }
        entries.insert(
            hash,
            Entry {
                record,
                cached_at: now,
            },
        );
    }

    /// Forgets the token `id` (after its revocation), whatever hash it is cached under.
    pub fn evict(&self, id: TokenId) {
        self.entries().retain(|_, entry| entry.record.id != id);
    }

    /// How many entries are held (fresh or not yet swept).
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    /// Whether nothing is held.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use mailroom_domain::{token::TokenScope, UserId, Uuid};

    use super::*;

    fn record(n: u128) -> TokenRecord {
        TokenRecord {
            id: TokenId::from_uuid(Uuid::from_u128(n)),
            user_id: UserId::from_uuid(Uuid::from_u128(1)),
            name: "t".into(),
            created_at: at(0),
            expires_at: None,
            last_used_at: None,
            revoked_at: None,
            scope: TokenScope::Full,
            account_ids: None,
        }
    }

    fn hash(n: u8) -> TokenHash {
        TokenHash([n; 32])
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::parse("2026-01-01T00:00:00Z")
            .expect("timestamp")
            .plus(Duration::seconds(seconds))
    }

    #[test]
    fn entries_live_for_the_ttl_only() {
        let cache = TokenCache::new(Duration::seconds(5), 10);
        cache.put(hash(1), record(1), at(0));
        assert_eq!(cache.get(&hash(1), at(4)), Some(record(1)));
        assert_eq!(cache.get(&hash(1), at(5)), None);
        assert!(cache.is_empty(), "an expired entry is dropped when seen");
        cache.put(hash(1), record(1), at(10));
        assert_eq!(cache.get(&hash(1), at(9)), None, "clock moved back");
    }

    #[test]
    fn eviction_by_id_and_the_bound() {
        let cache = TokenCache::new(Duration::seconds(5), 2);
        cache.put(hash(1), record(1), at(0));
        cache.put(hash(2), record(2), at(0));
        cache.evict(TokenId::from_uuid(Uuid::from_u128(1)));
        assert_eq!(cache.get(&hash(1), at(1)), None);
        assert_eq!(cache.get(&hash(2), at(1)), Some(record(2)));
        cache.put(hash(3), record(3), at(1));
        cache.put(hash(4), record(4), at(2));
        assert!(cache.len() <= 2, "{}", cache.len());
        assert_eq!(cache.get(&hash(4), at(2)), Some(record(4)));
    }

    #[test]
    fn a_zero_ttl_caches_nothing() {
        let cache = TokenCache::new(Duration::ZERO, 10);
        cache.put(hash(1), record(1), at(0));
        assert!(cache.is_empty());
    }
}
