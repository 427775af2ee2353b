//! When a refused call is tried again.
//!
//! The server answers 429 when a token's request budget is spent and 503 when its database
//! cannot be reached for a moment; both carry `Retry-After`, and in both cases the request
//! did nothing. The client waits that long and tries again, within a budget of attempts
//! and of total waiting, so a caller never hangs on a server that keeps refusing.
//!
//! Only calls that are safe to repeat are retried: reads, `PUT` and `DELETE` (idempotent by
//! HTTP's rules), the read-only searches, and any call that carries an `Idempotency-Key`
//! (every send does). A `POST` or `PATCH` without a key (recording an event, creating a
//! template) is never repeated: its refusal is returned to the caller, who knows whether
//! repeating it is harmless.

use std::time::{Duration, SystemTime};

/// How many times, and for how long in total, a refused call is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 turns retrying off).
    pub max_retries: u32,
    /// The most time spent waiting between attempts, summed over the call. A `Retry-After`
    /// that would pass it ends the call with the refusal instead of waiting.
    pub max_wait: Duration,
    /// The wait when the refusal names none (or names an unreadable one).
    pub default_delay: Duration,
}

impl RetryPolicy {
    /// No retries.
    pub const NONE: Self = Self {
        max_retries: 0,
        max_wait: Duration::ZERO,
        default_delay: Duration::ZERO,
    };
}

impl Default for RetryPolicy {
    /// Three retries, at most 30 seconds of waiting in all, one second when the server
    /// names no delay.
    fn default() -> Self {
        Self {
            max_retries: 3,
            max_wait: Duration::from_secs(30),
            default_delay: Duration::from_secs(1),
        }
    }
}

/// What one call has spent of its [`RetryPolicy`].
#[derive(Debug)]
pub(crate) struct RetryBudget {
    policy: RetryPolicy,
    retries: u32,
    waited: Duration,
}

impl RetryBudget {
    pub(crate) fn new(policy: RetryPolicy) -> Self {
        Self {
            policy,
            retries: 0,
            waited: Duration::ZERO,
        }
    }

    /// The wait before the next attempt, or `None` when the budget does not allow one.
    pub(crate) fn next_delay(&mut self, retry_after: Option<Duration>) -> Option<Duration> {
        if self.retries >= self.policy.max_retries {
            return None;
        }
        let delay = retry_after.unwrap_or(self.policy.default_delay);
        let waited = self.waited.checked_add(delay)?;
        if waited > self.policy.max_wait {
            return None;
        }
        self.retries += 1;
        self.waited = waited;
        Some(delay)
    }
}

/// Reads `Retry-After`: delay-seconds, or an HTTP date (RFC 9110, section 10.2.3).
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        assert_eq!(parse_retry_after(" 7 ", now), Some(Duration::from_secs(7)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(90));
        assert_eq!(
            parse_retry_after(&later, now),
            Some(Duration::from_secs(90))
        );
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(90));
        assert_eq!(parse_retry_after(&earlier, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
    }

    #[test]
    fn the_budget_bounds_retries_and_total_wait() {
        let policy = RetryPolicy {
            max_retries: 3,
            max_wait: Duration::from_secs(10),
            default_delay: Duration::from_secs(2),
        };
        let mut budget = RetryBudget::new(policy);
        assert_eq!(budget.next_delay(None), Some(Duration::from_secs(2)));
        assert_eq!(
            budget.next_delay(Some(Duration::from_secs(7))),
            Some(Duration::from_secs(7))
        );
        // 2 + 7 + 2 would pass the 10 s of waiting allowed.
        assert_eq!(budget.next_delay(None), None);
        assert_eq!(
            budget.next_delay(Some(Duration::from_secs(1))),
            Some(Duration::from_secs(1))
        );
        // Three retries spent.
        assert_eq!(budget.next_delay(Some(Duration::ZERO)), None);

        let mut none = RetryBudget::new(RetryPolicy::NONE);
        assert_eq!(none.next_delay(Some(Duration::ZERO)), None);
        let mut huge = RetryBudget::new(RetryPolicy::default());
        assert_eq!(huge.next_delay(Some(Duration::MAX)), None);
    }
}
