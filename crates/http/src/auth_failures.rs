//! Failed authentications per client address: a token bucket per address, charged by
//! each presented token the database does not know (or knows as revoked or expired).
//! Once an address's bucket is empty, its tokens get 429 with `Retry-After` *without a
//! database lookup*, so guessing tokens costs the database nothing more.
//!
//! Successful authentications are never charged. While an address is refused, a token
//! that authenticated in this process within [`KNOWN_GOOD_FOR`] is still looked up, so a
//! legitimate client sharing an address (a NAT, a proxy) with a guesser keeps working.
//!
//! The address is the TCP peer's. `X-Forwarded-For` is honoured only when the peer is one
//! of the operator's trusted proxies (`MAILROOM_TRUSTED_PROXIES`), and then its right-most
//! entry that is not itself a trusted proxy is the client. IPv6 addresses are keyed by
//! their /64, the block one subscriber usually holds. Memory is bounded: at most
//! [`MAX_TRACKED_ADDRESSES`] buckets and [`MAX_KNOWN_GOOD`] remembered tokens.

use std::{
    collections::HashMap,
    net::{IpAddr, Ipv6Addr},
    sync::Mutex,
    time::{Duration, Instant},
};

use actix_web::HttpRequest;
use mailroom_domain::token::TokenHash;

use crate::rate_limit::{RateDecision, RateLimit, RateLimiter};

/// Addresses tracked at once, at most.
pub const MAX_TRACKED_ADDRESSES: usize = 10_000;

/// Tokens remembered as recently good, at most.
pub const MAX_KNOWN_GOOD: usize = 10_000;

/// How long a successful authentication keeps a token usable from a refused address.
pub const KNOWN_GOOD_FOR: Duration = Duration::from_secs(600);

/// The default allowance of failures per address: 30 per minute, bursts of 30.
pub const DEFAULT_FAILURE_LIMIT: RateLimit = RateLimit {
    per_second: 0.5,
    burst: 30,
};

/// The guard: one per process, shared by every actix worker.
#[derive(Debug)]
pub struct AuthFailureGuard {
    failures: RateLimiter<IpAddr>,
    known_good: Mutex<HashMap<[u8; 32], Instant>>,
    trusted_proxies: Vec<IpAddr>,
}

/// What the guard says before a token is looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Look the token up.
    Lookup,
    /// Refuse with 429, retrying after this many seconds.
    Refuse(u64),
}

impl AuthFailureGuard {
    /// A guard allowing `limit` failures per address (`None`: no limit), trusting
    /// `X-Forwarded-For` from `trusted_proxies` only.
    pub fn new(limit: Option<RateLimit>, trusted_proxies: Vec<IpAddr>) -> Self {
        Self {
            failures: RateLimiter::bounded(limit, MAX_TRACKED_ADDRESSES),
            known_good: Mutex::new(HashMap::new()),
            trusted_proxies,
        }
    }

    /// The client address of `req`, as the key of its bucket.
    pub fn client_key(&self, req: &HttpRequest) -> Option<IpAddr> {
        let peer = req.peer_addr()?.ip();
        let client = if self.trusted_proxies.contains(&peer) {
            req.headers()
                .get_all("x-forwarded-for")
                .filter_map(|value| value.to_str().ok())
                .flat_map(|value| value.split(','))
                .filter_map(|entry| entry.trim().parse::<IpAddr>().ok())
                .filter(|address| !self.trusted_proxies.contains(address))
                .last()
                .unwrap_or(peer)
        } else {
            peer
        };
        Some(bucket_key(client))
    }

    /// Whether a token from `client` may be looked up at `now`.
    pub fn before_lookup(
        &self,
        client: Option<IpAddr>,
        token: &TokenHash,
        now: Instant,
    ) -> Verdict {
        let Some(client) = client else {
            return Verdict::Lookup;
        };
        match self.failures.peek(client, now) {
            Some(decision) if !decision.allowed && !self.is_known_good(token, now) => {
                Verdict::Refuse(decision.retry_after_secs)
            }
            _ => Verdict::Lookup,
        }
    }

    /// For a request that carries no token (a provider's event post): `Some(retry-after
    /// seconds)` when `client` has failed too often and is refused with 429 before any
    /// lookup.
    pub fn refused(&self, client: Option<IpAddr>, now: Instant) -> Option<u64> {
        let decision = self.failures.peek(client?, now)?;
        (!decision.allowed).then_some(decision.retry_after_secs)
    }

    /// Records a failed lookup from `client`; `Some` refusal when that used up its
    /// allowance (this attempt is then answered 429 too).
    pub fn failed(&self, client: Option<IpAddr>, now: Instant) -> Option<RateDecision> {
        let decision = self.failures.check(client?, now)?;
        (!decision.allowed).then_some(decision)
    }

    /// Records a successful authentication of `token`.
    pub fn succeeded(&self, token: &TokenHash, now: Instant) {
        let mut known = self
            .known_good
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !known.contains_key(&token.0) && known.len() >= MAX_KNOWN_GOOD {
            known.retain(|_, at| now.saturating_duration_since(*at) < KNOWN_GOOD_FOR);
            if known.len() >= MAX_KNOWN_GOOD {
                let oldest = known.iter().min_by_key(|(_, at)| **at).map(|(key, _)| *key);
                if let Some(oldest) = oldest {
                    known.remove(&oldest);
                }
            }
        }
        known.insert(token.0, now);
    }

    fn is_known_good(&self, token: &TokenHash, now: Instant) -> bool {
        self.known_good
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&token.0)
            .is_some_and(|at| now.saturating_duration_since(*at) < KNOWN_GOOD_FOR)
    }

    /// Addresses tracked now (for tests of the bound).
    pub fn tracked_addresses(&self) -> usize {
        self.failures.tracked()
    }
}

/// IPv4 addresses as they are; IPv6 by their /64 (IPv4-mapped ones as IPv4).
fn bucket_key(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(_) => address,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let segments = v6.segments();
                IpAddr::V6(Ipv6Addr::new(
                    segments[0],
                    segments[1],
                    segments[2],
                    segments[3],
                    0,
                    0,
                    0,
                    0,
                ))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(n: u8) -> TokenHash {
        TokenHash([n; 32])
    }

    #[test]
    fn an_address_past_30_failures_is_refused_but_a_known_good_token_is_looked_up() {
        let guard = AuthFailureGuard::new(
            Some(RateLimit {
                per_second: 0.5,
                burst: 30,
            }),
            Vec::new(),
        );
        let now = Instant::now();
        let address = Some("203.0.113.9".parse().expect("ip"));
        guard.succeeded(&hash(1), now);
        for _ in 0..30 {
            assert_eq!(guard.before_lookup(address, &hash(2), now), Verdict::Lookup);
            assert_eq!(guard.failed(address, now), None);
        }
        assert!(
            guard.failed(address, now).is_some(),
            "the 31st failure is refused"
        );
        assert!(matches!(
            guard.before_lookup(address, &hash(2), now),
            Verdict::Refuse(seconds) if seconds >= 1
        ));
        assert_eq!(guard.before_lookup(address, &hash(1), now), Verdict::Lookup);
        let other = Some("203.0.113.10".parse().expect("ip"));
        assert_eq!(guard.before_lookup(other, &hash(2), now), Verdict::Lookup);
    }

    #[test]
    fn at_most_10_000_addresses_are_tracked() {
        let guard = AuthFailureGuard::new(Some(DEFAULT_FAILURE_LIMIT), Vec::new());
        let now = Instant::now();
        for n in 0..(MAX_TRACKED_ADDRESSES as u32 + 500) {
            guard.failed(Some(IpAddr::V4(n.into())), now);
        }
        assert_eq!(guard.tracked_addresses(), MAX_TRACKED_ADDRESSES);
    }

    #[test]
    fn x_forwarded_for_is_read_only_from_a_trusted_proxy() {
        use actix_web::test::TestRequest;
        let request = |peer: &str| {
            TestRequest::default()
                .peer_addr(format!("{peer}:40000").parse().expect("addr"))
                .insert_header(("x-forwarded-for", "198.51.100.7, 10.0.0.2"))
                .to_http_request()
        };
        let untrusting = AuthFailureGuard::new(Some(DEFAULT_FAILURE_LIMIT), Vec::new());
        assert_eq!(
            untrusting.client_key(&request("10.0.0.1")),
            Some("10.0.0.1".parse().expect("ip")),
            "the header is ignored without a trusted proxy"
        );
        let trusting = AuthFailureGuard::new(
            Some(DEFAULT_FAILURE_LIMIT),
            vec![
                "10.0.0.1".parse().expect("ip"),
                "10.0.0.2".parse().expect("ip"),
            ],
        );
        assert_eq!(
            trusting.client_key(&request("10.0.0.1")),
            Some("198.51.100.7".parse().expect("ip")),
            "the right-most entry that is not a trusted proxy"
        );
        assert_eq!(
            trusting.client_key(&request("203.0.113.5")),
            Some("203.0.113.5".parse().expect("ip")),
            "an untrusted peer's header is ignored"
        );
    }

    #[test]
    fn ipv6_is_keyed_by_its_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().expect("ip");
        let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().expect("ip");
        assert_eq!(bucket_key(a), bucket_key(b));
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().expect("ip");
        assert_eq!(
            bucket_key(mapped),
            "192.0.2.1".parse::<IpAddr>().expect("ip")
        );
    }
}
