//! A short-lived, bounded map of lookups, so a hot read (a token, a membership) needs no
//! database transaction per request.
//!
//! An entry lives for the cache's TTL by the services' clock. Within that window a change
//! made by *another* process is not seen here; a change through this process's use cases
//! evicts the entry at once (see `docs/operations.md`, "Token and membership caches").
//! The cache holds at most its capacity of entries: expired entries go first, and when
//! every entry is fresh the whole map is dropped (a refill costs one lookup per key).

use std::{collections::HashMap, hash::Hash, sync::Mutex};

use mailroom_domain::Timestamp;
use time::Duration;

struct Entry<V> {
    value: V,
    cached_at: Timestamp,
}

/// Recent lookups by key. Cheap to share (`Arc`); safe across threads.
pub struct TtlCache<K, V> {
    ttl: Duration,
    capacity: usize,
    entries: Mutex<HashMap<K, Entry<V>>>,
}

impl<K, V> std::fmt::Debug for TtlCache<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TtlCache")
            .field("ttl", &self.ttl)
            .field("capacity", &self.capacity)
            .field("len", &self.len())
            .finish()
    }
}

impl<K, V> TtlCache<K, V> {
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

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<K, Entry<V>>> {
        // A panic while holding the lock leaves a map that is still consistent.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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

    /// Forgets every entry for which `stale` holds (after a change that makes it wrong).
    pub fn evict_where(&self, mut stale: impl FnMut(&K, &V) -> bool) {
        self.entries()
            .retain(|key, entry| !stale(key, &entry.value));
    }
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    /// The value cached for `key`, if it was cached less than the TTL before `now`.
    #[must_use]
    pub fn get(&self, key: &K, now: Timestamp) -> Option<V> {
        let mut entries = self.entries();
        let entry = entries.get(key)?;
        // A clock moved backwards also invalidates: the entry's age is unknown.
        let fresh = entry.cached_at <= now && now < entry.cached_at.plus(self.ttl);
        if fresh {
            Some(entry.value.clone())
        } else {
            entries.remove(key);
            None
        }
    }

    /// Remembers `value` (looked up at `now`) under `key`.
    pub fn put(&self, key: K, value: V, now: Timestamp) {
        if self.ttl <= Duration::ZERO {
            return;
        }
        let mut entries = self.entries();
        if entries.len() >= self.capacity && !entries.contains_key(&key) {
            let ttl = self.ttl;
            entries.retain(|_, entry| entry.cached_at <= now && now < entry.cached_at.plus(ttl));
            if entries.len() >= self.capacity {
                entries.clear();
            }
        }
        entries.insert(
            key,
            Entry {
                value,
                cached_at: now,
            },
        );
    }

    /// Forgets `key`.
    pub fn evict(&self, key: &K) {
        self.entries().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::parse("2026-01-01T00:00:00Z")
            .expect("timestamp")
            .plus(Duration::seconds(seconds))
    }

    #[test]
    fn entries_live_for_the_ttl_only() {
        let cache = TtlCache::new(Duration::seconds(5), 10);
        cache.put(1, "one", at(0));
        assert_eq!(cache.get(&1, at(4)), Some("one"));
        assert_eq!(cache.get(&1, at(5)), None);
        assert!(cache.is_empty(), "an expired entry is dropped when seen");
        cache.put(1, "one", at(10));
        assert_eq!(cache.get(&1, at(9)), None, "clock moved back");
    }

    #[test]
    fn eviction_and_the_bound() {
        let cache = TtlCache::new(Duration::seconds(5), 2);
        cache.put(1, "one", at(0));
        cache.put(2, "two", at(0));
        cache.evict(&1);
        assert_eq!(cache.get(&1, at(1)), None);
        assert_eq!(cache.get(&2, at(1)), Some("two"));
        cache.evict_where(|_, value| *value == "two");
        assert!(cache.is_empty());
        cache.put(3, "three", at(1));
        cache.put(4, "four", at(2));
        cache.put(5, "five", at(2));
        assert!(cache.len() <= 2, "{}", cache.len());
        assert_eq!(cache.get(&5, at(2)), Some("five"));
    }

    #[test]
    fn a_zero_ttl_caches_nothing() {
        let cache = TtlCache::new(Duration::ZERO, 10);
        cache.put(1, "one", at(0));
        assert!(cache.is_empty());
    }
}
