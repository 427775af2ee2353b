//! Per-token rate limiting: a token bucket per API token, checked by the [`Caller`]
//! extractor right after authentication, and the IETF `RateLimit-*` headers
//! (draft-ietf-httpapi-ratelimit-headers, the `RateLimit-Limit` / `-Remaining` / `-Reset`
//! form) written on the way out.
//!
//! Why a hand-written bucket rather than `governor`: the headers need the bucket's level
//! (remaining requests and time to full), which governor only exposes through an extra
//! middleware type, and eviction here is one rule — a bucket that has refilled is the
//! same as no bucket, so it can be dropped. The whole bucket is the twenty lines of
//! [`Bucket::take`].
//!
//! Unauthenticated requests are not limited here (keying on unverified input would let
//! anyone fill the table); failed authentications are limited per client address by
//! [`crate::auth_failures`], on the same bucket type.
//!
//! [`Caller`]: crate::extract::Caller

use std::{
    collections::HashMap,
    hash::Hash,
    sync::Mutex,
    time::{Duration, Instant},
};

use actix_web::{
    dev::ServiceResponse,
    http::header::{HeaderName, HeaderValue, RETRY_AFTER},
    HttpMessage, HttpRequest,
};
use mailroom_domain::TokenId;

/// A token's allowance: `per_second` requests on average, up to `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// The refill rate, in requests per second (greater than zero).
    pub per_second: f64,
    /// The bucket size: the most requests accepted back to back (at least 1).
    pub burst: u32,
}

impl RateLimit {
    /// The default: 100 requests per second, bursts of 200.
    pub const DEFAULT: Self = Self {
        per_second: 100.0,
        burst: 200,
    };
}

/// What the bucket said about one request; also the values of the response headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateDecision {
    /// Whether the request may go on.
    pub allowed: bool,
    /// `RateLimit-Limit`: the bucket size.
    pub limit: u32,
    /// `RateLimit-Remaining`: whole requests left in the bucket after this one.
    pub remaining: u32,
    /// `RateLimit-Reset`: seconds until the bucket is full again.
    pub reset_secs: u64,
    /// `Retry-After` of a refusal: seconds until the next request is accepted.
    pub retry_after_secs: u64,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    level: f64,
    at: Instant,
}

impl Bucket {
    /// Refills for the time since the last look, then takes one request if there is one.
    fn take(&mut self, limit: RateLimit, now: Instant) -> RateDecision {
        let burst = f64::from(limit.burst);
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.level = (self.level + elapsed * limit.per_second).min(burst);
        self.at = now;
        let allowed = self.level >= 1.0;
        if allowed {
            self.level -= 1.0;
        }
        let seconds = |missing: f64| whole_seconds(missing.max(0.0) / limit.per_second);
        RateDecision {
            allowed,
            limit: limit.burst,
            remaining: whole_requests(self.level),
            reset_secs: seconds(burst - self.level),
            retry_after_secs: if allowed {
                0
            } else {
                seconds(1.0 - self.level).max(1)
            },
        }
    }

    /// Whether the bucket would be full by `now`, and so equal to no bucket at all.
    fn refilled(&self, limit: RateLimit, now: Instant) -> bool {
        self.level_at(limit, now) >= f64::from(limit.burst)
    }

    /// The level the bucket would have at `now`, uncapped.
    fn level_at(&self, limit: RateLimit, now: Instant) -> f64 {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.level + elapsed * limit.per_second
    }
}

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn whole_seconds(seconds: f64) -> u64 {
    // Rounded up: a client that waits this long is accepted.
    seconds.ceil().clamp(0.0, u64::MAX as f64) as u64
}

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn whole_requests(level: f64) -> u32 {
    level.floor().clamp(0.0, f64::from(u32::MAX)) as u32
}

/// How often idle buckets are swept out, at most.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// The buckets of every key (a token, a client address) seen recently. Memory stays
/// bounded by the keys active within one refill period: full buckets are dropped every
/// [`SWEEP_EVERY`]; and by `max_tracked`: a new key beyond it first sweeps, then evicts the
/// fullest bucket (the one that would forget the least).
#[derive(Debug)]
pub struct RateLimiter<K = TokenId> {
    limit: Option<RateLimit>,
    max_tracked: usize,
    state: Mutex<State<K>>,
}

#[derive(Debug)]
struct State<K> {
    buckets: HashMap<K, Bucket>,
    swept_at: Instant,
}

impl<K: Eq + Hash + Copy> RateLimiter<K> {
    /// A limiter with `limit`, or one that lets everything through for `None`.
    pub fn new(limit: Option<RateLimit>) -> Self {
        Self::bounded(limit, usize::MAX)
    }

    /// As [`RateLimiter::new`], holding at most `max_tracked` buckets.
    pub fn bounded(limit: Option<RateLimit>, max_tracked: usize) -> Self {
        Self {
            limit,
            max_tracked: max_tracked.max(1),
            state: Mutex::new(State {
                buckets: HashMap::new(),
                swept_at: Instant::now(),
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State<K>> {
        // A poisoned lock only means another thread panicked mid-update of a number;
        // the map is still usable.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes one request from `key`'s bucket at `now`; `None` when limiting is off.
    pub fn check(&self, key: K, now: Instant) -> Option<RateDecision> {
        let limit = self.limit?;
        let mut state = self.state();
        if now.saturating_duration_since(state.swept_at) >= SWEEP_EVERY {
            state
                .buckets
                .retain(|_, bucket| !bucket.refilled(limit, now));
            state.swept_at = now;
        }
        if !state.buckets.contains_key(&key) && state.buckets.len() >= self.max_tracked {
            state
                .buckets
                .retain(|_, bucket| !bucket.refilled(limit, now));
            state.swept_at = now;
            if state.buckets.len() >= self.max_tracked {
                let fullest = state
                    .buckets
                    .iter()
                    .max_by(|a, b| {
                        a.1.level_at(limit, now)
                            .total_cmp(&b.1.level_at(limit, now))
                    })
                    .map(|(key, _)| *key);
                if let Some(fullest) = fullest {
                    state.buckets.remove(&fullest);
                }
            }
        }
        let bucket = state.buckets.entry(key).or_insert(Bucket {
            level: f64::from(limit.burst),
            at: now,
        });
        Some(bucket.take(limit, now))
    }

    /// Whether `key` has a request left at `now`, without taking it; `None` when
    /// limiting is off. The decision is that of a refusal when it has none.
    pub fn peek(&self, key: K, now: Instant) -> Option<RateDecision> {
        let limit = self.limit?;
        let state = self.state();
        let mut bucket = state.buckets.get(&key).copied()?;
        let decision = bucket.take(limit, now);
        Some(decision)
    }

    /// Buckets held now (for tests of eviction).
    pub fn tracked(&self) -> usize {
        self.state().buckets.len()
    }
}

/// Remembers the decision on the request, for [`stamp_headers`].
pub(crate) fn remember(req: &HttpRequest, decision: RateDecision) {
    req.extensions_mut().insert(decision);
}

/// Writes `RateLimit-*` (and `Retry-After` on a refusal) on a response whose request was
/// rate-checked. Other responses are left alone.
pub fn stamp_headers<B>(response: &mut ServiceResponse<B>) {
    let decision = response
        .request()
        .extensions()
        .get::<RateDecision>()
        .copied();
    let Some(decision) = decision else {
        return;
    };
    let headers = response.headers_mut();
    let mut set = |name: &'static str, value: u64| {
        headers.insert(HeaderName::from_static(name), HeaderValue::from(value));
    };
    set("ratelimit-limit", u64::from(decision.limit));
    set("ratelimit-remaining", u64::from(decision.remaining));
    set("ratelimit-reset", decision.reset_secs);
    if !decision.allowed {
        headers.insert(RETRY_AFTER, HeaderValue::from(decision.retry_after_secs));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(n: u8) -> TokenId {
        TokenId::parse(&format!("0190a000-0000-7000-8000-0000000000{n:02x}")).expect("id")
    }

    #[test]
    fn a_bucket_allows_its_burst_then_refuses_until_it_refills() {
        let limiter = RateLimiter::new(Some(RateLimit {
            per_second: 2.0,
            burst: 3,
        }));
        let start = Instant::now();
        let decisions: Vec<_> = (0..4)
            .map(|_| limiter.check(token(1), start).expect("on"))
            .collect();
        assert!(decisions[..3].iter().all(|d| d.allowed));
        assert_eq!(
            decisions.iter().map(|d| d.remaining).collect::<Vec<_>>(),
            [2, 1, 0, 0]
        );
        assert_eq!(
            decisions[2].reset_secs, 2,
            "3 requests at 2/s: 1.5 s, rounded up"
        );
        let refused = decisions[3];
        assert!(!refused.allowed);
        assert_eq!(refused.retry_after_secs, 1);
        // Another token has its own bucket.
        assert!(limiter.check(token(2), start).expect("on").allowed);
        // Half a second later one request is back.
        let later = start + Duration::from_millis(500);
        assert!(limiter.check(token(1), later).expect("on").allowed);
        assert!(!limiter.check(token(1), later).expect("on").allowed);
    }

    #[test]
    fn full_buckets_are_swept_and_off_means_no_decision() {
        let limiter = RateLimiter::new(Some(RateLimit {
            per_second: 10.0,
            burst: 5,
        }));
        let start = Instant::now();
        for n in 0..50 {
            limiter.check(token(n), start);
        }
        assert_eq!(limiter.tracked(), 50);
        limiter.check(token(99), start + SWEEP_EVERY);
        assert_eq!(limiter.tracked(), 1, "only the bucket just used remains");
        assert_eq!(RateLimiter::new(None).check(token(1), start), None);
    }
}
