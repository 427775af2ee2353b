//! The token cache: recently authenticated tokens by hash, so a busy token authenticates
//! without a database transaction per request (a [`TtlCache`]; see `docs/operations.md`,
//! "Token and membership caches").

use mailroom_domain::{token::TokenHash, TokenId};
use time::Duration;

use crate::{ports::TokenRecord, ttl_cache::TtlCache};

/// How long a looked-up token is trusted without reading it again.
pub const TOKEN_CACHE_TTL: Duration = Duration::seconds(5);
/// The default bound on cached tokens.
pub const TOKEN_CACHE_CAPACITY: usize = 10_000;

/// Recently authenticated tokens by hash, shared by every request of a process.
#[derive(Debug)]
pub struct TokenCache(TtlCache<TokenHash, TokenRecord>);

impl Default for TokenCache {
    fn default() -> Self {
        Self(TtlCache::new(TOKEN_CACHE_TTL, TOKEN_CACHE_CAPACITY))
    }
}

impl std::ops::Deref for TokenCache {
    type Target = TtlCache<TokenHash, TokenRecord>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl TokenCache {
    /// Forgets the token `id` (after its revocation), whatever hash it is cached under.
    pub fn evict_token(&self, id: TokenId) {
        self.evict_where(|_, record| record.id == id);
    }
}
